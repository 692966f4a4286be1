"""Is a compiled result wrong? Judged against a float64 eager reference, like PyTorch's minifier.

Comparing compiled against eager in the same dtype blames the compiler for rounding noise; so
both are compared against eager in float64: the compiled result fails when its RMSE to the
float64 reference exceeds `multiplier` times eager's own RMSE plus a tolerance. Non-float outputs
must be equal. Shapes and dtypes must match exactly.
"""

from __future__ import annotations

import copy

import torch
import torch.utils._pytree as pytree

DEFAULT_TOL = 1e-3
MULTIPLIER = 2.0


def _to64(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.detach().to(torch.float64)
    return v


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().to(torch.float64), b.detach().to(torch.float64)
    finite = torch.isfinite(a) & torch.isfinite(b)
    if finite.sum() == 0:
        return 0.0
    return float(torch.sqrt(torch.mean((a[finite] - b[finite]) ** 2)))


def float64_reference(module, inputs: list):
    """Eager result in float64 (module parameters and float inputs cast); None if not possible."""
    try:
        mod64 = copy.deepcopy(module).to(torch.float64) if isinstance(module, torch.nn.Module) else module
        with torch.no_grad():
            return mod64(*[_to64(v) for v in inputs])
    except Exception:  # some ops have no float64 kernel: fall back to same-dtype eager
        return None


def compare(compiled_out, eager_out, ref64_out, tol: float = DEFAULT_TOL) -> str | None:
    """None when compiled_out is acceptable, else a readable description of the first mismatch."""
    c_leaves, c_spec = pytree.tree_flatten(compiled_out)
    e_leaves, e_spec = pytree.tree_flatten(eager_out)
    if len(c_leaves) != len(e_leaves):
        return f"compiled returned {len(c_leaves)} values, eager returned {len(e_leaves)}"
    r_leaves = pytree.tree_flatten(ref64_out)[0] if ref64_out is not None else e_leaves
    if len(r_leaves) != len(e_leaves):
        r_leaves = e_leaves
    for i, (c, e, r) in enumerate(zip(c_leaves, e_leaves, r_leaves)):
        if not isinstance(e, torch.Tensor):
            if c != e and not (isinstance(e, float) and abs(c - e) <= tol * max(1.0, abs(e))):
                return f"output {i}: compiled {c!r} != eager {e!r}"
            continue
        if not isinstance(c, torch.Tensor):
            return f"output {i}: compiled returned {type(c).__name__}, eager a tensor"
        if c.shape != e.shape:
            return f"output {i}: shape mismatch: compiled {tuple(c.shape)}, eager {tuple(e.shape)}"
        if c.dtype != e.dtype:
            return f"output {i}: dtype mismatch: compiled {c.dtype}, eager {e.dtype}"
        if not (e.is_floating_point() or e.is_complex()):
            if not torch.equal(c.cpu(), e.cpu()):
                bad = int((c.cpu() != e.cpu()).sum())
                return f"output {i}: {bad} of {e.numel()} elements differ ({e.dtype})"
            continue
        if e.is_complex():
            c, e, r = torch.view_as_real(c), torch.view_as_real(e), torch.view_as_real(r) if r.is_complex() else r
        # NaN/inf must appear in the same places as in eager.
        if not torch.equal(torch.isnan(c).cpu(), torch.isnan(e).cpu()):
            return f"output {i}: NaN pattern differs from eager"
        res_err = _rmse(c, r)
        ref_err = _rmse(e, r)
        if res_err > MULTIPLIER * ref_err + tol:
            maxdiff = float((c.detach().double() - e.detach().double()).abs().nan_to_num(0).max()) if c.numel() else 0.0
            return (f"output {i}: accuracy mismatch, RMSE (compiled-fp64): {res_err:.5g}, "
                    f"(eager-fp64): {ref_err:.5g}, max |compiled-eager| = {maxdiff:.5g}, "
                    f"shape {tuple(e.shape)} {e.dtype}")
    return None


class AccuracyError(AssertionError):
    """Raised (and recorded as kind 'accuracy') when compiled output disagrees with eager."""
