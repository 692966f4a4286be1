"""Transformer architectures of the model suite, written out in plain PyTorch with random weights.

Each is small enough to run on a CPU in a second, but keeps the structure (and so the ops and the
Python patterns) of the real thing: GPT-2 (pre-norm decoder, causal SDPA, GELU MLP), BERT
(post-norm encoder, padding mask, pooler), T5 (relative position bias, encoder-decoder with
cross-attention, RMS-style norm), LLaMA (RMSNorm, rotary embeddings, SwiGLU, grouped-query attention).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GPTBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """nanoGPT-style decoder-only language model."""

    def __init__(self, vocab=256, block=64, dim=64, heads=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)
        self.blocks = nn.ModuleList([GPTBlock(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class BertLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm1 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x, pad_mask):
        a, _ = self.attn(x, x, x, key_padding_mask=pad_mask, need_weights=False)
        x = self.norm1(x + a)
        return self.norm2(x + self.ff(x))


class Bert(nn.Module):
    """BERT-style encoder with token-type embeddings, a padding mask and a pooler."""

    def __init__(self, vocab=256, max_len=64, dim=64, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.typ = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList([BertLayer(dim, heads) for _ in range(layers)])
        self.pooler = nn.Linear(dim, dim)

    def forward(self, ids, token_types, attention_mask):
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.norm(self.tok(ids) + self.pos(pos) + self.typ(token_types))
        pad_mask = attention_mask == 0
        for layer in self.layers:
            x = layer(x, pad_mask)
        return {"last_hidden_state": x, "pooler_output": torch.tanh(self.pooler(x[:, 0]))}


class T5Norm(nn.Module):
    """T5's LayerNorm: scale only, no mean subtraction."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * x * torch.rsqrt(var + self.eps)


class T5Attention(nn.Module):
    def __init__(self, dim, heads, relative_bias=False, buckets=16):
        super().__init__()
        self.heads, self.buckets = heads, buckets
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.rel = nn.Embedding(buckets, heads) if relative_bias else None

    def position_bias(self, q_len, k_len, device):
        ctx = torch.arange(q_len, device=device)[:, None]
        mem = torch.arange(k_len, device=device)[None, :]
        bucket = (mem - ctx).abs().clamp(max=self.buckets - 1)
        return self.rel(bucket).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x, kv=None, bias=None, causal=False):
        kv = x if kv is None else kv
        b, t, c = x.shape
        s = kv.shape[1]
        h = self.heads
        q = self.q(x).view(b, t, h, c // h).transpose(1, 2)
        k = self.k(kv).view(b, s, h, c // h).transpose(1, 2)
        v = self.v(kv).view(b, s, h, c // h).transpose(1, 2)
        scores = q @ k.transpose(-1, -2)
        if self.rel is not None:
            bias = self.position_bias(t, s, x.device)
        if bias is not None:
            scores = scores + bias
        if causal:
            mask = torch.ones(t, s, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        y = scores.softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, t, c)), bias


class T5(nn.Module):
    """T5-style encoder-decoder: relative position bias, cross-attention, ReLU feed-forward."""

    def __init__(self, vocab=256, dim=64, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.enc = nn.ModuleList(
            [nn.ModuleDict({"n1": T5Norm(dim), "attn": T5Attention(dim, heads, relative_bias=(i == 0)),
                            "n2": T5Norm(dim), "ff": nn.Sequential(nn.Linear(dim, 2 * dim, bias=False), nn.ReLU(),
                                                                   nn.Linear(2 * dim, dim, bias=False))})
             for i in range(layers)])
        self.dec = nn.ModuleList(
            [nn.ModuleDict({"n1": T5Norm(dim), "attn": T5Attention(dim, heads, relative_bias=(i == 0)),
                            "n2": T5Norm(dim), "cross": T5Attention(dim, heads),
                            "n3": T5Norm(dim), "ff": nn.Sequential(nn.Linear(dim, 2 * dim, bias=False), nn.ReLU(),
                                                                   nn.Linear(2 * dim, dim, bias=False))})
             for i in range(layers)])
        self.enc_norm = T5Norm(dim)
        self.dec_norm = T5Norm(dim)

    def forward(self, src, tgt):
        x = self.embed(src)
        bias = None
        for layer in self.enc:
            a, bias = layer["attn"](layer["n1"](x), bias=bias)
            x = x + a
            x = x + layer["ff"](layer["n2"](x))
        memory = self.enc_norm(x)
        y = self.embed(tgt)
        bias = None
        for layer in self.dec:
            a, bias = layer["attn"](layer["n1"](y), bias=bias, causal=True)
            y = y + a
            c, _ = layer["cross"](layer["n2"](y), kv=memory)
            y = y + c
            y = y + layer["ff"](layer["n3"](y))
        return self.dec_norm(y) @ self.embed.weight.t()


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(seq, head_dim, device, dtype, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    freqs = torch.outer(torch.arange(seq, device=device).float(), inv)
    return freqs.cos().to(dtype), freqs.sin().to(dtype)


def apply_rotary(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


class LlamaBlock(nn.Module):
    """LLaMA decoder block: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU."""

    def __init__(self, dim=64, heads=4, kv_heads=2, hidden=172):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        cos, sin = rotary_tables(t, self.head_dim, x.device, x.dtype)
        h = self.attn_norm(x)
        q = self.wq(h).view(b, t, self.heads, self.head_dim)
        k = self.wk(h).view(b, t, self.kv_heads, self.head_dim)
        v = self.wv(h).view(b, t, self.kv_heads, self.head_dim)
        q = apply_rotary(q, cos[:, None, :], sin[:, None, :]).transpose(1, 2)
        k = apply_rotary(k, cos[:, None, :], sin[:, None, :]).transpose(1, 2)
        v = v.transpose(1, 2)
        repeat = self.heads // self.kv_heads
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class ViT(nn.Module):
    """Vision transformer: patch embedding by convolution, class token, pre-norm encoder."""

    def __init__(self, image=32, patch=8, dim=64, heads=4, layers=2, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.encoder(x)
        return self.head(self.norm(x[:, 0]))


def scale_init(model, std=0.02):
    """Small weights keep deep random models numerically tame, so accuracy checks are meaningful."""
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.normal_(p, std=std / math.sqrt(max(1, p.dim() - 1)))
    return model
