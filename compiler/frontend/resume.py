"""Resume functions and the assembly of transformed code objects.

A resume function continues the original function after a graph break. It is a copy of the
original code object with a new signature `(___stack, <live locals>)` and a prologue that
pushes the saved stack back (PUSH_NULL for NULL slots, GET_ITER for loop iterators saved as
tuples) and jumps to the instruction after the break. The rest of its body is the original
bytecode, so when it is itself compiled on first call the evaluator just starts there.
"""
from __future__ import annotations

import inspect
import types

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from tracetorch.compiler.frontend.bytecode_info import PY312, code_info
from tracetorch.compiler.frontend.errors import Unsupported

STACK_ARG = "___stack"
_PREFIX_OPS = {"RESUME", "MAKE_CELL", "COPY_FREE_VARS", "NOP"}
_resume_cache: dict = {}
# resume code object -> (original code, offset there, entry offset in the resume code)
RESUME_ORIGIN: dict = {}


def split_prefix(instrs):
    """The leading RESUME / MAKE_CELL / COPY_FREE_VARS instructions, which must stay first."""
    k = 0
    while k < len(instrs) and isinstance(instrs[k], Instr) and instrs[k].name in _PREFIX_OPS:
        k += 1
        if instrs[k - 1].name == "RESUME":
            break
    return instrs[:k], instrs[k:]


def abstract_instr_at(code, offset):
    """The `bytecode` Instr for the dis instruction at `offset` (same order, no caches)."""
    info = code_info(code)
    want = info.index_of[offset]
    bc = Bytecode.from_code(code)
    k = -1
    for pos, ins in enumerate(bc):
        if isinstance(ins, Instr):
            k += 1
            if k == want:
                return bc, pos
    raise Unsupported(f"internal: no instruction at offset {offset}")


def make_resume_code(code, offset, layout, local_names, iter_locals=(), closures=(), made=()):
    """A code object that resumes `code` at `offset` with the stack described by `layout`
    ("null" / "value" / "iter" per slot, bottom first) and the locals `local_names`; the
    locals in `iter_locals` arrive as sequences and are made iterators again (GET_ITER);
    `closures` are functions the prologue makes again over this code's own cells
    (`_remake_closure`); `made` = ((name, (ctor, *leading args)), ...): locals that arrive as
    a list or dict of items and become ctor(*leading args, items) (a deque or a defaultdict
    made in the frame)."""
    key = (code, offset, tuple(layout), tuple(local_names), tuple(iter_locals), tuple(closures),
           tuple(made))
    if key in _resume_cache:
        return _resume_cache[key]
    bc, pos = abstract_instr_at(code, offset)
    instrs = list(bc)
    label = Label()
    instrs.insert(pos, label)
    prefix, rest = split_prefix(instrs)
    line = code.co_firstlineno
    prologue = []
    j = 0
    for kind in layout:
        if kind == "null":
            prologue.append(Instr("PUSH_NULL", lineno=line))
            continue
        if isinstance(kind, tuple) and kind[0] == "with":
            prologue += _reenter_grad_mode(kind[1], kind[2], line)
            continue
        prologue += [Instr("LOAD_FAST", STACK_ARG, lineno=line), Instr("LOAD_CONST", j, lineno=line),
                     Instr("BINARY_SUBSCR", lineno=line)]
        if kind == "iter":
            prologue.append(Instr("GET_ITER", lineno=line))
        j += 1
    for name in iter_locals:
        prologue += [Instr("LOAD_FAST", name, lineno=line), Instr("GET_ITER", lineno=line),
                     Instr("STORE_FAST", name, lineno=line)]
    for name, ctor in made:
        prologue += ([Instr("PUSH_NULL", lineno=line)]
                     + [Instr("LOAD_CONST", c, lineno=line) for c in ctor]
                     + [Instr("LOAD_FAST", name, lineno=line)] + _call(len(ctor), line)
                     + [Instr("STORE_FAST", name, lineno=line)])
    for spec in closures:
        prologue += _remake_closure(spec, line)
    prologue.append(Instr("JUMP_FORWARD", label, lineno=line))
    new = Bytecode(prefix + prologue + rest)
    new._copy_attr_from(bc)
    new.argnames = resume_argnames(code, local_names)
    new.argcount = len(new.argnames)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.flags = bc.flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    new.name = f"__resume_at_{offset}_{code.co_name}"
    if hasattr(new, "qualname"):
        new.qualname = new.name
    new.docstring = None
    result = new.to_code()
    _resume_cache[key] = result
    entry = next(i.argval for i in code_info(result).instructions if i.opname == "JUMP_FORWARD")
    RESUME_ORIGIN[result] = (code, offset, entry)
    return result


