"""Symbolic values: what the bytecode evaluator keeps on its stack and in its locals.

Every kind is declared here, in one place. They are mostly plain data; the behaviour
(calling, attribute access, operators) lives in calls.py / attributes.py, and the way each
kind is rebuilt at runtime is registered on dispatch.reconstruct (codegen.py, or the module
that owns the kind: iterators.py, numpy_calls.py, model_outputs.py, new_modules.py).

`source` (see source.py) is set when the value was read from the frame (an argument, a
global, an attribute of one) and not changed since: the generated code can reload it from
there, and guards are installed on it.
"""
from __future__ import annotations

import types
from typing import Any

import torch


class Variable:
    source = None

    def python_type(self):
        raise NotImplementedError(type(self).__name__)

    def is_constant(self) -> bool:
        return False

    def as_constant(self):
        raise NotImplementedError(f"{type(self).__name__} is not a Python constant")

    def __repr__(self):
        return f"{type(self).__name__}()"


class NullVariable(Variable):
    """The NULL that CPython 3.11+/3.12 push below a callable for the call protocol."""

    def __repr__(self):
        return "NULL"


NULL = NullVariable()


class ConstantVariable(Variable):
    """An immutable Python value known at trace time (int, float, bool, str, None, dtype,
    device, range, slice of constants, types, Ellipsis...)."""

    def __init__(self, value, source=None):
        self.value = value
        self.source = source

    def python_type(self):
        return type(self.value)

    def is_constant(self):
        return True

    def as_constant(self):
        return self.value

    def __repr__(self):
        return f"Const({self.value!r})"


#: node.meta key of a node's fake tensor as the trace sees it now, once an in-place metadata op
#: (t_, unsqueeze_, ...) changed it (output_graph.OutputGraph.call); meta['example_value'] keeps
#: the value the node produced (a placeholder's: the input at entry, which guards and AOT read)
CURRENT_VALUE = "current_value"


class TensorVariable(Variable):
    """A tensor produced by (or fed into) the FX graph. `node` is its FX node; the fake
    tensor is in node.meta['example_value'] (node.meta[CURRENT_VALUE] after an in-place
    metadata op on it)."""

    def __init__(self, node, source=None):
        self.node = node
        self.source = source

    @property
    def example(self):
        meta = self.node.meta
        return meta.get(CURRENT_VALUE, meta["example_value"])

    def python_type(self):
        return type(self.example) if not hasattr(self.example, "fake_mode") else torch.Tensor

    def __repr__(self):
        return f"Tensor({self.node.name})"


class NDArrayVariable(Variable):
    """A numpy array (or numpy scalar, `scalar`) computed from tensors while tracing
    (numpy_calls.py): `tensor` holds its data; operations on it follow numpy's semantics."""

    def __init__(self, tensor: "TensorVariable", scalar: bool = False):
        self.tensor = tensor
        self.scalar = scalar

    def python_type(self):
        import numpy as np
        return np.dtype(str(self.tensor.example.dtype).replace("torch.", "")).type if self.scalar \
            else np.ndarray

    def __repr__(self):
        return f"NDArray({self.tensor.node.name})"


class SymNodeVariable(Variable):
    """A symbolic int/float/bool (SymInt...) computed in the graph, from dynamic sizes."""

    def __init__(self, node, source=None):
        self.node = node
        self.source = source

    @property
    def example(self):
        return self.node.meta["example_value"]

    def python_type(self):
        ex = self.example
        return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}.get(type(ex), type(ex))

    def __repr__(self):
        return f"Sym({self.node.name})"


class RuntimeStrVariable(Variable):
    """A str read from the frame whose value is not guarded (dynamic.py: a str computed
    eagerly at a graph break, e.g. f"{tensor}", that changed between calls): only its type is
    guarded; len() of it is a symbolic graph input; anything needing the text breaks."""

    def __init__(self, value: str, source):
        self.value = value          # this call's value: a hint, never baked into the graph
        self.source = source

    def python_type(self):
        return str

    def __repr__(self):
        return f"RuntimeStr({self.source.name()})"


class BaseListVariable(Variable):
    def __init__(self, items, source=None):
        self.items = list(items)
        self.source = source


class TupleVariable(BaseListVariable):
    def python_type(self):
        return tuple

    def is_constant(self):
        return all(i.is_constant() for i in self.items)

    def as_constant(self):
        return tuple(i.as_constant() for i in self.items)

    def __repr__(self):
        return f"Tuple{self.items!r}"


