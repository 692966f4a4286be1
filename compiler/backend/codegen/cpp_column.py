"""C++ loops for reductions over *outer* dimensions (e.g. `x.sum(0)` of a row-major matrix).

The generic kernel shape (parallel outer loop, reduction loop inside) would walk each column with
a large stride. Here the last outer dimension is cut into blocks of BLOCK contiguous elements:
each thread owns a block and keeps BLOCK accumulators, and every reduction step reads BLOCK
neighbours with one SIMD loop:

    #pragma omp parallel for
    for (int64_t xb = 0; xb < X; xb += 32) {
        float acc[32] = {0...};
        for (int64_t r0 = 0; r0 < R; r0++) {
            #pragma omp simd
            for (int64_t x0 = xb; x0 < min(xb + 32, X); x0++) acc[x0 - xb] += in[x0 + X*r0];
        }
        for (x0 ...) out[x0] = acc[x0 - xb];
    }
"""

from __future__ import annotations

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.cpp_ops import CppVar, cpp_index, ctype
from tracetorch.compiler.backend.codegen.cpp_reduction import acc_ctype, rounded

BLOCK = 32
_OPS = {"sum": "+", "prod": "*", "max": ">", "min": "<"}


def _acc_dtype(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def eligible(group: ir.KernelGroup) -> bool:
    if not group.ranges or not group.reduction_ranges:
        return False
    names = set(group.node_names())
    reductions = [n for n in group.nodes if group.kinds[n.name] == ir.NODE_REDUCTION]
    for n in group.nodes:
        kind = group.kinds[n.name]
        if kind == ir.NODE_INNER:
            return False
        if kind == ir.NODE_REDUCTION and (n.data.reduction_type not in _OPS or set(n.reads()) & names):
            return False
        if kind == ir.NODE_OUTER and (n.read_deps() and any(
                nm in names and nm not in {r.name for r in reductions} for nm in n.reads())):
            return False   # outer nodes run after all reductions: they may read only those
    node = reductions[0] if reductions else None
    if node is None:
        return False
    deps = node.read_deps()
    if not deps:
        return False
    iv, rv = node.data.index_vars(), node.data.reduction_vars()
    index = sympy.expand(deps[0][1])
    cx, cr = index.coeff(iv[-1]), index.coeff(rv[-1])
    # contiguous along the last outer dim, strided along the reduction: a column reduction
    return cx == 1 and cr != 0 and cr != 1


def loops(codegen, k, group: ir.KernelGroup, xs, rs) -> list[str]:
    outer, xl = xs[:-1], xs[-1]
    X = cpp_index(group.ranges[-1])
    lines = []
    work = ir.product(group.ranges) * ir.product(group.reduction_ranges)
    n_par = len(outer) + 1
    lines.append(f"#pragma omp parallel for{f' collapse({n_par})' if n_par > 1 else ''} "
                 f"if(parallel: {cpp_index(work)} >= {codegen.parallel_threshold})")
    depth = 0
    for x, size in zip(outer, group.ranges[:-1]):
        lines.append("    " * depth + f"for (int64_t {x} = 0; {x} < {cpp_index(size)}; {x}++) {{")
        depth += 1
    lines.append("    " * depth + f"for (int64_t xb = 0; xb < {X}; xb += {BLOCK}) {{")
    depth += 1
    body = [f"const int64_t xe = std::min<int64_t>(xb + {BLOCK}, {X});"]
    accs = {}
    reductions = [n for n in group.nodes if group.kinds[n.name] == ir.NODE_REDUCTION]
    for n in reductions:
        rt = n.data.reduction_type
        adt = _acc_dtype(n.data.src_dtype)
        if rt == "sum" and adt == torch.float32:
            adt = torch.float64
        t = acc_ctype(rt, adt)
        init = {"sum": "0", "prod": "1"}.get(rt)
        if init is None:
            lim = "infinity()" if adt.is_floating_point else ("lowest()" if rt == "max" else "max()")
            init = f"{'-' if rt == 'max' and adt.is_floating_point else ''}std::numeric_limits<{t}>::{lim}"
        acc = f"{n.name}_acc"
        body.append(f"{t} {acc}[{BLOCK}]; for (int j = 0; j < {BLOCK}; j++) {acc}[j] = {init};")
        if rt in ("max", "min") and adt.is_floating_point:
            body.append(f"int {acc}_nan[{BLOCK}] = {{0}};")
        accs[n.name] = (acc, adt)
    rdepth = 0
    for r, size in zip(rs, group.reduction_ranges):
        body.append("    " * rdepth + f"for (int64_t {r} = 0; {r} < {cpp_index(size)}; {r}++) {{")
        rdepth += 1
    body.append("    " * rdepth + "#pragma omp simd")
    body.append("    " * rdepth + f"for (int64_t {xl} = xb; {xl} < xe; {xl}++) {{")
    k.push()
    k.code = []
    for n in reductions:
        acc, adt = accs[n.name]
        t = acc_ctype(n.data.reduction_type, adt)
        v = n.data.inner_fn(xs, rs)
        slot = f"{acc}[{xl} - xb]"
        rt = n.data.reduction_type
        if rt in ("sum", "prod"):
            k.code.append(f"{slot} {_OPS[rt]}= static_cast<{t}>({v});")
        else:
            nan = f" {acc}_nan[{xl} - xb] |= (tt_v != tt_v);" if adt.is_floating_point else ""
            k.code.append(f"{{ auto tt_v = static_cast<{t}>({v}); "
                          f"{slot} = (tt_v {_OPS[rt]} {slot}) ? tt_v : {slot};{nan} }}")
    k.pop()
    body += ["    " * (rdepth + 1) + c for c in k.code]
    body.append("    " * rdepth + "}")
    for i in reversed(range(rdepth)):
        body.append("    " * i + "}")
    body.append(f"for (int64_t {xl} = xb; {xl} < xe; {xl}++) {{")
    k.code = []
    k.push()
    for n in group.nodes:
        if group.kinds[n.name] == ir.NODE_OUTER:   # epilogue at each point, after the reductions
            k.store(n.name, n.store_index(xs), n.data.inner_fn(xs))
            continue
        acc, adt = accs[n.name]
        if n.data.reduction_type in ("max", "min") and adt.is_floating_point:
            k.code.append(f"if ({acc}_nan[{xl} - xb]) "
                          f"{acc}[{xl} - xb] = std::numeric_limits<{ctype(adt)}>::quiet_NaN();")
        k.store(n.name, n.store_index(xs), CppVar(rounded(n.data.reduction_type, f"{acc}[{xl} - xb]", adt), adt))
    k.pop()
    body += ["    " + c for c in k.code]
    body.append("}")
    lines += ["    " * depth + b for b in body]
    for i in reversed(range(depth)):
        lines.append("    " * i + "}")
    return ["    " + line for line in lines]
