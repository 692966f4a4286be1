"""A small autotuning sweep for generated Triton kernels (block sizes x num_warps), winner cached.

Why a *small* sweep: every configuration is a separate Triton compile (hundreds of ms each), and
cold compile time is one of the backend's goals. So the candidates are a handful chosen from the
kernel's kind and sizes (`pointwise_configs`, `reduction_configs`), each timed with
triton.testing.do_bench (median), and the winner is remembered twice: in memory for this process
and on disk in `<kernel_dir>/autotune/<source hash>.json`, keyed by the size bucket (each size
rounded up to a power of two), so a second process or another size in the same bucket skips it.

Under the Triton interpreter (CPU) timing means nothing, so the sweep is skipped and the first
(default) candidate is used; the same happens when config.triton.autotune is off or when there is
only one candidate. Every decision is logged as the `autotuning` artifact.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time

import torch

from tracetorch import logs
from tracetorch.compiler.backend.runtime import triton_launch
from tracetorch.compiler.backend.runtime.triton_launch import LaunchConfig, TritonKernel, source_hash

log = logs.get_logger(__name__)

_MEMO: dict[tuple[str, tuple], LaunchConfig] = {}
_LOCK = threading.Lock()


def _opt(name, default):
    from tracetorch.compiler import config
    try:
        return getattr(config.triton, name)
    except AttributeError:        # option not declared (older config): the documented default
        return default


def next_pow2(n: int) -> int:
    n = max(int(n), 1)
    return 1 << (n - 1).bit_length()


def size_bucket(sizes) -> tuple:
    return tuple(next_pow2(s) for s in sizes)


# ------------------------------------------------------------------ candidate configurations

def pointwise_configs(xnumel: int) -> list[LaunchConfig]:
    """Default first. Big blocks amortise index math; small ones fill the GPU for small tensors."""
    max_block = _opt("max_block", 1024)
    cap = min(max_block, next_pow2(xnumel))
    warps = _opt("num_warps_choices", [2, 4, 8])
    out = [LaunchConfig({"XBLOCK": cap}, num_warps=_clamp_warps(4, cap, warps))]
    if cap >= 1024:
        out.append(LaunchConfig({"XBLOCK": cap}, num_warps=_clamp_warps(8, cap, warps)))
    for xb in (cap // 2, cap // 4):
        if xb >= 128:
            out.append(LaunchConfig({"XBLOCK": xb}, num_warps=_clamp_warps(xb // 256 or 1, xb, warps)))
    return _dedup(out)


#: a grid of fewer programs leaves most SMs of a 132-SM GPU idle
FEW_PROGRAMS = 132


def reduction_configs(xnumel: int, rnumel: int, persistent: bool, outer: bool = False) -> list[LaunchConfig]:
    """Persistent: the whole row in one block (RBLOCK = next_pow2(rnumel)), vary rows per program.
    Looped: RBLOCK-wide chunks, vary chunk width and rows per program. `outer` (loads contiguous
    along the outputs, strided along the rows: per-channel statistics of a channels_last
    activation): looped blocks of many outputs by few rows, so that each row of the tile is one
    coalesced load, as inductor's outer-reduction configurations do."""
    warps = _opt("num_warps_choices", [2, 4, 8])
    out = []
    if outer and not persistent:
        blocks = ((64, 8), (32, 16), (128, 4), (64, 32))
        if -(-xnumel // 64) < FEW_PROGRAMS:
            # Few outputs (a split reduction's second pass: 64 channels over 896 partials): one
            # 64-wide program would loop 112 times, each iteration waiting for its loads. Narrow
            # blocks (8 outputs: a 32-byte sector of float32 per row) over 2048-element tiles let
            # several programs share the rows, each looping a few times; wider ones follow.
            blocks = ((8, 256), (32, 64), (16, 128), (64, 32))
        for xb, rb in blocks:
            xb = max(1, min(xb, next_pow2(xnumel)))
            rb = max(2, min(rb, next_pow2(rnumel)))
            out.append(LaunchConfig({"XBLOCK": xb, "RBLOCK": rb},
                                    num_warps=_clamp_warps(max(1, xb * rb // 128), xb * rb, warps)))
        return _dedup(out)
    if persistent:
        rb = next_pow2(rnumel)
        # Keep the tile (XBLOCK*RBLOCK) near 4k-16k elements: enough loads in flight, no spills;
        # outer: at least 32 outputs wide (one 128-byte line of float32 per row of the tile)
        for tile in (4096, 8192, 1024):
            xb = max(1, min(next_pow2(xnumel), max(tile // rb, 32 if outer else 1)))
            out.append(LaunchConfig({"XBLOCK": xb, "RBLOCK": rb},
                                    num_warps=_clamp_warps(max(1, xb * rb // 512), xb * rb, warps)))
    else:
        # One row per program, 16 elements per thread: on H100 a bf16 online softmax over 32768
        # columns ran at 91% of copy bandwidth with RBLOCK 2048 / 4 warps, 90% at 4096 / 8, but
        # 78% at 2048 / 8 and 62% at 16384 / 16 (more cross-warp reduction per loaded byte).
        rmax = _opt("max_block", 1024) * 2
        for xb, rb in ((1, rmax), (1, rmax * 2), (1, rmax // 2), (4, 512), (8, 128)):
            xb = max(1, min(xb, next_pow2(xnumel)))
            rb = max(2, min(rb, next_pow2(rnumel)))
            out.append(LaunchConfig({"XBLOCK": xb, "RBLOCK": rb},
                                    num_warps=_clamp_warps(max(1, xb * rb // 512), xb * rb, warps)))
    return _dedup(out)


def _clamp_warps(want: int, tile: int, choices) -> int:
    # No more warps than 32-element groups in the tile; only values the config allows.
    choices = sorted(choices) or [4]
    want = min(want, max(1, tile // 32))
    best = choices[0]
    for c in choices:
        if c <= want:
            best = c
    return best


def _dedup(cfgs):
    seen, out = set(), []
    for c in cfgs:
        if c.key() not in seen:
            seen.add(c.key())
            out.append(c)
    return out


# ------------------------------------------------------------------ the sweep

def _cache_path(src_hash: str) -> str:
    return os.path.join(triton_launch.kernel_dir(), "autotune", f"{src_hash[:40]}.json")


def _load_disk(src_hash: str, bucket: tuple):
    try:
        with open(_cache_path(src_hash)) as f:
            return LaunchConfig.from_json(json.load(f)[repr(bucket)])
    except (OSError, KeyError, ValueError, TypeError):
        return None


def _store_disk(src_hash: str, bucket: tuple, cfg: LaunchConfig) -> None:
    path = _cache_path(src_hash)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        with open(path) as f:
            table = json.load(f)
    except (OSError, ValueError):
        table = {}
    table[repr(bucket)] = cfg.to_json()
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(table, f)
    os.replace(tmp, path)


#: sweeps run in this process and the seconds they took (compiles of the candidates included):
#: what a first call spends on autotuning (scripts/bench_real_models.py reports it per variant)
STATS = {"sweeps": 0, "sweep_s": 0.0}


def choose_config(kernel: TritonKernel, candidates: list[LaunchConfig], args: list,
                  size_args: list, *, clone_args: tuple[int, ...] = ()) -> LaunchConfig:
    """Pick the launch config for `kernel` at these sizes; may run the kernel several times.

    clone_args: positions in `args` the kernel both reads and writes (in-place buffers); those are
    cloned for the sweep so that timing runs cannot change the values the real launch sees."""
    candidates = candidates[:max(1, _opt("autotune_max_configs", 2))]
    src_hash = source_hash(kernel.source)
    bucket = size_bucket(size_args)
    key = (src_hash, bucket)
    with _LOCK:
        hit = _MEMO.get(key)
    if hit is not None:
        return hit
    reason = _no_sweep_reason(kernel, candidates)
    if reason:
        _remember(key, candidates[0])
        _log(kernel, bucket, candidates[0], reason, [])
        return candidates[0]
    disk = _load_disk(src_hash, bucket)
    if disk is not None:
        _remember(key, disk)
        _log(kernel, bucket, disk, "on-disk autotune cache hit", [])
        return disk
    t0 = time.perf_counter()
    best, timings = _sweep(kernel, candidates, args, size_args, clone_args)
    STATS["sweeps"] += 1
    STATS["sweep_s"] += time.perf_counter() - t0
    _remember(key, best)
    try:
        _store_disk(src_hash, bucket, best)
    except OSError as e:      # a read-only cache folder costs a re-tune next time, nothing more
        log.warning("autotune_cache_write_failed", error=str(e))
    _log(kernel, bucket, best, "benchmarked", timings)
    return best


def _no_sweep_reason(kernel: TritonKernel, candidates: list) -> str | None:
    """Why the default candidate is taken without timing any, or None."""
    if kernel.interpret:
        return "triton interpreter: timings are meaningless, default config"
    if not _opt("autotune", True):
        return "config.triton.autotune is off"
    if len(candidates) == 1:
        return "single candidate"
    return None


def known_config(kernel: TritonKernel, size_args: list) -> LaunchConfig | None:
    """The config choose_config would return without compiling anything: remembered in memory or
    on disk for this kernel and size bucket; None if it has to be chosen."""
    src_hash = source_hash(kernel.source)
    bucket = size_bucket(size_args)
    with _LOCK:
        hit = _MEMO.get((src_hash, bucket))
    if hit is not None:
        return hit
    if kernel.interpret or not _opt("autotune", True):
        return None
    return _load_disk(src_hash, bucket)


def candidates_to_compile(kernel: TritonKernel, candidates: list[LaunchConfig]) -> list[LaunchConfig]:
    """The configs choose_config compiles for these candidates when nothing is remembered: every
    candidate it benchmarks, or only the default when it does not sweep."""
    candidates = candidates[:max(1, _opt("autotune_max_configs", 2))]
    if kernel.interpret or not _opt("autotune", True):
        return candidates[:1]
    return candidates


def _remember(key, cfg):
    with _LOCK:
        _MEMO[key] = cfg


def scratch_copy(t):
    """A copy of `t` in the same layout: same sizes, strides and storage offset, over a copy of
    its whole storage. The sweep writes into it in place of `t`. `t.clone()` would not do: a
    generated kernel indexes with the strides it was compiled for, and clone() makes a view that
    is not dense (a slice of a concatenation buffer, say) contiguous and smaller, so the timing
    runs would write past its end into other tensors."""
    storage = t.untyped_storage()
    copy = torch.empty(0, dtype=t.dtype, device=t.device)
    copy.set_(storage.clone(), t.storage_offset(), t.size(), t.stride())
    return copy


def _sweep(kernel, candidates, args, size_args, clone_args):
    import triton.testing
    bench_args = list(args)
    for i in clone_args:
        bench_args[i] = scratch_copy(args[i])
    timings = []
    for cfg in candidates:
        try:
            ms = triton.testing.do_bench(lambda: kernel.launch(bench_args, size_args, cfg),
                                         warmup=5, rep=20, return_mode="median")
            timings.append((cfg, ms))
        except Exception as e:    # e.g. out of shared memory / registers for this tile
            log.debug("autotune_config_failed", kernel=kernel.name, config=cfg.key(),
                      error=f"{type(e).__name__}: {e}"[:200])
    if not timings:
        return candidates[0], []
    best = min(timings, key=lambda t: t[1])[0]
    return best, timings


def _log(kernel, bucket, cfg, reason, timings):
    logs.artifact("autotuning", lambda: {
        "kernel": kernel.name, "size_bucket": list(bucket), "chosen": cfg.key(), "reason": reason,
        "timings_ms": [{"config": c.key(), "ms": round(ms, 5)} for c, ms in timings]},
        kernel_name=kernel.name, chosen=cfg.key(), reason=reason)


def clear_memory_cache() -> None:
    with _LOCK:
        _MEMO.clear()
