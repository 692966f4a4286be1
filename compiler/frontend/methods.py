"""Methods of symbolic values: tensor methods (recorded as call_method nodes), and the
methods of lists, dicts, tuples and constants (computed or mutated at trace time)."""
from __future__ import annotations

import torch
from tracetorch.compiler.frontend import dispatch, numpy_calls, symbolic
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.attributes import object_dict_lookup
from tracetorch.compiler.frontend.builtin_calls import call_builtin, consts
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.iterators import fold_result
from tracetorch.compiler.frontend.symbolic import tensor_shape

_TENSOR_METHODS_BREAK = {"item", "tolist", "numpy", "data_ptr", "__bool__", "backward",
                         "register_hook", "retain_grad", "storage", "untyped_storage",
                         "__index__", "__int__", "__float__", "cuda_", "pin_memory"}


@dispatch.call_function.register(V.MethodVariable)
def _call_method_variable(tx, fn, args, kwargs):
    return dispatch.call_method(tx, fn.obj, fn.name, args, kwargs)


@dispatch.call_method.default
def call_method(tx, obj, name, args, kwargs):
    if isinstance(obj, V.TensorVariable):
        return tensor_method(tx, obj, name, args, kwargs)
    if isinstance(obj, V.ListVariable):
        return list_method(tx, obj, name, args, kwargs)
    if isinstance(obj, V.DictVariable):
        return dict_method(tx, obj, name, args, kwargs)
    if isinstance(obj, V.BaseListVariable) and name == "__getitem__" and len(args) == 1 and not kwargs:
        return dispatch.get_item(tx, obj, args[0])
    if isinstance(obj, V.NamedTupleVariable) and name in _NAMEDTUPLE_METHODS:
        return _NAMEDTUPLE_METHODS[name](tx, obj, args, kwargs)
    if isinstance(obj, V.TupleVariable) and name in ("index", "count") and consts(args) and obj.is_constant():
        return V.ConstantVariable(getattr(obj.as_constant(), name)(*[a.as_constant() for a in args]))
    if isinstance(obj, V.ConstantVariable):
        value = obj.value
        if name == "join" and isinstance(value, str) and len(args) == 1:
            parts = dispatch.unpack(tx, args[0])
            if consts(parts):
                return V.ConstantVariable(value.join(p.as_constant() for p in parts))
        foldable = (str, int, float, bool, torch.dtype, tuple, torch.device, range)
        if consts(args) and consts(kwargs.values()) and isinstance(value, foldable):
            method = getattr(value, name)
            try:
                return fold_result(method(*[a.as_constant() for a in args],
                                          **{k: v.as_constant() for k, v in kwargs.items()}))
            except Exception as e:
                raise Unsupported(f"{type(value).__name__}.{name} raised {type(e).__name__}") from None
    if isinstance(obj, V.SymNodeVariable):
        return tx.output.call("call_method", name, (obj, *args), dict(kwargs))
    if isinstance(obj, V.ObjectDictVariable) and name in ("get", "__getitem__", "__contains__") \
            and not kwargs and args:
        found, value = object_dict_lookup(tx, obj, args[0])
        if name == "__contains__":
            return V.ConstantVariable(found)
        if name == "get":
            return value if found else (args[1] if len(args) > 1 else V.ConstantVariable(None))
        if not found:
            raise Unsupported("KeyError from obj.__dict__[key]")
        return value
    raise Unsupported(f"method {name} of {obj!r}")


def _nt_replace(tx, nt, args, kwargs):
    fields = list(nt.tuple_cls._fields)
    if args or set(kwargs) - set(fields):
        raise Unsupported("namedtuple._replace with unknown fields")
    return V.NamedTupleVariable([kwargs.get(f, v) for f, v in zip(fields, nt.items)], nt.tuple_cls)


def _nt_asdict(tx, nt, args, kwargs):
    if args or kwargs:
        raise Unsupported("namedtuple._asdict takes no arguments")
    return V.DictVariable(dict(zip(nt.tuple_cls._fields, nt.items)))


# namedtuple methods that the collections module defines in Python (not traced there)
_NAMEDTUPLE_METHODS = {"_replace": _nt_replace, "_asdict": _nt_asdict}


def tensor_method(tx, t, name, args, kwargs):
    if name == "numpy":
        return numpy_calls.tensor_numpy(tx, t, args, kwargs)
    if name in _TENSOR_METHODS_BREAK:
        raise Unsupported(f"Tensor.{name}() (needs the tensor's data in Python)")
    if name in ("size", "stride") and not kwargs:
        ex = t.example
        vals = ex.size() if name == "size" else ex.stride()
        if args:
            d = args[0].as_constant()
            v = vals[d]
            if isinstance(v, int):
                return V.ConstantVariable(v)
            op = torch.ops.aten.sym_size.int if name == "size" else torch.ops.aten.sym_stride.int
            return symbolic.record(tx, op, (t, V.ConstantVariable(d % ex.dim())))
        return tensor_shape(tx, t) if name == "size" else _stride(tx, t)
    if name in ("dim", "ndimension"):
        return V.ConstantVariable(t.example.dim())
    if name == "numel" and isinstance(t.example.numel(), int):
        return V.ConstantVariable(t.example.numel())
    if name in ("is_floating_point", "is_complex"):
        return V.ConstantVariable(getattr(t.example, name)())
    rewrite = _TENSOR_METHOD_REWRITES.get(name)
    if rewrite is not None:
        return rewrite(tx, t, args, kwargs)
    return tx.output.call("call_method", name, (t, *args), dict(kwargs))


