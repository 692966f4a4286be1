"""nn.Module instances created inside the traced frame (`Block()(x)`), for the simple case.

Dynamo inlines any module's constructor into a new, side-effect-tracked object. We model the
case whose construction we can prove has no effect but the new object: a user subclass that
adds no __init__ (nn.Module.__init__ only makes empty registries and training=True), called
with no arguments. The instance is a NewModuleVariable (a NewObjectVariable) whose state is
{training: True} plus what traced code assigns; calling it inlines its forward (a new module
has no hooks of its own; the global ones are checked); it is rebuilt at runtime as `cls()`
plus the assigned attributes, which is sound only because the constructor has no side effects
(no RNG use, no parameters), so running it later than eager did changes nothing observable.
Anything else stays an opaque object creation (a graph break).
"""
from __future__ import annotations

import copy
import inspect
import types

import torch
from tracetorch.compiler.frontend import dispatch
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported
from tracetorch.compiler.frontend.members import type_member
from tracetorch.compiler.frontend.stdlib_calls import _python_value

_Module = torch.nn.Module


def simple_module_class(cls) -> bool:
    """A user nn.Module subclass whose construction with no arguments is nn.Module.__init__
    alone, and whose attribute protocol and call are nn.Module's."""
    if not (isinstance(cls, type) and issubclass(cls, _Module)) or type(cls) is not type:
        return False
    if (cls.__module__ or "").split(".")[0] == "torch":
        return False      # torch's own modules take arguments and build parameters
    for name in ("__init__", "__new__", "__setattr__", "__getattr__", "__getattribute__",
                 "__call__", "__delattr__"):
        if inspect.getattr_static(cls, name) is not inspect.getattr_static(_Module, name):
            return False
    return isinstance(inspect.getattr_static(cls, "forward", None), types.FunctionType)


_PLAIN = (int, float, bool, str, type(None), tuple)


def torch_module_class(cls) -> bool:
    """One of torch.nn's own module classes (nn.ReLU, nn.Softmax, nn.Dropout, ...)."""
    return isinstance(cls, type) and issubclass(cls, _Module) and type(cls) is type \
        and (cls.__module__ or "").startswith("torch.nn.modules.")


def construct_torch(tx, cls, args, kwargs):
    """torch.nn.X(constant args) made in the frame: built now (RNG state kept as it was) and
    modelled as a NewModuleVariable when it has no parameters, buffers or submodules and its
    state is plain values; rebuilt at runtime as a deep copy of the instance built now (its
    constructor is then not run again: a stateless module's construction has no effect)."""
    real_args = [_python_value(a) for a in args]
    real_kwargs = {k: _python_value(v) for k, v in kwargs.items()}
    with torch.random.fork_rng(devices=[]):
        try:
            inst = cls(*real_args, **real_kwargs)
        except Exception as e:
            raise Unsupported(f"{cls.__name__}(...) raised {type(e).__name__}") from None
    if any(True for _ in inst.parameters()) or any(True for _ in inst.buffers()) \
            or inst._modules:
        raise Unsupported(f"creating {cls.__name__} in the frame (it has parameters, buffers "
                          "or submodules)")
    attrs = {}
    for k, v in inst.__dict__.items():
        if k.startswith("_") and isinstance(v, (dict, set)) and not v:
            continue                  # nn.Module's registries (empty for a fresh module)
        if k in ("_buffers", "_parameters") and all(x is None for x in v.values()):
            # registered as None (CrossEntropyLoss(weight=None)): reads give None
            attrs.update({name: V.ConstantVariable(None) for name in v})
            continue
        if type(v) not in _PLAIN:
            raise Unsupported(f"creating {cls.__name__} in the frame (attribute {k} is a "
                              f"{type(v).__name__})")
        attrs[k] = V.ConstantVariable(v)
    var = V.NewModuleVariable(cls, attrs)
    var.prototype = inst
    return var


def construct(tx, cls, args, kwargs):
    if args or kwargs:
        raise Unsupported(f"creating {cls.__qualname__} with arguments (nn.Module.__init__ takes none)")
    return V.NewModuleVariable(cls, {"training": V.ConstantVariable(True)})


@dispatch.get_attr.register(V.NewModuleVariable)
def get_attr(tx, obj, name):
    if name in obj.attrs:
        return obj.attrs[name]
    if name == "__class__":
        return V.ConstantVariable(obj.cls)
    for klass in obj.cls.__mro__:
        if klass is _Module:
            break
        if name in klass.__dict__:
            return type_member(tx, obj, obj.cls, name)
    # nn.Module's own machinery (parameters(), _modules, ...) of a fresh module is not modelled
    raise Unsupported(f"attribute {name} of a {obj.cls.__name__} created in the frame")


@dispatch.store_attr.register(V.NewModuleVariable)
def store_attr(tx, obj, name, value):
    if name == "training" or isinstance(value, (V.NNModuleVariable, V.NewModuleVariable)) or \
            (isinstance(value, V.TensorVariable) and isinstance(value.example, torch.nn.Parameter)):
        # nn.Module.__setattr__ would register a submodule / parameter: not modelled
        raise Unsupported(f"assigning {name} of a {obj.cls.__name__} created in the frame")
    obj.attrs[name] = value
    tx.ctx.side_effects.touched.append(obj)


@dispatch.call_function.register(V.NewModuleVariable)
def call(tx, obj, args, kwargs):
    """obj(*args): nn.Module.__call__ without hooks (a fresh module has none), forward inlined."""
    mod = torch.nn.modules.module
    if mod._global_forward_hooks or mod._global_forward_pre_hooks or \
            getattr(mod, "_global_backward_hooks", None) or getattr(mod, "_global_backward_pre_hooks", None):
        raise Unsupported(f"nn.Module {obj.cls.__name__} called with global module hooks registered")
    forward = inspect.getattr_static(obj.cls, "forward")
    return dispatch.inline_call(tx, V.UserFunctionVariable(forward), [obj] + list(args), kwargs, callee=obj)


@dispatch.reconstruct.register(V.NewModuleVariable)
def reconstruct(cg, var, side_effects):
    """A module built while tracing escapes the frame: a stateless torch.nn module is a copy of
    the instance made at trace time; a user module is cls() (nn.Module.__init__ has no other
    effect), then the attributes it differs in are set."""
    if var.source is not None:
        return cg.load_source(var)

    def construct():
        attrs = dict(var.attrs)
        if getattr(var, "prototype", None) is not None:
            cg.emit("PUSH_NULL")
            cg.emit("LOAD_CONST", copy.deepcopy)
            cg.emit("LOAD_CONST", var.prototype)
            cg.call(1)
            attrs = {k: v for k, v in attrs.items() if not (
                v.is_constant() and getattr(var.prototype, k, object()) is v.as_constant())}
            return f"copy.deepcopy(<{var.cls.__qualname__} built while tracing>)", attrs
        cg.emit("PUSH_NULL")
        cg.emit("LOAD_CONST", var.cls)
        cg.call(0)
        training = attrs.get("training")
        if training is not None and training.is_constant() and training.as_constant() is True:
            del attrs["training"]
        return f"{var.cls.__qualname__}()", attrs
    return cg.build_object(var, side_effects, construct)
