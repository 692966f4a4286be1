"""Opcode handlers for operators, subscripts, slices and container displays (a mixin of
instructions.Tracer): BINARY_OP, COMPARE_OP, BINARY_SUBSCR, BUILD_LIST/MAP/..., UNPACK_*."""
from __future__ import annotations

from tracetorch.compiler.frontend import dispatch, symbolic
from tracetorch.compiler.frontend import variables as V
from tracetorch.compiler.frontend.errors import Unsupported


class DataOps:
    # ---- operators ------------------------------------------------------------------------
    def BINARY_OP(self, inst):
        b = self.pop()
        a = self.pop()
        self.push(dispatch.binary_op(self, inst.argrepr, a, b))

    def UNARY_NEGATIVE(self, inst):
        self.push(dispatch.unary_op(self, "neg", self.pop()))

    def UNARY_POSITIVE(self, inst):
        self.push(dispatch.unary_op(self, "pos", self.pop()))

    def UNARY_INVERT(self, inst):
        self.push(dispatch.unary_op(self, "invert", self.pop()))

    def UNARY_NOT(self, inst):
        self.push(V.ConstantVariable(not dispatch.truthiness(self, self.pop())))

    def COMPARE_OP(self, inst):
        b = self.pop()
        a = self.pop()
        self.push(dispatch.compare_op(self, inst.argval, a, b))

    def IS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        self.push(dispatch.compare_op(self, "is not" if inst.arg else "is", a, b))

    def CONTAINS_OP(self, inst):
        b = self.pop()
        a = self.pop()
        result = dispatch.contains_op(self, a, b)
        self.push(V.ConstantVariable(result != bool(inst.arg)))

    def BINARY_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        self.push(dispatch.get_item(self, obj, key))

    def STORE_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        value = self.pop()
        dispatch.store_item(self, obj, key, value)

    def DELETE_SUBSCR(self, inst):
        key = self.pop()
        obj = self.pop()
        if isinstance(obj, V.DictVariable) and key.is_constant():
            self.ctx.side_effects.mutate(self, obj)
            obj.items.pop(key.as_constant())
        elif isinstance(obj, V.ListVariable) and key.is_constant():
            self.ctx.side_effects.mutate(self, obj)
            del obj.items[key.as_constant()]
        else:
            raise Unsupported(f"del on {obj!r}")

    def BUILD_SLICE(self, inst):
        parts = self.popn(inst.arg)
        self.push(make_slice(parts))

    def BINARY_SLICE(self, inst):
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        self.push(dispatch.get_item(self, obj, make_slice([start, end])))

    def STORE_SLICE(self, inst):
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        value = self.pop()
        dispatch.store_item(self, obj, make_slice([start, end]), value)

    # ---- containers -----------------------------------------------------------------------
    def BUILD_TUPLE(self, inst):
        self.push(V.TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst):
        self.push(V.ListVariable(self.popn(inst.arg)))

    def BUILD_MAP(self, inst):
        flat = self.popn(2 * inst.arg)
        items = {}
        for k, v in zip(flat[::2], flat[1::2]):
            items[const_key(k)] = v
        self.push(V.DictVariable(items))

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_constant()
        values = self.popn(inst.arg)
        self.push(V.DictVariable(dict(zip(keys, values))))

    def BUILD_STRING(self, inst):
        parts = self.popn(inst.arg)
        self.push(V.ConstantVariable("".join(p.as_constant() for p in parts)))

    def FORMAT_VALUE(self, inst):
        spec = self.pop().as_constant() if (inst.arg & 0x04) else ""
        value = self.pop()
        if isinstance(value, V.SymNodeVariable):
            value = symbolic.specialize(self, value)     # f"{n}" needs n's value (guarded), as Dynamo
        if not value.is_constant():
            raise Unsupported(f"f-string formatting of {value!r} (only Python constants)")
        v = value.as_constant()
        conv = inst.arg & 0x03
        v = {1: str, 2: repr, 3: ascii}.get(conv, lambda x: x)(v)
        self.push(V.ConstantVariable(format(v, spec)))

    def LIST_APPEND(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        self.ctx.side_effects.mutate(self, target)
        target.items.append(v)

    def LIST_EXTEND(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        self.ctx.side_effects.mutate(self, target)
        target.items.extend(dispatch.unpack(self, v))

    def BUILD_SET(self, inst):
        self.push(V.SetVariable(const_key(v) for v in self.popn(inst.arg)))

    def SET_ADD(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        _set_mutate(target)
        target.values.add(const_key(v))

    def SET_UPDATE(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        _set_mutate(target)
        target.values.update(const_key(i) for i in dispatch.unpack(self, v))

    def MAP_ADD(self, inst):
        v = self.pop()
        k = self.pop()
        target = self.stack[-inst.arg]
        target.items[const_key(k)] = v

    def DICT_UPDATE(self, inst):
        v = self.pop()
        target = self.stack[-inst.arg]
        if not isinstance(v, V.DictVariable):
            raise Unsupported(f"dict update with {v!r}")
        target.items.update(v.items)
    DICT_MERGE = DICT_UPDATE

    def LIST_TO_TUPLE(self, inst):
        self.push(V.TupleVariable(self.pop().items))

    def CALL_INTRINSIC_1(self, inst):
        name = inst.argrepr
        if name == "INTRINSIC_LIST_TO_TUPLE":
            self.push(V.TupleVariable(self.pop().items))
        elif name == "INTRINSIC_UNARY_POSITIVE":
            self.push(dispatch.unary_op(self, "pos", self.pop()))
        else:
            raise Unsupported(f"CALL_INTRINSIC_1 {name}")

    def UNPACK_SEQUENCE(self, inst):
        items = dispatch.unpack(self, self.pop())
        if len(items) != inst.arg:
            raise Unsupported(f"unpacking {len(items)} values into {inst.arg} names")
        for v in reversed(items):
            self.push(v)

    def UNPACK_EX(self, inst):
        items = dispatch.unpack(self, self.pop())
        before, after = inst.arg & 0xFF, inst.arg >> 8
        if len(items) < before + after:
            raise Unsupported("not enough values to unpack")
        mid = V.ListVariable(items[before:len(items) - after])
        out = items[:before] + [mid] + items[len(items) - after:]
        for v in reversed(out):
            self.push(v)


def _set_mutate(target):
    if not isinstance(target, V.SetVariable) or target.source is not None:
        raise Unsupported(f"set mutation of {target!r}")


def make_slice(parts):
    if all(p.is_constant() for p in parts):
        return V.ConstantVariable(slice(*[p.as_constant() for p in parts]))
    if not all(p.is_constant() or isinstance(p, V.SymNodeVariable) for p in parts):
        raise Unsupported("slice with non-integer bounds")
    return V.SliceVariable(parts)


def const_key(k):
    if not k.is_constant():
        raise Unsupported(f"dict key {k!r} is not a Python constant")
    return k.as_constant()