class SizeVariable(TupleVariable):
    """tensor.shape: a tuple of ints / SymNodes that rebuilds as torch.Size."""

    def python_type(self):
        return torch.Size

    def as_constant(self):
        return torch.Size(i.as_constant() for i in self.items)


class NamedTupleVariable(TupleVariable):
    def __init__(self, items, tuple_cls, source=None):
        super().__init__(items, source)
        self.tuple_cls = tuple_cls

    def python_type(self):
        return self.tuple_cls

    def is_constant(self):
        return False


class ModuleSliceVariable(TupleVariable):
    """module_list[a:b] of a ModuleList/Sequential: its submodules (each sourced through the
    original), typed as the container class; rebuilt as cls(submodules) if it escapes."""

    def __init__(self, items, module_cls):
        super().__init__(items)
        self.module_cls = module_cls

    def python_type(self):
        return self.module_cls


class ListVariable(BaseListVariable):
    """A list. Mutable: when it came from the frame (has a source) and was changed, the
    change is a side effect replayed after the graph (side_effects.py)."""

    def python_type(self):
        return list

    def __repr__(self):
        return f"List{self.items!r}"


class LazyListVariable(ListVariable):
    """A list read from the frame whose items are wrapped (and guarded: length, contents)
    only when the trace reads them. Appends made before that are replayed as appends, so a
    list the code only appends to (a log, a cache) costs no guards and no recompiles."""

    def __init__(self, materialize, source, on_materialize):
        self._materialize = materialize          # () -> list[Variable], installs the guards
        self._on_materialize = on_materialize    # (var) -> None: side effects switch to a rebuild
        self._items = None
        self.appended = []
        self.source = source

    @property
    def items(self):
        if self._items is None:
            self._items = self._materialize() + self.appended
            self._on_materialize(self)
        return self._items

    @items.setter
    def items(self, value):
        self._items = list(value)

    def is_materialized(self):
        return self._items is not None

    def __repr__(self):
        return f"LazyList({self.source.name()})"


def list_items_for_scan(v):
    """Items of a list-like value for bookkeeping scans that must not read a lazy list."""
    if isinstance(v, LazyListVariable) and not v.is_materialized():
        return list(v.appended)
    return list(v.items)


class DictVariable(Variable):
    """A dict with constant keys (insertion order kept). Mutable like ListVariable."""

    def __init__(self, items: dict, source=None, dict_cls=dict):
        self.items = dict(items)
        self.source = source
        self.dict_cls = dict_cls

    def python_type(self):
        return self.dict_cls

    def __repr__(self):
        return f"Dict{self.items!r}"


class SetVariable(Variable):
    """A set of hashable Python constants (a real set kept at trace time)."""

    def __init__(self, values, source=None):
        self.values = set(values)
        self.source = source

    def python_type(self):
        return set

    def __repr__(self):
        return f"Set{self.values!r}"


class SliceVariable(Variable):
    """slice(start, stop, step) where some part is symbolic."""

    def __init__(self, parts):
        self.parts = list(parts)

    def python_type(self):
        return slice


class IteratorVariable(Variable):
    """An iterator over a known, finite sequence of symbolic values (range, list, tuple,
    dict keys, enumerate, zip...). Rebuilt at a graph break as iter(remaining items)."""

    def __init__(self, items):
        self.items = list(items)
        self.index = 0

    def remaining(self):
        return self.items[self.index:]

    def python_type(self):
        return type(iter(()))


class LazyIteratorVariable(Variable):
    """map / zip / filter / enumerate created while tracing (iterators.py): items are pulled
    one at a time, as CPython does, so a mapped function runs when its item is consumed.
    Rebuilt at a graph break as the same builtin over the inner iterators' remaining items."""

    import itertools as _it
    _TYPES = {"map": map, "zip": zip, "filter": filter, "enumerate": enumerate,
              "chain": _it.chain, "zip_longest": _it.zip_longest, "count": _it.count,
              "islice": _it.islice, "accumulate": _it.accumulate}
    del _it

    def __init__(self, kind, fn, iterators, strict=False, start=0, **options):
        self.kind = kind
        self.fn = fn                      # Variable (map/filter/accumulate) or None
        self.iterators = list(iterators)  # iterator Variables
        self.strict = strict
        self.count = start                # enumerate's / count's next value, islice's position
        self.options = options            # step, stop (count, islice), fill, initial, ...
        self.state = None                 # accumulate's running total, chain's position
        self.exhausted = False

    def python_type(self):
        return self._TYPES[self.kind]

    def __repr__(self):
        return f"Lazy{self.kind}()"


