"""The spread of eager's own answers when its inexact math rounds the other way.

ATen's CPU math functions (exp, atan2, lgamma, ...) are accurate to about 1 ulp, not correctly
rounded, and which value an element gets depends on its position: a full vector goes through
Sleef, the scalar tail of the same call through libm. A compiled kernel's lanes fall elsewhere,
and our C++ code rounds these functions correctly, so it may round the other way. A later
ill-conditioned step (`x % small`, then `huge // that`) turns 1 ulp into a large difference that
the float64 reference cannot judge either: its own rounding of the earlier steps differs more.

`envelope(fn, inputs)` runs the program eagerly again with the result of one inexact call moved
by 1 to ULPS ulps, up and then down (every call in turn), and with every inexact result moved by a
random -ULPS..+ULPS ulps per element (a few seeded trials), with all of them moved up, then
all down, and with every pair of calls moved each way (two 1-ulp errors that only together flip
a later comparison or integer cast). Float sums and products count as inexact
(ATen's cascade of vector lanes is one order among many). A sum's error in any order of
accumulation is bounded by its terms, not its result (terms of +-200 that cancel to 3.9 leave
errors of many ulps of 3.9): sums are moved by ULPS * eps * (the same sum of |terms|) where
that is more than ULPS ulps, and to exactly 0 by the one-ulp moves where that bound spans 0.
Min/max-like calls are moved by the sign of their zero results (IEEE lets min(0.0, -0.0) be
either). Elementwise lower and upper bounds of those answers, and of eager's own, bound what
rounding alone can give; `within` asks whether a compiled output lies inside them. A wrong
lowering of one of these functions (a wrong formula, not a 1-ulp rounding) moves its results
far more than one ulp and stays outside.
"""

from __future__ import annotations

import itertools
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import compare
from .undefined_casts import CHOICES, UndefinedCasts
from .values import clone_all

#: ATen functions whose CPU results are within a few ulps, not correctly rounded (by the name
#: of the op; "_" suffixed in-place forms and "special_" names count as the same function)
INEXACT = frozenset("""
    exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh
    atanh erf erfc erfinv lgamma digamma polygamma mvlgamma pow float_power hypot rsqrt sigmoid
    logit softplus gelu silu mish elu selu celu log_sigmoid_forward _softmax _log_softmax
    logsumexp logaddexp logaddexp2 xlogy sinc i0 i0e i1 i1e ndtri log_ndtr
    sum mean nansum prod var std var_mean std_mean cumsum cumprod norm linalg_vector_norm
""".split())
#: float sums whose error is bounded by the sum of their terms' magnitudes (the same call on
#: |terms| gives that bound; mean's divides it by n as its result is divided)
SUMS = frozenset("sum mean nansum cumsum".split())
#: ATen functions that may return either zero for equal operands 0.0 and -0.0 (IEEE leaves the
#: choice open; ATen's vector lanes and scalar tails choose differently): moved by giving their
#: zero results the other sign
ZERO_SIGN = frozenset("min max amin amax minimum maximum aminmax".split())
#: how far a call's result is moved, in ulps of its dtype: ATen's functions are within about an
#: ulp (Sleef's u10 ones), its composite activations round two or three times (silu: within 1.9
#: ulps of the exact value over random inputs), so two ulps bound what rounding alone can give
ULPS = 2
#: the signed moves of one call at a time
STEPS = [k for k in range(-ULPS, ULPS + 1) if k]
#: random joint trials after the one-call-at-a-time ones
TRIALS = 8
#: calls moved one at a time at most (a longer program gets its first MAX_CALLS)
MAX_CALLS = 48
#: calls moved two at a time, every pair each way (4 runs a pair): the first MAX_PAIR_CALLS
MAX_PAIR_CALLS = 12


def _name(func) -> str:
    return func.overloadpacket.__name__.removeprefix("special_").rstrip("_")


