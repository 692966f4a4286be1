"""Resume functions and code assembly, directly (no tracing): a resume code object continues
the original function after a given instruction with a saved stack (NULL slots, plain values,
loop iterators saved as tuples, grad-mode blocks re-entered) and live locals. Runs on 3.11
and 3.12, whose call and jump encodings differ."""
import types

import torch

from tracetorch.compiler.frontend import resume
from tracetorch.compiler.frontend.bytecode_info import code_info
from tracetorch.compiler.frontend.codegen import PyCodegen


def g(x, k=1):
    return x * 10 + k


def h(a, b):
    return a - b


def straight(a, b):
    x = a + 1
    y = g(x, k=2)
    z = h(x, g(y))
    return [i * y for i in range(3)], x, z


def calls(code):
    return [i for i in code_info(code).instructions if i.opname == "CALL"]


def test_resume_after_call():
    info = code_info(straight.__code__)
    first = calls(straight.__code__)[0]
    code = resume.make_resume_code(straight.__code__, info.next_offset(first.offset), ["value"],
                                   ["a", "b", "x"])
    fn = types.FunctionType(code, straight.__globals__)
    assert fn((g(4, k=2),), 3, 0, 4) == straight(3, 0)
    assert resume.RESUME_ORIGIN[code][:2] == (straight.__code__, info.next_offset(first.offset))


def test_resume_with_null_and_values_below():
    info = code_info(straight.__code__)
    # the call g(y) inside h(x, g(y)): below it on the stack are NULL, h, x
    inner = [c for c in calls(straight.__code__) if c.arg == 1][0]
    code = resume.make_resume_code(straight.__code__, info.next_offset(inner.offset),
                                   ["null", "value", "value", "value"], ["a", "b", "x", "y"])
    fn = types.FunctionType(code, straight.__globals__)
    assert fn((h, 4, g(42)), 3, 0, 4, 42) == straight(3, 0)


def loop(xs):
    out = 0
    for v in xs:
        out += v
    return out


def test_resume_with_iterator_slot():
    info = code_info(loop.__code__)
    for_iter = [i for i in info.instructions if i.opname == "FOR_ITER"][0]
    code = resume.make_resume_code(loop.__code__, for_iter.offset, ["iter"], ["xs", "out"])
    assert types.FunctionType(code, {})(((2, 3),), [1, 2, 3], 1) == 6


def grad_block(x):
    with torch.no_grad():
        y = x * 2
        z = y + 1
    return z, torch.is_grad_enabled()


def test_resume_inside_grad_mode_block():
    info = code_info(grad_block.__code__)
    line = grad_block.__code__.co_firstlineno + 3          # z = y + 1, inside the block
    start = [i for i in info.instructions if i.positions.lineno == line][0]
    # the saved stack holds the with-block (inner mode False, outer mode True)
    code = resume.make_resume_code(grad_block.__code__, start.offset, [("with", False, True)],
                                   ["x", "y"])
    fn = types.FunctionType(code, grad_block.__globals__)
    x = torch.ones(2, requires_grad=True)
    z, enabled = fn((), x, x.detach() * 2)
    assert enabled and not z.requires_grad and torch.equal(z, torch.full((2,), 3.0))
    assert torch.is_grad_enabled()


def target(a, b):
    return a + b


def test_assembled_body_calls_and_kw_names():
    cg = PyCodegen(lineno=target.__code__.co_firstlineno, code=target.__code__)
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", g)
    cg.emit("LOAD_FAST", "a")
    cg.emit("LOAD_FAST", "b")
    cg.emit("KW_NAMES", ("k",))
    cg.call(2)
    cg.load_global("len", push_null=True)
    cg.emit("LOAD_CONST", (1, 2, 3))
    cg.call(1)
    cg.emit("LOAD_CONST", "abc")
    cg.load_attr("upper")
    cg.emit("BUILD_TUPLE", 3)
    cg.emit("RETURN_VALUE")
    fn = resume.transformed_function(target, resume.assemble(target.__code__, cg.instrs))
    out = fn(5, 2)
    assert out[:2] == (52, 3) and out[2]() == "ABC"
    assert fn.__name__ == "target" and fn.__code__.co_varnames[:2] == ("a", "b")


def with_closure(x, s=1):
    y = x + 1

    def add(v, w=2):
        return v * w + y + s
    z = g(x)
    y = y * 2
    return add(z), y, add.__defaults__


def test_resume_remakes_closure_over_its_own_cells():
    # the closure is not passed: the prologue makes it again over the resume function's cells
    # `y` (a cell variable) and `s` (a cell variable that is also a parameter), so the
    # rebinding of y after the resume point is seen by the closure, as in the original
    info = code_info(with_closure.__code__)
    first = calls(with_closure.__code__)[0]
    add_code = next(c for c in with_closure.__code__.co_consts if isinstance(c, types.CodeType))
    cells = tuple((name, True) for name in add_code.co_freevars)     # both cell variables
    assert sorted(add_code.co_freevars) == ["s", "y"]
    spec = ((("add", False, ()),), add_code, cells, (2,), None)
    code = resume.make_resume_code(with_closure.__code__, info.next_offset(first.offset), ["value"],
                                   ["x", "s", "y"], (), (spec,))
    assert "add" not in code.co_varnames[:code.co_argcount]
    fn = types.FunctionType(code, with_closure.__globals__)
    assert fn((g(3),), 3, 5, 4) == with_closure(3, 5)
