"""Emitting bytecode (with the `bytecode` package) that rebuilds symbolic values at runtime.

`PyCodegen` collects abstract instructions for the body of a transformed function: call the
compiled graph, replay side effects, rebuild the stack and the locals from graph outputs,
sources and constants. In parallel it writes a readable Python rendering of what it emits
(the "possible source code" of the `bytecode` artifact).
"""
from __future__ import annotations

import collections
import functools
import types
import weakref

import torch
from bytecode import CellVar, FreeVar, Instr
from tracetorch.compiler.frontend import dispatch
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.bytecode_info import PY312
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.iterators import children

GRAPH_OUT = "___graph_out"


class PyCodegen:
    def __init__(self, lineno=None, graph_outputs=None, code=None):
        self.code = code
        self.instrs = []
        self.lineno = lineno
        self.graph_outputs = graph_outputs or {}   # fx node -> index in the graph's output tuple
        self.lines = []                            # readable rendering
        self.tmp_count = 0
        self._built = {}                           # id(list/dict var) -> temp name

    # ---- raw emission ----------------------------------------------------------------------
    def emit(self, name, arg=None):
        kw = {"lineno": self.lineno} if self.lineno is not None else {}
        if name in ("LOAD_DEREF", "STORE_DEREF") and isinstance(arg, str):
            # the `bytecode` package names cells by kind
            cells = self.code.co_cellvars if self.code is not None else ()
            arg = CellVar(arg) if arg in cells else FreeVar(arg)
        if arg is None and name not in ("LOAD_CONST",):
            self.instrs.append(Instr(name, **kw))
        else:
            self.instrs.append(Instr(name, arg, **kw))

    def load_global(self, name, push_null=False):
        self.emit("LOAD_GLOBAL", (push_null, name))

    def load_attr(self, name):
        self.emit("LOAD_ATTR", (False, name) if PY312 else name)

    def call(self, argc):
        if not PY312:
            self.emit("PRECALL", argc)
        self.emit("CALL", argc)

    def call_const(self, fn, nargs_loader, argc):
        """fn(*args) where fn is a Python object: PUSH_NULL, LOAD_CONST fn, args, CALL."""
        self.emit("PUSH_NULL")
        self.emit("LOAD_CONST", fn)
        nargs_loader()
        self.call(argc)

    def new_tmp(self, prefix="___tmp"):
        self.tmp_count += 1
        return f"{prefix}_{self.tmp_count}"

    # ---- rebuilding values ------------------------------------------------------------------
    def preload_read_before_mutation(self, values, side_effects):
        """Values read from the frame through an object the side effects are about to change
        (`y = d['a']` then `d['a'] = x`; `v = obj.attr` then `obj.attr = w`; a global read then
        written) must keep what they read: load them into temporaries before the replay, and
        reconstruct them from there."""
        prefixes = []          # (source text, strict: only paths below it are stale)
        for op in side_effects.ops:
            if op[0] in ("container", "append") and op[1].source is not None:
                prefixes.append((op[1].source.name(), True))
            elif op[0] == "attr" and op[1].source is not None:
                prefixes.append((f"{op[1].source.name()}.{op[2]}", False))
            elif op[0] == "global":
                prefixes.append((f"G[{op[2]!r}]", False))
            elif op[0] == "cell":
                prefixes.append((f"L[{op[2]!r}]", False))
        if not prefixes:
            return
        for var in reachable_variables(values):
            src = getattr(var, "source", None)
            if src is None or id(var) in self._built or isinstance(var, (V.ListVariable, V.DictVariable)):
                continue
            name = src.name()
            if not any(name.startswith(p) and (len(name) > len(p) and name[len(p)] in ".[" or
                                                (not strict and name == p)) for p, strict in prefixes):
                continue
            text = self.reconstruct(var)
            tmp = self.new_tmp("___pre")
            self.emit("STORE_FAST", tmp)
            self._built[id(var)] = tmp
            self.lines.append(f"{tmp} = {text}  # read before the side effects below")

    def reconstruct(self, var, side_effects=None):
        """Emit code pushing var's runtime value; return its readable rendering. How a kind is
        rebuilt is registered on dispatch.reconstruct, next to the kind (handler(cg, var,
        side_effects)); the kinds kept in temporaries by those handlers reload themselves."""
        if id(var) in self._built and not isinstance(var, (V.ListVariable, V.DictVariable,
                                                           V.NewObjectVariable)):
            self.emit("LOAD_FAST", self._built[id(var)])
            return self._built[id(var)]
        return dispatch.reconstruct(self, var, side_effects)

    def load_source(self, var):
        """var's value reloaded from where it was read (an argument, a global, an attribute)."""
        var.source.reconstruct(self)
        return var.source.render()

    def build_once(self, var, build):
        """A value made in the frame that two places may hold (a list in two locals): built
        once by build() into a temporary and loaded from there afterwards, so the rebuilt
        frame shares one object where the original did."""
        key = id(var)
        if key in self._built:
            self.emit("LOAD_FAST", self._built[key])
            return self._built[key]
        text = build()
        name = self.new_tmp()
        self.emit("COPY", 1)
        self.emit("STORE_FAST", name)
        self._built[key] = name
        self.lines.append(f"{name} = {text}")
        return name

    def build_object(self, var, side_effects, construct):
        """An object made in the frame: construct() emits the bare instance and returns
        (rendering, attributes to set); the temporary is named before the attributes are
        rebuilt, so an attribute that refers back to the object finds it."""
        key = id(var)
        if key in self._built:
            self.emit("LOAD_FAST", self._built[key])
            return self._built[key]
        name = self.new_tmp()
        self._built[key] = name
        text, attrs = construct()
        self.lines.append(f"{name} = {text}")
        self.emit("STORE_FAST", name)
        own_setattr = isinstance(getattr(getattr(var, "cls", None), "__setattr__", None), types.FunctionType)
        for attr, value in attrs.items():
            if own_setattr:     # a frozen dataclass's __setattr__ raises: stored as its __init__ does
                self.emit("PUSH_NULL")
                self.emit("LOAD_CONST", object.__setattr__)
                self.emit("LOAD_FAST", name)
                self.emit("LOAD_CONST", attr)
                text = self.reconstruct(value, side_effects)
                self.call(3)
                self.emit("POP_TOP")
                self.lines.append(f"object.__setattr__({name}, {attr!r}, {text})")
                continue
            text = self.reconstruct(value, side_effects)
            self.emit("LOAD_FAST", name)
            self.emit("STORE_ATTR", attr)
            self.lines.append(f"{name}.{attr} = {text}")
        self.emit("LOAD_FAST", name)
        return name

    def _build_container(self, var, side_effects):
        if isinstance(var, V.ListVariable):
            deque = isinstance(var, V.DequeVariable)
            if deque:
                self.emit("PUSH_NULL")
                self.emit("LOAD_CONST", collections.deque)
            parts = [self.reconstruct(i, side_effects) for i in var.items]
            self.emit("BUILD_LIST", len(parts))
            if deque:
                self.call(1)
                return "deque([" + ", ".join(parts) + "])"
            return "[" + ", ".join(parts) + "]"
        parts = []
        wrap_cls = var.dict_cls is not dict
        factory = None
        if wrap_cls:
            if var.dict_cls not in (collections.OrderedDict, collections.defaultdict,
                                    collections.Counter):    # Counter(dict): counts as given
                raise Unsupported(f"rebuilding a {var.dict_cls.__name__}")
            self.emit("PUSH_NULL")
            self.emit("LOAD_CONST", var.dict_cls)
            if var.dict_cls is collections.defaultdict:
                factory = self.reconstruct(getattr(var, "default_factory", None)
                                           or V.ConstantVariable(None), side_effects)
        for k, v in var.items.items():
            self.emit("LOAD_CONST", k)
            parts.append(f"{k!r}: {self.reconstruct(v, side_effects)}")
        self.emit("BUILD_MAP", len(var.items))
        text = "{" + ", ".join(parts) + "}"
        if wrap_cls:
            self.call(1 if factory is None else 2)
            text = (f"{var.dict_cls.__name__}({text})" if factory is None
                    else f"defaultdict({factory}, {text})")
        return text

    # ---- side effects ----------------------------------------------------------------------
    def replay_side_effects(self, side_effects):
        for op in side_effects.ops:
            if op[0] == "container":
                var = op[1]
                if isinstance(var, V.ListVariable):
                    # source[:] = [new items]
                    parts = [self.reconstruct(i) for i in var.items]
                    self.emit("BUILD_LIST", len(parts))
                    var.source.reconstruct(self)
                    self.emit("LOAD_CONST", None)
                    self.emit("LOAD_CONST", None)
                    self.emit("BUILD_SLICE", 2)
                    self.emit("STORE_SUBSCR")
                    self.lines.append(f"{var.source.render()}[:] = [{', '.join(parts)}]")
                else:
                    # the new contents are built before the clear: they may be read from the
                    # dict itself (a **kwargs dict that lost a key: kwargs['input_ids'])
                    self.emit("PUSH_NULL")
                    self.emit("LOAD_CONST", replace_dict_contents)
                    var.source.reconstruct(self)
                    text = self._build_container(V.DictVariable(var.items), None)
                    self.call(2)
                    self.emit("POP_TOP")
                    self.lines.append(f"___new = {text}; {var.source.render()}.clear(); "
                                      f"{var.source.render()}.update(___new)")
            elif op[0] == "append":
                _, var, value = op
                self.emit("PUSH_NULL")
                self.emit("LOAD_CONST", list.append)
                var.source.reconstruct(self)
                text = self.reconstruct(value)
                self.call(2)
                self.emit("POP_TOP")
                self.lines.append(f"{var.source.render()}.append({text})")
            elif op[0] == "attr":
                _, obj, name, value = op
                text = self.reconstruct(value)
                otext = self.reconstruct(obj)
                self.emit("STORE_ATTR", name)
                self.lines.append(f"{otext}.{name} = {text}")
            elif op[0] == "delattr":
                otext = self.reconstruct(op[1])
                self.emit("DELETE_ATTR", op[2])
                self.lines.append(f"del {otext}.{op[2]}")
            elif op[0] == "call":
                # a deferred call, its constant arguments bound in (SideEffects.record_call)
                call = op[3].value
                self.emit("PUSH_NULL")
                self.emit("LOAD_CONST", call)
                self.call(0)
                self.emit("POP_TOP")
                self.lines.append(f"{_name_of(call.func)}(<{len(call.args)} constant args>)")
            elif op[0] == "cell":
                _, _, name, value = op
                text = self.reconstruct(value)
                self.emit("STORE_DEREF", name)
                self.lines.append(f"nonlocal {name}; {name} = {text}")
            else:
                _, _, name, value = op
                text = self.reconstruct(value)
                self.emit("STORE_GLOBAL", name)
                self.lines.append(f"global {name}; {name} = {text}")


