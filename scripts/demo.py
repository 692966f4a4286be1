"""The demo program behind `tracetui --demo`: a tiny transformer-style MLP block compiled with
compiler.compile, with one graph break (a print in forward), one recompile (a second input
rank) and fused elementwise kernels (gelu * 0.5 + sigmoid).

    TRACE_COMPILE_DEBUG=1 python scripts/demo.py     # then: tracetui (opens the newest run)
"""

import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracetorch import compiler  # noqa: E402


class TinyBlock(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.fc1(self.norm(x))
        h = F.gelu(h) * 0.5 + h.sigmoid()  # elementwise ops: fused into one kernel
        print("demo: hidden shape", tuple(h.shape))  # a side effect: graph break here
        y = self.fc2(h)
        return torch.softmax(x + y, dim=-1)


def main() -> int:
    torch.manual_seed(0)
    model = TinyBlock().eval()
    compiled = compiler.compile(model)
    with torch.no_grad():
        for shape in ((4, 32), (2, 8, 32)):  # the second rank fails a guard: recompile
            x = torch.randn(*shape)
            got, want = compiled(x), model(x)
            if not torch.allclose(got, want, atol=1e-5, rtol=1e-4):
                print(f"demo: result differs from eager for input {shape}", file=sys.stderr)
                return 1
    print("demo: compiled results match eager")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
