"""The code generators' op tables against the op vocabulary (backend/ops.py OpsProtocol).

Every op of the Protocol has, in each language, a method or a table entry (codegen/op_tables.py
dispatches the table entries); no table names an op outside the vocabulary; and the shared
index printer spells the same expression in each language's syntax."""
import inspect

import pytest
import sympy
import torch

from tracetorch.compiler.backend import ir
from tracetorch.compiler.backend.codegen.common import CodegenUnsupported, PythonIndexPrinter
from tracetorch.compiler.backend.codegen.cpp_ops import CppOpsHandler, CppVar, cpp_index
from tracetorch.compiler.backend.codegen.op_tables import COMPARE, TableOpsHandler
from tracetorch.compiler.backend.codegen.triton_ops import TritonOpsHandler
from tracetorch.compiler.backend.ops import BOOL_RESULT, OPS_VOCABULARY, OpsProtocol

HANDLERS = [CppOpsHandler, TritonOpsHandler]
TABLES = ("UNARY", "UNARY_FLOAT", "UNARY_INT", "BINARY", "BINARY_FLOAT", "BINARY_INT", "LOGICAL")


def test_vocabulary_is_the_protocol():
    members = [n for n, f in vars(OpsProtocol).items() if not n.startswith("_") and callable(f)]
    assert list(OPS_VOCABULARY) == members
    assert BOOL_RESULT <= set(OPS_VOCABULARY)


@pytest.mark.parametrize("cls", HANDLERS, ids=lambda c: c.__name__)
def test_every_op_has_code(cls):
    h = cls(kernel=None)
    assert isinstance(h, OpsProtocol)
    missing = [name for name in OPS_VOCABULARY if not h.implements(name)]
    assert missing == []


@pytest.mark.parametrize("cls", HANDLERS, ids=lambda c: c.__name__)
def test_tables_name_only_vocabulary_ops(cls):
    for table in TABLES:
        extra = set(getattr(cls, table)) - set(OPS_VOCABULARY)
        assert not extra, f"{cls.__name__}.{table}: {sorted(extra)}"
    assert set(COMPARE) <= set(OPS_VOCABULARY)


@pytest.mark.parametrize("cls", HANDLERS, ids=lambda c: c.__name__)
def test_special_methods_match_the_protocol(cls):
    """A method that implements an op takes the Protocol's parameters."""
    for name in OPS_VOCABULARY:
        for klass in cls.__mro__:
            if name in vars(klass) and issubclass(klass, TableOpsHandler):
                got = list(inspect.signature(getattr(klass, name)).parameters)
                want = list(inspect.signature(getattr(OpsProtocol, name)).parameters)
                assert got == want, f"{klass.__name__}.{name}{got} != OpsProtocol.{name}{want}"
                break


class _CppKernel:
    def __init__(self):
        self.lines, self.invariant = [], set()

    def emit(self, expr, dtype):
        self.lines.append(expr)
        return CppVar(f"t{len(self.lines)}", dtype)

    def reciprocal(self, b):
        return None


def test_shared_rules_apply_to_each_language():
    h = CppOpsHandler(_CppKernel())
    b = CppVar("b", torch.bool)
    i = CppVar("i", torch.int64)
    f = CppVar("f", torch.float32)
    with ir.set_ops_handler(h):
        assert ir.ops.abs(b) is b                      # abs of a bool is the bool
        assert ir.ops.floor(i) is i                    # integers are whole already
        assert ir.ops.bitwise_not(b).dtype == torch.bool
        assert ir.ops.isnan(f).dtype == torch.bool     # BOOL_RESULT
        assert ir.ops.lt(f, f).dtype == torch.bool
        with pytest.raises(CodegenUnsupported, match="ops.exp on torch.int64"):
            ir.ops.exp(i)
    assert h.kernel.lines == ["(!b)", "tt_isnan(f)", "(f < f)"]


def test_one_index_printer_two_spellings():
    x, y = sympy.symbols("x y", integer=True, nonnegative=True)
    e = ir.ModularIndexing(x, 4, 8) + 3 * ir.FloorDiv(y, 2) + sympy.Max(x, y) + 2**40
    py, cpp = PythonIndexPrinter()(e), cpp_index(e)
    assert "//" in py and "max(" in py and "1099511627776" in py
    assert "//" not in cpp and "std::max<int64_t>(" in cpp and "1099511627776LL" in cpp
    for v in ({x: 13, y: 7}, {x: 2, y: 9}):
        assert eval(py, {"max": max, "min": min}, {"x": v[x], "y": v[y]}) == int(
            e.subs(v).replace(ir.ModularIndexing, lambda a, d, m: (a // d) % m)
             .replace(ir.FloorDiv, lambda a, d: a // d))
    with pytest.raises(CodegenUnsupported):
        cpp_index(sympy.sqrt(x))
    with pytest.raises(NotImplementedError):
        PythonIndexPrinter()(sympy.sqrt(x))
