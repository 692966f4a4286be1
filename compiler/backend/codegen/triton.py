"""Triton code generation: one ir.KernelGroup -> one @triton.jit kernel plus its launcher.

Kernel shapes (why: one program handles a block of outer points; reductions keep whole rows in
registers when they fit, which is what makes a fused softmax/layernorm one pass over memory):

  pointwise   xindex = pid*XBLOCK + arange(XBLOCK); every node straight-line, masked by xmask.
  persistent  reduction with rnumel <= config.triton.persistent_reduction_max (an outer one,
              strided along its rows: a shorter limit, `persistent_max`): a tile
              [XBLOCK, RBLOCK >= rnumel]; each reduction is one tl.reduce over axis 1, and later
              nodes read its result from registers.
  looped      larger (or symbolic) rnumel: `for roffset in range(0, rnumel, RBLOCK)` loops; each
              reduction accumulates a [XBLOCK, RBLOCK] tile and reduces it after its loop. Nodes
              that read a reduction start a new loop after it; an inner value needed in a later
              loop is recomputed there (never written to memory and read back).

Outer ranges are flattened to xindex, reduction ranges to rindex; index rendering, masks and the
per-kernel state live in triton_kernel.py, the op vocabulary in triton_ops.py, the one-pass
softmax pattern in triton_online.py. Symbolic sizes arrive as int kernel arguments. Each kernel
starts with a provenance comment (FX nodes and user source lines).
"""
from __future__ import annotations

import torch

from tracetorch import logs
from tracetorch.compiler.backend import indexing, ir
from tracetorch.compiler.backend.codegen.common import (CodegenUnsupported, ComboPart, GeneratedKernel, KernelCodegen,
                                             compute_dtype, provenance_comment)
from tracetorch.compiler.backend.codegen import triton_online, triton_scatter
from tracetorch.compiler.backend.codegen.triton_kernel import (R, X, TritonKernelBuilder, _is_int, _opt,
                                                    _print)
from tracetorch.compiler.backend.codegen.triton_ops import TVar, tl_type
from tracetorch.compiler.backend.runtime.triton_compile import ptr_type

log = logs.get_logger(__name__)


#: an outer reduction with at most this many outputs runs in at most two waves of 32-output
#: programs on a 132-SM GPU: latency-bound, where a whole row per tile helps
SMALL_OUTER_OUTPUTS = 8192


def persistent_max(outer: bool, xnumel=None) -> int:
    """Longest reduction done as one block (persistent). An outer reduction (loads contiguous
    along the outputs, strided along the rows) needs >= 32 outputs per tile to coalesce, so its
    rows must be short: compiled for sm_90, ResNet-50's relu/BN-backward kernel took 110
    registers with 32x256 tiles, 255 and 208 bytes of spills with 32x1024 (a 1568-row one spilled
    5 KB), and ViT-S's LayerNorm-weight gradient 160 registers with 32x256 (one 8-warp program per
    SM). Large ones stop at inductor's 64 rows (`persistent_outer_reduction_max`); small ones
    (second passes of split reductions, which then share combined launches) at the spill-free
    `persistent_outer_small_max`."""
    if not outer:
        return _opt("persistent_reduction_max", 4096)
    if _is_int(xnumel) and int(xnumel) <= SMALL_OUTER_OUTPUTS:
        return _opt("persistent_outer_small_max", 256)
    return _opt("persistent_outer_reduction_max", 64)


# ---------------------------------------------------------------------------------- nodes

_NEUTRAL = {"sum": "0", "prod": "1"}
# how a looped reduction folds one masked tile ({v}) into its accumulator ({a})
_ACC_UPDATE = {"sum": "{a} + {v}", "prod": "{a} * {v}", "max": "th.maximum({a}, {v})",
               "min": "th.minimum({a}, {v})", "any": "{a} | {v}", "all": "{a} & {v}"}


def _extreme(dtype, lowest: bool) -> str:
    if dtype.is_floating_point:
        return 'float("-inf")' if lowest else 'float("inf")'
    if dtype == torch.bool:
        return "0" if lowest else "1"
    info = torch.iinfo(dtype)
    return str(info.min if lowest else info.max)


