"""compiler/native_checks.py: the native and the Python comparison of many tensors' metadata give
the same answers, and the compiled code that uses them still notices every change."""
import pytest
import torch

from tracetorch import compiler
from tracetorch.compiler import config, native_checks
from tracetorch.compiler.native_checks import TensorLayout


def _tensors():
    return [torch.nn.Parameter(torch.randn(4, 6)), torch.randn(3, 5).t(), torch.zeros(2, dtype=torch.bfloat16),
            torch.randn(2, 3, 4).permute(2, 0, 1), torch.tensor(1.5)]


def _changes():
    """(what, a function making the change on a fresh list of tensors) for every field checked."""
    def inplace_transpose(ts):
        with torch.no_grad():
            ts[1].t_()

    def data_swapped(ts):
        ts[0].data = torch.randn(6, 4)

    def dtype(ts):
        ts[2] = ts[2].float()

    def requires_grad(ts):
        ts[0].requires_grad_(False)

    def stride_only(ts):
        ts[3] = ts[3].contiguous()

    def one_more(ts):
        ts.append(torch.randn(1))

    def not_a_tensor(ts):
        ts[4] = 1.5

    def sparse(ts):
        ts[2] = torch.zeros(2).to_sparse()
    return [inplace_transpose, data_swapped, dtype, requires_grad, stride_only, one_more, not_a_tensor, sparse]


@pytest.fixture(scope="module")
def native_loaded():
    loaded = native_checks.wait_until_loaded()
    assert loaded, f"the extension did not load: status {native_checks._NATIVE.status}"
    return native_checks.native()


@pytest.mark.parametrize("change", _changes(), ids=lambda f: f.__name__)
def test_native_and_python_agree_on_every_change(native_loaded, change):
    ts = _tensors()
    layout = TensorLayout.of(ts)
    assert layout.matches(ts)                 # Python answers, and records for the extension
    assert layout.record is not None
    assert native_loaded.check(ts, layout.record)
    change(ts)
    python = TensorLayout(layout.metas, layout.strides)      # no record: Python reads only
    assert not python.matches(ts)
    assert not native_loaded.check(ts, layout.record)
    assert not layout.matches(ts)


def test_a_native_no_is_confirmed_from_python(native_loaded):
    # a record that disagrees with the metadata (as a bug in the extension would) cannot make a
    # check fail: the Python reads decide
    ts = _tensors()
    layout = TensorLayout.of(ts)
    assert layout.matches(ts)
    layout.record = native_loaded.record([torch.randn(9)])
    assert layout.matches(ts)


def test_without_the_extension_the_python_reads_answer(monkeypatch):
    monkeypatch.setattr(native_checks._NATIVE, "module", None)
    monkeypatch.setattr(native_checks._NATIVE, "status", "unavailable")
    ts = _tensors()
    layout = TensorLayout.of(ts)
    assert layout.matches(ts) and layout.record is None
    with torch.no_grad():
        ts[1].t_()
    assert not layout.matches(ts)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)
        self.register_buffer("scale", torch.ones(6))

    def forward(self, x):
        return self.fc(x) * self.scale


@pytest.mark.parametrize("native", [True, False])
def test_guards_notice_a_parameter_changed_in_place(native, native_loaded):
    # the guards' static tensors go through TensorLayout: an in-place change of a parameter's
    # layout (the same object, so no module mutation) must still recompile, and the result match eager
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(3, 6)
    with config.patch(**{"backend.native_checks": native}):
        fn = compiler.compile(net)
        with torch.no_grad():
            for _ in range(3):
                torch.testing.assert_close(fn(x), net(x))
            net.fc.weight.data = net.fc.weight.data.t().contiguous().t()      # same values, other strides
            net.scale.data = net.scale.data.double()                           # another dtype
            torch.testing.assert_close(fn(x), net(x))


def test_compiled_optimizer_step_notices_new_state_layout(native_loaded):
    # the optimizer step's input check goes through TensorLayout: replaced state with another
    # layout must not be read as the old one (differential against eager AdamW)
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 4)
    ours = torch.nn.Linear(4, 4)
    ours.load_state_dict(ref.state_dict())
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=0.1)
    opt = torch.optim.AdamW(ours.parameters(), lr=0.1)
    step = compiler.compile(opt.step)
    x = torch.randn(8, 4)
    for i in range(4):
        for model, o in ((ref, opt_ref), (ours, None)):
            model(x).square().sum().backward()
        opt_ref.step()
        step()
        if i == 1:      # the same values, transposed layout, in both
            for o in (opt_ref, opt):
                w = o.param_groups[0]["params"][0]
                o.state[w]["exp_avg"] = o.state[w]["exp_avg"].t().contiguous().t()
        opt_ref.zero_grad()
        opt.zero_grad()
        for a, b in zip(ref.parameters(), ours.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_dict_entries_native_and_python_agree(native_loaded, monkeypatch):
    # the guards' module fingerprint reads module dicts through DictEntries: another object
    # under a key, or a key gone, is a change either way
    import collections

    from tracetorch.compiler.native_checks import DictEntries
    a, b = object(), object()
    plain, ordered = {"w": a, "x": b}, collections.OrderedDict(y=a)
    entries = DictEntries([plain, plain, ordered], ["w", "x", "y"], [a, b, a])
    for change in (lambda: plain.__setitem__("x", a), lambda: ordered.pop("y"), plain.clear):
        assert native_loaded.items_are(entries.dicts, entries.keys, entries.expected) and entries.same()
        change()
        assert not native_loaded.items_are(entries.dicts, entries.keys, entries.expected)
        assert not entries.same()
        with monkeypatch.context() as m:          # the Python reads alone
            m.setattr(native_checks._NATIVE, "module", None)
            assert not entries.same()
        plain.update(w=a, x=b)
        ordered["y"] = a


def test_the_installed_package_carries_the_extension_source():
    import os
    assert os.path.exists(native_checks._SOURCE)
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "setup.py")) as f:
        assert "native_checks.cpp" in f.read()


def test_a_failed_build_says_why_under_the_compile_that_started_it(monkeypatch, tmp_path):
    # no C++ compiler (here: a command that fails): a warning naming the failure, logged with the
    # compile id of the compile whose first check started the background build; checks answer
    # from Python
    import logging

    from tracetorch import logs
    state = native_checks._Native()
    monkeypatch.setattr(native_checks, "_NATIVE", state)
    monkeypatch.setattr(native_checks, "library_path", lambda: str(tmp_path / "missing.so"))
    monkeypatch.setattr(native_checks, "_compile_command", lambda source, output: ["false"])
    with logs.testing.capture(names={"native_checks_unavailable"}, level=logging.WARNING) as events:
        with logs.compile_context(7, 0):
            assert native_checks.native() is None
        assert not native_checks.wait_until_loaded(timeout=60)
    assert state.status == "unavailable"
    (event,) = events
    assert str(event.compile_id) == "7/0"
    assert "the C++ compiler failed" in event.fields["error"]
    ts = _tensors()
    layout = TensorLayout.of(ts)
    assert layout.matches(ts) and layout.record is None