def _legacy_tensor_type(spec):
    """(dtype, is_cuda) of torch.HalfTensor / "torch.HalfTensor" / a dtype, else None."""
    if isinstance(spec, torch.dtype):
        return spec, None
    if isinstance(spec, str):
        spec = getattr(torch.cuda if spec.startswith("torch.cuda.") else torch, spec.split(".")[-1], None)
    if type(spec).__name__ == "tensortype" and isinstance(getattr(spec, "dtype", None), torch.dtype):
        return spec.dtype, bool(spec.is_cuda)
    return None


def _tensor_type(tx, t, args, kwargs):
    """Tensor.type(): the legacy type name (a constant of dtype and device); Tensor.type(T)
    with a legacy tensor type, its name or a dtype: a dtype conversion, recorded as .to()."""
    ex = t.example
    if not args and not kwargs:
        if ex.device.type != "cpu":
            raise Unsupported("Tensor.type() of a non-CPU tensor")
        return V.ConstantVariable(torch.empty(0, dtype=ex.dtype).type())
    if len(args) != 1 or kwargs or not args[0].is_constant():
        raise Unsupported("Tensor.type() with arguments other than one tensor type")
    found = _legacy_tensor_type(args[0].as_constant())
    if found is None or (found[1] is not None and found[1] != (ex.device.type == "cuda")):
        raise Unsupported(f"Tensor.type({args[0].as_constant()!r}) (device change or unknown type)")
    return tx.output.call("call_method", "to", (t, V.ConstantVariable(found[0])), {})


def _tensor_new(tx, t, args, kwargs):
    """Tensor.new(*sizes) / new(torch.Size): an uninitialized tensor like t (new_empty);
    new() with data or a tensor argument is left to eager."""
    if kwargs:
        raise Unsupported("Tensor.new() with keywords")
    if len(args) == 1 and isinstance(args[0], V.SizeVariable):     # a tuple or list is data
        size = V.TupleVariable(list(args[0].items))
    elif all(a.is_constant() and type(a.as_constant()) is int or isinstance(a, V.SymNodeVariable)
             for a in args):
        size = V.TupleVariable(list(args)) if args else V.TupleVariable([V.ConstantVariable(0)])
    else:
        raise Unsupported("Tensor.new() with data")
    return tx.output.call("call_method", "new_empty", (t, size), {})


# Tensor methods traced as another call (methods whose Python-level meaning differs from the
# op a graph node of the same name would run)
def _conversion_targets(args, kwargs):
    """The dtypes and devices a .to()/.type_as() call names, or None when it asks for more than
    a conversion (copy=True, a memory format) or names something not known at trace time."""
    if kwargs.get("copy") is not None and not (kwargs["copy"].is_constant() and not kwargs["copy"].as_constant()):
        return None
    if "memory_format" in kwargs:
        return None
    targets = []
    for a in list(args) + [v for k, v in kwargs.items() if k in ("dtype", "device")]:
        ex = getattr(a, "example", None)
        if isinstance(ex, torch.Tensor):
            targets += [ex.dtype, ex.device]
        elif a.is_constant() and isinstance(a.as_constant(), (torch.dtype, torch.device, str)):
            c = a.as_constant()
            targets.append(torch.device(c) if isinstance(c, str) else c)
        else:
            return None
    return targets


def _same_tensor_if_no_conversion(name):
    def rewrite(tx, t, args, kwargs):
        """Tensor.to(...) / type_as(other) return `self` itself when nothing changes, as in eager.
        Traced as a graph op, the result became a copy after an in-place metadata change of the
        input (`v = a.type_as(a); a.unsqueeze_(0); return v[..., None]` returned a copy where
        eager's result is a view of `a`: fuzz 431434)."""
        ex = t.example
        targets = _conversion_targets(args, {k: v for k, v in kwargs.items() if k != "non_blocking"})
        if targets and all(x == ex.dtype if isinstance(x, torch.dtype) else _same_device(x, ex.device)
                           for x in targets):
            return t
        return tx.output.call("call_method", name, (t, *args), dict(kwargs))
    return rewrite


def _same_device(d: torch.device, have: torch.device) -> bool:
    return d.type == have.type and (d.index is None or d.index == have.index)


