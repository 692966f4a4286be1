"""Sequence, graph, recommendation, diffusion and deliberately dynamic models of the model suite.

The "dynamic" models exist to exercise the frontend: data-dependent branches, Python loops over
lists of layers, dict outputs and `.item()` calls are what real research code is full of.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LSTMTagger(nn.Module):
    """Embedding -> bidirectional LSTM -> GRU -> per-token classifier."""

    def __init__(self, vocab=128, dim=32, hidden=32, tags=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(2 * hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, tags)

    def forward(self, tokens):
        h, _ = self.lstm(self.embed(tokens))
        h, _ = self.gru(h)
        return self.out(h).log_softmax(-1)


class GraphConv(nn.Module):
    """A message-passing layer: gather source features, scatter-add into targets, degree-normalise."""

    def __init__(self, dim=32, layers=2):
        super().__init__()
        self.lins = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])
        self.self_lins = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        ones = torch.ones_like(dst, dtype=x.dtype)
        deg = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device).index_add_(0, dst, ones).clamp(min=1)
        for lin, self_lin in zip(self.lins, self.self_lins):
            msg = lin(x).index_select(0, src)
            agg = torch.zeros_like(x).scatter_add_(0, dst.unsqueeze(-1).expand_as(msg), msg)
            x = F.relu(self_lin(x) + agg / deg.unsqueeze(-1))
        return x


class DLRM(nn.Module):
    """A recommendation model: dense MLP, sparse features through EmbeddingBags, pairwise interactions."""

    def __init__(self, tables=4, rows=100, dim=16, dense=13):
        super().__init__()
        self.bags = nn.ModuleList([nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables)])
        self.bottom = nn.Sequential(nn.Linear(dense, 32), nn.ReLU(), nn.Linear(32, dim), nn.ReLU())
        n = tables + 1
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        feats = [x] + [bag(indices[i], offsets[i]) for i, bag in enumerate(self.bags)]
        t = torch.stack(feats, dim=1)
        inter = torch.bmm(t, t.transpose(1, 2))
        i, j = torch.triu_indices(t.shape[1], t.shape[1], offset=1, device=t.device)
        return torch.sigmoid(self.top(torch.cat([x, inter[:, i, j]], dim=1)))


def timestep_embedding(t, dim, dtype):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=dtype) / half)
    args = t[:, None].to(dtype) * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class DiffusionResBlock(nn.Module):
    """A timestep-conditioned residual block (DDPM/Stable-Diffusion style) with scale-shift modulation."""

    def __init__(self, ch=16, tdim=32):
        super().__init__()
        self.tdim = tdim
        self.time_mlp = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, 2 * ch))
        self.norm1 = nn.GroupNorm(4, ch)
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.norm2 = nn.GroupNorm(4, ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x, t):
        emb = self.time_mlp(timestep_embedding(t, self.tdim, x.dtype))
        scale, shift = emb[:, :, None, None].chunk(2, dim=1)
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.norm2(h) * (1 + scale) + shift
        return x + self.conv2(F.silu(h))


class DataDependentBranch(nn.Module):
    """Branches on a tensor's value: a graph break in any tracing compiler."""

    def __init__(self, dim=32):
        super().__init__()
        self.a = nn.Linear(dim, dim)
        self.b = nn.Linear(dim, dim)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        if h.sum() > 0:
            return self.b(h).relu()
        return self.b(-h).sigmoid()


class LayerListLoop(nn.Module):
    """A Python loop over a list of layers with a per-layer config and a dict of outputs."""

    def __init__(self, dim=32, depth=4):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
        self.acts = ["relu", "gelu", "silu", "tanh"][:depth]

    def forward(self, x):
        outs = {}
        for i, (layer, act) in enumerate(zip(self.layers, self.acts)):
            x = getattr(F, act)(layer(x)) + x
            outs[f"layer{i}"] = x
        return {"out": x.mean(-1), "hidden": outs}


class ItemCall(nn.Module):
    """Reads a scalar out with `.item()` and uses it as a Python float: a break, then more tensor code."""

    def __init__(self, dim=32):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.proj(x)
        scale = h.abs().max().item()
        return F.softmax(h / (scale + 1.0), dim=-1)
