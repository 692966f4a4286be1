"""C++/OpenMP code generation: one ir.KernelGroup -> one `extern "C" int name(...)` function.

Kernel shape (why: the outer loops are independent, so they are the OpenMP parallel loops; the
reduction loops run per outer point, in order, so a whole softmax/layernorm row stays in cache):

    extern "C" int cpp_kernel0(const float* arg0_1, float* buf2, int64_t s0) {
        int tt_status = 0;
        #pragma omp parallel for if(...)
        for (int64_t x0 = 0; x0 < s0; x0++) {
            <outer nodes>                                 // once per row
            float buf0_acc = -inf;                        // a reduction's accumulator
            for (int64_t r0 = 0; r0 < 16; r0++) { ... }   // reduction loop(s): inner nodes + reductions
            <more outer nodes / reduction loops, in node order>
        }
        return tt_status;                                 // non-zero: the wrapper raises
    }

Consecutive inner/reduction nodes share one reduction loop unless a node reads the result of a
reduction accumulated in that same loop (then a new loop starts after it completes).
"""

from __future__ import annotations

import torch

from compiler.backend import ir
from compiler.backend.codegen import cpp_ops
from compiler.backend.codegen.common import (CodegenUnsupported, GeneratedKernel, KernelCodegen,
                                             provenance_comment)
from compiler.backend.codegen.cpp_ops import CPP_STORAGE, CppOpsHandler, CppVar, cpp_index, ctype

_INIT = {"sum": "0", "prod": "1", "any": "false", "all": "true"}


