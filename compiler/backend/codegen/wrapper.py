"""Wrapper code generation: the readable, standalone Python module that runs a compiled graph.

    device_cpu = torch.device('cpu')             # the allocations' devices, made once

    def call(args):
        arg0_1, = args
        args.clear()
        s0 = arg0_1.size(0)                      # size symbols bound from the inputs
        # kernel0_sin_cos: sin (model.py:12: y = x.sin()), cos (...)
        buf0 = empty_strided((s0, 16), (16, 1), dtype=torch.float32, device=device_cpu)
        kernel0_sin_cos(arg0_1, buf0, s0)
        buf1 = aten.mm.default(buf0, arg1_1)     # extern kernel
        del buf0
        return (buf1,)

Kernels are defined above `call` by each code generator's module_prelude / define_code.
`python output_code.py` runs `call` on random inputs of the example sizes.
"""

from __future__ import annotations

import math
import re

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.common import CodegenUnsupported, PythonIndexPrinter
from tracetorch.compiler.backend.scheduler import WRITEBACK_REASON

pexpr = PythonIndexPrinter()


def _dtype(d: torch.dtype) -> str:
    return str(d)


def _tuple(xs) -> str:
    items = [pexpr(x) for x in xs]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


#: extern kernels the output code calls by a cheaper name than the graph's op: the custom op that
#: keeps attention whole costs ~100 us per call in torch.library's dispatch; at run time the same
#: function is called directly: (name, how many leading arguments go by position (None: all),
#: the names of the ones after them: F.scaled_dot_product_attention takes `scale` by keyword only).
RUNTIME_NAMES = {"torch.ops.tracetorch.sdpa.default": ("scaled_dot_product_attention", 6, ("scale",))}
#: the matmul and convolution overloads through torch's generated Python bindings, which resolve
#: to the same overload from these arguments: an OpOverload call parses its arguments against the
#: schema at every call, 15.6 us of host time per addmm against torch.addmm's 12.2 (H100 host,
#: scripts/host_call_costs.py); a transformer block makes 4-6 of them per layer.
RUNTIME_NAMES.update({f"aten.{name}.default": (f"torch.{name}", None, ())   # every argument as given
                      for name in ("mm", "bmm", "addmm", "baddbmm", "convolution", "empty_strided")})


def _runtime_call(kernel: str, args: list, kwargs: dict):
    """(callee, rendered arguments) of an extern kernel call in the output code."""
    name, n_positional, keyword_names = RUNTIME_NAMES.get(kernel, (kernel, len(args), ()))
    kwargs = {**dict(zip(keyword_names, args[n_positional:])), **kwargs}
    args = args[:n_positional]
    rendered = [_extern_arg(a) for a in args]
    if kernel == "aten.convolution.default" and _channels_last_conv(args):
        rendered[1] = f"channels_last_weight({rendered[1]})"
    return name, rendered + [f"{k}={fmt_arg(v)}" for k, v in kwargs.items()]


def _extern_arg(a) -> str:
    """An extern kernel's argument; a view with its base's own size and stride passes the base:
    an as_strided costs ~2 us of host time, and a training step of ViT-S passed ~250 such views to
    its matmuls (the weights as they are). The runtime tensor of a buffer has its layout: inputs are
    checked against it at every call, extern outputs pass through ensure_layout."""
    if isinstance(a, ir.ReinterpretView) and a.layout.offset == 0:
        base = getattr(a.data, "layout", None)
        if isinstance(base, ir.Layout) and list(base.size) == list(a.layout.size) and \
                list(base.stride) == list(a.layout.stride) and base.dtype == a.layout.dtype:
            return a.data.name
    return fmt_arg(a)


def _channels_last_conv(args) -> bool:
    """A 2-d convolution of channels_last activations whose weight is a graph input with a
    spatial kernel (a 1x1 filter is channels_last already): its weight goes through
    channels_last_weight (runtime/wrapper_support.py), converted before the call."""
    if len(args) < 2 or not isinstance(args[1], ir.InputBuffer) or isinstance(args[1], ir.ConstantBuffer):
        return False
    x, w = args[0].layout if isinstance(args[0], ir.Buffer) else None, args[1].layout
    if x is None or len(x.size) != 4 or len(w.size) != 4:
        return False
    _, c, _, wd = x.stride
    channels_last = c == 1 and not x.size[1] == 1 and wd == x.size[1]
    spatial = not (w.size[2] == 1 and w.size[3] == 1)
    return bool(channels_last and spatial)


