"""Combined launches (codegen/triton_combo.py): consecutive independent pointwise Triton kernels
run as one kernel whose programs are split between them. Every case runs the compiled graph on
copies of the inputs and compares outputs and mutated inputs with eager (CUDA tensors where there
is a GPU, else the Triton interpreter on CPU tensors); fusion is turned off where a case needs
separate kernels to combine or keep apart."""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import logging  # noqa: E402

import pytest  # noqa: E402

from tracetorch import logs  # noqa: E402
from tracetorch.compiler import config  # noqa: E402
from tracetorch.compiler.backend import ir  # noqa: E402
from tracetorch.compiler.backend.codegen.common import ComboPart, GeneratedKernel  # noqa: E402
from tracetorch.compiler.backend.codegen.triton_combo import combo_runs  # noqa: E402
from tests.compiler.backend.cpp_test_utils import check_with_mutations, compile_fn, compiled_graph  # noqa: E402

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def optimizer_like(p, m, g, q):       # two parameters of different shapes, updated in place
    m.lerp_(g, 0.1)
    p.add_(m * -0.01)
    q.mul_(0.5)
    return None


def reuses_storage(x, w, y):          # c's output takes the storage of x @ w, which b reads
    a = x @ w
    b = a.t() * 2
    c = y + 3
    return b, c


def shared_input(x, y, s):            # both read s (a scale): reading together is fine
    return x * s, y * s


CASES = {
    optimizer_like: [(64, 32), (64, 32), (64, 32), (100,)],
    reuses_storage: [(16, 16), (16, 16), (16, 16)],
    shared_input: [(64, 32), (33,), (1,)],
}


def _run(fn, fusion):
    shapes = CASES[fn]

    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(s, generator=g).to(DEVICE) for s in shapes]
    # (no on-disk cache: a cached graph is not generated again, so its decisions are not logged)
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.combo_kernels": True, "backend.fusion": fusion,
                         "backend.cache_enabled": False}), logs.testing.capture(level=logging.DEBUG) as events:
        rt = compile_fn(fn, make(0))
        code = compiled_graph(rt).code
        check_with_mutations(rt, fn, make, range(2))
    combined = [e.fields for e in events if e.name == "kernels_combined"]
    return code, combined


def test_independent_kernels_share_one_launch():
    code, combined = _run(optimizer_like, fusion=True)
    assert len(combined) == 1 and len(combined[0]["parts"]) == 2, code
    launches = [ln.strip() for ln in code.split("def call(")[1].splitlines()
                if ln.strip().startswith(("kernel", "combo_"))]
    assert len(launches) == 1 and launches[0].startswith("combo_"), launches
    assert "pid = tl.program_id(0)" in code and "PID_BASE" in code


def test_a_kernel_writing_storage_an_earlier_one_reads_is_not_combined_with_it():
    """The memory plan gives c's output the storage of x @ w once b has read it: in one launch b's
    programs could read what c's programs already wrote, so they stay two launches."""
    code, combined = _run(reuses_storage, fusion=True)
    call = code.split("def call(")[1]
    assert "# reuse" in call, call                # the case this test is about did arise
    assert combined == [] and "combo_" not in call, call


def _group(name, inputs, outputs):
    return ir.KernelGroup(name=name, nodes=[], ranges=[4], reduction_ranges=[], kinds={}, inputs=inputs,
                          outputs=outputs, internal=[], size_symbols=[], layouts={})


def _kernel(name, params, written):
    return GeneratedKernel(name=name, source="", language="triton", call_args=params,
                           combo_part=ComboPart(source="", params=params, written=written, xnumel=4,
                                                interpret=True, ptr_types=("*fp32",) * len(params)))


def test_runs_stop_at_a_kernel_that_reads_or_overwrites_what_an_earlier_part_touches():
    """combo_runs on hand-made steps: a reader of an earlier part's output, a writer into an
    earlier part's input (by storage, through the memory plan) and a non-kernel step each end a
    run; kernels that only share inputs stay together."""
    from types import SimpleNamespace
    steps = [_group("k0", ["x"], ["a"]), _group("k1", ["x"], ["b"]),     # share input x: one run
             _group("k2", ["a"], ["c"]),                                   # reads k0's output
             _group("k3", ["y"], ["d"]),
             _group("k4", ["z"], ["e"]),                                   # e placed in y's storage
             SimpleNamespace(name="mm"),
             _group("k5", ["z"], ["f"]), _group("k6", ["w"], ["g"])]
    kernels = {g.name: _kernel(g.name, list(g.inputs) + list(g.outputs), list(g.outputs))
               for g in steps if isinstance(g, ir.KernelGroup)}
    plan = SimpleNamespace(allocs={4: [("e", "y")]})
    assert combo_runs(steps, kernels, plan) == {0: [0, 1], 2: [2, 3], 6: [6, 7]}


def test_kernels_reading_one_input_share_a_launch():
    code, combined = _run(shared_input, fusion=False)
    assert len(combined) == 1 and len(combined[0]["parts"]) == 2, code