def _acc_dtype(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


class CppKernel:
    """State of one kernel being generated: code lines, temporaries, CSE, local buffers."""

    def __init__(self, group: ir.KernelGroup):
        self.group = group
        self.code: list[str] = []
        self.n_tmp = 0
        self.cse: list[dict] = [{}]
        self.locals: dict[str, CppVar] = {}   # buffer name -> local holding its value
        self.subst: dict = {}                 # loop-variable rewrite of merged dimensions
        self.handler = CppOpsHandler(self)

    # value emission with scoped common-subexpression elimination -------------------------
    def emit(self, expr: str, dtype) -> CppVar:
        for scope in reversed(self.cse):
            if expr in scope:
                return scope[expr]
        name = f"tmp{self.n_tmp}"
        self.n_tmp += 1
        self.code.append(f"auto {name} = {expr};")
        v = CppVar(name, dtype)
        self.cse[-1][expr] = v
        return v

    def push(self):
        self.cse.append({})

    def pop(self):
        self.cse.pop()

    def load(self, name, index):
        if name in self.locals:
            return self.locals[name]
        layout = self.group.layouts[name]
        ptr = f"{name}[{cpp_index(index.xreplace(self.subst) if self.subst else index)}]"
        if layout.dtype == torch.float16:
            return self.emit(f"tt_half_to_float({ptr})", torch.float32)
        if layout.dtype == torch.bfloat16:
            return self.emit(f"tt_bf16_to_float({ptr})", torch.float32)
        return self.emit(ptr, layout.dtype)

    def convert_for_store(self, name, value) -> str:
        dt = self.group.layouts[name].dtype
        if dt == torch.float16:
            return f"tt_float_to_half({value})"
        if dt == torch.bfloat16:
            return f"tt_float_to_bf16({value})"
        return f"static_cast<{ctype(dt)}>({value})"

    def store(self, name, index, value):
        if name in self.group.internal:
            dt = _acc_dtype(self.group.layouts[name].dtype)
            self.code.append(f"auto {name}_val = static_cast<{ctype(dt)}>({value});")
            self.locals[name] = CppVar(f"{name}_val", dt)
            return
        if self.subst:
            index = index.xreplace(self.subst)
        self.code.append(f"{name}[{cpp_index(index)}] = {self.convert_for_store(name, value)};")

    def masked(self, mask, body, other):
        saved, self.code = self.code, []
        self.push()
        result = body()
        self.pop()
        inner, self.code = self.code, saved
        t = ctype(result.dtype)
        lam = " ".join(inner)
        other_s = cpp_ops.cpp_constant(other, result.dtype)
        return self.emit(f"({mask} ? [&]() {{ {lam} return static_cast<{t}>({result}); }}() : {other_s})",
                         result.dtype)


class CppCodegen(KernelCodegen):
    language = "cpp"

    def __init__(self, parallel_threshold: int = 32768):
        self.parallel_threshold = parallel_threshold

    def generate(self, group: ir.KernelGroup) -> GeneratedKernel:
        k = CppKernel(group)
        xs = [ir.index_var("x", i) for i in range(len(group.ranges))]
        rs = [ir.index_var("r", i) for i in range(len(group.reduction_ranges))]
        body: list[str] = []
        from compiler.backend.codegen import cpp_column, cpp_dims
        column = cpp_column.eligible(group)
        merged = None if column else cpp_dims.merge_plan(group)
        with ir.set_ops_handler(k.handler):
            if column:
                loop_lines = cpp_column.loops(self, k, group, xs, rs)
            elif merged:
                ranges, k.subst, loop_vars = merged
                self._body(k, group, xs, rs, body)
                loop_lines = self._loops(group, loop_vars, body, ranges)
            else:
                self._body(k, group, xs, rs, body)
                loop_lines = self._loops(group, xs, body)
        params, call_args = self._params(group)
        header = provenance_comment(group.provenance, prefix="// ")
        lines = [f"// {group.name}: ranges={group.ranges} reduction_ranges={group.reduction_ranges}"]
        if header:
            lines.append(header)
        lines.append(f'extern "C" int {group.name}({", ".join(params)}) {{')
        lines.append("    int tt_status = 0;")
        lines += loop_lines
        lines.append("    if (__atomic_exchange_n(&tt_div_error, 0, __ATOMIC_RELAXED)) tt_status = 3;")
        lines.append("    return tt_status;")
        lines.append("}")
        source = "\n".join(lines)
        return GeneratedKernel(
            name=group.name, source=source, language="cpp", call_args=call_args,
            launch={"parallel": "openmp over outer loops", "size_args": [s.name for s in group.size_symbols], "outer_ranges": [str(r) for r in group.ranges],
                    "reduction_ranges": [str(r) for r in group.reduction_ranges]},
            provenance=list(group.provenance), group=group)

    # pieces --------------------------------------------------------------------------------
    def _params(self, group):
        params, call_args = [], []
        for name in group.inputs:
            params.append(f"const {CPP_STORAGE[group.layouts[name].dtype]}* {name}"
                          if name not in group.outputs else f"{CPP_STORAGE[group.layouts[name].dtype]}* {name}")
            call_args.append(name)
        for name in group.outputs:
            if name in group.inputs:
                continue
            dt = group.layouts[name].dtype
            if dt not in CPP_STORAGE:
                raise CodegenUnsupported(f"dtype {dt} of {name}")
            params.append(f"{CPP_STORAGE[dt]}* {name}")
            call_args.append(name)
        for s in group.size_symbols:
            params.append(f"int64_t {s.name}")
            call_args.append(s.name)
        for name in group.inputs:
            if group.layouts[name].dtype not in CPP_STORAGE:
                raise CodegenUnsupported(f"dtype {group.layouts[name].dtype} of {name}")
        return params, call_args

    def _loops(self, group, xs, body, ranges=None):
        ranges = list(group.ranges) if ranges is None else ranges
        out = []
        depth = 1
        work = ir.product(group.ranges) * ir.product(group.reduction_ranges)
        cond = f"if({cpp_index(work)} >= {self.parallel_threshold})"
        n = len(xs)
        if n == 0:
            return ["    " + line for line in body]
        # collapse(2) only when a third loop remains to be the vectorised innermost one
        n_par = 2 if (n >= 3 or (n == 2 and group.reduction_ranges)) else 1
        collapse = f" collapse({n_par})" if n_par > 1 else ""
        pointwise = not group.reduction_ranges
        # the innermost loop of a pointwise kernel is a SIMD loop (no loop-carried dependencies)
        simd = " simd" if pointwise and n == 1 else ""
        cond = cond.replace("if(", "if(parallel: ")
        out.append(f"    #pragma omp parallel for{simd}{collapse} {cond}")
        for i, (x, size) in enumerate(zip(xs, ranges)):
            if i == n - 1 and i >= n_par and pointwise:
                out.append("    " * depth + "#pragma omp simd")
            out.append("    " * depth + f"for (int64_t {x} = 0; {x} < {cpp_index(size)}; {x}++) {{")
            depth += 1
        out += ["    " * depth + line for line in body]
        for _ in range(n):
            depth -= 1
            out.append("    " * depth + "}")
        return out

    def _body(self, k: CppKernel, group, xs, rs, body):
        """Emit every node in order; reduction-loop nodes are blocked into shared loops."""
        block: list = []          # nodes of the currently open reduction loop
        block_reductions: set = set()

        def flush():
            if block:
                body.extend(self._reduction_block(k, group, block, xs, rs))
                block.clear()
                block_reductions.clear()

        for node in group.nodes:
            kind = group.kinds[node.name]
            if kind == ir.NODE_OUTER:
                reads = set(node.reads())
                if reads & set(n.name for n in block):
                    flush()
                k.code = []
                value = node.data.inner_fn(xs)
                k.store(node.name, node.store_index(xs), value)
                # outer nodes that don't depend on the open block may run before it
                body.extend(k.code) if not block else body.extend(k.code)
                continue
            if set(node.reads()) & block_reductions:
                flush()
            block.append(node)
            if kind == ir.NODE_REDUCTION:
                block_reductions.add(node.name)
        flush()

    def _reduction_block(self, k: CppKernel, group, nodes, xs, rs):
        out = []
        accs = {}
        for node in nodes:
            if group.kinds[node.name] != ir.NODE_REDUCTION:
                continue
            red = node.data
            adt = _acc_dtype(red.src_dtype if red.reduction_type not in ("any", "all") else torch.bool)
            if red.reduction_type == "sum" and adt == torch.float32:
                adt = torch.float64   # long float32 sums drift; double partial sums keep eager's accuracy
            t = ctype(adt)
            acc = f"{node.name}_acc"
            rt = red.reduction_type
            if rt in ("max", "argmax"):
                init = (f"-std::numeric_limits<{t}>::infinity()" if adt.is_floating_point
                        else f"std::numeric_limits<{t}>::lowest()")
            elif rt in ("min", "argmin"):
                init = (f"std::numeric_limits<{t}>::infinity()" if adt.is_floating_point
                        else f"std::numeric_limits<{t}>::max()")
            else:
                init = _INIT[rt]
            out.append(f"{t} {acc} = {init};")
            if rt in ("argmax", "argmin"):
                out.append(f"int64_t {acc}_idx = 0;")
            accs[node.name] = (acc, adt)
        # loop header(s): a SIMD loop unless an arg-reduction needs the first index in order
        clause_op = {"sum": "+", "prod": "*", "max": "max", "min": "min", "any": "||", "all": "&&"}
        red_nodes = [n for n in nodes if n.name in accs]
        simd = all(n.data.reduction_type in clause_op for n in red_nodes)
        clauses = {}
        for n in red_nodes:
            clauses.setdefault(clause_op.get(n.data.reduction_type, "?"), []).append(accs[n.name][0])
            if n.data.reduction_type in ("max", "min") and accs[n.name][1].is_floating_point:
                out.append(f"int {accs[n.name][0]}_nan = 0;")
                clauses.setdefault("|", []).append(f"{accs[n.name][0]}_nan")
        loop_open = []
        red_clause = "".join(f" reduction({op}:{', '.join(v)})" for op, v in clauses.items())
        full = not group.ranges and simd and rs
        if full:
            # a reduction to a scalar: the reduction loops themselves are the parallel loops
            work = cpp_index(ir.product(group.reduction_ranges))
            coll = f" collapse({len(rs)})" if len(rs) > 1 else ""
            loop_open.append(f"#pragma omp parallel for simd{coll}{red_clause} if(parallel: {work} >= "
                             f"{self.parallel_threshold})")
        for i, (r, size) in enumerate(zip(rs, group.reduction_ranges)):
            if i == len(rs) - 1 and simd and not full:
                loop_open.append("#pragma omp simd" + red_clause)
            loop_open.append("    " * i + f"for (int64_t {r} = 0; {r} < {cpp_index(size)}; {r}++) {{")
        out += loop_open
        k.push()
        k.code = []
        rlinear = sum((r * st for r, st in zip(rs, ir.contiguous_strides(group.reduction_ranges))), 0)
        for node in nodes:
            kind = group.kinds[node.name]
            if kind == ir.NODE_INNER:
                value = node.data.inner_fn(list(xs) + list(rs))
                k.store(node.name, node.store_index(list(xs) + list(rs)), value)
                continue
            v = node.data.inner_fn(xs, rs)
            acc, adt = accs[node.name]
            t = ctype(adt)
            rt = node.data.reduction_type
            v = f"static_cast<{t}>({v})"
            if rt == "sum":
                k.code.append(f"{acc} += {v};")
            elif rt == "prod":
                k.code.append(f"{acc} *= {v};")
            elif rt in ("max", "min"):
                # NaN propagates through a flag so that the loop stays a plain (vectorisable) max/min
                cmp = ">" if rt == "max" else "<"
                nan = f" {acc}_nan |= (tt_v != tt_v);" if adt.is_floating_point else ""
                k.code.append(f"{{ auto tt_v = {v}; {acc} = (tt_v {cmp} {acc}) ? tt_v : {acc};{nan} }}")
            elif rt == "any":
                k.code.append(f"{acc} = {acc} || ({v});")
            elif rt == "all":
                k.code.append(f"{acc} = {acc} && ({v});")
            else:
                cmp = ">" if rt == "argmax" else "<"
                k.code.append(f"{{ auto tt_v = {v}; if ((tt_v {cmp} {acc}) || (tt_v != tt_v && {acc} == {acc})) "
                              f"{{ {acc} = tt_v; {acc}_idx = {cpp_index(rlinear)}; }} }}")
        inner = k.code
        k.pop()
        pad = "    " * max(len(rs), 1)
        out += [pad + line for line in inner]
        for i in reversed(range(len(rs))):
            out.append("    " * i + "}")
        for node in nodes:
            if node.name in accs and node.data.reduction_type in ("max", "min") and accs[node.name][1].is_floating_point:
                acc, adt = accs[node.name]
                out.append(f"if ({acc}_nan) {acc} = std::numeric_limits<{ctype(adt)}>::quiet_NaN();")
        # store reduction results (or keep them in locals)
        k.code = []
        for node in nodes:
            if node.name not in accs:
                continue
            acc, adt = accs[node.name]
            rt = node.data.reduction_type
            value = CppVar(f"{acc}_idx" if rt in ("argmax", "argmin") else acc,
                           torch.int64 if rt in ("argmax", "argmin") else adt)
            k.store(node.name, node.store_index(xs), value)
        out += k.code
        return out


def cpp_module_prelude(kernels: list[GeneratedKernel]) -> str:
    """Python code that builds every C++ kernel of the graph into one shared object and binds
    each kernel name (one compiler run per graph; cached on disk by source hash)."""
    if not kernels:
        return ""
    from compiler.backend.runtime.cpp_build import simd_math_declarations
    src = cpp_ops.PRELUDE + simd_math_declarations() + "\n\n" + "\n\n".join(k.source for k in kernels)
    kinds = {k.name: "".join("i" if a in k.launch.get("size_args", ()) else "p" for a in k.call_args)
             for k in kernels}
    lines = ["cpp_source = r'''" + src + "\n'''",
             f"cpp_module = load_cpp_module(cpp_source, {kinds!r})"]
    lines += [f"{k.name} = cpp_module.{k.name}" for k in kernels]
    return "\n".join(lines)


CppCodegen.module_prelude = lambda self, kernels: cpp_module_prelude(kernels)