class GeneratorVariable(LazyIteratorVariable):
    """The generator object of an inlined generator function or generator expression
    (generators.py): `frame` is the callee's Tracer, suspended after its last YIELD_VALUE;
    each next() runs it to its next yield, interleaved with the consumer as in CPython.
    `fn`/`args` are the call that made it (rebuilt by calling again while not started)."""

    def __init__(self, frame, fn, args, name):
        super().__init__("generator", fn, [])
        self.frame = frame
        self.args = list(args)
        self.name = name
        self.started = False
        self.running = False
        self.return_value = None          # what `yield from` evaluates to, once exhausted

    def python_type(self):
        import types
        return types.GeneratorType

    def __repr__(self):
        return f"Generator({self.name})"


class ListIteratorVariable(Variable):
    """iter(lst) of a ListVariable: live, as CPython's list iterator (it reads lst[index] at
    each step, so appends and pops made while looping are seen). iterators.py."""

    def __init__(self, lst):
        self.list = lst
        self.index = 0

    def python_type(self):
        return type(iter([]))

    def __repr__(self):
        return f"ListIter({self.list!r}@{self.index})"


class ExceptionVariable(Variable):
    """An exception object of the traced program (exceptions.py): raised, caught, returned."""

    def __init__(self, cls, args):
        self.cls = cls
        self.args = list(args)

    def python_type(self):
        return self.cls

    def __repr__(self):
        return f"Exception({self.cls.__name__})"


class DequeVariable(ListVariable):
    """collections.deque made in the frame (no maxlen): a list with deque's type and its
    left-end methods (methods.py); rebuilt as deque([...])."""

    def python_type(self):
        import collections
        return collections.deque

    def __repr__(self):
        return f"Deque{self.items!r}"


class DictViewVariable(Variable):
    """d.keys() / d.values() / d.items() of a DictVariable: a live view (iterators.py)."""

    _TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}

    def __init__(self, dict_var, kind):
        self.dict = dict_var
        self.kind = kind

    def python_type(self):
        return self._TYPES[self.kind]

    def __repr__(self):
        return f"DictView({self.kind})"


class UserFunctionVariable(Variable):
    """A Python function defined in user code (inlined when called)."""

    def __init__(self, fn: types.FunctionType, source=None):
        self.fn = fn
        self.source = source

    def python_type(self):
        return types.FunctionType

    def __repr__(self):
        return f"UserFunction({self.fn.__qualname__})"


class NestedFunctionVariable(Variable):
    """A function created by MAKE_FUNCTION while tracing (lambda, closure, comprehension)."""

    def __init__(self, code, qualname, defaults, kwdefaults, closure, globals_, annotations=None):
        self.code = code
        self.qualname = qualname
        self.defaults = defaults          # TupleVariable or None
        self.kwdefaults = kwdefaults      # DictVariable or None
        self.closure = closure            # list[CellVariable] or None
        self.globals = globals_
        self.annotations = annotations    # TupleVariable or None (MAKE_FUNCTION flag 0x04)

    def python_type(self):
        return types.FunctionType


class CellVariable(Variable):
    """A closure cell created in the traced frame (MAKE_CELL); `contents` is a Variable."""

    def __init__(self, contents=None):
        self.contents = contents


class UserMethodVariable(Variable):
    """A Python function bound to an object (self.method)."""

    def __init__(self, fn: types.FunctionType, obj: Variable, source=None):
        self.fn = fn
        self.obj = obj
        self.source = source

    def python_type(self):
        return types.MethodType


class _LibraryFunctionVariable(Variable):
    """A function object of a library, held as a constant; the subclasses only say whose
    (their calls are dispatched by kind: builtin_calls / torch_calls / numpy_calls)."""

    LABEL = "Function"

    def __init__(self, fn, source=None):
        self.fn = fn
        self.source = source

    def python_type(self):
        return type(self.fn)

    def is_constant(self):
        return True

    def as_constant(self):
        return self.fn

    def __repr__(self):
        return f"{self.LABEL}({getattr(self.fn, '__name__', self.fn)})"


class BuiltinVariable(_LibraryFunctionVariable):
    """A Python builtin (len, isinstance, range, print, ...) or operator.* function."""

    LABEL = "Builtin"


class NumpyFunctionVariable(BuiltinVariable):
    """A top-level numpy function or ufunc that torch._numpy implements (numpy_calls.py)."""

    LABEL = "Numpy"


class TorchFunctionVariable(_LibraryFunctionVariable):
    """A function of torch / torch.nn.functional / a torch.Tensor method (unbound)."""

    LABEL = "Torch"


