"""Input mutations stored in place (scheduler/memory.py): the kernel that computes a mutated
input's new value stores it straight into the input, and the aot stage's write-back copy_
becomes a no-op, where that is safe; elsewhere the copy stays. Every case runs the compiled
graph on copies of the inputs and compares outputs AND the mutated inputs with eager, with the
C++ code generator and with the Triton one (CUDA tensors where there is a GPU, else the
interpreter on CPU tensors)."""
import os

import torch

if not torch.cuda.is_available():   # before triton is imported (see tests/conftest.py)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from tracetorch.compiler import config  # noqa: E402
from tests.compiler.backend.cpp_test_utils import check_with_mutations, compile_fn, compiled_graph  # noqa: E402

IN_PLACE = "needs no copy"
COPY = "# fallback: input mutation write-back"


def lerp_then_add(x, m, g):          # an optimizer-like update: both inputs written in place
    m.lerp_(g, 0.1)
    x.add_(m * 0.5)
    return None


def mutate_and_return_other(x, y):
    x.add_(1)
    return y * 2


def read_after_mutation(x, y):       # x's old value is read after the kernel writing it
    z = x + 1
    x.copy_(z * y)
    return z.sum() + x.sum()


def mutated_input_returned(x, y):    # the output is its own buffer (stored by the same kernel)
    x.add_(y)
    return x


def transposed_write(x, y):          # new value computed at another element: not in place
    x.copy_(x.t() + y)
    return None


def running_statistic(x, rm):         # batch norm's running mean: stored by the reduction kernel
    rm.mul_(0.9).add_(x.mean(0) * 0.1)
    return x * 2


def statistic_reads_it_in_the_loop(x, rm):   # rm is read inside the reduction's loop: copy
    rm.copy_((x * rm[:, None]).sum(0))
    return None


CASES = [(lerp_then_add, 3, 2, 0), (mutate_and_return_other, 2, 1, 0),
         (read_after_mutation, 2, 0, 1), (mutated_input_returned, 2, 1, 0),
         (transposed_write, 2, 0, 1), (running_statistic, 2, 1, 0),
         (statistic_reads_it_in_the_loop, 2, 0, 1)]


def _run(fn, n_inputs, in_place, copies, codegen):
    device = "cuda" if codegen == "triton" and torch.cuda.is_available() else "cpu"

    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(16, 16, generator=g).to(device) for _ in range(n_inputs)]
    with config.patch(**{"backend.cpu_codegen": codegen}):
        rt = compile_fn(fn, make(0))
        code = compiled_graph(rt).code
        check_with_mutations(rt, fn, make, range(3))
    assert code.count(IN_PLACE) == in_place, code
    assert code.count(COPY) == copies, code
    return rt


@pytest.mark.parametrize("fn,n_inputs,in_place,copies", CASES, ids=[c[0].__name__ for c in CASES])
def test_input_mutation_cpp(fn, n_inputs, in_place, copies):
    _run(fn, n_inputs, in_place, copies, "cpp")


@pytest.mark.parametrize("fn,n_inputs,in_place,copies", CASES, ids=[c[0].__name__ for c in CASES])
def test_input_mutation_triton(fn, n_inputs, in_place, copies):
    pytest.importorskip("triton")
    _run(fn, n_inputs, in_place, copies, "triton")
