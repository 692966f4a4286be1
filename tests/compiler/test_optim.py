"""The compiled optimizer step matches eager torch.optim, and shares its state."""
from __future__ import annotations

import copy
import logging

import pytest
import torch
import torch.nn as nn

from tracetorch import logs
from tracetorch.compiler.optim import compile_optimizer_step


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _grads(model, seed):
    g = torch.Generator().manual_seed(seed)
    model.zero_grad()
    x = torch.randn(5, 8, generator=g)
    model(x).pow(2).sum().backward()


CASES = [
    (torch.optim.SGD, dict(lr=0.1)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (torch.optim.SGD, dict(lr=0.05, momentum=0.8, dampening=0.1, maximize=True)),
    (torch.optim.Adam, dict(lr=0.01)),
    (torch.optim.Adam, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    (torch.optim.Adam, dict(lr=0.01, foreach=True)),
    (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    (torch.optim.AdamW, dict(lr=0.01, betas=(0.8, 0.9), eps=1e-6, maximize=True)),
]


@pytest.mark.parametrize("cls,kw", CASES, ids=lambda v: v.__name__ if isinstance(v, type) else
                         ",".join(f"{k}={x}" for k, x in v.items()))
def test_matches_eager_parameters_and_state(cls, kw):
    model = _model()
    ref = copy.deepcopy(model)
    opt, ref_opt = cls(model.parameters(), **kw), cls(ref.parameters(), **kw)
    step = compile_optimizer_step(opt.step, backend="eager")
    for i in range(4):
        _grads(model, i)
        _grads(ref, i)
        step()
        ref_opt.step()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=0, atol=0)   # same ATen ops: bit for bit
    for p, rp in zip(model.parameters(), ref.parameters()):
        s, rs = opt.state[p], ref_opt.state[rp]
        assert set(s) == set(rs)
        for k in s:
            torch.testing.assert_close(s[k], rs[k], rtol=0, atol=0)


@pytest.mark.parametrize("cls,kw", [(torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
                                    (torch.optim.Adam, dict(lr=0.01))])
def test_switching_between_compiled_and_eager_steps(cls, kw):
    model = _model()
    ref = copy.deepcopy(model)
    opt, ref_opt = cls(model.parameters(), **kw), cls(ref.parameters(), **kw)
    step = compile_optimizer_step(opt.step, backend="eager")
    for i, use_compiled in enumerate([True, False, True, True, False]):
        _grads(model, i)
        _grads(ref, i)
        (step if use_compiled else opt.step)()
        ref_opt.step()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=0, atol=0)
    # the state dict round-trips into a fresh optimizer that continues identically
    model2 = copy.deepcopy(model)
    opt2 = cls(model2.parameters(), **kw)
    opt2.load_state_dict(opt.state_dict())
    step2 = compile_optimizer_step(opt2.step, backend="eager")
    _grads(model2, 9)
    _grads(ref, 9)
    step2()
    ref_opt.step()
    for p, rp in zip(model2.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=0, atol=0)


@pytest.mark.filterwarnings("error::UserWarning")
def test_lr_change_recompiles_with_reason_and_stays_correct():
    with logs.testing.capture(level=logging.DEBUG) as events:
        model = _model()
        ref = copy.deepcopy(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=2, gamma=0.5)
        step = compile_optimizer_step(opt.step, backend="eager")
        for i in range(5):
            _grads(model, i)
            _grads(ref, i)
            step()
            ref_opt.step()
            sched.step()
            ref_sched.step()
        for p, rp in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p, rp, rtol=0, atol=0)
        reasons = [e.fields.get("reason") for e in events if e.name == "optimizer_recompile"]
        # step 2: momentum buffers now exist; steps 3 and 5: the scheduler halved lr
        assert reasons == ["changed: state layout", "changed: hyperparameters",
                           "changed: hyperparameters"]


def test_one_graph_for_all_parameters():
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    step = compile_optimizer_step(opt.step, backend=counting_backend)
    for i in range(3):
        _grads(model, i)
        step()
    assert len(graphs) == 1                       # one graph, reused across steps
    n = len(list(model.parameters()))
    placeholders = [x for x in graphs[0].graph.nodes if x.op == "placeholder"]
    assert len(placeholders) == 4 * n + 1         # params, grads, exp_avg, exp_avg_sq, scalars


def test_unsupported_options_fall_back_to_eager_step():
    with logs.testing.capture(level=logging.DEBUG) as events:
        model = _model()
        ref = copy.deepcopy(model)
        opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
        ref_opt = torch.optim.Adam(ref.parameters(), lr=torch.tensor(0.01))
        step = compile_optimizer_step(opt.step, backend="eager")
        _grads(model, 0)
        _grads(ref, 0)
        step()
        ref_opt.step()
        for p, rp in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p, rp, rtol=0, atol=0)
        assert any(e.name == "optimizer_step_fallback" and "tensor lr" in e.fields["reason"]
                   for e in events)


