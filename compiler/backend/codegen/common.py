"""The interface between the scheduler's KernelGroups and a code generator (C++ or Triton).

See docs/CONTRACTS.md section 7. A code generator subclasses KernelCodegen and turns one
ir.KernelGroup into one GeneratedKernel; the wrapper (codegen/wrapper.py) puts each kernel's
`define_code` into the output module and calls `name(*call_args)` at the right place.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import sympy
import torch

from tracetorch.compiler.backend import ir


class CodegenUnsupported(Exception):
    """Raised by a code generator for a group it cannot compile; the backend then runs the
    whole graph eagerly and logs the reason (never a wrong result)."""


@dataclasses.dataclass
class GeneratedKernel:
    """One generated kernel, ready for the wrapper.

    name:        Python identifier the wrapper calls (e.g. "cpp_kernel0", "triton_kernel0").
    source:      the kernel's source text (logged as kernel_code, stored in the `kernel` record).
    language:    "cpp" or "triton".
    call_args:   what the wrapper passes, in order: buffer names (it passes the torch.Tensor held
                 in the wrapper variable of that name) and size symbol names (it passes the int).
    define_code: Python statements (module level of the output code) that bind `name` to a
                 callable taking call_args positionally. May be empty when module_prelude()
                 binds it.
    launch:      human-readable launch information (grid, block sizes, num_warps, threads...).
    provenance:  [(fx node name, user source line or "")], printed as a comment above the call.
    """

    name: str
    source: str
    language: str
    call_args: list
    define_code: str = ""
    launch: dict = dataclasses.field(default_factory=dict)
    provenance: list = dataclasses.field(default_factory=list)
    group: Optional[ir.KernelGroup] = None
    #: a Triton pointwise kernel that may share one launch with its independent neighbours
    #: (codegen/triton_combo.py): its body as a device function and its static size
    combo_part: Optional["ComboPart"] = None


@dataclasses.dataclass
class ComboPart:
    """A kernel's body as a @triton.jit device function `{name}_part(*params, xnumel, XBLOCK,
    PID_BASE)` that computes the block `tl.program_id(0) - PID_BASE` of its xnumel elements; a
    persistent reduction's is `{name}_part(*params, xnumel, rnumel, XBLOCK, RBLOCK, PID_BASE)`,
    XBLOCK rows of rnumel elements per block."""

    source: str
    params: list          # buffer names, in the order the function takes them
    written: list         # those of params it stores to
    xnumel: int
    interpret: bool
    ptr_types: tuple
    rnumel: int | None = None     # a reduction's row length (None: pointwise)
    rblock: int | None = None     # its lanes per row, a power of two >= rnumel


class KernelCodegen:
    """Base class of code generators. Subclasses: CppCodegen (cpp.py), TritonCodegen (triton.py)."""

    language = "?"

    def generate(self, group: ir.KernelGroup) -> GeneratedKernel:
        raise NotImplementedError

    def module_prelude(self, kernels: list[GeneratedKernel]) -> str:
        """Python code emitted once near the top of the output module, after the imports and
        before the kernels' define_code (e.g. build all C++ kernels into one shared object)."""
        return ""


def provenance_comment(provenance: list, prefix: str = "# ") -> str:
    """Comment lines naming the FX nodes and user source lines a kernel came from."""
    lines = []
    for node_name, where in provenance:
        lines.append(f"{prefix}{node_name}" + (f": {where}" if where else ""))
    return "\n".join(lines)


class IndexPrinter:
    """Prints sympy index expressions as integer expressions of a language. Indices are
    non-negative, so floor division and modulo are the language's own division and `%`; a
    language subclass sets the spellings (the one printer both code generators share)."""

    floordiv = "//"
    mul = " * "
    max_fn, min_fn = "max", "min"

    def __call__(self, expr) -> str:
        return self.doprint(sympy.sympify(expr))

    def integer(self, v: int) -> str:
        return str(v)

    def unsupported(self, e) -> Exception:
        return NotImplementedError(f"cannot print index expression {e!r}")

    def doprint(self, e) -> str:
        if isinstance(e, sympy.Integer):
            return self.integer(int(e))
        if isinstance(e, sympy.Symbol):
            return e.name
        if isinstance(e, ir.FloorDiv):
            return f"({self.doprint(e.args[0])} {self.floordiv} {self.doprint(e.args[1])})"
        if isinstance(e, ir.ModularIndexing):
            a, d, m = (self.doprint(x) for x in e.args)
            return f"(({a} {self.floordiv} {d}) % {m})" if e.args[1] != 1 else f"({a} % {m})"
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(self.doprint(a) for a in e.args) + ")"
        if isinstance(e, sympy.Mul):
            return "(" + self.mul.join(self.doprint(a) for a in e.args) + ")"
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
            return "(" + self.mul.join([self.doprint(e.base)] * int(e.exp)) + ")"
        if isinstance(e, (sympy.Max, sympy.Min)):
            fn = self.max_fn if isinstance(e, sympy.Max) else self.min_fn
            out = self.doprint(e.args[0])
            for a in e.args[1:]:
                out = f"{fn}({out}, {self.doprint(a)})"
            return out
        raise self.unsupported(e)


class PythonIndexPrinter(IndexPrinter):
    """Python and Triton spelling (the wrapper's sizes, Triton kernels' indices)."""


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float16/bfloat16 values are computed in float32 and rounded only where the graph converts
    or stores (both code generators, as Inductor does)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype

