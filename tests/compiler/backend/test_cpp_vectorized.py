"""The C++ code generator's loops vectorise: a fused pointwise kernel with a NaN-aware select
(relu) and transcendental calls must call glibc's vector math (libmvec `_ZGV*` symbols), not the
scalar functions one element at a time. Structural (symbols of the built library), not timed;
its speed is measured by scripts/bench.py --device cpu. The result is compared with eager too."""
import subprocess

import torch

from tracetorch import compiler
from tracetorch.compiler.backend.runtime import cpp_build


def chain(x, y):
    return torch.sigmoid(x * 1.5 + y).sin() * y - x.relu()


def test_pointwise_chain_calls_vector_math(backend_cache_dir, monkeypatch):
    built = []
    real_build = cpp_build.build
    monkeypatch.setattr(cpp_build, "build", lambda source: built.append(real_build(source)) or built[-1])
    x, y = torch.randn(4096), torch.randn(4096)
    x[::7] = float("nan")
    compiler.reset()
    torch.testing.assert_close(compiler.compile(chain)(x, y), chain(x, y), equal_nan=True)
    assert built, "no C++ library was built for the graph"
    symbols = subprocess.run(["nm", "-D", built[-1]], capture_output=True, text=True, check=True).stdout
    # float32 math runs in double (within half an ulp, as accurate as ATen's): the vector
    # versions called are libmvec's double ones (_ZGV?N?v_sin)
    assert any(line.split()[-1].startswith("_ZGV") and "v_sin" in line for line in symbols.splitlines()), symbols
