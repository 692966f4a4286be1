"""Frames that run eagerly still get their callees compiled (Dynamo's frame hook, emulated).

When capture cannot resume after a graph break (a break inside a loop, a try block, a `with`
of an untraced context manager), the rest of the function runs eagerly. Under Dynamo that
frame runs in the interpreter too, but every Python function it calls enters Dynamo's frame
hook (PEP 523) and is compiled on its own. We have no frame hook, so the code run eagerly is
rewritten instead: at each call site whose callable can be located in straight-line bytecode,
the callable is passed through a `CalleeRouter` just before the call; the router hands back
the function compiled with the same options (the runtime's per-code-object cache, its guards,
recompiles and graph breaks apply), or the callable unchanged when it is not user Python code
(builtins, torch functions, the standard library, modules with hooks). Call sites that cannot
be located (the callable is computed across a jump) are left as they are.
"""
from __future__ import annotations

import os
import types

import torch
from bytecode import Bytecode, Instr, Label
from tracetorch.compiler.frontend.bytecode_info import PY312, code_info
from tracetorch.compiler.frontend.inline import _is_stdlib
from tracetorch.compiler.frontend.resume import transformed_function

from tracetorch import logs

log = logs.get_logger(__name__)

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_COMPILER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_code(fn) -> bool:
    filename = fn.__code__.co_filename
    return not (filename.startswith(_TORCH_DIR) or filename.startswith(_COMPILER_DIR)
                or _is_stdlib(filename))


class CalleeRouter:
    """callable -> the callable to call in its place (compiled where Dynamo would compile it)."""

    def __init__(self, make_compiled_callable, caller):
        self.make = make_compiled_callable
        self.caller = caller
        self.seen = set()

    def __call__(self, f):
        t = type(f)
        if t is types.FunctionType:
            return self._compiled(f) if _user_code(f) else f
        if t is types.MethodType and type(f.__func__) is types.FunctionType:
            if not _user_code(f.__func__):
                return f
            return types.MethodType(self._compiled(f.__func__), f.__self__)
        if isinstance(f, torch.nn.Module):
            return self._module(f)
        return f

    def _compiled(self, fn):
        if fn.__code__ not in self.seen:
            self.seen.add(fn.__code__)
            log.debug("eager_frame_callee_compiled", caller=self.caller, callee=fn.__qualname__)
        return self.make(fn)

    def _module(self, m):
        cls = type(m)
        forward = cls.__dict__.get("forward") or getattr(cls, "forward", None)
        if cls.__call__ is not torch.nn.Module.__call__ or "forward" in m.__dict__ \
                or type(forward) is not types.FunctionType or not _user_code(forward):
            return m
        compiled_forward = self._compiled(forward)

        def call_module(*args, **kwargs):
            # hooks run through Module.__call__; without any, forward is the whole call
            if (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                    or torch.nn.modules.module._global_forward_hooks
                    or torch.nn.modules.module._global_forward_pre_hooks
                    or torch.nn.modules.module._global_backward_hooks):
                return m(*args, **kwargs)
            return compiled_forward(m, *args, **kwargs)
        return call_module


# (pops, pushes) of the instructions a call's callable and arguments may be built from
_FIXED = {"LOAD_FAST": (0, 1), "LOAD_FAST_CHECK": (0, 1), "LOAD_CONST": (0, 1),
          "LOAD_DEREF": (0, 1), "LOAD_CLOSURE": (0, 1), "LOAD_NAME": (0, 1),
          "LOAD_METHOD": (1, 2), "PUSH_NULL": (0, 1), "COPY": (0, 1),
          "BINARY_OP": (2, 1), "BINARY_SUBSCR": (2, 1), "COMPARE_OP": (2, 1),
          "CONTAINS_OP": (2, 1), "IS_OP": (2, 1), "BINARY_SLICE": (3, 1),
          "UNARY_NEGATIVE": (1, 1), "UNARY_NOT": (1, 1), "UNARY_INVERT": (1, 1),
          "UNARY_POSITIVE": (1, 1), "LIST_EXTEND": (1, 0), "LIST_APPEND": (1, 0),
          "SET_ADD": (1, 0), "DICT_MERGE": (1, 0), "DICT_UPDATE": (1, 0),
          "PRECALL": (0, 0), "KW_NAMES": (0, 0), "NOP": (0, 0), "CACHE": (0, 0),
          "EXTENDED_ARG": (0, 0)}


