"""The schedule verifier (scheduler/verify.py): real schedules pass it; a schedule with one
invariant broken on purpose fails it with a sentence naming the kernel and the rule."""
import dataclasses

import pytest
import torch

from tracetorch.compiler import config
from tracetorch.compiler.backend.scheduler import verify
from cpp_test_utils import check

pytestmark = pytest.mark.usefixtures("backend_cache_dir")


@pytest.fixture
def schedules(monkeypatch):
    """Every (schedule, graph outputs) verified while the test compiles."""
    seen, real = [], verify.check

    def recording(schedule, outs=()):
        seen.append((schedule, set(outs)))
        real(schedule, outs)
    monkeypatch.setattr(verify, "check", recording)
    with config.patch(**{"backend.verify_schedule": True, "backend.cache_enabled": False}):
        yield seen


def _fused_group(seen):
    for schedule, outs in seen:
        for g in schedule.kernels():
            if len(g.nodes) >= 2:
                return schedule, outs, g
    raise AssertionError("no kernel with two or more fused nodes was scheduled")


def _with_group(schedule, old, new):
    steps = [new if s is old else s for s in schedule.steps]
    return dataclasses.replace(schedule, steps=steps) if dataclasses.is_dataclass(schedule) \
        else type("S", (), {"steps": steps, "kernels": lambda self: [s for s in steps if hasattr(s, "kinds")]})()


def test_real_schedules_pass(schedules):
    def f(x, w, b):
        y = torch.nn.functional.layer_norm(x, (32,), w, b)
        return torch.softmax(y * 2, -1), y.sum(0)
    check(f, [torch.randn(6, 32), torch.randn(32), torch.randn(32)])
    schedule, outs, g = _fused_group(schedules)
    assert verify.check_group(g) == []


@pytest.mark.parametrize("corrupt, rule", [
    (lambda g: dataclasses.replace(g, nodes=list(reversed(g.nodes))), "before (or without) its producer"),
    (lambda g: dataclasses.replace(g, layouts={}), "no layout for"),
    (lambda g: dataclasses.replace(g, outputs=[], internal=list(g.node_names())[:-1]), "are not the nodes"),
    (lambda g: dataclasses.replace(g, kinds={**g.kinds, g.nodes[0].name: "sideways"}), "has kind 'sideways'"),
])
def test_a_broken_invariant_is_named(schedules, corrupt, rule):
    check(lambda x: torch.softmax(x, -1) + 1, [torch.randn(8, 40)])
    schedule, outs, g = _fused_group(schedules)
    problems = verify.check_group(corrupt(g))
    assert any(rule in p for p in problems), problems


def test_an_internal_graph_output_fails_the_whole_schedule_check(schedules):
    check(lambda x: torch.softmax(x, -1), [torch.randn(8, 40)])
    schedule, outs, g = _fused_group(schedules)
    out = next(n for n in g.outputs if n in outs)
    bad = dataclasses.replace(g, outputs=[n for n in g.outputs if n != out], internal=[*g.internal, out])
    with pytest.raises(verify.ScheduleError, match=f"internal buffer {out} is read outside the kernel"):
        verify.check(_with_group(schedule, g, bad), outs)
