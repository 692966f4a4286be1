"""Captured FX nodes carry the user's source stack in node.meta['stack_trace'] (torch.fx's
format), so that the backend's provenance comments can name user lines."""
import re

import torch

from tracetorch.compiler.backend.lowering.graph import user_location
from tests.compiler.frontend.capture_harness import check


def helper(t):
    return t.sin() * 2


def program(x):
    y = x + 1
    return helper(y).max(0)


def _line(fn, offset):
    return fn.__code__.co_firstlineno + offset


def test_nodes_carry_user_stack():
    rec = check(program, torch.randn(3, 3))
    nodes = [n for n in rec.graphs[0].graph.nodes if n.op not in ("placeholder", "output")]
    assert nodes
    for n in nodes:
        st = n.meta.get("stack_trace")
        assert st, n
        # torch.fx's format: File "path", line N, in fn / the source line, outermost first
        frames = re.findall(r'  File "([^"]+)", line (\d+), in (\S+)\n    ([^\n]*)\n', st)
        assert frames and "".join(f'  File "{p}", line {ln}, in {fn}\n    {src}\n'
                                  for p, ln, fn, src in frames) == st
        assert frames[0][0] == __file__ and frames[0][2] == "program"
    by_target = {getattr(n.target, "__name__", n.target): n for n in nodes}
    add = by_target["add"]
    assert f'line {_line(program, 1)}, in program\n    y = x + 1\n' in add.meta["stack_trace"]
    # an inlined callee's node names both frames, innermost last
    sin = by_target["sin"]
    assert sin.meta["stack_trace"].endswith(
        f'line {_line(helper, 1)}, in helper\n    return t.sin() * 2\n')
    assert f"line {_line(program, 2)}, in program" in sin.meta["stack_trace"]
    # getitem nodes unpacking a tuple result share their producer's stack
    getitems = [n for n in nodes if getattr(n.target, "__name__", None) == "getitem"]
    assert getitems and all(g.meta["stack_trace"] == g.args[0].meta["stack_trace"] for g in getitems)
    # the backend's reader names the user's line
    assert user_location(sin) == f"test_capture_provenance.py:{_line(helper, 1)}: return t.sin() * 2"
