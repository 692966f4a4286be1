"""One reduction loop of a C++ row kernel: accumulators, the (SIMD) loop nest, its body, results.

    double buf1_acc = 0;                                  // float32 sums: double across chunks
    const float tt_rcp0 = float(1) / buf0_val; ...        // reciprocals of loop-invariant divisors
    for (int64_t r0c = 0; r0c < s1; r0c += 1024) {        // only when the row may exceed a chunk
        const int64_t r0e = std::min<int64_t>(r0c + 1024, s1);
        float buf1_acc_p = 0;                             // float partial sum of one chunk
        #pragma omp simd reduction(+:buf1_acc_p)
        for (int64_t r0 = r0c; r0 < r0e; r0++) { ...; buf1_acc_p += tmp3; }
        buf1_acc += buf1_acc_p;
    }

Why chunks: a float accumulator keeps the SIMD loop at full width (a double one converts every
element and halves the lanes), and per-chunk float sums of at most CHUNK elements (CHUNK/lanes
per lane) lose no more than eager's cascade sum; the chunk totals add up in double.
"""

from __future__ import annotations

import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.cpp_ops import CppVar, cpp_index, ctype

CHUNK = 1024
# independent accumulators of a reduction loop: a single SIMD accumulator waits for each add
# (4 cycles) while the loads could feed two per cycle; LANES of them in a local array are kept
# in several vector registers once the fixed-length inner loop is unrolled
LANES = 64
_INIT = {"sum": "0", "prod": "1", "any": "false", "all": "true"}
_CLAUSE_OP = {"sum": "+", "prod": "*", "max": "max", "min": "min", "any": "||", "all": "&&"}


# float64 products accumulate in long double: whether a partial product overflows or underflows
# depends on the order of multiplication (1e-300 * 1e-30 * 1e300 is 0 one way and 1e-30 the
# other), and the wider exponent range makes the result that of the exact product rounded once
# for any order (fuzz 360693). float32 products stay in float, as ATen's: a double accumulator
# is more exact, but a program that casts to float32 is judged against float32 arithmetic (the
# fuzzer's reference keeps the cast), where eager's overflow to inf and a later 0 give NaN
# (fuzz 381039, 381064)
_WIDE_PRODUCT = {torch.float64: "long double"}