#: extern kernels whose result is always a new row-major (contiguous) tensor: when the compile-time
#: layout is row-major too, the output code needs no ensure_layout check after them (a few us each)
ALWAYS_CONTIGUOUS = {"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default"}
#: extern kernels whose result has exactly the layout asked for (no ensure_layout after them)
EXACT_LAYOUT = {"aten.empty_strided.default"}


def _row_major(layout) -> bool:
    expected = 1
    for size, stride in reversed(list(zip(layout.size, layout.stride))):
        if size != 1 and stride != expected:
            return False
        expected = expected * size
    return True


def fmt_arg(a) -> str:
    if isinstance(a, ir.ReinterpretView):
        L = a.layout
        # IR offsets are relative to the base tensor's data_ptr(); as_strided takes absolute ones
        # (a buffer may be an input, or computed in place into one, at any storage offset). The
        # method form costs less host time than torch.as_strided (scripts/host_call_costs.py);
        # ViT-B/16 passes ~100 views per call.
        # Without an offset as_strided keeps the base's own storage offset: one call less.
        base = a.data.name
        if L.offset == 0:
            return f"{base}.as_strided({_tuple(L.size)}, {_tuple(L.stride)})"
        off = f"{base}.storage_offset() + {pexpr(L.offset)}"
        return f"{base}.as_strided({_tuple(L.size)}, {_tuple(L.stride)}, {off})"
    if isinstance(a, ir.Buffer):
        return a.name
    if isinstance(a, (list, tuple)):
        inner = ", ".join(fmt_arg(x) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
    if isinstance(a, sympy.Basic):
        if a.is_number and not a.is_integer:
            return repr(float(a))
        return pexpr(a)
    if isinstance(a, torch.dtype):
        return _dtype(a)
    if isinstance(a, torch.device):
        return f"torch.device({str(a)!r})"
    if isinstance(a, (torch.memory_format, torch.layout)):
        return str(a)
    if isinstance(a, float):
        if math.isinf(a) or math.isnan(a):
            return f"float({str(a)!r})"
        return repr(a)
    if isinstance(a, (bool, int, str)) or a is None:
        return repr(a)
    raise CodegenUnsupported(f"cannot write argument {a!r} of type {type(a).__name__} into the wrapper")


def symbol_bindings(graph) -> dict:
    """size symbol -> Python expression reading it from the graph inputs."""
    out = {}
    for name, v in graph.graph_inputs:
        if isinstance(v, sympy.Symbol):
            out.setdefault(v, name)
    for name, v in graph.graph_inputs:
        if isinstance(v, ir.InputBuffer):
            for d, s in enumerate(v.layout.size):
                if isinstance(s, sympy.Symbol):
                    out.setdefault(s, f"{name}.size({d})")
            for d, s in enumerate(v.layout.stride):
                if isinstance(s, sympy.Symbol):
                    out.setdefault(s, f"{name}.stride({d})")
    return out


def _free(x) -> set:
    if isinstance(x, sympy.Basic):
        return set(x.free_symbols)
    if isinstance(x, ir.Layout):
        s = set()
        for e in list(x.size) + list(x.stride) + [x.offset]:
            s |= e.free_symbols
        return s
    if isinstance(x, ir.ReinterpretView):
        return _free(x.layout)
    if isinstance(x, (list, tuple)):
        s = set()
        for e in x:
            s |= _free(e)
        return s
    return set()


def _example_value(x, default=8) -> int:
    if isinstance(x, torch.SymInt):
        try:
            return int(x.node.hint) if x.node.hint is not None else default
        except Exception:
            return default
    return int(x)


def generate_wrapper(sched, kernels: dict, preludes: list[str], example_inputs=(), header: str = "",
                     combos: dict | None = None) -> str:
    """combos: first step -> (its run of step indices, the GeneratedKernel launching them all)
    (codegen/triton_combo.py); the parts are not defined on their own."""
    graph = sched.graph
    combos = combos or {}
    combined = {sched.steps[j].name for run, _ in combos.values() for j in run}
    lines_top = ['"""tracetorch output code' + (f": {header}" if header else "") + '"""',
                 "import math",
                 "import torch",
                 "from torch import empty_strided, as_strided",
                 "from torch.nn.functional import scaled_dot_product_attention",
                 "from tracetorch.compiler.backend.runtime.cpp_build import load_cpp_module",
                 "from tracetorch.compiler.backend.runtime.wrapper_support import (channels_last_weight, "
                 "ensure_layout, increment_version, write_back)",
                 "import tracetorch.compiler.aot.decompose"
                 "  # registers torch.ops.tracetorch.sdpa (attention kept whole)",
                 "aten = torch.ops.aten",
                 "constants = {}  # get_attr tensors (weights), bound by the loader", ""]
    for p in preludes:
        if p:
            lines_top += [p, ""]
    hints = size_hints(graph, example_inputs)
    if hints:
        lines_top += [f"size_hints = {hints!r}  # example sizes: for ahead-of-time kernel compilation", ""]
    for k in list(kernels.values()) + [c for _, c in combos.values()]:
        if k.define_code and k.name not in combined:
            lines_top += [k.define_code, ""]

    body = []
    ins = [n for n, _ in graph.graph_inputs]
    body.append(f"{', '.join(ins)}{',' if len(ins) == 1 else ''} = args" if ins else "pass")
    body.append("args.clear()")
    # inputs our kernels write in place (no ATen op bumps their version counters): autograd's
    # saved-tensor checks, and anything else keyed on `_version`, must see the write
    written = [s.args[0].name for s in sched.steps if s.name in sched.plan.inplace_writebacks]
    if written:
        body.append(f"written_inputs = ({', '.join(written)},)  # their versions are bumped at the end")
    for cname in graph.constants:
        body.append(f"{cname} = constants[{cname!r}]")
    needed = set()
    for s in sched.steps:
        if isinstance(s, ir.KernelGroup):
            needed |= set(s.size_symbols)
            for o in s.outputs:
                needed |= _free(s.layouts[o])
        else:
            needed |= _free(getattr(s, "args", [])) | _free(list(getattr(s, "kwargs", {}).values()))
            if s.layout is not None:
                needed |= _free(s.layout)
    for v in graph.outputs:
        needed |= _free(v) if not isinstance(v, ir.Buffer) else set()
    binds = symbol_bindings(graph)
    # float scalars computed from other scalars: each needs its operands' symbols bound first
    defs = list(getattr(graph, "scalar_defs", []))
    for sym, _, operands in reversed(defs):
        if sym in needed:
            needed |= _free(operands)
    defined = {sym for sym, _, _ in defs}
    for sym in sorted(needed - defined, key=lambda s: s.name):
        if sym not in binds:
            raise CodegenUnsupported(f"size symbol {sym} cannot be read from the graph inputs")
        body.append(f"{sym.name} = {binds[sym]}")
    for sym, fmt, operands in defs:
        if sym in needed:
            kind = "float scalar" if ir.is_float_symbol(sym) else "int of a float scalar"
            body.append(f"{sym.name} = {fmt.format(*[fmt_arg(a) for a in operands])}  # {kind}")

    # a combined launch's parts free their buffers after it: the run's last step frees them all
    inside = {j for run, _ in combos.values() for j in run[:-1]}
    run_ending = {run[-1]: run for run, _ in combos.values()}
    for i, s in enumerate(sched.steps):
        if i in combos:
            body += _combo_call(sched, *combos[i])
        if i in inside or i in run_ending:
            pass                 # launched by the combined kernel above
        elif isinstance(s, ir.KernelGroup):
            k = kernels.get(s.name)
            if k is None:        # writes_nothing(): its outputs are allocated, there is no call
                body += [_allocation(name, s.layouts[name]) + f"  # {s.name}: no element"
                         for name, _ in sched.plan.allocs.get(i, [])]
            else:
                body += _kernel_call(s, k, sched.plan.allocs.get(i, []))
        elif isinstance(s, ir.MultiOutput):
            body.append(f"{s.name} = {s.parent.name}[{s.index}]")
            L = s.layout
            body.append(f"{s.name} = ensure_layout({s.name}, {_tuple(L.size)}, {_tuple(L.stride)})")
        elif s.name in sched.plan.inplace_writebacks:
            body.append(f"# {s.name}: input mutation written in place by {sched.plan.inplace_writebacks[s.name]} "
                        f"(copy_({s.args[0].name}, {s.args[1].name}) needs no copy)")
        else:
            kernel, args = _runtime_call(s.kernel, list(s.args), dict(s.kwargs))
            if isinstance(s, ir.FallbackKernel) and s.reason == WRITEBACK_REASON:
                kernel = "write_back"     # copy_ that also takes an expanded (stride-0) input
            note = f"  # fallback: {s.reason}" if isinstance(s, ir.FallbackKernel) else "  # extern kernel"
            body.append(f"{s.name} = {kernel}({', '.join(args)}){note}")
            if s.layout is not None and s.kernel not in EXACT_LAYOUT and \
                    not (s.kernel in ALWAYS_CONTIGUOUS and _row_major(s.layout)):
                L = s.layout   # kernels index this buffer with the strides decided here
                body.append(f"{s.name} = ensure_layout({s.name}, {_tuple(L.size)}, {_tuple(L.stride)})")
        if i in inside:
            continue
        for d in (d for j in run_ending.get(i, [i]) for d in sched.plan.frees.get(j, [])):
            if not _reused_later(sched.plan, d, i):
                body.append(f"del {d}")
    outs = [fmt_arg(v) for v in graph.outputs]
    if written:
        body.append("increment_version(written_inputs)")
    body.append(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")

    devices = _device_definitions(body)
    if devices:
        lines_top += ["# devices of the allocations, made once (a device string is parsed at every call)",
                      *devices, ""]
    lines = lines_top + ["def call(args):"] + ["    " + b if b else "" for b in body]
    lines += ["", "", _main_block(graph, example_inputs)]
    return "\n".join(lines) + "\n"


def _combo_call(sched, run, combo) -> list[str]:
    """The parts' allocations, then one launch of their combined kernel."""
    lines = ["", f"# {combo.name}: {', '.join(combo.launch['parts'])} in one launch"]
    inplace = []
    for j in run:
        allocs = sched.plan.allocs.get(j, [])
        lines += _allocation_lines(sched.steps[j], allocs)
        inplace += _inplace_sources(sched.steps[j], allocs)
    lines.append(f"{combo.name}({', '.join(combo.call_args)})")
    if inplace:
        lines.append(f"del {', '.join(dict.fromkeys(inplace))}")
    return lines


def _allocation(name, L) -> str:
    return (f"{name} = empty_strided({_tuple(L.size)}, {_tuple(L.stride)}, "
            f"dtype={_dtype(L.dtype)}, device={_device_name(L.device)})")


def _device_name(device) -> str:
    """The module-level name an allocation passes as its device (`device_cuda_0`), defined once
    at the top of the output code (_device_definitions): torch parses a device string at every
    call, ~0.5 us per allocation on this project's CPU machine, and a ResNet-50 training step
    allocates ~700 buffers."""
    return "device_" + re.sub(r"\W", "_", str(device))


def _device_definitions(lines: list[str]) -> list[str]:
    """`device_cuda_0 = torch.device('cuda:0')` for every device name the lines use."""
    out = []
    for name in sorted({m for line in lines for m in re.findall(r"device=(device_\w+)", line)}):
        kind, index = re.fullmatch(r"device_(\w+?)(?:_(\d+))?", name).groups()
        out.append(f"{name} = torch.device({kind if index is None else f'{kind}:{index}'!r})")
    return out


def _kernel_call(group, k, allocs) -> list[str]:
    """The lines that allocate a kernel's outputs (or reuse buffers for them) and call it."""
    prov = "; ".join(f"{n}" + (f" ({w})" if w else "") for n, w in k.provenance)
    lines = ["", f"# {group.name}: {prov}" if prov else f"# {group.name}"]
    lines += _allocation_lines(group, allocs)
    lines.append(f"{k.name}({', '.join(k.call_args)})")
    inplace = _inplace_sources(group, allocs)
    if inplace:
        lines.append(f"del {', '.join(inplace)}")
    return lines


def _inplace_sources(group, allocs) -> list[str]:
    """The kernel's own inputs whose storage its outputs take (dropped after its launch)."""
    return [src for _, src in allocs if src is not None and src in group.inputs]


def _allocation_lines(group, allocs) -> list[str]:
    """A kernel's outputs: new buffers, or the storage of a buffer the memory plan reuses."""
    lines = []
    for name, src in allocs:
        if src is not None and src in group.inputs and _scatters_into(group, name, src):
            lines.append(f"{name} = {src}  # in-place: {group.name} scatters into {src}")
        elif src is not None and src in group.inputs:
            lines.append(f"{name} = {_same_storage_as(src, group.layouts[src], group.layouts[name])}"
                         f"  # in-place: {group.name} reads {src} only where it writes {name}")
        elif src is not None:
            lines.append(f"{name} = {src}; del {src}  # reuse")
        else:
            lines.append(_allocation(name, group.layouts[name]))
    return lines


def _same_storage_as(src: str, src_layout, layout) -> str:
    """`src` itself, or a view of its storage in `layout`'s sizes and strides where the memory
    plan gave an output of another shape the storage of a dying input (memory.same_storage)."""
    if (list(src_layout.size), list(src_layout.stride)) == (list(layout.size), list(layout.stride)):
        return src
    return f"{src}.as_strided({_tuple(layout.size)}, {_tuple(layout.stride)})"


def _scatters_into(group, name, src) -> bool:
    return any(isinstance(n, ir.ScatterBuffer) and n.name == name and n.target.name == src for n in group.nodes)


def size_hints(graph, example_inputs) -> dict:
    """size symbol name -> its value in the example inputs (empty when sizes are static or the
    values cannot be read): the sizes the first call most likely has."""
    binds = symbol_bindings(graph)
    if not binds or not example_inputs:
        return {}
    ns = {name: ex for (name, _), ex in zip(graph.graph_inputs, example_inputs)}
    out = {}
    for sym, expr in binds.items():
        if ir.is_float_symbol(sym):
            continue                   # not a kernel size argument
        try:
            v = eval(expr, {}, ns)     # "arg0_1.size(0)" or an input's name
        except Exception:
            continue
        # the hint, never int(v): converting a symbolic value would install a guard on it
        if isinstance(v, torch.SymInt):
            v = v.node.hint
        if isinstance(v, int) and not isinstance(v, bool):
            out[sym.name] = int(v)
    return out


def _reused_later(plan, name, step) -> bool:
    for j, entries in plan.allocs.items():
        if j > step and any(src == name for _, src in entries):
            return True
    return False


def _main_block(graph, example_inputs) -> str:
    specs = []
    for (name, v), ex in zip(graph.graph_inputs, list(example_inputs) + [None] * len(graph.graph_inputs)):
        if isinstance(ex, torch.Tensor):
            size = [_example_value(s) for s in ex.shape]
            stride = [_example_value(s) for s in ex.stride()]
            specs.append(f"rand_strided({tuple(size)!r}, {tuple(stride)!r}, {ex.dtype}, '{ex.device}')")
        elif isinstance(ex, (int, torch.SymInt)):
            specs.append(repr(_example_value(ex)))
        elif isinstance(ex, torch.SymFloat):
            hint = ex.node.hint
            specs.append(fmt_arg(float(hint)) if hint is not None else "1.0")
        else:
            specs.append(repr(ex))
    return "\n".join([
        'if __name__ == "__main__":',
        "    from tracetorch.compiler.backend.runtime.wrapper_support import rand_strided",
        *[f"    constants[{n!r}] = rand_strided({tuple(int(x) for x in t.shape)!r}, {tuple(t.stride())!r}, "
          f"{t.dtype}, '{t.device}')" for n, t in graph.constants.items()],
        f"    args = [{', '.join(specs)}]",
        "    out = call(list(args))",
        "    print([tuple(o.shape) if isinstance(o, torch.Tensor) else o for o in out])",
    ])