# ---- how each kind is rebuilt (dispatch.reconstruct); kinds owned by a module of their own
# register there: NDArray (numpy_calls), iterators and views (iterators), ModelOutput
# (model_outputs), NewModule (new_modules) -------------------------------------------------
@dispatch.reconstruct.default
def _from_source(cg, var, side_effects):
    """Anything read from the frame and not rebuilt by a handler of its own: reloaded."""
    if var.source is not None:
        return cg.load_source(var)
    raise Unsupported(f"cannot rebuild {var!r} after the graph")


@dispatch.reconstruct.register(V.NullVariable)
def _null(cg, var, side_effects):
    cg.emit("PUSH_NULL")
    return "NULL"


@dispatch.reconstruct.register(V.TensorVariable, V.SymNodeVariable)
def _graph_value(cg, var, side_effects):
    if var.node in cg.graph_outputs:
        i = cg.graph_outputs[var.node]
        cg.emit("LOAD_FAST", GRAPH_OUT)
        cg.emit("LOAD_CONST", i)
        cg.emit("BINARY_SUBSCR")
        return f"{GRAPH_OUT}[{i}]"
    if var.source is not None:
        return cg.load_source(var)
    raise Unsupported(f"internal: {var!r} is neither a graph output nor sourced")


@dispatch.reconstruct.register(V.ConstantVariable)
def _constant(cg, var, side_effects):
    if var.source is not None and not _plain_constant(var.value):
        return cg.load_source(var)
    cg.emit("LOAD_CONST", var.value)
    return repr(var.value) if _plain_constant(var.value) else _name_of(var.value)


