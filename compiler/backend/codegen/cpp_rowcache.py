"""Row cache: an expensive per-element value computed in one reduction loop of a row and needed
again by a later loop of the same row is stored once and loaded back instead of recomputed.

Softmax is the case this exists for: `exp(x - max)` is summed in the second loop and divided by
the sum in the third; recomputing it costs one more exp per element, while the row (a few KB)
stays in L1/L2, so a store plus a load is much cheaper:

    alignas(64) float tt_row0[1024];                 // per row (stack), or a per-thread buffer
    for (r0 ...) { auto tmp3 = std::exp(tmp2); tt_row0[r0] = tmp3; sum += tmp3; }
    for (r0 ...) { auto tmp6 = tt_row0[r0]; out[...] = tmp6 * rcp; }

Values are matched by value numbering (CppKernel.canonical), not by name: the later loop's
`tmp6 = std::exp(tmp5)` has the same canonical form as the first loop's `tmp3`. Only values at
the top level of a loop body are cached (never inside a masked lambda), and only expensive ones
(transcendental calls): loads and arithmetic are as cheap to redo as a reload.
"""

from __future__ import annotations

import re

import sympy

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.cpp_ops import CPP_STORAGE, CppVar, cpp_index, ctype

# rows up to this many bytes live on the stack of the thread running the row
STACK_ROW_BYTES = 64 * 1024
_EXPENSIVE = re.compile(r"\b(std::(exp|exp2|expm1|log|log2|log10|log1p|sqrt|sin|cos|tan|asin|acos|atan|"
                        r"sinh|cosh|tanh|asinh|acosh|atanh|erf|erfc|lgamma|pow|atan2|hypot)|"
                        r"tt_sigmoid|tt_pow|tt_erfinv)\(")
_BYTES = {"float": 4, "double": 8, "int64_t": 8, "int32_t": 4, "int16_t": 2, "int8_t": 1, "uint8_t": 1,
          "bool": 1}


def is_expensive(expr: str) -> bool:
    return bool(_EXPENSIVE.search(expr))


