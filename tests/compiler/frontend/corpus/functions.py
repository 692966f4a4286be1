"""Inlined calls: user functions, closures, lambdas, methods, *args/**kwargs, grad modes."""
import functools

import torch

from tests.compiler.frontend.corpus import KW, P, STD, STD2, T


def helper(x, k=2):
    return x * k + 1


def helper2(x):
    return helper(x, 3) - helper(x)


class Scaler:
    def __init__(self, s):
        self.s = s

    def apply(self, x):
        return x * self.s

    @staticmethod
    def static(x):
        return x + 1

    @classmethod
    def cls(cls, x):
        return x - 1


SCALER = Scaler(2.0)


def call_helper(x): return helper(x)
def call_helper_kw(x): return helper(x, k=5)
def call_nested_helpers(x): return helper2(x)
def closure(x):
    k = 3
    def inner(y):
        return y * k
    return inner(x)
def closure_mutation(x):
    total = 0
    def bump():
        nonlocal total
        total += 1
    bump(); bump()
    return x * total
def lambda_call(x): f = lambda t: t.relu() * 2; return f(x)
def lambda_in_map(x): return sum(map(lambda t: t * 2, [x, x]))
def method_call(x): return SCALER.apply(x)
def static_class_methods(x): return Scaler.static(x) + Scaler.cls(x)
def new_object(x): return Scaler(3.0).apply(x)
def varargs(*xs): return sum(xs)
def kwargs_fn(x, **kw): return x * kw["scale"] + kw.get("shift", 0)
def mixed_args(x, *rest, scale=1.0, **kw): return (x + sum(rest)) * scale
def call_with_star(x): args = (x, 2); return helper(*args)
def call_with_dstar(x): kw = {"k": 4}; return helper(x, **kw)
def default_arg(x, k=3): return x * k
def keyword_only(x, *, alpha): return x * alpha
def partial_call(x): f = functools.partial(helper, k=7); return f(x)
def recursion_small(x, n=2): return x if n == 0 else recursion_small(x + 1, n - 1)
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + x
def enable_grad_in_no_grad(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
    return y
def set_grad_enabled_false(x):
    with torch.set_grad_enabled(False):
        return x * 3
def higher_order(x): return apply_twice(helper, x)
def apply_twice(f, x): return f(f(x))
def returns_function_result_tuple(x): a, b = pair(x); return a * b
def pair(x): return x + 1, x - 1
def generator_expression_sum(x): return sum(x * i for i in range(3))
def builtin_map_zip(x): return sum(a * b for a, b in zip([x, x], [1.0, 2.0]))
def _compiled_inner_impl(x):
    return x.sin() + 1


def call_compiled_function(x): return _compiled_inner(x) * 2
def any_all(x): return x * 2 if all([True, 1 > 0]) and any([False, True]) else x

def _compile_inner():
    """The user's own compiled function, called from the compiled program (torch.compile inside
    torch.compile for Dynamo, compiler.compile inside compiler.compile for us)."""
    import sys
    if "torch._dynamo" in sys.modules and _DYNAMO_MODE[0]:
        return torch.compile(_compiled_inner_impl, backend="eager")
    from tracetorch import compiler
    return compiler.compile(_compiled_inner_impl, backend="eager")


_DYNAMO_MODE = [False]
_compiled_inner = None


def _set_inner(fn, i):
    global _compiled_inner
    if i == 0 or _compiled_inner is None:
        _compiled_inner = _compile_inner()


PROGRAMS = [
    P(call_helper), P(call_helper_kw), P(call_nested_helpers), P(closure), P(closure_mutation),
    P(lambda_call), P(lambda_in_map), P(method_call), P(static_class_methods), P(new_object),
    P(varargs, STD2), P(kwargs_fn, [(T(3), KW(scale=2.0)), (T(3), KW(scale=2.0, shift=1))], recompiles=1),
    P(mixed_args, [(T(3), T(3), KW(scale=2.0)), (T(3), T(3), KW(scale=2.0))]), P(call_with_star), P(call_with_dstar),
    P(default_arg), P(keyword_only, [(T(3), KW(alpha=2.0)), (T(3), KW(alpha=2.0))]), P(partial_call), P(recursion_small),
    P(no_grad_block, [(T(3, 4, requires_grad=True),)] * 3),
    P(enable_grad_in_no_grad, [(T(3, 4, requires_grad=True),)] * 3),
    P(set_grad_enabled_false, [(T(3, 4, requires_grad=True),)] * 3), P(higher_order),
    P(returns_function_result_tuple), P(generator_expression_sum), P(builtin_map_zip), P(any_all),
    P(call_compiled_function, before_call=_set_inner, recompiles=2,
      note="graphs and breaks as Dynamo (1, 0: the compiled function's original is inlined); the "
           "second recompile is the inner compiled function's own cache, called directly by the "
           "test's eager reference run on the new shape (Dynamo's count runs no eager reference)"),
]
