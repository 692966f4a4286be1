"""Side effects on objects that existed before the call, replayed after the graph runs.

While tracing, a mutation of a pre-existing list/dict (it has a source), an attribute write
on a pre-existing object or module, or a global write is not performed: it is recorded here
(later reads in the trace see the new value). The generated code replays them, in the order
they happened, right after the compiled graph: `lst[:] = [...]`, `d.clear(); d.update(...)`,
`obj.attr = value`, `del obj.attr`, `global g = value`.
"""
from __future__ import annotations

from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend import variables as V_
from tracetorch.compiler.frontend.errors import Unsupported

from tracetorch import logs

log = logs.get_logger(__name__)


def _identity(var):
    """The real object behind a pre-existing object's Variable (several Variables may stand
    for one object), else the Variable itself."""
    if isinstance(var, (V.NNModuleVariable, V.UserObjectVariable)):
        return ("object", id(var.value))
    return ("var", id(var))


class SideEffects:
    def __init__(self):
        # ordered: ("attr", obj, name, value) / ("delattr", obj, name, None) /
        # ("global", g, name, value) / ("container", var) / ...
        self.ops = []
        self._attrs = {}               # (id(obj var), name) -> value
        self._globals = {}             # (id(globals dict), name) -> value
        self._mutated = {}             # id(var) -> var (pre-existing lists/dicts)
        self.touched = []              # every container / new object mutated, sourced or not
                                       # (generators.py: may a generator run ahead?)

    def __bool__(self):
        return bool(self.ops)

    # ---- containers ----------------------------------------------------------------------
    def mutate(self, tx, var):
        if not isinstance(var, (V.ListVariable, V.DictVariable)):
            raise Unsupported(f"mutation of {var!r}")
        self.touched.append(var)
        if isinstance(var, V.LazyListVariable):
            var.items      # read it (guards) before any change
        if var.source is not None and id(var) not in self._mutated:
            self._mutated[id(var)] = var
            self.ops.append(("container", var))

    def append_lazy(self, var, value):
        """list.append on a lazy list nobody has read: replayed as an append."""
        var.appended.append(value)
        self.ops.append(("append", var, value))

    def materialized(self, var):
        """A lazy list was read after appends: replay its final contents instead."""
        idx = [i for i, op in enumerate(self.ops) if op[0] == "append" and op[1] is var]
        if not idx:
            return
        self.ops = [op for i, op in enumerate(self.ops) if i not in set(idx)]
        if id(var) not in self._mutated:
            self._mutated[id(var)] = var
            self.ops.insert(idx[0], ("container", var))

    def is_mutated(self, var) -> bool:
        return id(var) in self._mutated

    # ---- attributes ------------------------------------------------------------------------
    def store_attr(self, tx, obj, name, value):
        self._attrs[(_identity(obj), name)] = value
        self.ops.append(("attr", obj, name, value))

    def delete_attr(self, tx, obj, name):
        """`del obj.name` on a pre-existing object: replayed after the graph; later reads in
        the trace see a DeletedVariable (the class attribute, or AttributeError)."""
        self._attrs[(_identity(obj), name)] = V.DeletedVariable()
        self.ops.append(("delattr", obj, name, None))

    def pending_attr(self, obj, name):
        return self._attrs.get((_identity(obj), name))

    # ---- deferred calls --------------------------------------------------------------------
    def record_call(self, call):
        """A call with constant arguments made after the graph, in order (logging)."""
        self.ops.append(("call", None, "<call>", V_.ConstantVariable(call)))

    # ---- globals ---------------------------------------------------------------------------
    def store_global(self, tx, name, value):
        if tx.f_globals is not tx.ctx.root_globals:
            raise Unsupported(f"write to global {name!r} of another module")
        self._globals[(id(tx.f_globals), name)] = value
        self.ops.append(("global", tx.f_globals, name, value))

    # ---- closure cells of the traced function --------------------------------------------
    def store_cell(self, name, value):
        """`nonlocal name; name = value` on a free variable of the root frame: replayed with
        STORE_DEREF by the transformed function, which shares the original's closure."""
        self.ops.append(("cell", None, name, value))

    def has_global(self, g, name):
        return (id(g), name) in self._globals

    def load_global(self, g, name):
        return self._globals[(id(g), name)]

    # ---- rendering -------------------------------------------------------------------------
    def describe(self) -> str:
        lines = []
        for op in self.ops:
            if op[0] == "container":
                var = op[1]
                lines.append(f"mutated {var.python_type().__name__} {var.source.name()} "
                             f"-> {len(var.items)} items")
            elif op[0] == "append":
                lines.append(f"{op[1].source.name()}.append({op[2]!r})")
            elif op[0] == "attr":
                _, obj, name, value = op
                where = obj.source.name() if obj.source is not None else repr(obj)
                lines.append(f"setattr {where}.{name} = {value!r}")
            elif op[0] == "delattr":
                where = op[1].source.name() if op[1].source is not None else repr(op[1])
                lines.append(f"delattr {where}.{op[2]}")
            elif op[0] == "cell":
                lines.append(f"cell L[{op[2]!r}] = {op[3]!r}")
            elif op[0] == "call":
                lines.append(f"call {op[3].value!r}")
            else:
                _, _, name, value = op
                lines.append(f"global G[{name!r}] = {value!r}")
        return "\n".join(lines)