def _effect(ins):
    """(pops, pushes) of an abstract instruction, or None where we do not model it."""
    name = ins.name
    if name in _FIXED:
        return _FIXED[name]
    arg = ins.arg
    if name == "LOAD_GLOBAL":
        return (0, 2) if isinstance(arg, tuple) and arg[0] else (0, 1)
    if name == "LOAD_ATTR":
        return (1, 2) if isinstance(arg, tuple) and arg[0] else (1, 1)
    if name in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING", "BUILD_SLICE"):
        return arg, 1
    if name == "BUILD_MAP":
        return 2 * arg, 1
    if name == "BUILD_CONST_KEY_MAP":
        return arg + 1, 1
    if name == "FORMAT_VALUE":
        return 1 + bool(arg & 0x04), 1
    if name == "CALL":
        return arg + 2, 1
    if name == "CALL_FUNCTION_EX":
        return 3 + (arg & 1), 1
    return None


def _producer(items, k, t):
    """Walk back from index k-1 to the instruction that pushed the slot `t` below the top
    (0 = top) as it is just before items[k]. Returns (index, position among its pushes from
    the top), or None across a jump, a jump target or an instruction we do not model."""
    i = k - 1
    while i >= 0:
        ins = items[i]
        if isinstance(ins, Label):
            return None
        if not isinstance(ins, Instr):          # SetLineno, TryBegin, TryEnd markers
            i -= 1
            continue
        if ins.has_jump():
            return None
        eff = _effect(ins)
        if eff is None:
            return None
        pops, pushes = eff
        if t < pushes:
            return i, t
        t = t - pushes + pops
        i -= 1
    return None


def _wrap_sequence(router, lineno):
    """TOS = callable (NULL below it) -> TOS = router(callable)."""
    seq = [Instr("PUSH_NULL", lineno=lineno), Instr("SWAP", 2, lineno=lineno),
           Instr("LOAD_CONST", router, lineno=lineno), Instr("SWAP", 2, lineno=lineno)]
    if not PY312:
        seq.append(Instr("PRECALL", 1, lineno=lineno))
    return seq + [Instr("CALL", 1, lineno=lineno)]


def _plan(items, k):
    """(index to insert after, replacement for that instruction or None) for the CALL at k."""
    call = items[k]
    found = _producer(items, k, call.arg)          # the slot under the arguments
    if found is None:
        return None
    i, pos = found
    ins = items[i]
    lineno = ins.lineno
    pushes = _effect(ins)[1]
    if pushes == 2 and pos == 0:
        if ins.name == "LOAD_GLOBAL":                # [NULL, global]
            return i, None
        # LOAD_METHOD / LOAD_ATTR(method): [meth, self] or [NULL, bound] at run time; load the
        # bound attribute instead, with a NULL under it, so the callable is the top item
        name = ins.arg[1] if isinstance(ins.arg, tuple) else ins.arg
        attr = Instr("LOAD_ATTR", (False, name) if PY312 else name, lineno=lineno)
        return i, [attr, Instr("PUSH_NULL", lineno=lineno), Instr("SWAP", 2, lineno=lineno)]
    if pushes == 1 and pos == 0:
        below = _producer(items, i + 1, 1)
        if below is not None and items[below[0]].name == "PUSH_NULL":
            return i, None
    return None


def route_calls(fn, make_compiled_callable):
    """(fn with every locatable call site routed through a CalleeRouter, the offsets of those
    CALL instructions in fn's code); fn itself when no call site could be located."""
    code = fn.__code__
    offsets = [i.offset for i in code_info(code).instructions]
    bc = Bytecode.from_code(code)
    items = list(bc)
    router = CalleeRouter(make_compiled_callable, fn.__qualname__)
    plans, routed, n = [], set(), -1
    for k, ins in enumerate(items):
        if not isinstance(ins, Instr):
            continue
        n += 1
        if ins.name == "CALL":
            plan = _plan(items, k)
            if plan is not None:
                plans.append(plan)
                routed.add(offsets[n])
    if not plans:
        return fn, routed
    for i, replacement in sorted(plans, key=lambda p: p[0], reverse=True):
        lineno = items[i].lineno
        new = (replacement or [items[i]]) + _wrap_sequence(router, lineno)
        items[i:i + 1] = new
    out = Bytecode(items)
    out._copy_attr_from(bc)
    new_fn = transformed_function(fn, out.to_code())
    new_fn._tracetorch_routes_calls = True     # the runtime must keep it (not skip the frame)
    log.debug("eager_frame_calls_routed", function=fn.__qualname__, call_sites=len(plans))
    return new_fn, routed
