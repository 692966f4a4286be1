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

import re

import torch

from tracetorch import logs
from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen import cpp_ops
from tracetorch.compiler.backend.codegen.common import (CodegenUnsupported, GeneratedKernel, KernelCodegen,
                                             provenance_comment)
from tracetorch.compiler.backend.codegen.cpp_ops import CPP_STORAGE, CppOpsHandler, CppVar, cpp_index, ctype
from tracetorch.compiler.backend.codegen.cpp_prefetch import next_row_prefetch
from tracetorch.compiler.backend.codegen.cpp_reduction import acc_dtype, reduction_block
from tracetorch.compiler.backend.codegen.cpp_rowcache import RowCache

log = logs.get_logger(__name__)
_TMP = re.compile(r"\btmp\d+\b")
_NARROW = (torch.bool, torch.uint8, torch.int8, torch.int16)   # types C promotes to int


class CppKernel:
    """State of one kernel being generated: code lines, temporaries, CSE, local buffers.

    Besides the scoped CSE (by expression text), every value gets a value number: its expression
    with operand temporaries replaced by their numbers. Equal numbers mean equal values at the
    same loop point even across loops, which is what the row cache (cpp_rowcache) matches on."""

    def __init__(self, group: ir.KernelGroup):
        self.group = group
        self.code: list[str] = []
        self.n_tmp = 0
        self.cse: list[dict] = [{}]
        self.locals: dict[str, CppVar] = {}   # buffer name -> local holding its value
        self.subst: dict = {}                 # loop-variable rewrite of merged dimensions
        self.handler = CppOpsHandler(self)
        self.value_numbers: dict[str, int] = {}   # canonical expression -> value number
        self.var_number: dict[str, int] = {}      # tmp name -> value number
        self.n_values = 0
        self.row: RowCache | None = None          # set for row (reduction) kernels
        self.in_rloop = False                     # generating a reduction loop's body
        self.lambda_depth = 0                     # inside masked() lambdas
        self.invariant: set[str] = set()          # values fixed for a whole reduction loop
        self.preheader: list[str] | None = None   # lines the open reduction loop needs before it
        self.reciprocals: dict[str, CppVar] = {}

    # value emission with scoped common-subexpression elimination -------------------------
    def canonical(self, expr: str) -> str:
        return _TMP.sub(lambda m: f"v{self.var_number[m.group()]}" if m.group() in self.var_number
                        else m.group(), expr)

    def _new_tmp(self, expr: str, dtype, canon: str) -> CppVar:
        name = f"tmp{self.n_tmp}"
        self.n_tmp += 1
        # C promotes bool and narrow integers to int: declaring the variable with the value's own
        # type renormalizes bool arithmetic (True + True is True) and wraps uint8/int8/int16
        # (-x on uint8 is 256 - x), as torch does; wider types keep `auto` (same type anyway).
        decl = ctype(dtype) if dtype in _NARROW else "auto"
        self.code.append(f"{decl} {name} = {expr};")
        v = CppVar(name, dtype)
        self.cse[-1][expr] = v
        if canon not in self.value_numbers:
            self.value_numbers[canon] = self.n_values
            self.n_values += 1
        self.var_number[name] = self.value_numbers[canon]
        if not self.in_rloop and self.lambda_depth == 0:
            self.invariant.add(name)
        return v

    def emit(self, expr: str, dtype) -> CppVar:
        for scope in reversed(self.cse):
            if expr in scope:
                return scope[expr]
        canon = self.canonical(expr)
        top = self.lambda_depth == 0
        if self.row is not None and top:
            hit = self.row.lookup(canon, expr)
            if hit is not None:
                v = self._new_tmp(f"{hit[0]}[{self.row.rlinear}]", dtype, canon)
                self.cse[-1][expr] = v
                return v
        v = self._new_tmp(expr, dtype, canon)
        if self.row is not None and top:
            self.row.define(canon, v)
        return v

    def reciprocal(self, b: CppVar) -> tuple[CppVar, CppVar] | None:
        """(1/b, whether 1/b may replace b as a divisor) computed ahead of the open reduction
        loop, or None when b is not fixed for the loop. The flag is set only where the product is
        the quotient bit for bit: b a power of two with a normal reciprocal. Elsewhere a * (1/b)
        is up to 1.5 ulp off a / b, which ATen computes exactly, and a later op can amplify it
        (`1e20 % (x / 0.1)` differed by 1e-6 relative: fuzz 331155)."""
        if self.preheader is None or not self.in_rloop or self.lambda_depth or str(b) not in self.invariant:
            return None
        if str(b) not in self.reciprocals:
            t = ctype(b.dtype)
            name = f"tt_rcp{len(self.reciprocals)}"
            self.preheader.append(f"const {t} {name} = {t}(1) / {b}; "
                                  f"const bool {name}_ok = std::isnormal({b}) && std::isnormal({name})"
                                  f" && tt_pow2({b});")
            self.reciprocals[str(b)] = CppVar(name, b.dtype)
        r = self.reciprocals[str(b)]
        return r, CppVar(f"{r.name}_ok", torch.bool)

    def push(self):
        self.cse.append({})

    def pop(self):
        self.cse.pop()

    def load(self, name, index):
        if name in self.locals:
            return self.locals[name]
        layout = self.group.layouts[name]
        if self.row is not None and self.in_rloop and self.lambda_depth == 0:
            self.row.note_load(name, index)
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
            # a value kept in a local stands for the stored one: a half-precision buffer's
            # readers see it rounded to its dtype, as they would after a store and a load
            # (fuzz 371158: a float16 sum read unrounded by one reader of std and rounded by
            # the other gave (x - round(x))^2 / 0 = inf where eager has 0 / 0 = NaN)
            stored = self.group.layouts[name].dtype
            if stored in (torch.float16, torch.bfloat16):
                value = self.handler.to_dtype(value, stored)
            dt = acc_dtype(stored)
            self.code.append(f"auto {name}_val = static_cast<{ctype(dt)}>({value});")
            self.locals[name] = CppVar(f"{name}_val", dt)
            if not self.in_rloop and self.lambda_depth == 0:
                self.invariant.add(f"{name}_val")
            return
        if self.subst:
            index = index.xreplace(self.subst)
        self.code.append(f"{name}[{cpp_index(index)}] = {self.convert_for_store(name, value)};")
        if self.row is not None:
            self.row.note_store(name, cpp_index(index))
        self._forget_loads(name)

    def _forget_loads(self, name):
        """Later loads of a buffer written here are new values (never matched with older ones)."""
        stale = [c for c in self.value_numbers if f"{name}[" in c]
        for c in stale:
            del self.value_numbers[c]
        if self.row is not None and stale:
            self.row.forget(lambda c: f"{name}[" in c)

    def masked(self, mask, body, other):
        saved, self.code = self.code, []
        self.push()
        self.lambda_depth += 1
        try:
            result = body()
        finally:
            self.lambda_depth -= 1
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
        from tracetorch.compiler.backend.codegen import cpp_column, cpp_dims
        # a scatter kernel runs its loops serially (why: see _scatter) and as they are
        scatter = any(isinstance(n, ir.ScatterBuffer) for n in group.nodes)
        column = not scatter and cpp_column.eligible(group)
        merged = None if column or scatter else cpp_dims.merge_plan(group)
        with ir.set_ops_handler(k.handler):
            if column:
                loop_lines = cpp_column.loops(self, k, group, xs, rs)
            elif merged:
                ranges, k.subst, loop_vars = merged
                self._body(k, group, xs, rs, body)
                loop_lines = self._loops(group, loop_vars, body, ranges)
            else:
                if rs:
                    k.row = RowCache(group, rs)
                self._body(k, group, xs, rs, body)
                if k.row is not None:
                    body = k.row.apply(body, per_row=bool(xs))
                    if k.row.cached:
                        log.debug("cpp_row_cache", kernel=group.name, values=sorted(k.row.cached))
                    body = next_row_prefetch(group, xs, rs, k.row.first_loop_loads, self.parallel_threshold) + body
                loop_lines = self._loops(group, xs, body, serial=scatter)
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
            launch={"parallel": "openmp over outer loops", "size_args": [s.name for s in group.size_symbols],
                    "float_args": [s.name for s in group.size_symbols if ir.is_float_symbol(s)],
                    "outer_ranges": [str(r) for r in group.ranges],
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
            # a float scalar (SymFloat input) arrives as a double, like a Python float
            params.append(f"double {s.name}" if ir.is_float_symbol(s) else f"int64_t {s.name}")
            call_args.append(s.name)
        for name in group.inputs:
            if group.layouts[name].dtype not in CPP_STORAGE:
                raise CodegenUnsupported(f"dtype {group.layouts[name].dtype} of {name}")
        return params, call_args

    def _loops(self, group, xs, body, ranges=None, serial=False):
        ranges = list(group.ranges) if ranges is None else ranges
        out = []
        depth = 1
        if serial:
            for x, size in zip(xs, ranges):
                out.append("    " * depth + f"for (int64_t {x} = 0; {x} < {cpp_index(size)}; {x}++) {{")
                depth += 1
            out += ["    " * depth + line for line in body]
            for _ in xs:
                depth -= 1
                out.append("    " * depth + "}")
            return out
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
                body.extend(reduction_block(self, k, group, block, xs, rs))
                block.clear()
                block_reductions.clear()

        for node in group.nodes:
            kind = group.kinds[node.name]
            if isinstance(node, ir.ScatterBuffer):
                k.code = []
                self._scatter(k, node, xs)
                body.extend(k.code)
                continue
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


    #: how a scatter combines the element already there (a) with the new value (b)
    _COMBINE = {"sum": "({a} + {b})", "prod": "({a} * {b})", "amax": "tt_max({a}, {b})", "amin": "tt_min({a}, {b})"}

    def _scatter(self, k: CppKernel, node, xs):
        """out[dst(i)] = v or combine(out[dst(i)], v). The loops run serially (no OpenMP): points
        sharing a destination then combine in source order, as ATen's CPU kernels do, so float
        sums are deterministic and no atomics are needed. An index out of range sets the status
        word (the wrapper raises) and writes element 0 of this temporary instead."""
        value = node.data.inner_fn(xs)
        index = cpp_index(node.store_index(xs))
        name, mode = node.name, node.data.scatter_mode
        if mode == "store":
            k.code.append(f"{name}[{index}] = {k.convert_for_store(name, value)};")
            return
        dt = node.layout.dtype
        if dt in (torch.float16, torch.bfloat16):   # the lowering accumulates these in float32
            raise CodegenUnsupported(f"accumulating scatter into {dt}")
        old = k.emit(f"{name}[{index}]", dt)
        k.code.append(f"{name}[{index}] = {k.convert_for_store(name, self._COMBINE[mode].format(a=old, b=value))};")
        k._forget_loads(name)


def cpp_module_prelude(kernels: list[GeneratedKernel]) -> str:
    """Python code that builds every C++ kernel of the graph into one shared object and binds
    each kernel name (one compiler run per graph; cached on disk by source hash)."""
    if not kernels:
        return ""
    from tracetorch.compiler.backend.runtime.cpp_build import simd_math_declarations
    src = cpp_ops.PRELUDE + simd_math_declarations() + "\n\n" + "\n\n".join(k.source for k in kernels)
    kinds = {k.name: "".join("d" if a in k.launch.get("float_args", ()) else
                             "i" if a in k.launch.get("size_args", ()) else "p" for a in k.call_args)
             for k in kernels}
    lines = ["cpp_source = r'''" + src + "\n'''",
             f"cpp_module = load_cpp_module(cpp_source, {kinds!r})"]
    lines += [f"{k.name} = cpp_module.{k.name}" for k in kernels]
    return "\n".join(lines)


CppCodegen.module_prelude = lambda self, kernels: cpp_module_prelude(kernels)