def _inexact(func) -> bool:
    return _name(func) in INEXACT or _name(func) in ZERO_SIGN


class _Jitter(TorchDispatchMode):
    """Moves float results of inexact calls by whole ulps (sums by their terms' bound, SUMS).
    `moves`: {index of an inexact call: signed ulps (+2: two up)} moves those calls only; None
    moves every inexact result, by `steps`, or with `gen` by a random -ULPS..+ULPS ulps per
    element. Counts the inexact calls in `calls`."""

    def __init__(self, moves=None, steps=ULPS, gen=None):
        super().__init__()
        self.moves, self.steps, self.gen, self.calls = moves, steps, gen, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # the bound is taken before the call: an in-place cumsum_ overwrites its terms
        magnitude = _terms_magnitude(func, args, kwargs) if self._moves_next() else None
        out = func(*args, **kwargs)
        if not _inexact(func):
            return out
        index, self.calls = self.calls, self.calls + 1
        if self.moves is not None and index not in self.moves:
            return out
        steps = self.steps if self.moves is None else self.moves[index]
        zero_sign = _name(func) in ZERO_SIGN
        for t in compare.leaves(out):
            if isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.numel():
                # in place: an in-place op's result is its input
                t.copy_(self._moved(t, zero_sign, steps, magnitude))
        return out

    def _moves_next(self) -> bool:
        return self.moves is None or self.calls in self.moves

    def _moved(self, t: torch.Tensor, zero_sign: bool, steps: int, magnitude) -> torch.Tensor:
        if self.moves is None and self.gen is not None:     # random joint moves, per element
            pick = torch.randint(-ULPS, ULPS + 1, t.shape, generator=self.gen)
            out = t
            for k in [k for k in range(-ULPS, ULPS + 1) if k]:
                out = torch.where(pick == k, _step(t, zero_sign, k, magnitude), out)
            return out
        return _step(t, zero_sign, steps, magnitude)


def _step(t: torch.Tensor, zero_sign: bool, steps: int, magnitude) -> torch.Tensor:
    """t moved `steps` ulps (signed); zero results of min/max-like calls get the sign of the
    move instead; a sum at least |steps| * eps * its terms' magnitude."""
    if zero_sign:        # "up" is +0.0, "down" -0.0, for zero results only
        return torch.where(t == 0, t.abs() if steps > 0 else -t.abs(), t)
    toward = torch.full_like(t, float("inf") if steps > 0 else float("-inf"))
    moved = t
    for _ in range(abs(steps)):
        moved = torch.nextafter(moved, toward)
    if magnitude is not None and magnitude.shape == t.shape:
        # half sums accumulate in float32 (ATen's and ours): its eps bounds their order
        eps = torch.finfo(torch.float64 if t.dtype == torch.float64 else torch.float32).eps
        spread = (steps * eps * magnitude.double() + t.double()).to(t.dtype)
        moved = torch.maximum(moved, spread) if steps > 0 else torch.minimum(moved, spread)
        if abs(steps) == 1:
            # where the bound spans 0, another order can cancel exactly: eager's 0.01 from terms
            # of +-1e30 was 0.0 in ours, and `x != 0` flipped (fuzz 471527); the one-ulp moves
            # land on 0 there, the two-ulp ones on the bound
            spans_zero = t.double().abs() <= eps * magnitude.double()
            moved = torch.where(spans_zero, torch.zeros_like(t), moved)
    return moved


def _terms_magnitude(func, args, kwargs):
    """For a float sum (SUMS), the same call on |terms|: what bounds its rounding in any order."""
    if _name(func) not in SUMS or not args or not isinstance(args[0], torch.Tensor) \
            or not args[0].dtype.is_floating_point:
        return None
    try:
        return func(args[0].abs(), *args[1:], **kwargs)
    except Exception:       # an overload this call form does not fit: moved by ulps alone
        return None


