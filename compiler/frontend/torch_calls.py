"""Calls to torch functions: torch.*, torch.nn.functional.*, unbound torch.Tensor methods,
and the grad-mode context managers."""
from __future__ import annotations

import torch

from compiler.frontend import variables as V
from compiler.frontend.errors import Unsupported

# Functions with effects outside the graph (global state, files, RNG seeding, printing).
_SIDE_EFFECT_NAMES = {"manual_seed", "seed", "save", "load", "compile", "set_printoptions",
                      "use_deterministic_algorithms", "set_num_threads", "set_rng_state",
                      "get_rng_state", "initial_seed", "set_default_dtype",
                      "set_default_device", "set_default_tensor_type", "set_anomaly_enabled",
                      "autocast", "synchronize", "cuda"}


def call_torch(tx, fn, args, kwargs):
    out = tx.output
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
    if fn is torch.is_grad_enabled:
        return V.ConstantVariable(out.grad_enabled)
    if fn is torch.get_default_dtype:
        return V.ConstantVariable(torch.get_default_dtype())
    if fn is torch.is_tensor:
        return V.ConstantVariable(isinstance(args[0], V.TensorVariable))
    if fn in (torch.Size,):
        from compiler.frontend.builtin_calls import call_type
        return call_type(tx, fn, args, kwargs)
    if name in _SIDE_EFFECT_NAMES or name.startswith("set_") or name.startswith("_set"):
        raise Unsupported(f"torch.{name} has effects outside the graph")
    if isinstance(fn, type):
        from compiler.frontend.builtin_calls import call_type
        return call_type(tx, fn, args, kwargs)
    return out.call("call_function", fn, tuple(args), dict(kwargs))