def mask_lines(name: str, test: str, ranges, shape: str, block: str) -> list[str]:
    """The lines defining a tile mask. With a static size the block divides (decided by Triton at
    compile time, per autotuned block: `if` on a constexpr is resolved statically) the mask is a
    constant True, which Triton folds out of every load, store and where: on H100/H200 a bf16
    online softmax over 32768 columns ran 4-6% faster without its per-element bounds test."""
    numel = indexing.product(ranges)
    if not numel.is_Integer or int(numel) == 0:
        # (0 % BLOCK == 0 too, but a zero-size range must mask every lane: an all-True mask read
        # a zero-size fp16 tensor out of bounds and crashed the interpreter)
        return [f"{name} = {test}"]
    return [f"if {int(numel)} % {block} == 0:",
            f"    {name} = tl.full({shape}, True, tl.int1)",
            "else:",
            f"    {name} = {test}"]


class TritonCodegen(KernelCodegen):
    language = "triton"

    def generate(self, group: ir.KernelGroup) -> GeneratedKernel:
        interpret = any(l.device.type == "cpu" for l in group.layouts.values())
        if interpret:
            from tracetorch.compiler.backend.runtime.triton_launch import interpreter_usable
            if not interpreter_usable():
                raise CodegenUnsupported("Triton kernels for CPU tensors need TRITON_INTERPRET=1 "
                                         "set before triton is first imported")
        k = self._build(group, interpret)
        rnumel, xnumel = ir.product(group.reduction_ranges), ir.product(group.ranges)
        limit = persistent_max(True, xnumel)
        if k.persistent and k.outer and int(rnumel) > limit:
            # too long a row for one outer tile (persistent_max): loop over short chunks of rows
            k = self._build(group, interpret, persistent=False)
            log.debug("outer_reduction_looped", kernel=group.name, rnumel=int(rnumel),
                      outputs=str(xnumel), persistent_max=limit)
        alt = None
        if k.reduction and not k.persistent and not _is_int(rnumel):
            # A symbolic reduction size: also a persistent variant, which the launcher picks
            # (RBLOCK = next_pow2(rnumel)) when the size at run time is small enough.
            alt = self._build(group, interpret, persistent=True)
        return self._finish(k, alt)

    def _build(self, group, interpret, persistent=None):
        k = TritonKernelBuilder(group, interpret, persistent)
        k.int64 = self._needs_int64(group)   # indices past 2**31 (or symbolic sizes): int64 math
        with ir.set_ops_handler(k.handler):
            if not k.reduction:
                self._pointwise(k)
            elif k.persistent:
                self._persistent(k)
            else:
                self._looped(k)
        return k

    # bodies -------------------------------------------------------------------------------
    def _outer(self, k, node, ctx):
        v = node.data.inner_fn(k.xs)
        k.locals[0][node.name] = v
        if node.name in k.group.outputs:
            k.store(node.name, node.store_index(k.xs), v, ctx)

    def _pointwise(self, k):
        for node in k.group.nodes:
            if isinstance(node, ir.ScatterBuffer):     # alone in its kernel (scheduler/fusion.py)
                triton_scatter.emit_scatter(k, node)
            elif k.group.kinds[node.name] == ir.NODE_REDUCTION:
                self._single_element_reduction(k, node)
            else:
                self._outer(k, node, frozenset({X}))

    def _single_element_reduction(self, k, node):
        """A reduction over no dimensions (e.g. sum of a 0-d tensor): the element itself."""
        rt = node.data.reduction_type
        v = node.data.inner_fn(k.xs, [])
        if rt in ("argmax", "argmin"):
            v = k.emit(f"tl.zeros({k.shape(frozenset({X}))}, tl.int64)", torch.int64, frozenset({X}))
        elif rt in ("any", "all"):
            v = k.emit(f"({v} != 0)", torch.bool, v.dims)
        v = _as_stored(k, node, v)
        k.locals[0][node.name] = v
        if node.name in k.group.outputs:
            k.store(node.name, node.store_index(k.xs), v, frozenset({X}))

    def _persistent(self, k):
        k.in_rloop = True            # rindex covers the whole row: inner values stay valid
        for node in k.group.nodes:
            kind = k.group.kinds[node.name]
            if kind == ir.NODE_OUTER:
                self._outer(k, node, frozenset({X}))
            elif kind == ir.NODE_INNER:
                self._inner(k, node)
            else:
                acc = self._reduce_init(k, node, persistent=True)
                self._reduce_step(k, node, acc, persistent=True)
                self._reduce_finish(k, node, acc, persistent=True)

    def _inner(self, k, node):
        xr = k.xs + k.rs
        v = node.data.inner_fn(xr)
        k.locals[-1][node.name] = v
        if node.name in k.group.outputs:
            k.store(node.name, node.store_index(xr), v, frozenset({X, R}))

    def _looped(self, k):
        k.online = triton_online.online_pairs(k.group)
        block, block_reductions = [], set()

        def flush():
            if block:
                self._loop(k, list(block))
                block.clear()
                block_reductions.clear()

        for node in k.group.nodes:
            kind = k.group.kinds[node.name]
            reads = set(node.reads())
            if kind == ir.NODE_OUTER:
                if reads & {n.name for n in block}:
                    flush()
                self._outer(k, node, frozenset({X}))
                continue
            blocking = reads & block_reductions
            if blocking and blocking != {k.online.get(node.name)}:
                flush()
            block.append(node)
            if kind == ir.NODE_REDUCTION:
                block_reductions.add(node.name)
        flush()

    def _loop(self, k, nodes):
        accs = {n.name: self._reduce_init(k, n, persistent=False)
                for n in nodes if k.group.kinds[n.name] == ir.NODE_REDUCTION}
        names = {n.name for n in nodes}
        online = {b: a for b, a in k.online.items() if b in names and a in names}
        partner = {a: b for b, a in online.items()}
        for a in partner:
            triton_online.emit_init(k, accs[a]["name"])
        k.line("for roffset in range(0, rnumel, RBLOCK):")
        outer_lines, k.lines = k.lines, []
        k.push()
        k.in_rloop = True
        k.line("rindex = roffset + tl.arange(0, RBLOCK)[None, :]" + (".to(tl.int64)" if k.int64 else ""))
        k.lines += mask_lines("rmask", "rindex < rnumel", k.group.reduction_ranges, "[1, RBLOCK]", "RBLOCK")
        for node in nodes:
            if k.group.kinds[node.name] == ir.NODE_INNER:
                self._inner(k, node)
            elif node.name in online:
                continue                      # updated together with its max, below
            elif node.name in partner:
                masked = self._reduce_step(k, node, accs[node.name], persistent=False, update=False)
                triton_online.emit_step(k, accs[node.name]["name"], accs[partner[node.name]]["name"],
                                        masked.name)
            else:
                self._reduce_step(k, node, accs[node.name], persistent=False)
        k.in_rloop = False
        k.pop()
        body, k.lines = k.lines, outer_lines
        k.lines += ["    " + line for line in body]
        for node in nodes:
            if node.name in online:
                a = online[node.name]
                triton_online.emit_finish(k, accs[a]["name"], f"{a}_val", accs[node.name]["name"],
                                          f"{node.name}_val")
                self._reduce_finish(k, node, accs[node.name], persistent=False, computed=True)
            elif node.name in accs:
                self._reduce_finish(k, node, accs[node.name], persistent=False)

    # reductions -----------------------------------------------------------------------------
    def _reduce_init(self, k, node, persistent):
        red = node.data
        rt = red.reduction_type
        # any/all accumulate 0/1 in int32: Triton promotes where(mask, bool, 0) to int32 anyway
        adt = torch.int32 if rt in ("any", "all") else compute_dtype(red.src_dtype)
        acc = {"name": f"{node.name}_acc", "dtype": adt, "rt": rt}
        if persistent:
            return acc
        ty = tl_type(adt)
        init = self._neutral(rt, adt)
        k.line(f"{acc['name']} = tl.full([XBLOCK, RBLOCK], {init}, {ty})")
        if rt in ("argmax", "argmin"):
            k.line(f"{acc['name']}_idx = tl.full([XBLOCK, RBLOCK], 2147483647, tl.int64)")
        return acc

    def _neutral(self, rt, adt):
        if rt in _NEUTRAL:
            return _NEUTRAL[rt]
        if rt == "any":
            return "0"
        if rt == "all":
            return "1"
        return _extreme(adt, lowest=rt in ("max", "argmax"))

    def _reduce_step(self, k, node, acc, persistent, update=True):
        rt, adt = acc["rt"], acc["dtype"]
        v = node.data.inner_fn(k.xs, k.rs)
        if rt in ("any", "all"):
            v = k.emit(f"({v} != 0).to(tl.int32)", adt, v.dims)
        elif v.dtype != adt:
            v = k.emit(f"{v}.to({tl_type(adt)})", adt, v.dims)
        full = frozenset({X, R})
        vb = k.broadcast(v, full)
        neutral = self._neutral(rt, adt)
        masked = k.emit(f"tl.where(xmask & rmask, {vb}, {neutral})", adt, full)
        a = acc["name"]
        if persistent:
            acc["value"] = masked
            return masked
        if not update:
            return masked
        if rt in _ACC_UPDATE:
            k.line(f"{a} = " + _ACC_UPDATE[rt].format(a=a, v=masked))
        else:
            idx = k.emit("tl.broadcast_to(rindex, [XBLOCK, RBLOCK]).to(tl.int64)", torch.int64, full)
            k.line(f"{a}, {a}_idx = th.{rt}_combine({a}, {a}_idx, {masked}, {idx})")

    def _reduce_finish(self, k, node, acc, persistent, computed=False):
        rt, adt = acc["rt"], acc["dtype"]
        src = acc["value"].name if persistent else acc["name"]
        name = f"{node.name}_val"
        if computed:
            pass                              # the value line was emitted by the caller
        elif rt == "sum":
            k.line(f"{name} = tl.sum({src}, 1)[:, None]")
        elif rt == "prod":
            k.line(f"{name} = tl.reduce({src}, 1, th.prod_combine)[:, None]")
        elif rt in ("max", "min"):
            k.line(f"{name} = tl.reduce({src}, 1, th.{'maximum' if rt == 'max' else 'minimum'})[:, None]")
        elif rt == "any":
            k.line(f"{name} = tl.max({src}, 1)[:, None] != 0")
        elif rt == "all":
            k.line(f"{name} = tl.min({src}, 1)[:, None] != 0")
        else:
            if persistent:
                k.line(f"{node.name}_idx = tl.broadcast_to(rindex, [XBLOCK, RBLOCK]).to(tl.int64)")
                idx = f"{node.name}_idx"
            else:
                idx = f"{acc['name']}_idx"
            k.line(f"_, {name} = tl.reduce(({src}, {idx}), 1, th.{rt}_combine)")
            k.line(f"{name} = {name}[:, None]")
            adt = torch.int64
        if rt in ("any", "all"):
            adt = torch.bool
        v = _as_stored(k, node, TVar(name, adt, frozenset({X})))
        k.locals[0][node.name] = v
        if node.name in k.group.outputs:
            k.store(node.name, node.store_index(k.xs), v, frozenset({X}))

    # assembly ---------------------------------------------------------------------------------
    def _source(self, k: TritonKernelBuilder, ptrs, sizes, floats=()) -> str:
        g = k.group
        params = ptrs + (["tt_status"] if k.status else []) + [f"{f}: tl.float64" for f in floats] + \
            sizes + ["xnumel"] + \
            (["rnumel"] if k.reduction else []) + \
            ["XBLOCK: tl.constexpr"] + (["RBLOCK: tl.constexpr"] if k.reduction else [])
        kind = "pointwise" if not k.reduction else ("persistent" if k.persistent else "looped")
        pid = "tl.program_id(0).to(tl.int64)" if k.int64 else "tl.program_id(0)"
        head = [f"xoffset = {pid} * XBLOCK"] + _index_lines(k)
        src = [f"# {g.name}: {kind}, ranges={[str(r) for r in g.ranges]}, "
               f"reduction_ranges={[str(r) for r in g.reduction_ranges]}"]
        prov = provenance_comment(g.provenance)
        if prov:
            src.append(prov)
        src += module_imports(k.interpret) + ["", "", "@triton.jit", f"def {g.name}({', '.join(params)}):"]
        src += ["    " + line for line in head + k.prologue + k.lines]
        source = "\n".join(src) + "\n"
        if "'''" in source:
            raise CodegenUnsupported("kernel source contains triple quotes")
        return source

    def _finish(self, k: TritonKernelBuilder, alt=None) -> GeneratedKernel:
        g = k.group
        ptrs = list(g.inputs) + [n for n in g.outputs if n not in g.inputs]
        for name in ptrs:
            tl_type(g.layouts[name].dtype)
        sizes = [s.name for s in g.size_symbols if not ir.is_float_symbol(s)]
        # float scalars (SymFloat inputs): fp64 arguments after the pointers, never part of the
        # launch plan (one compiled kernel and launch config serve every value)
        floats = [s.name for s in g.size_symbols if ir.is_float_symbol(s)]
        kind = "pointwise" if not k.reduction else ("persistent" if k.persistent else "looped")
        source = self._source(k, ptrs, sizes, floats)
        xnumel = _print(ir.product(g.ranges))
        rnumel = _print(ir.product(g.reduction_ranges)) if k.reduction else "1"
        # Autotuning runs the kernel several times: every written buffer is cloned for the sweep,
        # since the memory planner may hand an output the storage of an input (in-place reuse).
        clone = [i for i, n in enumerate(ptrs) if n in g.outputs]
        define = (f"{g.name} = TritonLauncher({g.name!r}, '''{source}''', kind={kind!r}, "
                  f"n_ptrs={len(ptrs)}, n_floats={len(floats)}, numel=lambda {', '.join(sizes)}: ({xnumel}, {rnumel}), "
                  f"rblock={self._rblock(k)}, interpret={k.interpret}, clone_args={tuple(clone)!r}"
                  + _status_arg(k.status, alt.status if alt is not None else False))
        if k.outer:
            define += ", outer=True"
        ptr_types = tuple(ptr_type(g.layouts[n].dtype) for n in ptrs)
        if None not in ptr_types:     # for ahead-of-time compilation (runtime/triton_compile.py)
            define += f", ptr_types={ptr_types!r}"
        if alt is not None:
            alt_source = self._source(alt, ptrs, sizes, floats)
            define += (f", persistent_source='''{alt_source}''', "
                       f"persistent_max={persistent_max(alt.outer, ir.product(g.ranges))}")
            source += "\n# persistent variant, used when rnumel <= persistent_max at run time\n" + alt_source
        define += ")"
        return GeneratedKernel(
            name=g.name, source=source, language="triton", call_args=ptrs + floats + sizes,
            define_code=define,
            launch={"kind": kind + ("+persistent" if alt is not None else ""), "xnumel": xnumel,
                    "rnumel": rnumel, "size_args": sizes, "float_args": floats, "interpret": k.interpret},
            provenance=list(g.provenance), group=g,
            combo_part=self._combo_part(k, ptrs, ptr_types) if not (floats or sizes) else None)

    def _combo_part(self, k: TritonKernelBuilder, ptrs, ptr_types) -> ComboPart | None:
        """The kernel as a device function a combined launch calls (codegen/triton_combo.py):
        static pointwise kernels, and persistent reductions of rows up to COMBO_MAX_RNUMEL (the
        second passes of split reductions: a few hundred small sums in a training backward); no
        status word, 32-bit indices, no scatter."""
        g = k.group
        xnumel = ir.product(g.ranges)
        rnumel = ir.product(g.reduction_ranges) if k.reduction else 1
        if (k.status or k.int64 or None in ptr_types or not _is_int(xnumel) or not _is_int(rnumel)
                or int(xnumel) <= 0 or any(isinstance(n, ir.ScatterBuffer) for n in g.nodes)):
            return None
        if k.reduction and not (k.persistent and 0 < int(rnumel) <= COMBO_MAX_RNUMEL):
            return None
        head = ["xoffset = (tl.program_id(0) - PID_BASE) * XBLOCK"] + _index_lines(k)
        params = ptrs + ["xnumel"] + (["rnumel"] if k.reduction else []) + ["XBLOCK: tl.constexpr"] \
            + (["RBLOCK: tl.constexpr"] if k.reduction else []) + ["PID_BASE: tl.constexpr"]
        src = ["@triton.jit", f"def {g.name}_part({', '.join(params)}):"]
        src += ["    " + line for line in head + k.prologue + k.lines]
        rblock = self._rblock(k) if k.reduction else None
        return ComboPart(source="\n".join(src) + "\n", params=list(ptrs),
                         written=[n for n in ptrs if n in g.outputs], xnumel=int(xnumel),
                         interpret=k.interpret, ptr_types=tuple(ptr_types),
                         rnumel=int(rnumel) if k.reduction else None, rblock=rblock)

    def _rblock(self, k):
        if not k.persistent:
            return None
        return 1 << (int(ir.product(k.rranges)) - 1).bit_length()

    def _needs_int64(self, g) -> bool:
        limit = 2 ** 31 - 1
        for lay in g.layouts.values():
            n = lay.storage_size()
            if not _is_int(n) or int(n) > limit:
                return True
        total = ir.product(g.ranges) * ir.product(g.reduction_ranges)
        return not _is_int(total) or int(total) > limit

    def module_prelude(self, kernels) -> str:
        if not kernels:
            return ""
        return "from tracetorch.compiler.backend.runtime.triton_launch import TritonLauncher"


