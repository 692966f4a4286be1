"""Classes and descriptors: methods, properties, __call__, class attributes, super()."""
import torch

from tests.compiler.frontend.pysem import World, brk, case

PROGRAMS = []
P = PROGRAMS.append


@case("classes")
def class_call_replaced_between_calls():
    class Scale:
        def __call__(self, x):
            return x + 1
    obj = Scale()

    def f(x):
        return obj(x)

    def before(i):
        if i == 1:
            Scale.__call__ = lambda self, x: x + 2
    return World(f, before=before)
P(class_call_replaced_between_calls)


@case("classes")
def method_replaced_on_class():
    class A:
        def g(self, x):
            return x * 2
    a = A()

    def f(x):
        return a.g(x)

    def before(i):
        if i == 2:
            A.g = lambda self, x: x * 3
    return World(f, before=before)
P(method_replaced_on_class)


@case("classes")
def instance_attribute_changes():
    class Cfg:
        def __init__(self):
            self.scale = 1.0
            self.mode = "a"
    cfg = Cfg()

    def f(x):
        if cfg.mode == "a":
            return x * cfg.scale
        return x - cfg.scale

    def before(i):
        cfg.scale = float(i + 1)
        cfg.mode = "ab"[i % 2]
    return World(f, before=before)
P(instance_attribute_changes)


@case("classes")
def property_and_setter():
    class Box:
        def __init__(self, v):
            self._v = v

        @property
        def v(self):
            return self._v * 2

        @v.setter
        def v(self, val):
            self._v = val

    def f(x):
        b = Box(x)
        b.v = x + 1
        return b.v, b._v
    return f
P(property_and_setter)


@case("classes")
def zero_arg_super_with_break():
    class Base:
        def f(self, x):
            return x + 1

    class Der(Base):
        def f(self, x):
            y = x * 2
            brk()
            return super().f(y)
    d = Der()

    def f(x):
        return d.f(x)
    return f
P(zero_arg_super_with_break)


@case("classes")
def callable_builtin_on_objects():
    class NoCall:
        pass

    class Yes:
        def __call__(self):
            return 1

    def f(x):
        return x + 1, callable(NoCall()), callable(NoCall), callable(Yes()), callable(len), \
            callable(x), callable(None)
    return f
P(callable_builtin_on_objects)


@case("classes")
def classmethod_staticmethod_and_class_attr():
    class K:
        factor = 3

        @classmethod
        def make(cls, v):
            return v * cls.factor

        @staticmethod
        def add(a, b):
            return a + b

    def f(x):
        return K.make(x), K.add(x, 1), K().make(2)

    def before(i):
        K.factor = i + 3
    return World(f, before=before)
P(classmethod_staticmethod_and_class_attr)


@case("classes")
def new_object_escapes():
    class Pt:
        def __init__(self, a, b):
            self.a = a
            self.b = b

        def norm(self):
            return self.a * self.a + self.b * self.b

    def f(x):
        p = Pt(x, 2)
        p.c = p.norm()
        return p
    return f
P(new_object_escapes)


@case("classes")
def isinstance_and_type_checks():
    class A:
        pass

    class B(A):
        pass

    def f(x):
        b = B()
        return x + 1, isinstance(b, A), type(b) is A, issubclass(B, A), type(b).__name__, \
            isinstance(x, torch.Tensor), isinstance(3, (int, float))
    return f
P(isinstance_and_type_checks)


@case("classes")
def getattr_hasattr_setattr_defaults():
    class O:
        pass
    o = O()

    def f(x):
        has = hasattr(o, "flag")
        v = getattr(o, "flag", 10)
        return x + v, has

    def before(i):
        if i == 1:
            o.flag = 5
        if i == 2:
            del o.flag
    return World(f, before=before)
P(getattr_hasattr_setattr_defaults)


def _tagged(i):
    t = torch.ones(2) * i
    if i % 2 == 1:
        t.tag = 5
    return (t,)


@case("classes", args=_tagged, calls=4)
def hasattr_on_tensor_attribute():
    def f(x):
        if hasattr(x, "tag"):
            return x + x.tag
        return x - 1
    return f
P(hasattr_on_tensor_attribute)


@case("classes")
def dunder_methods_on_new_object():
    class V:
        def __init__(self, t):
            self.t = t

        def __add__(self, other):
            return V(self.t + other.t)

        def __len__(self):
            return 3

        def __getitem__(self, i):
            return self.t * i

    def f(x):
        v = V(x) + V(x)
        return v.t, len(v), v[2]
    return f
P(dunder_methods_on_new_object)


@case("classes")
def module_built_in_frame_with_args():
    def f(x):
        return torch.nn.Softmax(dim=0)(x), torch.nn.ReLU()(x - 2)
    return f
P(module_built_in_frame_with_args)
