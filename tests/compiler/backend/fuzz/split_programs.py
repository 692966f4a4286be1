"""Random programs around split reductions: a training backward's bias and norm-weight gradients.

The main generator (generator.py) draws small tensors, too small for the Triton code generator to
split a reduction (lowering/split_reduction.py: at least 4096 rows, or 2**20 elements). These
programs are large enough: a pointwise chain over [B, S, D] activations (the dropout and GELU
backward products), then column sums over the B * S tokens (flattened or not, weighted, of an
input), a column max, the product itself and a matmul of it. That exercises what only split
reductions reach: their partial sums fused into the product (fusion._nestings), the second
passes moved to the end of the graph and combined into one launch (scheduler._final_pass_bytes,
codegen/triton_combo.py), and Triton's re-nesting check (fusion._walks_one_way).

Values are small integers, halves and quarters, kept small by the steps (no squaring: seed 139
of an earlier version reached 1e8, where float32 sums round by order), so every sum is exact in
float32 whatever the order: any difference from eager is a wrong result, not rounding.
"""
from __future__ import annotations

import dataclasses
import random

import torch

SHAPES = [(4, 1024, 256), (2, 2048, 320), (8, 512, 256), (4, 1024, 384)]
#: the pointwise steps of the chain: name -> y, b, m -> new y
STEPS = {
    "mul": lambda y, b, m: y * b,
    "add": lambda y, b, m: y + b * 0.5,
    "mask": lambda y, b, m: torch.where(m, y, torch.zeros_like(y)) * 1.25,
    "relu": lambda y, b, m: torch.relu(y - 1),
    "abs": lambda y, b, m: torch.abs(y) - b,
}
#: the outputs: name -> (y, a, b, w) -> tensor
OUTPUTS = {
    "y": lambda y, a, b, w: y,
    "flat_sum": lambda y, a, b, w: y.reshape(-1, y.shape[-1]).sum(0),
    "token_sum": lambda y, a, b, w: y.sum((0, 1)),
    "weighted_sum": lambda y, a, b, w: (y * a).reshape(-1, y.shape[-1]).sum(0),
    "input_sum": lambda y, a, b, w: b.reshape(-1, b.shape[-1]).sum(0),
    "column_max": lambda y, a, b, w: y.reshape(-1, y.shape[-1]).amax(0),
    "matmul": lambda y, a, b, w: y.reshape(-1, y.shape[-1]) @ w,
}


@dataclasses.dataclass
class SplitProgram:
    seed: int
    shape: tuple
    steps: list
    outputs: list

    def __call__(self, a, b, m, w):
        y = a
        for step in self.steps:
            y = STEPS[step](y, b, m)
        return tuple(OUTPUTS[o](y, a, b, w) for o in self.outputs)

    def as_function(self):
        def fn(a, b, m, w):
            return self(a, b, m, w)
        return fn

    def inputs(self) -> list:
        g = torch.Generator().manual_seed(self.seed)
        B, S, D = self.shape
        return [torch.randint(-3, 4, (B, S, D), generator=g).float(),
                torch.randint(-3, 4, (B, S, D), generator=g).float() * 0.5,
                torch.rand(B, S, D, generator=g) > 0.3,
                torch.randint(-3, 4, (D, 16), generator=g).float()]

    def source(self) -> str:
        lines = ["def fn(a, b, m, w):   # shapes: a, b, m " + f"{list(self.shape)}, w [{self.shape[2]}, 16]",
                 "    y = a"]
        lines += [f"    y = STEPS[{s!r}](y, b, m)" for s in self.steps]
        lines.append("    return (" + ", ".join(f"OUTPUTS[{o!r}](y, a, b, w)" for o in self.outputs) + ",)")
        return "\n".join(lines)


def generate(seed: int) -> SplitProgram:
    rng = random.Random(seed)
    return SplitProgram(seed=seed, shape=rng.choice(SHAPES),
                        steps=[rng.choice(sorted(STEPS)) for _ in range(rng.randint(1, 3))],
                        outputs=rng.sample(sorted(OUTPUTS), rng.randint(2, 4)))


def check(program: SplitProgram) -> str:
    """'' when the program compiled for the Triton code generator (CPU tensors: its interpreter)
    returns eager's outputs exactly, else what differed."""
    from tracetorch.compiler import config
    from tests.compiler.backend.cpp_test_utils import compile_fn
    inputs = program.inputs()
    with config.patch(**{"backend.cpu_codegen": "triton", "backend.cache_enabled": False}):
        try:
            got = compile_fn(program.as_function(), inputs)(*inputs)
        except Exception as e:       # a crash is a finding, reported with the program
            return f"crash: {type(e).__name__}: {e}"[:300]
    for i, (g, w) in enumerate(zip(got, program(*inputs))):
        if g.shape != w.shape or g.dtype != w.dtype:
            return (f"output {i} ({program.outputs[i]}): {tuple(g.shape)} {g.dtype} "
                    f"vs eager's {tuple(w.shape)} {w.dtype}")
        if not torch.equal(g, w):
            return f"output {i} ({program.outputs[i]}): max difference {float((g - w).abs().max())}"
    return ""