#: a pointwise kernel's element indices of its block (after `xoffset`), and their mask
_POINTWISE_INDEX = ["xindex = xoffset + tl.arange(0, XBLOCK)", "xmask = xindex < xnumel"]

#: a persistent reduction of rows up to this long may be part of a combined launch
COMBO_MAX_RNUMEL = 1024


def _index_lines(k) -> list[str]:
    """A kernel's index and mask lines after its block offset `xoffset`: a reduction's rows of
    the block (and, persistent, the whole row's lanes), a pointwise kernel's elements."""
    g = k.group
    if not k.reduction:
        return list(_POINTWISE_INDEX)
    lines = ["xindex = xoffset + tl.arange(0, XBLOCK)[:, None]"]
    lines += mask_lines("xmask", "xindex < xnumel", g.ranges, "[XBLOCK, 1]", "XBLOCK")
    if k.persistent:
        lines += ["rindex = tl.arange(0, RBLOCK)[None, :]" + (".to(tl.int64)" if k.int64 else "")]
        lines += mask_lines("rmask", "rindex < rnumel", g.reduction_ranges, "[1, RBLOCK]", "RBLOCK")
    return lines


def module_imports(interpret: bool) -> list[str]:
    """The imports a kernel file starts with (the interpreter's libdevice on CPU tensors)."""
    return ["import triton", "import triton.language as tl",
            "from tracetorch.compiler.backend.runtime import triton_helpers as th",
            "from tracetorch.compiler.backend.runtime import triton_interp_libdevice as libdevice"
            if interpret else "from triton.language.extra import libdevice"]


def _status_arg(*statuses) -> str:
    """The launcher's `status`: "async" where every status kernel is a scatter (an index error
    may surface after the launch, as ATen's device asserts do); True (checked at once) where
    one is the injected relu bug, which the minifier must see in the failing call."""
    live = [s for s in statuses if s]
    if not live:
        return ""
    return ", status='async'" if all(s == "async" for s in live) else ", status=True"


def _as_stored(k, node, v: TVar) -> TVar:
    """A reduction's result as its buffer holds it: a float16/bfloat16 one kept in a register
    for later nodes of the kernel is rounded to its dtype first, as a store and a load would
    round it (a float16 sum read unrounded by one of std's two reads: inf where eager has NaN)."""
    dt = k.group.layouts[node.name].dtype
    if dt in (torch.float16, torch.bfloat16) and v.dtype in (torch.float32, torch.float64):
        return k.handler.to_dtype(v, dt)
    return v
