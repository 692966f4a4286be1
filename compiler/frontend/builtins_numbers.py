"""Builtins on numbers: the `operator` module's functions (traced as the operators they name),
abs(), int()/float() of symbolic values. Registered into dispatch.BUILTINS; a handler returns
NOT_HANDLED where builtin_calls' generic rules (folding on constants, symbolic specialization)
should decide instead."""
from __future__ import annotations

import operator

import torch
from tracetorch.compiler.frontend import dispatch, numpy_calls, symbolic
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.dispatch import NOT_HANDLED

_OPERATOR_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                    operator.truediv: "/", operator.floordiv: "//", operator.mod: "%",
                    operator.pow: "**", operator.matmul: "@", operator.and_: "&",
                    operator.or_: "|", operator.xor: "^", operator.iadd: "+=",
                    operator.imul: "*=", operator.isub: "-="}
_OPERATOR_COMPARE = {operator.lt: "<", operator.le: "<=", operator.eq: "==", operator.ne: "!=",
                     operator.gt: ">", operator.ge: ">=", operator.is_: "is",
                     operator.is_not: "is not"}


@dispatch.builtin(*_OPERATOR_BINARY)
def _binary(tx, fn, args, kwargs):
    if len(args) != 2:
        return NOT_HANDLED
    return dispatch.binary_op(tx, _OPERATOR_BINARY[fn], args[0], args[1])


@dispatch.builtin(*_OPERATOR_COMPARE)
def _compare(tx, fn, args, kwargs):
    if len(args) != 2:
        return NOT_HANDLED
    return dispatch.compare_op(tx, _OPERATOR_COMPARE[fn], args[0], args[1])


@dispatch.builtin(operator.getitem)
def _getitem(tx, fn, args, kwargs):
    return dispatch.get_item(tx, args[0], args[1])


@dispatch.builtin(operator.neg)
def _neg(tx, fn, args, kwargs):
    return dispatch.unary_op(tx, "neg", args[0])


@dispatch.builtin(operator.not_, operator.truth)
def _truth(tx, fn, args, kwargs):
    t = dispatch.truthiness(tx, args[0])
    return V.ConstantVariable(not t if fn is operator.not_ else t)


@dispatch.builtin(abs)
def _abs(tx, fn, args, kwargs):
    if len(args) == 1 and isinstance(args[0], V.NDArrayVariable):
        return numpy_calls.operator_call(tx, "abs", [args[0]])
    if symbolic.graph_value(args[0]):
        return symbolic.record(tx, operator.abs, args)
    return NOT_HANDLED


@dispatch.builtin(int, float)
def _int_float(tx, fn, args, kwargs):
    if len(args) != 1 or not isinstance(args[0], V.SymNodeVariable):
        return NOT_HANDLED
    # torch.sym_int / sym_float: int(SymFloat) would guard on the value (symbolic.specialize);
    # sym_int truncates symbolically, as Dynamo records it (plain int/float at runtime)
    if fn is int and args[0].python_type() is float:
        return symbolic.record(tx, torch.sym_int, args)
    if fn is float and args[0].python_type() is int:
        return symbolic.record(tx, torch.sym_float, args)
    if args[0].python_type() is fn:
        return args[0]
    return symbolic.record(tx, fn, args)