def test_closure_is_called_and_its_loss_returned():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = compile_optimizer_step(opt.step, backend="eager")
    x = torch.randn(3, 8)

    def closure():
        model.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        return loss

    before = closure().item()
    assert step(closure).item() == pytest.approx(before)
    assert model(x).pow(2).sum().item() < before


def test_state_never_aliases_a_gradient_even_if_the_backend_returns_an_input():
    """First SGD step: buf = clone(grad). A backend may legally return the grad itself for
    that output; the optimizer must still own a separate buffer (zero_grad zeroes grads)."""
    model = _model()
    ref = copy.deepcopy(model)
    n = len(list(model.parameters()))

    def aliasing_backend(gm, example_inputs):
        first = len(example_inputs) == 2 * n        # the first-step graph: no buffers yet

        def run(*args):
            outs = list(gm(*args))
            if first:                               # new buffers == grads: return the grads
                outs[:] = args[n:2 * n]
            return outs
        return run

    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    step = compile_optimizer_step(opt.step, backend=aliasing_backend)
    for i in range(3):
        for m, o in ((model, opt), (ref, ref_opt)):
            o.zero_grad(set_to_none=False)          # zeroes the grads in place
            m(torch.randn(5, 8, generator=torch.Generator().manual_seed(i))).sum().backward()
        step()
        ref_opt.step()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=0, atol=0)
        torch.testing.assert_close(opt.state[p]["momentum_buffer"],
                                   ref_opt.state[rp]["momentum_buffer"], rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["eager", "default"])
def test_adamw_step_updates_in_place_below_one_copy_of_the_parameters(backend):
    """The step writes parameters and state in place: its extra memory stays under one copy of
    the parameters (torch.optim's foreach AdamW allocates one for sqrt(exp_avg_sq)); with our
    backend each kernel stores into the inputs, so the step allocates (almost) nothing. The
    values match eager (exactly for the eager backend)."""
    from torch.profiler import ProfilerActivity, profile, record_function
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(6)])
    ref = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, foreach=True)
    step = compile_optimizer_step(opt.step, backend=backend)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    # profiled over two steps, the second measured: the profiler misses frees of blocks
    # allocated before it started (the state a step replaces)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for i in range(3):
            g = torch.Generator().manual_seed(i)
            for p, rp in zip(model.parameters(), ref.parameters()):
                p.grad = torch.randn(p.shape, generator=g)
                rp.grad = p.grad.clone()
            with record_function(f"step{i}"):
                step()
            ref_opt.step()
            if i == 0:
                state_before = [(opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"])
                                for p in model.parameters()]
    events = prof.profiler.kineto_results.events()
    start, end = next((e.start_ns(), e.end_ns()) for e in events if e.name() == "step2")
    live = peak = 0
    for t, nbytes in sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]"):
        if start <= t <= end:
            live += nbytes
            peak = max(peak, live)
    if backend == "eager":        # op by op: one parameter's temporaries at a time
        assert 0 < peak < param_bytes, (peak, param_bytes)
    else:                         # fused kernels store into the inputs: only the small scalars
        assert peak < param_bytes // 64, (peak, param_bytes)
    tol = {"rtol": 0, "atol": 0} if backend == "eager" else {"rtol": 1e-5, "atol": 1e-6}
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, **tol)
        torch.testing.assert_close(opt.state[p]["exp_avg_sq"], ref_opt.state[rp]["exp_avg_sq"], **tol)
    # the state tensors were updated in place: the same objects as after the first step
    for (m, v), p in zip(state_before, model.parameters()):
        assert opt.state[p]["exp_avg"] is m and opt.state[p]["exp_avg_sq"] is v