_TENSOR_METHOD_REWRITES = {"type": _tensor_type, "new": _tensor_new,
                           "type_as": _same_tensor_if_no_conversion("type_as"),
                           "to": _same_tensor_if_no_conversion("to")}


def _stride(tx, t):
    vals = t.example.stride()
    if all(isinstance(s, int) for s in vals):
        return V.TupleVariable([V.ConstantVariable(s) for s in vals])
    raise Unsupported("stride() of a tensor with dynamic sizes")


def list_method(tx, lst, name, args, kwargs):
    se = tx.ctx.side_effects
    if isinstance(lst, V.LazyListVariable) and not lst.is_materialized() and name in ("append", "extend"):
        for v in ([args[0]] if name == "append" else dispatch.unpack(tx, args[0])):
            se.append_lazy(lst, v)
        return V.ConstantVariable(None)
    if name == "append":
        se.mutate(tx, lst)
        lst.items.append(args[0])
        return V.ConstantVariable(None)
    if name == "extend":
        se.mutate(tx, lst)
        lst.items.extend(dispatch.unpack(tx, args[0]))
        return V.ConstantVariable(None)
    if name == "insert":
        se.mutate(tx, lst)
        lst.items.insert(args[0].as_constant(), args[1])
        return V.ConstantVariable(None)
    if name == "pop":
        se.mutate(tx, lst)
        idx = args[0].as_constant() if args else -1
        try:
            return lst.items.pop(idx)
        except IndexError:
            raise Unsupported("pop from an empty list") from None
    if name == "clear":
        se.mutate(tx, lst)
        lst.items.clear()
        return V.ConstantVariable(None)
    if name == "copy":
        return V.ListVariable(list(lst.items))
    if name == "reverse":
        se.mutate(tx, lst)
        lst.items.reverse()
        return V.ConstantVariable(None)
    if name in ("index", "count") and consts(args) and consts(lst.items):
        return V.ConstantVariable(getattr([i.as_constant() for i in lst.items], name)(*[a.as_constant() for a in args]))
    if name == "sort" and not args and set(kwargs) <= {"key", "reverse"}:
        ordered = call_builtin(tx, sorted, [V.ListVariable(list(lst.items))], dict(kwargs))
        se.mutate(tx, lst)
        lst.items[:] = ordered.items
        return V.ConstantVariable(None)
    if isinstance(lst, V.DequeVariable) and name in _DEQUE_METHODS:
        se.mutate(tx, lst)
        return _DEQUE_METHODS[name](tx, lst, args)
    raise Unsupported(f"list.{name}")


def _deque_popleft(tx, lst, args):
    if not lst.items:
        raise Unsupported("popleft from an empty deque raises IndexError")
    return lst.items.pop(0)


def _deque_rotate(tx, lst, args):
    n = args[0].as_constant() if args else 1
    if lst.items and isinstance(n, int):
        n %= len(lst.items)
        lst.items[:] = lst.items[-n:] + lst.items[:-n] if n else lst.items
    return V.ConstantVariable(None)


# deque's methods beyond list's (the deque was made in the frame: mutations need no replay)
_DEQUE_METHODS = {
    "appendleft": lambda tx, lst, args: (lst.items.insert(0, args[0]), V.ConstantVariable(None))[1],
    "popleft": _deque_popleft,
    "extendleft": lambda tx, lst, args: (lst.items.__setitem__(
        slice(0, 0), list(reversed(dispatch.unpack(tx, args[0])))), V.ConstantVariable(None))[1],
    "rotate": _deque_rotate,
}


def dict_method(tx, d, name, args, kwargs):
    se = tx.ctx.side_effects
    if name in ("keys", "values", "items") and not args and not kwargs:
        return V.DictViewVariable(d, name)     # live: sees later changes of d (iterators.py)
    if name == "get":
        key = args[0].as_constant()
        default = args[1] if len(args) > 1 else V.ConstantVariable(None)
        return d.items.get(key, default)
    if name == "copy":
        return V.DictVariable(dict(d.items), dict_cls=d.dict_cls)
    if name == "update":
        se.mutate(tx, d)
        if args:
            if not isinstance(args[0], V.DictVariable):
                raise Unsupported("dict.update with a non-dict")
            d.items.update(args[0].items)
        d.items.update(kwargs)
        return V.ConstantVariable(None)
    if name == "pop":
        se.mutate(tx, d)
        key = args[0].as_constant()
        if key in d.items:
            return d.items.pop(key)
        if len(args) > 1:
            return args[1]
        raise Unsupported("dict.pop of a missing key")
    if name == "setdefault":
        key = args[0].as_constant()
        if key not in d.items:
            se.mutate(tx, d)
            d.items[key] = args[1] if len(args) > 1 else V.ConstantVariable(None)
        return d.items[key]
    if name == "clear":
        se.mutate(tx, d)
        d.items.clear()
        return V.ConstantVariable(None)
    raise Unsupported(f"dict.{name}")