@dispatch.reconstruct.register(V.ListVariable, V.DictVariable)
def _container(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    return cg.build_once(var, lambda: cg._build_container(var, side_effects))


@dispatch.reconstruct.register(V.SizeVariable)
def _size(cg, var, side_effects):
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", torch.Size)
    parts = [cg.reconstruct(item, side_effects) for item in var.items]
    cg.emit("BUILD_TUPLE", len(var.items))
    cg.call(1)
    return f"torch.Size([{', '.join(parts)}])"


@dispatch.reconstruct.register(V.ModuleSliceVariable)
def _module_slice(cg, var, side_effects):
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", var.module_cls)
    parts = [cg.reconstruct(item, side_effects) for item in var.items]
    cg.emit("BUILD_LIST", len(parts))
    cg.call(1)
    return f"{var.module_cls.__name__}([{', '.join(parts)}])"


@dispatch.reconstruct.register(V.NamedTupleVariable)
def _named_tuple(cg, var, side_effects):
    cls = var.tuple_cls
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", cls._make if hasattr(cls, "_make") else cls)
    parts = [cg.reconstruct(item, side_effects) for item in var.items]
    cg.emit("BUILD_TUPLE", len(var.items))
    cg.call(1)
    return f"{cls.__name__}({', '.join(parts)})"


@dispatch.reconstruct.register(V.TupleVariable)
def _tuple(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    parts = [cg.reconstruct(item, side_effects) for item in var.items]
    cg.emit("BUILD_TUPLE", len(var.items))
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


@dispatch.reconstruct.register(V.SetVariable)
def _set(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", set)
    cg.emit("LOAD_CONST", frozenset(var.values))
    cg.call(1)
    return f"set({sorted(var.values, key=repr)!r})"


@dispatch.reconstruct.register(V.SliceVariable)
def _slice(cg, var, side_effects):
    parts = [cg.reconstruct(p, side_effects) for p in var.parts]
    cg.emit("BUILD_SLICE", len(var.parts))
    return f"slice({', '.join(parts)})"


@dispatch.reconstruct.register(V.UserFunctionVariable, V.BuiltinVariable, V.TorchFunctionVariable)
def _function(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    cg.emit("LOAD_CONST", var.fn)
    return _name_of(var.fn)


@dispatch.reconstruct.register(V.PythonModuleVariable)
def _python_module(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    cg.emit("LOAD_CONST", var.value)
    return var.value.__name__


@dispatch.reconstruct.register(V.MethodVariable)
def _method(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    text = cg.reconstruct(var.obj, side_effects)
    cg.load_attr(var.name)
    return f"{text}.{var.name}"


@dispatch.reconstruct.register(V.UserMethodVariable)
def _user_method(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", types.MethodType)
    cg.emit("LOAD_CONST", var.fn)
    text = cg.reconstruct(var.obj, side_effects)
    cg.call(2)
    return f"{text}.{var.fn.__name__}"


@dispatch.reconstruct.register(V.NewObjectVariable)
def _new_object(cg, var, side_effects):
    """object.__new__(cls) and its attributes set one by one (no __init__ runs twice)."""
    if var.source is not None:
        return cg.load_source(var)

    def construct():
        cg.emit("PUSH_NULL")
        cg.emit("LOAD_CONST", object.__new__)
        cg.emit("LOAD_CONST", var.cls)
        cg.call(1)
        return f"object.__new__({var.cls.__qualname__})", dict(var.attrs)
    return cg.build_object(var, side_effects, construct)


@dispatch.reconstruct.register(V.ExceptionVariable)
def _exception(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", var.cls)
    parts = [cg.reconstruct(a, side_effects) for a in var.args]
    cg.call(len(parts))
    return f"{var.cls.__name__}({', '.join(parts)})"


@dispatch.reconstruct.register(V.WeakRefVariable)
def _weakref(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", weakref.ref)
    text = cg.reconstruct(var.target, side_effects)
    cg.call(1)
    return f"weakref.ref({text})"


@dispatch.reconstruct.register(V.PartialVariable)
def _partial(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", functools.partial)
    parts = [cg.reconstruct(var.fn, side_effects)]
    parts += [cg.reconstruct(a, side_effects) for a in var.args]
    cg.emit("BUILD_TUPLE", 1 + len(var.args))
    for k, v in var.kwargs.items():
        cg.emit("LOAD_CONST", k)
        parts.append(f"{k}={cg.reconstruct(v, side_effects)}")
    cg.emit("BUILD_MAP", len(var.kwargs))
    cg.emit("CALL_FUNCTION_EX", 1)
    return f"functools.partial({', '.join(parts)})"


@dispatch.reconstruct.register(V.NestedFunctionVariable)
def _nested_function(cg, var, side_effects):
    if var.source is not None:
        return cg.load_source(var)
    if var.closure or var.kwdefaults is not None:
        raise Unsupported("cannot rebuild a closure created in the traced frame")
    cg.emit("PUSH_NULL")
    cg.emit("LOAD_CONST", types.FunctionType)
    cg.emit("LOAD_CONST", var.code)
    cg.emit("LOAD_CONST", var.globals)
    cg.emit("LOAD_CONST", var.code.co_name)
    if var.defaults is not None:
        cg.reconstruct(var.defaults, side_effects)
    else:
        cg.emit("LOAD_CONST", None)
    cg.call(4)
    return f"<function {var.qualname}>"


def replace_dict_contents(target: dict, new: dict) -> None:
    """A mutated pre-existing dict's replay: its contents become `new` (built beforehand)."""
    target.clear()
    target.update(new)


def _plain_constant(value):
    return value is None or type(value) in (bool, int, float, str, complex, bytes, tuple, range,
                                            slice, type(Ellipsis))


def _name_of(value):
    if isinstance(value, (torch.dtype, torch.device)):
        return repr(value)
    mod = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if name:
        return f"{mod}.{name}" if mod and mod != "builtins" else name
    return repr(value)


def held_values(v) -> list:
    """The Variables v holds directly (items, attributes, the object of a method...)."""
    if isinstance(v, V.BaseListVariable):
        return V.list_items_for_scan(v)
    if isinstance(v, V.IteratorVariable):
        return list(v.items)
    if isinstance(v, (V.LazyIteratorVariable, V.DictViewVariable, V.ListIteratorVariable)):
        return children(v)
    if isinstance(v, V.DictVariable):
        return list(v.items.values())
    if isinstance(v, V.SliceVariable):
        return list(v.parts)
    if isinstance(v, (V.MethodVariable, V.UserMethodVariable)):
        return [v.obj]
    if isinstance(v, V.NDArrayVariable):
        return [v.tensor]
    if isinstance(v, (V.NewObjectVariable, V.ModelOutputVariable)):
        return list(v.attrs.values())
    if isinstance(v, V.WeakRefVariable):
        return [v.target]
    if isinstance(v, V.PartialVariable):
        return [v.fn] + v.args + list(v.kwargs.values())
    if isinstance(v, V.CellVariable) and v.contents is not None:
        return [v.contents]
    return []


def reachable_variables(values) -> list:
    """Every Variable reachable from `values` (containers, objects, iterators...), once each."""
    seen, out, todo = set(), [], list(values)
    while todo:
        v = todo.pop()
        if id(v) in seen or not isinstance(v, V.Variable):
            continue
        seen.add(id(v))
        out.append(v)
        todo += held_values(v)
    return out


def collect_graph_values(values, out, seen=None):
    """All tensor/symbolic Variables reachable from `values` that must come out of the graph."""
    seen = seen if seen is not None else set()
    for v in values:
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (V.TensorVariable, V.SymNodeVariable)):
            if v.node.op != "placeholder":
                out.append(v)
        elif isinstance(v, V.BaseListVariable):
            collect_graph_values(V.list_items_for_scan(v), out, seen)
        elif isinstance(v, V.IteratorVariable):
            collect_graph_values(v.items, out, seen)
        elif isinstance(v, (V.LazyIteratorVariable, V.DictViewVariable, V.ListIteratorVariable)):
            collect_graph_values(children(v), out, seen)
        elif isinstance(v, V.DictVariable):
            collect_graph_values(list(v.items.values()), out, seen)
        elif isinstance(v, V.SliceVariable):
            collect_graph_values(v.parts, out, seen)
        elif isinstance(v, V.MethodVariable):
            collect_graph_values([v.obj], out, seen)
        elif isinstance(v, V.NDArrayVariable):
            collect_graph_values([v.tensor], out, seen)
        elif isinstance(v, V.UserMethodVariable):
            collect_graph_values([v.obj], out, seen)
        elif isinstance(v, (V.NewObjectVariable, V.ModelOutputVariable)):
            collect_graph_values(list(v.attrs.values()), out, seen)
        elif isinstance(v, V.WeakRefVariable):
            collect_graph_values([v.target], out, seen)
        elif isinstance(v, V.PartialVariable):
            collect_graph_values([v.fn] + v.args + list(v.kwargs.values()), out, seen)
        elif isinstance(v, V.CellVariable) and v.contents is not None:
            collect_graph_values([v.contents], out, seen)
    return out