def test_the_compiled_optimizer_step_updates_every_parameter_in_one_launch():
    """An optimizer step over parameters of four shapes: one combined kernel, values as eager."""
    import copy

    import torch.nn as nn
    from tracetorch.compiler.optim import compile_optimizer_step
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.Flatten(),
                          nn.Linear(8 * 6 * 6, 10), nn.LayerNorm(10)).to(DEVICE)
    ref = copy.deepcopy(model)
    opt, ref_opt = torch.optim.AdamW(model.parameters(), lr=1e-2), torch.optim.AdamW(ref.parameters(), lr=1e-2)
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.cache_enabled": False}), \
            logs.testing.capture(level=logging.DEBUG) as events:
        step = compile_optimizer_step(opt.step)
        for i in range(3):
            g = torch.Generator().manual_seed(i)      # the same gradients for both (no backward
            for p, rp in zip(model.parameters(), ref.parameters()):   # whose rounding differs)
                p.grad = torch.randn(p.shape, generator=g).to(DEVICE)
                rp.grad = p.grad.clone()
            step()
            ref_opt.step()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(opt.state[p]["exp_avg_sq"], ref_opt.state[rp]["exp_avg_sq"], rtol=1e-5, atol=1e-6)
    combined = [e.fields["parts"] for e in events if e.name == "kernels_combined"]
    assert len(combined) == 1 and len(combined[0]) >= 3, combined


def _tiny_hf(name):
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    if name == "gpt2":
        return GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=128, n_positions=32))
    return BertForMaskedLM(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, vocab_size=128, max_position_embeddings=32))


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_adamw_over_a_transformers_models_parameters_matches_eager(name):
    """Code nobody here wrote: the parameter set of a Hugging Face model (embeddings, tied
    weights, layer norms, biases of several shapes), updated by the compiled AdamW step in
    combined launches; parameters and every state tensor match torch.optim's after 3 steps."""
    import copy
    pytest.importorskip("transformers")
    from tracetorch.compiler.optim import compile_optimizer_step
    model = _tiny_hf(name).to(DEVICE)
    ref = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1)
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.cache_enabled": False}), \
            logs.testing.capture(level=logging.DEBUG) as events:
        step = compile_optimizer_step(opt.step)
        for i in range(3):
            g = torch.Generator().manual_seed(i)
            for p, rp in zip(model.parameters(), ref.parameters()):
                p.grad = torch.randn(p.shape, generator=g).to(DEVICE)
                rp.grad = p.grad.clone()
            step()
            ref_opt.step()
    for p, rp in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, rp, rtol=1e-5, atol=1e-6)
        for key in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(opt.state[p][key], ref_opt.state[rp][key], rtol=1e-5, atol=1e-6)
    assert any(len(e.fields["parts"]) >= 2 for e in events if e.name == "kernels_combined")


def transposed_products_and_a_write(a, b, buf):   # two copies of ATen results, then an input write
    x = torch.mm(a, b)
    y = torch.mm(b, a)
    buf.mul_(3)
    return x.t().contiguous(), y.t().contiguous()


def test_copies_of_aten_results_share_a_launch_beside_an_input_write():
    """Without backend.combo_kernels: copies of ATen results into graph outputs move together
    (scheduler `_group_copies`) and share one launch; the memory plan frees what they read only
    after the whole run (the second copy took the first one's source storage, which kept them
    apart). Outputs and the written input equal eager's."""
    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(s, generator=g).to(DEVICE) for s in [(24, 24), (24, 24), (40,)]]
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.cache_enabled": False}), \
            logs.testing.capture(level=logging.DEBUG) as events:
        rt = compile_fn(transposed_products_and_a_write, make(0))
        check_with_mutations(rt, transposed_products_and_a_write, make, range(2))
    combined = [e.fields for e in events if e.name == "kernels_combined"]
    assert len(combined) == 1 and len(combined[0]["parts"]) == 2, compiled_graph(rt).code


def bias_and_norm_gradients(g1, g2, x):     # a backward's column sums over 4096 rows: split
    return g1.sum(0), (g1 * x).sum(0), g2.sum(0), g1 * 2


def test_second_passes_of_split_reductions_share_a_launch_at_the_end():
    """Without backend.combo_kernels: the second passes of split column sums (a training
    backward's bias and norm weight gradients), whose results only leave the graph, move to the
    end (scheduler `_final_pass_bytes`) and run as persistent reduction parts of one combined
    launch; their values equal eager's (small integers: the sums are exact in any order)."""
    shapes = [(4096, 256), (4096, 320), (4096, 256)]

    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randint(-4, 5, s, generator=g).float().to(DEVICE) for s in shapes]
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.cache_enabled": False}), \
            logs.testing.capture(level=logging.DEBUG) as events:
        rt = compile_fn(bias_and_norm_gradients, make(0))
        check_with_mutations(rt, bias_and_norm_gradients, make, range(2))
    splits = [e for e in events if e.name == "split_reduction"]
    combined = [e.fields for e in events if e.name == "kernels_combined"]
    code = compiled_graph(rt).code
    assert len(splits) >= 2, code
    assert len(combined) == 1 and len(combined[0]["parts"]) >= 2, code
    assert "RBLOCK: tl.constexpr, PID_BASE: tl.constexpr" in code