def _adamw_side_by_side(params, steps=3, **kw):
    """(params, ref, opt, ref_opt, step): `steps` AdamW steps through our compiled step and
    through torch.optim on copies of `params`, with the same random gradients each step."""
    ref = [nn.Parameter(p.detach().clone()) for p in params]
    opt = torch.optim.AdamW(params, foreach=True, **kw)
    ref_opt = torch.optim.AdamW(ref, foreach=True, **kw)
    step = compile_optimizer_step(opt.step)
    for i in range(steps):
        g = torch.Generator().manual_seed(i)
        for p, rp in zip(params, ref):
            p.grad = torch.randn(p.shape, generator=g)
            rp.grad = p.grad.clone()
        step()
        ref_opt.step()
    return params, ref, opt, ref_opt, step


def _step_code(step) -> str:
    """The output code of the compiled step's one graph ('' when our backend did not compile it)."""
    from tracetorch.compiler.backend.compile import CompiledGraph
    (_, compiled), = step.cache.values()
    return compiled.compiled.code if isinstance(getattr(compiled, "compiled", None), CompiledGraph) else ""


def test_same_shaped_parameters_update_in_one_kernel():
    """The per-parameter updates share nothing but their loops: the optimizer's graph is
    compiled with backend.fuse_independent, so same-shaped parameters (biases, norm weights)
    are updated by one kernel, in place, and the values still match eager's."""
    torch.manual_seed(0)
    shapes = [(64,)] * 6 + [(16, 8)] * 3 + [(5,)]
    params, ref, _, _, step = _adamw_side_by_side([nn.Parameter(torch.randn(s)) for s in shapes], lr=1e-2)
    for p, rp in zip(params, ref):
        torch.testing.assert_close(p, rp, rtol=1e-5, atol=1e-6)
    code = _step_code(step)
    assert code.count('extern "C" int ') == 3, code       # one kernel per distinct shape
    assert code.count("needs no copy") == 3 * len(shapes)  # parameter, exp_avg, exp_avg_sq in place


def test_step_counters_are_views_of_one_tensor_and_survive_a_state_dict_round_trip(tmp_path):
    """Adam's per-parameter step counters become views of one CPU tensor (one add and one read
    per step instead of a foreach add and a stack); their values stay torch.optim's through
    compiled steps, eager steps, torch.save/torch.load and load_state_dict."""
    model = _model()
    ref = copy.deepcopy(model)
    opt, ref_opt = torch.optim.Adam(model.parameters(), lr=0.01), torch.optim.Adam(ref.parameters(), lr=0.01)
    step = compile_optimizer_step(opt.step, backend="eager")
    with logs.testing.capture(level=logging.DEBUG) as events:
        for i, compiled in enumerate([True, True, False, True]):
            _grads(model, i)
            _grads(ref, i)
            (step if compiled else opt.step)()
            ref_opt.step()
    shared = [e for e in events if e.name == "optimizer_step_counters_shared"]
    assert len(shared) == 1 and shared[0].fields["renewed"] is False
    steps = [opt.state[p]["step"] for p in model.parameters()]
    assert len({s.untyped_storage().data_ptr() for s in steps}) == 1
    for p, rp in zip(model.parameters(), ref.parameters()):
        assert opt.state[p]["step"].item() == ref_opt.state[rp]["step"].item() == 4.0
        assert opt.state[p]["step"].dtype == ref_opt.state[rp]["step"].dtype
    torch.save(opt.state_dict(), tmp_path / "opt.pt")
    opt.load_state_dict(torch.load(tmp_path / "opt.pt"))
    with logs.testing.capture(level=logging.DEBUG) as events:
        for i in range(4, 6):
            _grads(model, i)
            _grads(ref, i)
            step()
            ref_opt.step()
    assert [e.fields["renewed"] for e in events if e.name == "optimizer_step_counters_shared"] == [True]
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=0, atol=0)
        assert opt.state[p]["step"].item() == ref_opt.state[rp]["step"].item() == 6.0


