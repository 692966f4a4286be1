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


class PythonIndexPrinter:
    """Prints sympy index expressions as Python/Triton integer expressions (indices >= 0)."""

    def __call__(self, expr) -> str:
        return self.doprint(sympy.sympify(expr))

    def doprint(self, e) -> str:
        if isinstance(e, sympy.Integer):
            return str(int(e))
        if isinstance(e, sympy.Symbol):
            return e.name
        if isinstance(e, ir.FloorDiv):
            return f"({self.doprint(e.args[0])} // {self.doprint(e.args[1])})"
        if isinstance(e, ir.ModularIndexing):
            a, d, m = (self.doprint(x) for x in e.args)
            return f"(({a} // {d}) % {m})" if e.args[1] != 1 else f"({a} % {m})"
        if isinstance(e, sympy.Add):
            return "(" + " + ".join(self.doprint(a) for a in e.args) + ")"
        if isinstance(e, sympy.Mul):
            return "(" + " * ".join(self.doprint(a) for a in e.args) + ")"
        if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
            return "(" + " * ".join([self.doprint(e.base)] * int(e.exp)) + ")"
        if isinstance(e, sympy.Max):
            return self._fold("max", e.args)
        if isinstance(e, sympy.Min):
            return self._fold("min", e.args)
        raise NotImplementedError(f"cannot print index expression {e!r}")

    def _fold(self, fn, args):
        out = self.doprint(args[0])
        for a in args[1:]:
            out = f"{fn}({out}, {self.doprint(a)})"
        return out


def dtype_is_low_precision(dtype: torch.dtype) -> bool:
    return dtype in (torch.float16, torch.bfloat16)