def _run(fn, inputs, mode):
    args = clone_all(inputs)
    try:
        with warnings.catch_warnings(), mode:
            warnings.simplefilter("ignore")
            return compare.leaves(fn(*args)) + args
    except Exception:
        return None


def envelope(fn, inputs) -> list | None:
    """Per output leaf (then per input after the call), (low, high) float64 tensors bounding
    eager's answers under ULPS-ulp moves of its inexact results and the values its undefined casts
    may give; None if eager's own run fails or the program makes no inexact call and no such cast."""
    counter = _Jitter(moves={})
    base = _run(fn, inputs, counter)
    casts = UndefinedCasts()
    _run(fn, inputs, casts)
    if base is None or counter.calls == 0 and casts.found == 0:
        return None
    runs = [base]
    if casts.found:       # eager's answer there is one of several (undefined_casts.py)
        runs += [_run(fn, inputs, UndefinedCasts(choice)) for choice in CHOICES]
    # one call at a time, by each whole number of ulps: an ill-conditioned step after it
    # (fmod(x, x / 7)) is not monotonic, so the answers at 1 ulp need not lie between those at 2
    for index in range(min(counter.calls, MAX_CALLS)):
        for steps in STEPS:
            runs.append(_run(fn, inputs, _Jitter(moves={index: steps})))
    for first, second in itertools.combinations(range(min(counter.calls, MAX_PAIR_CALLS)), 2):
        for one, other in itertools.product((ULPS, -ULPS), repeat=2):
            runs.append(_run(fn, inputs, _Jitter(moves={first: one, second: other})))
    # every inexact result moved the same way at once (errors that add up through the program)
    runs += [_run(fn, inputs, _Jitter(steps=d)) for d in (ULPS, -ULPS)]
    gen = torch.Generator().manual_seed(0)
    runs += [_run(fn, inputs, _Jitter(gen=gen)) for _ in range(TRIALS)]
    runs = [r for r in runs if r is not None and len(r) == len(base)]
    bounds = []
    for k, leaf in enumerate(base):
        same = [r[k] for r in runs if isinstance(r[k], torch.Tensor) and isinstance(leaf, torch.Tensor)
                and r[k].shape == leaf.shape]
        if not same or not isinstance(leaf, torch.Tensor) or leaf.is_complex():
            bounds.append(None)
            continue
        stack = torch.stack([t.detach().cpu().double() for t in same])
        # NaN in some answers: the bounds ignore them, and `within` accepts NaN only where one is
        nan = torch.isnan(stack)
        low = torch.where(nan, torch.full_like(stack, float("inf")), stack).amin(0)
        high = torch.where(nan, torch.full_like(stack, float("-inf")), stack).amax(0)
        bounds.append((low, high, nan.any(0)))
    return bounds


def within_mask(actual, bound, dtype=None) -> torch.Tensor | None:
    """Elementwise: `actual` lies in [low, high] (up to the dtype's tolerance), or is NaN where
    one of the answers is NaN; None where there is no bound to judge by."""
    if bound is None or not isinstance(actual, torch.Tensor):
        return None
    low, high, some_nan = bound
    if tuple(actual.shape) != tuple(low.shape):
        return None
    c = actual.detach().cpu().double()
    rtol, atol = compare.TOLERANCES.get(dtype or actual.dtype, (0.0, 0.0)) if actual.dtype.is_floating_point \
        else (0.0, 0.0)
    slack_low = atol + rtol * torch.where(torch.isfinite(low), low.abs(), torch.zeros_like(low))
    slack_high = atol + rtol * torch.where(torch.isfinite(high), high.abs(), torch.zeros_like(high))
    inside = (c >= low - slack_low) & (c <= high + slack_high)
    return inside | (torch.isnan(c) & some_nan)


def within(actual, bound, dtype=None) -> bool:
    """within_mask holds everywhere."""
    mask = within_mask(actual, bound, dtype)
    return mask is not None and bool(mask.all())