class MethodVariable(Variable):
    """A method bound to a symbolic value: tensor.add, list.append, dict.items, ..."""

    def __init__(self, obj: Variable, name: str):
        self.obj = obj
        self.name = name

    def python_type(self):
        return types.BuiltinMethodType

    def __repr__(self):
        return f"Method({self.obj!r}.{self.name})"


class NNModuleVariable(Variable):
    """A torch.nn.Module instance that existed before the call (always has a source)."""

    def __init__(self, module: torch.nn.Module, source):
        self.value = module
        self.source = source

    def python_type(self):
        return type(self.value)

    def __repr__(self):
        return f"NNModule({type(self.value).__name__} @ {self.source.name()})"


class PythonModuleVariable(Variable):
    """A Python module object (torch, math, torch.nn.functional, a user module)."""

    def __init__(self, module: types.ModuleType, source=None):
        self.value = module
        self.source = source

    def python_type(self):
        return types.ModuleType


class UserObjectVariable(Variable):
    """Any other object that existed before the call: opaque except for plain instance
    attributes and Python methods defined on its class."""

    def __init__(self, value: Any, source):
        self.value = value
        self.source = source

    def python_type(self):
        return type(self.value)

    def __repr__(self):
        return f"Object({type(self.value).__name__} @ {self.source.name() if self.source else '?'})"


class ObjectDictVariable(Variable):
    """obj.__dict__ of a pre-existing object: lookups read the real dict and guard only the
    keys they touch (the dict as a whole is never wrapped: config objects hold dozens)."""

    def __init__(self, obj: UserObjectVariable):
        self.obj = obj
        self.source = None

    def python_type(self):
        return dict

    def __repr__(self):
        return f"ObjectDict({self.obj!r})"


class NewObjectVariable(Variable):
    """An instance of a plain Python class created while tracing (its __init__ inlined);
    attributes live here, and it is rebuilt with object.__new__ + setattr if it escapes."""

    def __init__(self, cls, attrs=None):
        self.cls = cls
        self.attrs = dict(attrs or {})

    def python_type(self):
        return self.cls

    def __repr__(self):
        return f"New({self.cls.__name__})"


class NewModuleVariable(NewObjectVariable):
    """A simple user nn.Module created while tracing (new_modules.py): rebuilt as cls()."""

    def __repr__(self):
        return f"NewModule({self.cls.__name__})"


class ModelOutputVariable(Variable):
    """An instance of a Hugging Face ModelOutput class (a dataclass subclassing OrderedDict
    whose dict items mirror its non-None fields) created while tracing (model_outputs.py).
    `attrs` holds every field (None included), `items` the dict part in insertion order."""

    def __init__(self, cls, attrs: dict, items: dict):
        self.cls = cls
        self.attrs = dict(attrs)
        self.items = dict(items)

    def python_type(self):
        return self.cls

    def __repr__(self):
        return f"ModelOutput({self.cls.__name__})"


class SuperVariable(Variable):
    """super() / super(cls, obj): attribute lookup starts after `cls` in obj's MRO."""

    def __init__(self, cls, obj):
        self.cls = cls
        self.obj = obj

    def python_type(self):
        return super


class PartialVariable(Variable):
    """functools.partial(fn, *args, **kwargs) created while tracing."""

    def __init__(self, fn, args, kwargs):
        self.fn = fn
        self.args = list(args)
        self.kwargs = dict(kwargs)

    def python_type(self):
        import functools
        return functools.partial


class WeakRefVariable(Variable):
    """weakref.ref(x) created while tracing, of an object that has a source (a module, a
    graph-input tensor, a user object): calling it gives x back; rebuilt as weakref.ref(x)."""

    def __init__(self, target):
        self.target = target

    def python_type(self):
        import weakref
        return weakref.ReferenceType


class GradModeVariable(Variable):
    """torch.no_grad() / enable_grad() / set_grad_enabled(b): a context manager (and, for
    set_grad_enabled, an immediate switch) that records the grad mode change in the graph."""

    def __init__(self, target: bool, ctor):
        self.target = target
        self.ctor = ctor
        self.prior = None

    def python_type(self):
        return self.ctor if isinstance(self.ctor, type) else object


class ContextExitVariable(Variable):
    """The bound __exit__ that BEFORE_WITH leaves on the stack."""

    def __init__(self, ctx: GradModeVariable):
        self.ctx = ctx


class DeletedVariable(Variable):
    """A local that `del` removed (or a comprehension's saved-and-cleared slot)."""


def is_tensor_like(v) -> bool:
    return isinstance(v, (TensorVariable, SymNodeVariable))
