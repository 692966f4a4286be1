"""Models for the debug tests: long chains of cheap ops with exactly one relu deep inside."""
import torch


class ReluDeep(torch.nn.Module):
    """`blocks` blocks of 7 ops; relu only in block `relu_at`: 7 * blocks + 2 graph nodes after
    aot (the graph the backend stage sees), 51 by default."""

    def __init__(self, blocks: int = 7, relu_at: int = 4, width: int = 8):
        super().__init__()
        self.blocks, self.relu_at = blocks, relu_at
        self.w = torch.nn.Parameter(torch.randn(width, width) * 0.3)

    def forward(self, x):
        for i in range(self.blocks):
            x = torch.sin(x) * 0.5 + x @ self.w
            if i == self.relu_at:
                x = torch.relu(x)
            x = x / (1 + x.abs())
        return x.sum(1)


def relu_chain(x, w, blocks: int = 7, relu_at: int = 4):
    """The same computation as a plain function (for graphs made with torch.fx directly)."""
    for i in range(blocks):
        x = torch.sin(x) * 0.5 + torch.mm(x, w)
        if i == relu_at:
            x = torch.relu(x)
        x = x / (1 + x.abs())
    return x.sum(1)