def test_more_same_shaped_parameters_than_one_kernel_holds_allocate_nothing():
    """Past `max_fusion_size` nodes the per-parameter updates spread over several kernels; each
    parameter's chain must stay in one kernel, storing its new values straight into the
    parameter and its state. Before, every write-back was an identity copy realized after the
    whole computation, in kernels of its own: each new exp_avg was stored to a temporary and
    copied into the state by a second kernel (ResNet-50's 161 parameters: 162 temporaries per
    step)."""
    from tracetorch.compiler import config
    torch.manual_seed(0)
    with config.patch(**{"backend.max_fusion_size": 8}):
        params, ref, opt, ref_opt, step = _adamw_side_by_side(
            [nn.Parameter(torch.randn(64)) for _ in range(30)], lr=1e-2, weight_decay=0.1)
    for p, rp in zip(params, ref):
        torch.testing.assert_close(p, rp, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt.state[p]["exp_avg"], ref_opt.state[rp]["exp_avg"], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt.state[p]["exp_avg_sq"], ref_opt.state[rp]["exp_avg_sq"],
                                   rtol=1e-5, atol=1e-6)
    code = _step_code(step)
    assert code, "the step was not compiled by our backend"
    assert "empty_strided(" not in code, code                # no temporary
    assert code.count("needs no copy") == 3 * len(params)    # parameter, exp_avg, exp_avg_sq in place


@pytest.mark.parametrize("with_closure", [False, True])
def test_sparse_gradient_falls_back_before_anything_is_updated(with_closure):
    """A sparse gradient (an nn.Embedding(sparse=True)) has no compiled step: the eager step runs
    for every parameter, also when the closure is what produced the gradients (it runs once)."""
    def build():
        torch.manual_seed(0)
        return nn.ModuleDict({"emb": nn.Embedding(10, 4, sparse=True), "lin": nn.Linear(4, 2)})

    def loss_of(m):
        return m["lin"](m["emb"](torch.tensor([1, 3, 3]))).pow(2).sum()

    model, ref = build(), build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    step = compile_optimizer_step(opt.step, backend="eager")
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = loss_of(model)
        loss.backward()
        return loss

    with logs.testing.capture(level=logging.DEBUG) as events:
        if with_closure:
            loss = step(closure)
            assert calls == [1] and loss is not None
        else:
            loss_of(model).backward()
            step()
    loss_of(ref).backward()
    ref_opt.step()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=0, atol=0)
    assert any(e.name == "optimizer_step_fallback" and "sparse gradient" in e.fields["reason"]
               for e in events)


def test_the_update_is_recorded_without_tracing_tensors(monkeypatch):
    """The update is recorded symbolically (the aot stage's fake-tensor trace is the only one):
    recording never runs an op on a tensor, and the recorded graph run on real tensors writes
    what eager's step writes."""
    from tracetorch.compiler import optim as optim_mod
    from torch.fx.experimental import proxy_tensor

    def no_make_fx(*a, **k):
        raise AssertionError("the optimizer update was traced with make_fx")
    monkeypatch.setattr(proxy_tensor, "make_fx", no_make_fx)
    model = _model()
    ref = copy.deepcopy(model)
    params, ref_params = list(model.parameters()), list(ref.parameters())
    for seed in (1, 2):
        _grads(model, seed)
        _grads(ref, seed)
    grads = [p.grad for p in params]
    bufs = [torch.randn_like(p) for p in params]
    ref_bufs = [b.clone() for b in bufs]

    def fn(params, grads, bufs):
        return optim_mod._sgd_update(params, grads, bufs, has_buf=(True,) * len(params), lr=0.1,
                                     momentum=0.9, dampening=0.0, weight_decay=0.0,
                                     nesterov=False, maximize=False)
    gm = optim_mod._record(fn, [params, grads, bufs])
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 3 * len(params)
    assert all(isinstance(n.target, torch._ops.OpOverload)
               for n in gm.graph.nodes if n.op == "call_function")
    with torch.no_grad():
        gm(*[p.detach() for p in params], *grads, *bufs)
        for p, g, b in zip(ref_params, [p.grad for p in ref_params], ref_bufs):
            b.mul_(0.9).add_(g)
            p.add_(b, alpha=-0.1)
    for a, b in zip(params + bufs, ref_params + ref_bufs):
        torch.testing.assert_close(a, b)