def acc_dtype(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def acc_ctype(rt, adt) -> str:
    """The C type of a reduction's accumulator whose values have dtype adt."""
    if rt == "prod" and adt in _WIDE_PRODUCT:
        return _WIDE_PRODUCT[adt]
    return ctype(adt)


def rounded(rt, acc, adt) -> str:
    """The accumulator as a value of adt: a wider one is rounded once here, so that the rest of
    the row computes with the value eager stores."""
    t = acc_ctype(rt, adt)
    return acc if t == ctype(adt) else f"static_cast<{ctype(adt)}>({acc})"


def _static(e):
    try:
        return int(e)
    except TypeError:
        return None


def _init_value(rt, adt):
    t = ctype(adt)
    if rt in ("max", "argmax"):
        return (f"-std::numeric_limits<{t}>::infinity()" if adt.is_floating_point
                else f"std::numeric_limits<{t}>::lowest()")
    if rt in ("min", "argmin"):
        return (f"std::numeric_limits<{t}>::infinity()" if adt.is_floating_point
                else f"std::numeric_limits<{t}>::max()")
    return _INIT[rt]


def reduction_block(codegen, k, group: ir.KernelGroup, nodes, xs, rs) -> list[str]:
    out = []
    accs = {}        # node name -> (accumulator, dtype)
    partial = {}     # node name -> float partial-sum accumulator of the innermost loop
    for node in nodes:
        if group.kinds[node.name] != ir.NODE_REDUCTION:
            continue
        red = node.data
        rt = red.reduction_type
        adt = acc_dtype(red.src_dtype if rt not in ("any", "all") else torch.bool)
        if rt == "sum" and adt == torch.float32:
            adt = torch.float64   # long float32 sums drift; double keeps eager's accuracy
            partial[node.name] = f"{node.name}_acc_p"
        acc = f"{node.name}_acc"
        out.append(f"{acc_ctype(rt, adt)} {acc} = {_init_value(rt, adt)};")
        if rt in ("argmax", "argmin"):
            out.append(f"int64_t {acc}_idx = 0;")
        accs[node.name] = (acc, adt)
    red_nodes = [n for n in nodes if n.name in accs]
    # a SIMD loop unless an arg-reduction needs the first index in order
    simd = all(n.data.reduction_type in _CLAUSE_OP for n in red_nodes)
    full = bool(not group.ranges and simd and rs)
    last = group.reduction_ranges[-1] if rs else None
    # partial sums need a vectorised innermost loop long enough to be worth it
    if full or not simd or not rs or (_static(last) is not None and _static(last) < 16):
        partial = {}
    chunked = bool(partial) and (_static(last) is None or _static(last) > CHUNK)
    clauses = {}
    for n in red_nodes:
        rt = n.data.reduction_type
        clauses.setdefault(_CLAUSE_OP.get(rt, "?"), []).append(partial.get(n.name, accs[n.name][0]))
        if rt in ("max", "min") and accs[n.name][1].is_floating_point:
            out.append(f"int {accs[n.name][0]}_nan = 0;")
            clauses.setdefault("|", []).append(f"{accs[n.name][0]}_nan")
    red_clause = "".join(f" reduction({op}:{', '.join(v)})" for op, v in clauses.items())

    # the loop body first: it decides which reciprocals the loop needs ahead of it
    k.push()
    k.code = []
    k.preheader = []
    k.in_rloop = True
    if k.row is not None:
        k.row.open_block()
    rlinear = sum((r * st for r, st in zip(rs, ir.contiguous_strides(group.reduction_ranges))), sympy.Integer(0))
    updates = set()  # positions of the accumulator updates in the body
    for node in nodes:
        if group.kinds[node.name] == ir.NODE_INNER:
            k.store(node.name, node.store_index(list(xs) + list(rs)), node.data.inner_fn(list(xs) + list(rs)))
            continue
        v = node.data.inner_fn(xs, rs)
        acc, adt = accs[node.name]
        updates.add(len(k.code))
        k.code.append(_update(node.data.reduction_type, acc, adt, v, partial.get(node.name), rlinear))
    inner = k.code
    if k.row is not None:
        k.row.close_block()
    k.in_rloop = False
    k.pop()
    out += k.preheader
    k.preheader = None

    # the loop nest around it
    depth = 0
    if full:
        work = cpp_index(ir.product(group.reduction_ranges))
        coll = f" collapse({len(rs)})" if len(rs) > 1 else ""
        out.append(f"#pragma omp parallel for simd{coll}{red_clause} if(parallel: {work} >= "
                   f"{codegen.parallel_threshold})")
    for i, (r, size) in enumerate(zip(rs, group.reduction_ranges)):
        pad = "    " * depth
        if i < len(rs) - 1:
            out.append(pad + f"for (int64_t {r} = 0; {r} < {cpp_index(size)}; {r}++) {{")
            depth += 1
            continue
        start, stop = "0", cpp_index(size)
        if chunked:
            out.append(pad + f"for (int64_t {r}c = 0; {r}c < {stop}; {r}c += {CHUNK}) {{")
            depth += 1
            pad = "    " * depth
            out.append(pad + f"const int64_t {r}e = std::min<int64_t>({r}c + {CHUNK}, {stop});")
            start, stop = f"{r}c", f"{r}e"
        for name, p in partial.items():
            out.append(pad + f"float {p} = 0;")
        if simd and not full and red_nodes and (_static(last) is None or _static(last) >= 2 * LANES):
            lanes = _lane_accumulators(red_nodes, accs, partial)
            out += [pad + line for line in _multi_accumulator_loop(r, start, stop, inner, updates, lanes, red_clause)]
        else:
            if simd and not full:
                out.append(pad + "#pragma omp simd" + red_clause)
            out.append(pad + f"for (int64_t {r} = {start}; {r} < {stop}; {r}++) {{")
            out += [pad + "    " + line for line in inner]
            out.append(pad + "}")
        for name, p in partial.items():
            out.append(pad + f"{accs[name][0]} += {p};")
        if chunked:
            depth -= 1
            out.append("    " * depth + "}")
    if not rs:
        out += inner
    for _ in range(depth):
        depth -= 1
        out.append("    " * depth + "}")
    for n in red_nodes:
        acc, adt = accs[n.name]
        if n.data.reduction_type in ("max", "min") and adt.is_floating_point:
            out.append(f"if ({acc}_nan) {acc} = std::numeric_limits<{ctype(adt)}>::quiet_NaN();")
    # the results: stored, or kept in locals for the rest of the row
    k.code = []
    for n in red_nodes:
        acc, adt = accs[n.name]
        arg = n.data.reduction_type in ("argmax", "argmin")
        if arg:
            k.store(n.name, n.store_index(xs), CppVar(f"{acc}_idx", torch.int64))
        else:
            k.store(n.name, n.store_index(xs), CppVar(rounded(n.data.reduction_type, acc, adt), adt))
    out += k.code
    return out


def _lane_accumulators(red_nodes, accs, partial):
    """(name, C++ type, initial value, fold op) of every accumulator the loop updates."""
    lanes = []
    for n in red_nodes:
        rt = n.data.reduction_type
        acc, adt = accs[n.name]
        if n.name in partial:
            lanes.append((partial[n.name], "float", "0", "+"))
        else:
            lanes.append((acc, acc_ctype(rt, adt), _init_value(rt, adt), _CLAUSE_OP[rt]))
        if rt in ("max", "min") and adt.is_floating_point:
            lanes.append((f"{acc}_nan", "int", "0", "|"))
    return lanes


_FOLD = {"+": "{a} += {v};", "*": "{a} *= {v};", "max": "{a} = ({v} > {a}) ? {v} : {a};",
         "min": "{a} = ({v} < {a}) ? {v} : {a};", "||": "{a} = {a} || {v};", "&&": "{a} = {a} && {v};",
         "|": "{a} |= {v};"}


def _multi_accumulator_loop(r, start, stop, inner, updates, lanes, red_clause) -> list[str]:
    """The innermost reduction loop with LANES accumulators per value, then the remainder:

        float acc_v[64]; for (...) acc_v[tt_j] = 0;
        int64_t r0b = 0;
        for (; r0b + 64 <= n; r0b += 64) {
            #pragma omp simd
            for (int64_t tt_j = 0; tt_j < 64; tt_j++) { const int64_t r0 = r0b + tt_j; ... acc_v[tt_j] += v; }
        }
        #pragma omp simd reduction(+:acc)
        for (int64_t r0 = r0b; r0 < n; r0++) { ... acc += v; }
        #pragma omp simd reduction(+:acc)
        for (int tt_j = 0; tt_j < 64; tt_j++) acc += acc_v[tt_j];
    """
    import re
    names = [name for name, _, _, _ in lanes]
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b")
    vector_body = [pattern.sub(lambda m: f"{m.group(1)}_v[tt_j]", line) if i in updates else line
                   for i, line in enumerate(inner)]
    out = [f"{t} {name}_v[{LANES}]; for (int tt_j = 0; tt_j < {LANES}; tt_j++) {name}_v[tt_j] = {init};"
           for name, t, init, _ in lanes]
    out.append(f"int64_t {r}b = {start};")
    out.append(f"for (; {r}b + {LANES} <= {stop}; {r}b += {LANES}) {{")
    out.append("    #pragma omp simd")
    out.append(f"    for (int64_t tt_j = 0; tt_j < {LANES}; tt_j++) {{")
    out.append(f"        const int64_t {r} = {r}b + tt_j;")
    out += ["        " + line for line in vector_body]
    out.append("    }")
    out.append("}")
    out.append("#pragma omp simd" + red_clause)
    out.append(f"for (int64_t {r} = {r}b; {r} < {stop}; {r}++) {{")
    out += ["    " + line for line in inner]
    out.append("}")
    out.append("#pragma omp simd" + red_clause)
    out.append(f"for (int tt_j = 0; tt_j < {LANES}; tt_j++) {{")
    out += ["    " + _FOLD[op].format(a=name, v=f"{name}_v[tt_j]") for name, _, _, op in lanes]
    out.append("}")
    return ["{"] + ["    " + line for line in out] + ["}"]   # a scope: loops of one row reuse the names


def _update(rt, acc, adt, v, partial, rlinear) -> str:
    t = acc_ctype(rt, adt)
    if rt == "sum":
        return f"{partial} += static_cast<float>({v});" if partial else f"{acc} += static_cast<{t}>({v});"
    v = f"static_cast<{t}>({v})"
    if rt == "prod":
        return f"{acc} *= {v};"
    if rt in ("max", "min"):
        # NaN propagates through a flag so that the loop stays a plain (vectorisable) max/min
        cmp = ">" if rt == "max" else "<"
        nan = f" {acc}_nan |= (tt_v != tt_v);" if adt.is_floating_point else ""
        return f"{{ auto tt_v = {v}; {acc} = (tt_v {cmp} {acc}) ? tt_v : {acc};{nan} }}"
    if rt == "any":
        return f"{acc} = {acc} || ({v});"
    if rt == "all":
        return f"{acc} = {acc} && ({v});"
    cmp = ">" if rt == "argmax" else "<"
    return (f"{{ auto tt_v = {v}; if ((tt_v {cmp} {acc}) || (tt_v != tt_v && {acc} == {acc})) "
            f"{{ {acc} = tt_v; {acc}_idx = {cpp_index(rlinear)}; }} }}")