def _remake_closure(spec, line):
    """MAKE_FUNCTION over the resume function's cells (the same names as the original's, so
    the new function and the frame share them after the break as the old one did before it),
    stored into every local that held the old function and back into the containers that
    held it. spec = (targets, function code, ((cell name, is a cell variable), ...), defaults,
    annotations); targets = ((local name, is a cell variable, ()), ...) for locals and
    ((container local name, False, (index or key,)), ...) for `local[key] = fn`. 3.11 and
    3.12 both take the code object on top of the stack, under it the closure tuple,
    annotations and defaults, as the flags say."""
    targets, fn_code, cells, defaults, annotations = spec
    out, flags = [], 0x08
    if defaults is not None:
        out.append(Instr("LOAD_CONST", defaults, lineno=line))
        flags |= 0x01
    if annotations is not None:
        out.append(Instr("LOAD_CONST", annotations, lineno=line))
        flags |= 0x04
    for name, is_cell in cells:
        out.append(Instr("LOAD_CLOSURE", CellVar(name) if is_cell else FreeVar(name), lineno=line))
    out += [Instr("BUILD_TUPLE", len(cells), lineno=line), Instr("LOAD_CONST", fn_code, lineno=line),
            Instr("MAKE_FUNCTION", flags, lineno=line)]
    for k, (name, is_cell, key) in enumerate(targets):
        if k < len(targets) - 1:
            out.append(Instr("COPY", 1, lineno=line))
        if key:
            # fn on the stack, then the container and the key: STORE_SUBSCR does c[key] = fn
            out += [Instr("LOAD_FAST", name, lineno=line), Instr("LOAD_CONST", key[0], lineno=line),
                    Instr("STORE_SUBSCR", lineno=line)]
        else:
            out.append(Instr("STORE_DEREF", CellVar(name), lineno=line) if is_cell
                       else Instr("STORE_FAST", name, lineno=line))
    return out


def resume_argnames(code, local_names) -> list:
    """The resume function's parameters: `___stack` then the live locals; but a method using
    zero-argument super() (a `__class__` free variable) keeps its first parameter first,
    because CPython 3.11's super() reads the frame's first local as the instance."""
    names = list(local_names)
    first = code.co_varnames[0] if code.co_argcount else None
    if "__class__" in code.co_freevars and first in names:
        names.remove(first)
        return [first, STACK_ARG] + names
    return [STACK_ARG] + names


def _call(argc, line):
    out = [] if PY312 else [Instr("PRECALL", argc, lineno=line)]
    return out + [Instr("CALL", argc, lineno=line)]


def _reenter_grad_mode(inner, outer, line):
    """A break inside `with torch.no_grad()` (or enable_grad): restore the mode outside the
    block, then enter a fresh context, so that the block's end (or an exception) restores it
    exactly as the original `with` would have."""
    import contextlib

    import torch
    if inner is None:        # contextlib.nullcontext(): nothing to restore, a fresh one
        return ([Instr("PUSH_NULL", lineno=line), Instr("LOAD_CONST", contextlib.nullcontext, lineno=line)]
                + _call(0, line) + [Instr("BEFORE_WITH", lineno=line), Instr("POP_TOP", lineno=line)])
    ctor = torch.enable_grad if inner else torch.no_grad
    return ([Instr("PUSH_NULL", lineno=line), Instr("LOAD_CONST", torch._C._set_grad_enabled, lineno=line),
             Instr("LOAD_CONST", bool(outer), lineno=line)] + _call(1, line)
            + [Instr("POP_TOP", lineno=line), Instr("PUSH_NULL", lineno=line),
               Instr("LOAD_CONST", ctor, lineno=line)] + _call(0, line)
            + [Instr("BEFORE_WITH", lineno=line), Instr("POP_TOP", lineno=line)])


def make_function(code, like: types.FunctionType):
    fn = types.FunctionType(code, like.__globals__, code.co_name, None, like.__closure__)
    return fn


def assemble(code, body, name_suffix=None):
    """The transformed code: the original's prefix (RESUME, MAKE_CELL, COPY_FREE_VARS) then
    `body`; same signature, names and flags as `code`."""
    bc = Bytecode.from_code(code)
    prefix, _ = split_prefix(list(bc))
    new = Bytecode(prefix + body)
    new._copy_attr_from(bc)
    return new.to_code()


def transformed_function(fn, code):
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    return new
