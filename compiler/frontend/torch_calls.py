"""Calls to torch functions: torch.*, torch.nn.functional.*, unbound torch.Tensor methods,
and the grad-mode context managers."""
from __future__ import annotations

import torch
from tracetorch.compiler.frontend import dispatch, numpy_calls
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported

from tracetorch import logs

log = logs.get_logger(__name__)

# Functions with effects outside the graph (global state, files, RNG seeding, printing).
_SIDE_EFFECT_NAMES = {"manual_seed", "seed", "save", "load", "compile", "set_printoptions",
                      "use_deterministic_algorithms", "set_num_threads", "set_rng_state",
                      "get_rng_state", "initial_seed", "set_default_dtype",
                      "set_default_device", "set_default_tensor_type", "set_anomaly_enabled",
                      "autocast", "synchronize", "cuda"}


def _trace_time_answers():
    """torch's "am I being compiled / traced?" predicates, answered as Dynamo answers them
    inside a captured frame: compiling yes; exporting, TorchScript and FX tracing no."""
    import torch.fx._symbolic_trace as fx_trace
    answers = {torch.compiler.is_compiling: True, torch.compiler.is_dynamo_compiling: True,
               torch.compiler.is_exporting: False, torch.jit.is_tracing: False,
               torch.jit.is_scripting: False, fx_trace.is_fx_tracing: False,
               torch._C._get_tracing_state: None}
    if hasattr(torch._utils, "is_compiling"):
        answers[torch._utils.is_compiling] = True
    # nn.MultiheadAttention asks it before taking its fast path; a compiled call never runs
    # under make_fx (our aot stage traces the captured graph, not the user's code)
    activation = torch.nn.modules.activation
    if hasattr(activation, "_is_make_fx_tracing"):
        answers[activation._is_make_fx_tracing] = False
    return answers


# Queries of the dispatch / torch-function mode stacks. Capture itself runs under modes of its
# own (FakeTensorMode), so their answer at capture time is not the compiled call's: baked into
# the graph or a resume function it was wrong (a stack length of 1 where the call has 0, then
# "Tried to get stack at idx that's too big"). They run eagerly, at call time, instead.
_MODE_STACK_QUERIES = {getattr(torch._C, name) for name in (
    "_len_torch_dispatch_stack", "_get_dispatch_stack_at", "_len_torch_function_stack",
    "_get_function_stack_at", "_get_dispatch_mode", "_is_torch_function_mode_enabled",
    "_is_torch_function_enabled", "_is_torch_function_all_disabled") if hasattr(torch._C, name)}


TRACE_TIME_ANSWERS = _trace_time_answers()

# Queries of ambient torch state that every cache entry guards (guards.AMBIENT_STATE): answered
# now, as constants, since a change of the state recompiles.
_AMBIENT_QUERIES = {f for f in (
    getattr(torch, n, None) for n in (
        "get_autocast_dtype", "is_autocast_enabled", "get_autocast_cpu_dtype",
        "get_autocast_gpu_dtype", "is_autocast_cpu_enabled", "are_deterministic_algorithms_enabled",
        "is_deterministic_algorithms_warn_only_enabled", "is_inference_mode_enabled"))
    if f is not None}


def trace_time_answer(fn):
    """(True, value) when fn is one of those predicates, else (False, None)."""
    try:
        if fn in TRACE_TIME_ANSWERS:
            return True, TRACE_TIME_ANSWERS[fn]
    except TypeError:       # unhashable callable
        pass
    return False, None


def _cloned_grad_mode(fn):
    """`ctx.clone()` of a grad-mode context: what the @torch.no_grad() / @torch.enable_grad()
    decorators call (torch.utils._contextlib) before entering the context."""
    if getattr(fn, "__name__", "") != "clone" or not hasattr(fn, "__self__"):
        return None
    ctx = fn.__self__
    if type(ctx) is torch.no_grad:
        return V.GradModeVariable(False, torch.no_grad)
    if type(ctx) is torch.enable_grad:
        return V.GradModeVariable(True, torch.enable_grad)
    return None


@dispatch.call_function.first
def _answered_at_trace_time(tx, fn, args, kwargs):
    """A predicate about the tracing itself (is_compiling(), ...) called with no arguments,
    whatever kind of callee stands for it: its answer under capture."""
    real = getattr(fn, "fn", None)
    if real is not None and not args and not kwargs:
        known, answer = trace_time_answer(real)
        if known:
            return V.ConstantVariable(answer)
    return dispatch.NOT_HANDLED


@dispatch.call_function.register(V.TorchFunctionVariable)
def _call_torch_function(tx, fn, args, kwargs):
    return call_torch(tx, fn.fn, args, kwargs)


def call_torch(tx, fn, args, kwargs):
    out = tx.output
    if any(isinstance(a, V.NDArrayVariable) for a in list(args) + list(kwargs.values())):
        result = numpy_calls.torch_call(tx, fn, args, kwargs)
        if result is None:
            raise Unsupported(f"torch.{getattr(fn, '__name__', fn)} with a numpy array argument")
        return result
    name = getattr(fn, "__name__", "")
    if fn is torch.no_grad:
        return V.GradModeVariable(False, fn)
    if fn is torch.enable_grad:
        return V.GradModeVariable(True, fn)
    if fn is torch.set_grad_enabled:
        if len(args) != 1 or not args[0].is_constant():
            raise Unsupported("torch.set_grad_enabled with a non-constant argument")
        target = bool(args[0].as_constant())
        ctx = V.GradModeVariable(target, fn)
        ctx.prior = out.grad_enabled
        if target != out.grad_enabled:
            out.record_grad_mode(target)
        return ctx
    if fn is torch._C._set_grad_enabled:
        if len(args) != 1 or not args[0].is_constant():
            raise Unsupported("torch._C._set_grad_enabled with a non-constant argument")
        if bool(args[0].as_constant()) != out.grad_enabled:
            out.record_grad_mode(bool(args[0].as_constant()))
        return V.ConstantVariable(None)
    cloned = _cloned_grad_mode(fn)
    if cloned is not None:
        return cloned
    if fn is torch.is_grad_enabled:
        return V.ConstantVariable(out.grad_enabled)
    if fn is torch.get_default_dtype:
        return V.ConstantVariable(torch.get_default_dtype())
    if fn in _AMBIENT_QUERIES and all(a.is_constant() for a in list(args) + list(kwargs.values())):
        value = fn(*[a.as_constant() for a in args], **{k: a.as_constant() for k, a in kwargs.items()})
        log.debug("ambient_state_read", query=name, value=str(value), reason="guarded by AMBIENT")
        return V.ConstantVariable(value)
    if fn is torch.is_tensor:
        return V.ConstantVariable(isinstance(args[0], V.TensorVariable))
    if fn in (torch.Size,):
        return dispatch.call_type(tx, fn, args, kwargs)
    if fn in _MODE_STACK_QUERIES:
        raise Unsupported(f"torch._C.{name} reads the dispatch mode stack, which capture itself "
                          "changes: it runs eagerly at call time")
    if name in _SIDE_EFFECT_NAMES or name.startswith("set_") or name.startswith("_set"):
        raise Unsupported(f"torch.{name} has effects outside the graph")
    if isinstance(fn, type):
        return dispatch.call_type(tx, fn, args, kwargs)
    return out.call("call_function", fn, tuple(args), dict(kwargs))
