"""Combined launches: several independent Triton kernels in one launch.

A graph of many small independent kernels (an optimizer step: one kernel per parameter shape)
pays the host's launch cost for each one; on the lent GPU machine's host that cost, not the GPU,
set the step's time. Consecutive kernels that share no buffer (`combo_runs`) become one kernel
whose programs are split into ranges, one per part (as inductor's foreach/combo kernels do):

    @triton.jit
    def combo0(arg0_1, buf0, arg2_1, buf1, xnumel, XBLOCK: tl.constexpr):
        pid = tl.program_id(0)
        if pid < 2:
            kernel0_add_part(arg0_1, buf0, 2048, XBLOCK, 0)
        elif pid < 3:
            kernel1_add_part(arg2_1, buf1, 100, XBLOCK, 2)

Each part is the kernel's own body as a device function (codegen/triton.py `_combo_part`) that
computes block `pid - PID_BASE`. The block sizes are fixed (COMBO_XBLOCK elements for a
pointwise part; for a persistent reduction part, whole rows filling a COMBO_REDUCTION_TILE tile,
passed as constants), so the ranges are constants; the launcher runs it as kind "combo" with
that one configuration.
"""
from __future__ import annotations

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.common import GeneratedKernel
from tracetorch.compiler.backend.codegen.triton import module_imports

COMBO_XBLOCK = 1024
COMBO_WARPS = 4
#: at most this many parts, and pointer arguments, per combined launch (compile time grows with
#: the parts; Triton passes every argument through the launcher)
MAX_PARTS = 16
MAX_PARAMS = 160


def combo_runs(steps: list, kernels: dict, plan, start: int = 0) -> dict[int, list[int]]:
    """first step index -> the step indices of a run of >= 2 consecutive kernels that may share
    one launch: each has a combo part, and none reads or writes memory an earlier one of the run
    writes, or writes memory an earlier one reads (their programs run in any order). Memory is
    named by storage: an output placed in another buffer's storage (memory plan) is that buffer.
    Runs start at step `start` or later."""
    runs: dict[int, list[int]] = {}
    i = start
    while i < len(steps):
        run, reads, writes, params = [], set(), set(), 0
        first = _part_of(steps[i], kernels)
        j = i
        while j < len(steps) and len(run) < MAX_PARTS:
            part = _part_of(steps[j], kernels)
            if part is None:
                break
            r, w = _accesses(steps[j], plan.allocs.get(j, []))
            if run and (r & writes or w & (reads | writes)
                        or params + len(part.params) > MAX_PARAMS or part.interpret != first.interpret):
                break
            run.append(j)
            reads |= r
            writes |= w
            params += len(part.params)
            j += 1
        if len(run) >= 2:
            runs[i] = run
            i = j
        else:
            i += 1
    return runs


def _part_of(step, kernels: dict):
    if not isinstance(step, ir.KernelGroup):
        return None
    k = kernels.get(step.name)
    return getattr(k, "combo_part", None) if k is not None else None


def _accesses(group: ir.KernelGroup, allocs) -> tuple[set, set]:
    storage = {name: src for name, src in allocs if src is not None}
    reads = {storage.get(n, n) for n in group.inputs}
    writes = {storage.get(n, n) for n in group.outputs}
    return reads, writes


#: elements of a reduction part's [XBLOCK, RBLOCK] tile (COMBO_WARPS warps: 16 per thread)
COMBO_REDUCTION_TILE = 2048


def part_block(part) -> tuple[int, str]:
    """(elements or rows per block, the size arguments the call passes after the buffers) of
    one part: pointwise parts take COMBO_XBLOCK elements per block, as the launch's XBLOCK; a
    reduction part takes as many whole rows as fill a COMBO_REDUCTION_TILE tile."""
    if part.rnumel is None:
        return COMBO_XBLOCK, f"{part.xnumel}, XBLOCK"
    rows = max(1, COMBO_REDUCTION_TILE // part.rblock)
    rows = min(rows, 1 << (part.xnumel - 1).bit_length())
    return rows, f"{part.xnumel}, {part.rnumel}, {rows}, {part.rblock}"


def combine(name: str, parts: list[GeneratedKernel]) -> GeneratedKernel:
    """One kernel launching `parts` (GeneratedKernels with combo_part), in their order."""
    params: list[str] = []
    for k in parts:
        params += [p for p in k.combo_part.params if p not in params]
    written = {w for k in parts for w in k.combo_part.written}
    ptr_types = {}
    for k in parts:
        ptr_types.update(zip(k.combo_part.params, k.combo_part.ptr_types))
    interpret = parts[0].combo_part.interpret
    lines = [f"# {name}: {len(parts)} independent kernels in one launch "
             f"({', '.join(k.name for k in parts)})"] + module_imports(interpret) + ["", ""]
    for k in parts:
        lines += [k.combo_part.source, ""]
    lines += ["@triton.jit", f"def {name}({', '.join(params)}, xnumel, XBLOCK: tl.constexpr):",
              "    pid = tl.program_id(0)"]
    base = 0
    for i, k in enumerate(parts):
        part = k.combo_part
        xblock, sizes = part_block(part)
        blocks = -(-part.xnumel // xblock)
        lines.append(f"    {'if' if i == 0 else 'elif'} pid < {base + blocks}:")
        lines.append(f"        {k.name}_part({', '.join(part.params)}, {sizes}, {base})")
        base += blocks
    source = "\n".join(lines) + "\n"
    define = (f"{name} = TritonLauncher({name!r}, '''{source}''', kind='combo', n_ptrs={len(params)}, "
              f"n_floats=0, numel=lambda : ({base * COMBO_XBLOCK}, 1), rblock=None, interpret={interpret}, "
              f"clone_args={tuple(i for i, p in enumerate(params) if p in written)!r}, "
              f"ptr_types={tuple(ptr_types[p] for p in params)!r})")
    return GeneratedKernel(
        name=name, source=source, language="triton", call_args=params, define_code=define,
        launch={"kind": "combo", "parts": [k.name for k in parts], "blocks": base,
                "XBLOCK": COMBO_XBLOCK, "interpret": interpret},
        provenance=[p for k in parts for p in k.provenance])
