"""The issue-18 model: a small GPT-style language model with a print (graph break), a
data-dependent branch (graph break) and calls with another sequence length (shape) and another
index dtype (dtype), so that both compilers recompile. Run as a script:

    python gpt_program.py ours    # compiler.compile (TRACE_COMPILE_DEBUG / TRACE_DIR decide the trace)
    python gpt_program.py torch   # torch.compile (TORCH_TRACE decides the trace)

With GPT_FAIL=1 the backend fails on graphs with a relu (ours: testing.inject_relu_bug; torch: a
backend that raises), so a failed compile with a repro script exists (the fourth question);
GPT_BACKEND=inductor compiles the other graphs with inductor (torch mode: kernels to show)."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).tril().logical_not(), -1e9)
        x = x + self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, d=32, heads=2, layers=2, max_len=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        print("hidden", tuple(x.shape))
        if x.abs().mean() > 0:
            x = torch.relu(x)
        else:
            x = x * 0.5
        return self.ln(x) @ self.tok.weight.t()


def failing_backend(gm, example_inputs):
    """Fails on graphs with a relu; otherwise inductor (GPT_BACKEND=inductor) or eager."""
    if any(n.target in (torch.relu, F.relu) for n in gm.graph.nodes):
        raise RuntimeError("injected relu compile error")
    if os.environ.get("GPT_BACKEND") == "inductor":
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)
    return gm.forward


def main(mode):
    torch.manual_seed(0)
    model = TinyGPT().eval()
    fail = os.environ.get("GPT_FAIL") == "1"
    if mode == "torch":
        import torch._dynamo as dynamo
        dynamo.config.suppress_errors = True
        inductor = os.environ.get("GPT_BACKEND") == "inductor"
        if inductor:  # kernel -> node and kernel -> user stack records in the trace
            import torch._inductor.config as inductor_config
            inductor_config.trace.provenance_tracking_level = 1
        compiled = torch.compile(model, backend=failing_backend if fail else
                                 "inductor" if inductor else "eager")
    else:
        from tracetorch import compiler
        if fail:
            compiler.config.patch(**{"testing.inject_relu_bug": "compile_error"}).__enter__()
        compiled = compiler.compile(model)
    with torch.no_grad():
        for length, dtype in ((8, torch.int64), (12, torch.int64), (12, torch.int32)):
            ids = torch.randint(0, 64, (2, length), dtype=dtype)
            try:
                compiled(ids)
            except Exception as e:
                print("call failed:", type(e).__name__, str(e).splitlines()[0][:200])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "ours"))