class RowCache:
    def __init__(self, group: ir.KernelGroup, rs):
        self.group = group
        strides = ir.contiguous_strides(group.reduction_ranges)
        self.rlinear = cpp_index(sum((r * st for r, st in zip(rs, strides)), sympy.Integer(0)))
        self.block = None            # id of the reduction loop being generated (None: outside)
        self.n_blocks = 0
        self.defs: dict[str, tuple[int, CppVar]] = {}   # canonical form -> (loop id, first value)
        self.cached: dict[str, tuple[str, str]] = {}    # defining tmp -> (buffer, C++ type)
        self.consumers: dict[str, set[int]] = {}        # defining tmp -> loops that reload it
        self.stores: list[tuple[str, str, int | None]] = []  # (buffer, C++ index, loop) of each store
        self.seq = 0                                    # order of reloads and stores in the body
        self.last_reload: dict[str, int] = {}           # defining tmp -> seq of its last reload
        self.store_seq: list[int] = []                  # seq of each entry of self.stores
        self.first_loop_loads: list = []                      # (buffer, index) read by the first loop

    # called by the reduction-loop generator ------------------------------------------------
    def open_block(self):
        self.block = self.n_blocks
        self.n_blocks += 1

    def close_block(self):
        self.block = None

    # called by CppKernel.emit ----------------------------------------------------------------
    def lookup(self, canon: str, expr: str) -> tuple[str, str] | None:
        """(buffer, C++ type) holding `canon` when an earlier loop of this row computed it."""
        if self.block is None or canon not in self.defs or not is_expensive(expr):
            return None
        block, var = self.defs[canon]
        if block >= self.block:
            return None
        if var.name not in self.cached:
            self.cached[var.name] = (f"tt_row{len(self.cached)}", ctype(var.dtype))
        self.consumers.setdefault(var.name, set()).add(self.block)
        self.seq += 1
        self.last_reload[var.name] = self.seq
        return self.cached[var.name]

    def note_load(self, name: str, index):
        if self.block == 0:
            self.first_loop_loads.append((name, index))

    def note_store(self, name: str, index: str):
        self.seq += 1
        self.stores.append((name, index, self.block))
        self.store_seq.append(self.seq)

    def define(self, canon: str, var: CppVar):
        if self.block is not None and canon not in self.defs:
            self.defs[canon] = (self.block, var)

    def forget(self, canon_prefix_test):
        for c in [c for c in self.defs if canon_prefix_test(c)]:
            del self.defs[c]

    # applied to the finished row body ----------------------------------------------------------
    def apply(self, body: list[str], per_row: bool) -> list[str]:
        """Insert the stores after each cached value's definition and declare the buffers.
        per_row: the body runs once per outer point on one thread (else: once, shared by threads)."""
        if not self.cached:
            return body
        aliases = self._output_aliases()
        if aliases:
            body = [_replace_all(line, aliases) for line in body]
        out = []
        for line in body:
            out.append(line)
            m = re.match(r"(\s*)auto (tmp\d+) = ", line)
            if m and m.group(2) in self.cached:
                buf, _ = self.cached[m.group(2)]
                out.append(f"{m.group(1)}{aliases.get(buf, f'{buf}[{self.rlinear}]')} = {m.group(2)};")
        size = ir.product(self.group.reduction_ranges)
        decls = []
        for buf, t in self.cached.values():
            if buf in aliases:
                continue
            static = isinstance(size, (int, sympy.Integer)) or getattr(size, "is_Integer", False)
            if static and int(size) * _BYTES.get(t, 8) <= STACK_ROW_BYTES:
                decls.append(f"alignas(64) {t} {buf}[{int(size)}];")
            elif per_row:
                # one buffer per thread, grown to the largest row seen, kept between calls
                decls.append(f"static thread_local std::vector<{t}> {buf}_store; "
                             f"if ((int64_t){buf}_store.size() < {cpp_index(size)}) "
                             f"{buf}_store.resize({cpp_index(size)}); "
                             f"{t}* {buf} = {buf}_store.data();")
            else:
                decls.append(f"std::vector<{t}> {buf}_store({cpp_index(size)}); {t}* {buf} = {buf}_store.data();")
        return decls + out

    def _output_aliases(self) -> dict[str, str]:
        """Row buffers that can live in an output instead: {buffer: 'out[index]'}.

        When the one loop that reloads a cached value also writes an output element at each
        point, that element can hold the value until it is overwritten, provided every reload
        in that iteration comes before the store (a second reload after it read the output's
        new value: `v = hypot(..); return v.mean() + v, v` returned the sum as v). Writing it in
        the earlier loop also brings the output's cache lines in while that loop is busy
        computing (exp), so the last loop only streams."""
        group = self.group
        write_count: dict[str, int] = {}
        for name, _, _ in self.stores:
            write_count[name] = write_count.get(name, 0) + 1
        read_anywhere = {r for n in group.nodes for r in n.reads()}
        aliases, used = {}, set()
        for var, (buf, t) in self.cached.items():
            consumers = self.consumers.get(var, set())
            if len(consumers) != 1:
                continue
            (block,) = consumers
            for (name, index, b), seq in zip(self.stores, self.store_seq):
                layout = group.layouts[name]
                if (b == block and self.last_reload.get(var, 0) < seq and name not in used
                        and write_count[name] == 1 and name not in group.inputs and name not in read_anywhere
                        and CPP_STORAGE.get(layout.dtype) == t and _dense(layout)):
                    aliases[buf] = f"{name}[{index}]"
                    used.add(name)
                    break
        return aliases


def _replace_all(line: str, aliases: dict[str, str]) -> str:
    for buf, target in aliases.items():
        line = re.sub(rf"\b{buf}\[[^\]]*\]", lambda m: target, line)
    return line


def _dense(layout) -> bool:
    """Every element of the layout at its own storage position (no overlaps, no holes)."""
    if any(st == 0 for s, st in zip(layout.size, layout.stride) if s != 1):
        return False
    span = 1 + sum((s - 1) * st for s, st in zip(layout.size, layout.stride))
    return sympy.expand(span - ir.product(layout.size)) == 0
