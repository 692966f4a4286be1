"""The demo program behind `tracetui --demo`: a small GPT-style language model (token and
position embeddings, two pre-norm transformer blocks of causal self-attention and a GELU MLP, a
tied output head) compiled with compiler.compile. It shows each kind of event once:

- a graph break: a print() in the model's forward, after the blocks;
- a recompile: a second batch with another sequence length (a size guard fails);
- fused kernels: layer norms, GELU MLP epilogues, softmax, residual adds.

    python -m tracetorch.debug.demo                              # just run it
    TRACE_COMPILE_DEBUG=1 python -m tracetorch.debug.demo        # then: tracetui
"""
from __future__ import annotations

import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from tracetorch import compiler


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 128, d: int = 64, heads: int = 4, layers: int = 2,
                 max_len: int = 64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        print("demo: hidden shape", tuple(x.shape))          # a side effect: graph break here
        return self.ln(x) @ self.tok.weight.t()               # logits (tied output head)


def main() -> int:
    torch.manual_seed(0)
    model = TinyGPT().eval()
    compiled = compiler.compile(model)
    with torch.no_grad():
        for length in (16, 24):          # the second length fails a size guard: recompile
            ids = torch.randint(0, 128, (2, length))
            got, want = compiled(ids), model(ids)
            if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
                print(f"demo: logits differ from eager for length {length}", file=sys.stderr)
                return 1
    print("demo: compiled logits match eager")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
