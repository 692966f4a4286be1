"""The evaluator's protocol: one table per operation, filled by the handler modules.

Every operation the symbolic evaluator performs on a value (call it, read an attribute,
subscript it, iterate it, rebuild it after the graph, ...) is an `Operation` declared here. A
handler module registers what it knows at import time:

    @dispatch.get_attr.register(V.NDArrayVariable)      # this kind's attribute reads
    def get_attr(tx, arr, name): ...

    @dispatch.get_attr.default                         # every other kind
    def get_attr(tx, obj, name): ...

    @dispatch.builtin(len)                             # one Python builtin
    def _len(tx, args, kwargs): ...

A call `dispatch.get_attr(tx, obj, "x")` runs the handler registered for the most derived
class of `obj` (its MRO, like `functools.singledispatch`), else the default. Modules call each
other only through these tables, so this module sits at the bottom of the frontend's import
graph and every handler module can import it; `handlers.py` imports all the handler modules
once, which fills the tables before the first frame is traced.
"""
from __future__ import annotations

from tracetorch.compiler.frontend.errors import Unsupported

NOT_HANDLED = object()      # a handler's answer when the next rule should decide


class Operation:
    """One operation of the evaluator, dispatched on the kind (class) of its first operand."""

    def __init__(self, name: str):
        self.name = name
        self._kinds: dict[type, object] = {}
        self._default = None
        self._by_type: dict[type, object] = {}     # resolved lookups; cleared on register
        self._first: list = []

    def register(self, *kinds):
        """Decorator: fn handles operands of these kinds (and their subclasses)."""
        def deco(fn):
            for kind in kinds:
                if kind in self._kinds:
                    raise ValueError(f"{self.name}: {kind.__name__} registered twice")
                self._kinds[kind] = fn
            self._by_type.clear()
            return fn
        return deco

    def default(self, fn):
        """Decorator: fn handles every kind with no handler of its own."""
        if self._default is not None:
            raise ValueError(f"{self.name}: a second default handler")
        self._default = fn
        self._by_type.clear()
        return fn

    def first(self, fn):
        """Decorator: fn runs before any kind's handler (an answer that does not depend on the
        kind); it returns NOT_HANDLED to let the kind's handler decide."""
        self._first.append(fn)
        return fn

    def handler(self, kind: type):
        found = self._by_type.get(kind)
        if found is None:
            found = next((self._kinds[k] for k in kind.__mro__ if k in self._kinds), self._default)
            if found is None:
                raise Unsupported(f"{self.name} has no handler for {kind.__name__} "
                                  "(handlers.py not imported?)")
            self._by_type[kind] = found
        return found

    def __call__(self, tx, subject, *args, **kwargs):
        for first in self._first:
            out = first(tx, subject, *args, **kwargs)
            if out is not NOT_HANDLED:
                return out
        return self.handler(type(subject))(tx, subject, *args, **kwargs)

    def __repr__(self):
        return f"<operation {self.name}: {len(self._kinds)} kinds>"


# ---- the operations (subject: the operand whose kind picks the handler) --------------------
call_function = Operation("call_function")   # (tx, fn, args, kwargs): by the callee's kind
call_method = Operation("call_method")       # (tx, obj, name, args, kwargs)
get_attr = Operation("get_attr")             # (tx, obj, name)
store_attr = Operation("store_attr")         # (tx, obj, name, value)
delete_attr = Operation("delete_attr")       # (tx, obj, name): delattr(); NOT_HANDLED if unknown
has_attr = Operation("has_attr")             # (tx, obj, name) -> bool: hasattr()
length = Operation("length")                 # (tx, obj) -> Variable: len()
is_none = Operation("is_none")               # (tx, obj) -> True / False / None (not known)
get_item = Operation("get_item")             # (tx, obj, key)
store_item = Operation("store_item")         # (tx, obj, key, value)
reconstruct = Operation("reconstruct")       # (codegen, value): bytecode that rebuilds it
# operations with one implementation (calls.py, builder.py, inline.py): the subject is not a
# Variable, so only the default is ever used; declared here so callers need not import them
binary_op = Operation("binary_op")           # (tx, symbol, a, b)
compare_op = Operation("compare_op")         # (tx, symbol, a, b)
unary_op = Operation("unary_op")             # (tx, name, a)
truthiness = Operation("truthiness")         # (tx, v) -> bool
unpack = Operation("unpack")                 # (tx, v) -> list of Variables
get_iter = Operation("get_iter")             # (tx, v)
contains_op = Operation("contains_op")       # (tx, item, container) -> bool
wrap = Operation("wrap")                     # (tx, value, source, guard=True): real -> Variable
inline_call = Operation("inline_call")       # (tx, fn, args, kwargs, callee=None)
call_type = Operation("call_type")           # (tx, cls, args, kwargs): cls(*args) in traced code


# ---- builtins, by the function object ----------------------------------------------------
BUILTINS: dict = {}


def builtin(*fns):
    """Decorator: handler(tx, fn, args, kwargs) for calls of these builtins (it may return
    NOT_HANDLED to leave the call to builtin_calls' generic rules)."""
    def deco(handler):
        for fn in fns:
            if fn in BUILTINS:
                raise ValueError(f"builtin {getattr(fn, '__name__', fn)} registered twice")
            BUILTINS[fn] = handler
        return handler
    return deco
