"""A seeded random generator of small Python/PyTorch programs for differential testing.

`generate(seed)` writes the source of `def prog(x, n, lst, d):` (x a tensor, n an int, lst a list
of ints, d a dict of str -> tensor) mixing control flow (if/elif/else, for over range/lists/dict
items/enumerate/zip/map/filter, bounded while, break/continue, early return), containers (list
and dict mutation, aliasing, views, comprehensions, unpacking), closures (nested functions
reading and `nonlocal`-writing cells, lambdas, functions made in loops), try/except around lookups,
a module-level counter written through `global`, and graph breaks (`brk()`, which prints).
Every program returns a tuple of its live values and the run compares it, the mutated inputs
and the global with eager (pysem.run_case). `case_for(seed)` wraps a program as a pysem Case
with 3 calls whose inputs change (values, list length, dict keys, the size of x).
"""
from __future__ import annotations

import collections
import itertools
import random

import torch

from tests.compiler.frontend.pysem import Case, World, brk

_HEADER = "def prog(x, n, lst, d):\n    global COUNTER\n"


class _Gen:
    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.lines: list[str] = []
        self.depth = 1
        self.tensors = ["x"]
        self.ints = ["n"]
        self.lists = ["lst"]
        self.dicts = ["d"]
        self.fns: list[tuple[str, int]] = []   # (name, arity)
        self.k = 0
        self.loop = 0

    # ---- helpers -------------------------------------------------------------------------
    def emit(self, line: str):
        self.lines.append("    " * self.depth + line)

    def fresh(self, prefix):
        self.k += 1
        return f"{prefix}{self.k}"

    def pick(self, seq):
        return self.r.choice(seq)

    def int_expr(self, d=0):
        r = self.r.random()
        if r < 0.3 or d > 1:
            return self.pick(self.ints) if self.r.random() < 0.7 else str(self.r.randint(-2, 4))
        if r < 0.45:
            return f"len({self.pick(self.lists)})"
        if r < 0.55:
            return f"len({self.pick(self.dicts)})"
        if r < 0.62:
            return f"{self.pick(self.tensors)}.shape[0]"
        op = self.pick(["+", "-", "*", "//", "%"])
        rhs = self.int_expr(d + 1)
        if op in ("//", "%"):
            rhs = f"({rhs} or 1)"
        return f"({self.int_expr(d + 1)} {op} {rhs})"

    def tensor_expr(self, d=0):
        t = self.pick(self.tensors)
        r = self.r.random()
        if r < 0.25 or d > 1:
            return t
        if r < 0.5:
            return f"({t} {self.pick(['+', '-', '*'])} {self.int_expr(d + 1)})"
        if r < 0.65:
            return f"({t} {self.pick(['+', '*'])} {self.tensor_expr(d + 1)})"
        if r < 0.75:
            return f"torch.{self.pick(['relu', 'sin', 'tanh', 'neg'])}({self.tensor_expr(d + 1)})"
        if r < 0.82:
            return f"({t}.sum() + {t})"
        if r < 0.9 and self.fns:
            name, arity = self.pick(self.fns)
            return f"{name}({', '.join(self.tensor_expr(d + 1) for _ in range(arity))})"
        return f"{t}.clone()"

    def cond(self):
        r = self.r.random()
        if r < 0.4:
            return f"{self.int_expr()} {self.pick(['<', '>', '==', '!=', '>=', '<='])} {self.int_expr()}"
        if r < 0.55:
            return f"{self.r.randint(0, 3)} in {self.pick(self.lists)}"
        if r < 0.7:
            return f"{self.pick(['a', 'b', 'c', 'k0'])!r} in {self.pick(self.dicts)}"
        if r < 0.8:
            return f"not {self.pick(self.lists)}"
        if r < 0.9:
            return f"isinstance({self.pick(self.ints + self.tensors)}, int)"
        return f"{self.pick(self.ints)} % 2 == 0"

    # ---- statements ----------------------------------------------------------------------
    def block(self, n):
        for _ in range(n):
            self.stmt()

    def stmt(self):
        kinds = ["assign_t", "assign_i", "list_op", "dict_op", "if", "for", "closure", "lambda_map",
                 "try", "brk", "global", "unpack", "comp", "while", "view", "call_fn", "lazy",
                 "itertools", "deque", "genexpr"]
        weights = [5, 3, 4, 3, 3, 3, 2, 2, 1, 1, 1, 1, 2, 1, 1, 2, 1, 1, 1, 1]
        if self.depth > 3:
            weights = [w if k not in ("if", "for", "closure", "while", "try") else 0
                       for k, w in zip(kinds, weights)]
        getattr(self, "s_" + self.r.choices(kinds, weights)[0])()

    def s_assign_t(self):
        v = self.fresh("t")
        self.emit(f"{v} = {self.tensor_expr()}")
        self.tensors.append(v)

    def s_assign_i(self):
        v = self.fresh("i")
        self.emit(f"{v} = {self.int_expr()}")
        self.ints.append(v)

    def s_list_op(self):
        lst = self.pick(self.lists)
        op = self.r.randint(0, 7)
        if op == 0:
            self.emit(f"{lst}.append({self.int_expr()})")
        elif op == 1:
            self.emit(f"if {lst}: {lst}.pop()")
        elif op == 2:
            self.emit(f"{lst}.insert(0, {self.int_expr()})")
        elif op == 3:
            v = self.fresh("l")
            self.emit(f"{v} = {lst}")            # an alias
            self.lists.append(v)
        elif op == 4:
            v = self.fresh("l")
            self.emit(f"{v} = list({lst}) + [{self.int_expr()}]")
            self.lists.append(v)
        elif op == 5:
            self.emit(f"{lst}.reverse()")
        elif op == 6:
            self.emit(f"if len({lst}) > 1: {lst}[0], {lst}[-1] = {lst}[-1], {lst}[0]")
        else:
            v = self.fresh("i")
            self.emit(f"{v} = {lst}[-1] if {lst} else {self.int_expr()}")
            self.ints.append(v)

    def s_dict_op(self):
        dd = self.pick(self.dicts)
        op = self.r.randint(0, 6)
        key = self.pick(["a", "b", "c", "k0"])
        if op == 0:
            self.emit(f"{dd}[{key!r}] = {self.tensor_expr()}")
        elif op == 1:
            v = self.fresh("t")
            self.emit(f"{v} = {dd}.get({key!r}, {self.pick(self.tensors)})")
            self.tensors.append(v)
        elif op == 2:
            self.emit(f"{dd}.pop({key!r}, None)")
        elif op == 3:
            v = self.fresh("i")
            self.emit(f"{v} = len(list({dd}.keys()))")
            self.ints.append(v)
        elif op == 4:
            v = self.fresh("kv")
            self.emit(f"{v} = {dd}.keys()")         # a live view, read later
            self.emit(f"{dd}[{key!r}] = {self.pick(self.tensors)}")
            w = self.fresh("i")
            self.emit(f"{w} = len({v})")
            self.ints.append(w)
        elif op == 5:
            v = self.fresh("dd")
            self.emit(f"{v} = dict({dd})")
            self.dicts.append(v)
        else:
            acc = self.fresh("t")
            self.emit(f"{acc} = {self.pick(self.tensors)}")
            self.emit(f"for _k, _v in {dd}.items():")
            self.depth += 1
            self.emit(f"{acc} = {acc} + _v")
            self.depth -= 1
            self.tensors.append(acc)

    def s_if(self):
        self.emit(f"if {self.cond()}:")
        self.scoped(lambda: self.block(self.r.randint(1, 3)))
        if self.r.random() < 0.3:
            self.emit(f"elif {self.cond()}:")
            self.scoped(lambda: self.block(self.r.randint(1, 2)))
        if self.r.random() < 0.6:
            self.emit("else:")
            self.scoped(lambda: self.block(self.r.randint(1, 2)))

    def scoped(self, body):
        """A nested block: names it binds may be unbound after it (a branch not taken), so
        they are dropped from the pools afterwards."""
        saved = (list(self.tensors), list(self.ints), list(self.lists), list(self.dicts), list(self.fns))
        self.depth += 1
        body()
        self.depth -= 1
        self.tensors, self.ints, self.lists, self.dicts, self.fns = saved

    def s_for(self):
        v = self.fresh("v")
        it = self.r.randint(0, 5)
        src = [f"range({self.r.randint(0, 3)})", f"list({self.pick(self.lists)})",
               f"enumerate({self.pick(self.lists)}[:3])",
               f"zip({self.pick(self.lists)}, range(3))",
               f"map(lambda q: q * 2, {self.pick(self.lists)}[:3])",
               f"filter(lambda q: q % 2, list({self.pick(self.lists)}))"][it]
        target = v if it in (0, 1, 4, 5) else f"{v}, {v}b"
        self.loop += 1
        self.emit(f"for {target} in {src}:")

        def body():
            if it in (2, 3):
                self.ints.append(v + "b")
            if it != 2:
                self.ints.append(v)
            self.block(self.r.randint(1, 3))
            if self.r.random() < 0.2:
                self.emit(f"if {self.cond()}: break")
            if self.r.random() < 0.15:
                self.emit(f"if {self.cond()}: continue")
        self.scoped(body)
        self.loop -= 1

    def s_while(self):
        c = self.fresh("c")
        self.emit(f"{c} = 0")
        self.emit(f"while {c} < {self.r.randint(1, 3)}:")

        def body():
            self.emit(f"{c} += 1")
            self.block(self.r.randint(1, 2))
        self.scoped(body)

    def s_closure(self):
        name = self.fresh("f")
        cell = self.fresh("cell")
        self.emit(f"{cell} = {self.int_expr()}")
        self.ints.append(cell)
        captured = self.pick(self.tensors)
        self.emit(f"def {name}(a):")
        self.depth += 1
        if self.r.random() < 0.5:
            self.emit(f"nonlocal {cell}")
            self.emit(f"{cell} += 1")
        self.emit(f"return a * {cell} + {captured}")
        self.depth -= 1
        self.fns.append((name, 1))
        if self.r.random() < 0.4:
            self.emit(f"{cell} = {self.int_expr()}")     # rebinding the cell after creation

    def s_lambda_map(self):
        v = self.fresh("l")
        self.emit(f"{v} = list(map(lambda q: q + {self.int_expr()}, {self.pick(self.lists)}))")
        self.lists.append(v)

    def s_try(self):
        v = self.fresh("t")
        kind = self.r.randint(0, 2)
        if kind == 2:           # a raise in a nested function, caught by the caller
            g = self.fresh("g")
            self.emit(f"def {g}(q):")
            self.depth += 1
            self.emit(f"if q > {self.r.randint(0, 3)}: raise ValueError('big', q)")
            self.emit(f"return {self.pick(self.tensors)} * q")
            self.depth -= 1
        self.emit("try:")
        self.depth += 1
        if kind == 0:
            self.emit(f"{v} = {self.pick(self.dicts)}[{self.pick(['a', 'zz', 'k0'])!r}]")
        elif kind == 1:
            self.emit(f"{v} = {self.pick(self.tensors)} * {self.pick(self.lists)}[{self.r.randint(0, 4)}]")
        else:
            self.emit(f"{v} = {g}({self.int_expr()})")
        self.depth -= 1
        self.emit(f"except {['KeyError', 'IndexError', 'ValueError'][kind]} as err:")
        self.depth += 1
        self.emit(f"{v} = {self.tensor_expr()} + len(err.args)")
        self.depth -= 1
        if self.r.random() < 0.3:
            self.emit("finally:")
            self.depth += 1
            self.emit(f"COUNTER += {self.r.randint(1, 3)}")
            self.depth -= 1
        self.tensors.append(v)

    def s_brk(self):
        self.emit(f"brk({self.pick(self.ints)})")

    def s_global(self):
        self.emit(f"COUNTER += {self.int_expr()}")

    def s_unpack(self):
        a, b = self.fresh("i"), self.fresh("l")
        lst = self.pick(self.lists)
        self.emit(f"{a}, *{b} = [{self.int_expr()}] + {lst}")
        self.ints.append(a)
        self.lists.append(b)

    def s_comp(self):
        v = self.fresh("l")
        lst = self.pick(self.lists)
        self.emit(f"{v} = [q * {self.int_expr()} for q in {lst} if q != {self.r.randint(0, 3)}]")
        self.lists.append(v)
        if self.r.random() < 0.5:
            w = self.fresh("dd")
            self.emit(f"{w} = {{str(q): {self.pick(self.tensors)} * q for q in {v}[:2]}}")
            self.dicts.append(w)

    def s_view(self):
        v = self.fresh("t")
        base = self.pick(self.tensors)
        self.emit(f"{v} = {base}.view(-1)")
        self.tensors.append(v)
        if base != "x" and self.r.random() < 0.5:
            self.emit(f"{base}.add_(1)")

    def s_call_fn(self):
        if not self.fns:
            return self.s_assign_t()
        v = self.fresh("t")
        name, arity = self.pick(self.fns)
        self.emit(f"{v} = {name}({', '.join(self.tensor_expr() for _ in range(arity))})")
        self.tensors.append(v)

    def s_lazy(self):
        """A lazy map/filter/zip made, its input changed (maybe across a break), then read."""
        lst = self.pick(self.lists)
        m = self.fresh("m")
        kind = self.r.randint(0, 2)
        self.emit(f"{m} = " + [f"map(lambda q: q + {self.int_expr()}, {lst})",
                               f"filter(lambda q: q > {self.r.randint(0, 3)}, {lst})",
                               f"zip({lst}, {self.pick(self.lists)})"][kind])
        if self.r.random() < 0.5:
            self.emit(f"{lst}.append({self.int_expr()})")
        if self.r.random() < 0.3:
            self.emit(f"brk({self.pick(self.ints)})")
        v = self.fresh("l")
        self.emit(f"{v} = list({m})" if kind != 2 else f"{v} = [a + b for a, b in {m}]")
        self.lists.append(v)

    def s_itertools(self):
        v = self.fresh("l")
        a, b = self.pick(self.lists), self.pick(self.lists)
        self.emit(f"{v} = " + self.pick([
            f"list(itertools.islice(itertools.chain({a}, {b}), {self.r.randint(0, 4)}))",
            f"list(itertools.accumulate({a}))",
            f"[p + q for p, q in itertools.combinations({a}[:4], 2)]",
            f"[p * q for p, q in itertools.zip_longest({a}, {b}, fillvalue=1)]",
            f"list(itertools.islice(itertools.count({self.int_expr()}), {self.r.randint(0, 3)}))"]))
        self.lists.append(v)

    def s_genexpr(self):
        """A generator expression whose items have side effects, consumed by something that
        may stop early (any/all/next) or fully (sum/list)."""
        src = self.pick(self.lists)
        log = self.fresh("log")        # its own list: appending to the one iterated could
        self.emit(f"{log} = []")       # double it at every pass of an enclosing loop
        v = self.fresh("i")
        item = f"({log}.append(q) or q > {self.r.randint(0, 3)})"
        self.emit(f"{v} = " + self.pick([
            f"int(any({item} for q in list({src})))", f"int(all({item} for q in list({src})))",
            f"sum(q for q in list({src}) if {item})",
            f"next((q for q in list({src}) if {item}), -1)"]))
        self.ints.append(v)

    def s_deque(self):
        dq = self.fresh("dq")
        self.emit(f"{dq} = collections.deque({self.pick(self.lists)})")
        self.emit(f"{dq}.appendleft({self.int_expr()})")
        if self.r.random() < 0.5:
            self.emit(f"if {dq}: {dq}.pop()")
        v = self.fresh("l")
        self.emit(f"{v} = list({dq})")
        self.lists.append(v)

    def program(self) -> str:
        self.block(self.r.randint(4, 12))
        if self.r.random() < 0.2:
            self.emit(f"if {self.cond()}:")
            self.depth += 1
            self.emit(f"return {self.pick(self.tensors)}, COUNTER")
            self.depth -= 1
        outs = sorted(set(self.r.sample(self.tensors, min(3, len(self.tensors)))
                          + self.r.sample(self.ints, min(2, len(self.ints)))
                          + self.r.sample(self.lists, 1) + self.r.sample(self.dicts, 1)))
        self.emit(f"return ({', '.join(outs)}, COUNTER)")
        return _HEADER + "\n".join(self.lines) + "\n"


def generate(seed: int) -> str:
    return _Gen(seed).program()


def _args_for(seed: int):
    def args(i):
        r = random.Random(seed * 7919 + i)
        size = [3, 3, 4][i] if seed % 3 == 0 else 3
        g = torch.Generator().manual_seed(seed * 31 + i)
        x = torch.randn(size, generator=g)
        n = r.randint(-1, 4)
        lst = [r.randint(0, 4) for _ in range(r.randint(0, 4))]
        d = {k: torch.randn(size, generator=g) for k in r.sample(["a", "b", "c"], r.randint(0, 3))}
        return (x, n, lst, d)
    return args


def case_for(seed: int) -> Case:
    src = generate(seed)

    def make():
        ns = {"torch": torch, "brk": brk, "COUNTER": 0, "itertools": itertools,
              "collections": collections}
        exec(compile(src, f"<pysem generated {seed}>", "exec"), ns)
        return World(ns["prog"], observe=lambda: ns["COUNTER"])
    c = Case(f"gen{seed}", make, args=_args_for(seed), calls=3, feature="generated")
    c.source = src
    return c
