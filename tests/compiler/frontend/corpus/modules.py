"""nn.Modules: compiled as modules (compile(module)) and called from compiled functions."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.compiler.frontend.corpus import In, P, T, shapes

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x):
        return x * self.scale


class TrainingFlag(nn.Module):
    def forward(self, x):
        return x * 2 if self.training else x


class ModuleListNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


class ModuleDictNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})

    def forward(self, x):
        return {k: h(x) for k, h in self.heads.items()}


class Attention(nn.Module):
    def __init__(self, d=8, h=2):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.h) ** 0.5
        y = att.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, idx):
        return self.emb(idx).sum(1)


class SubmoduleAttr(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = MLP()
        self.alpha = 0.5

    def forward(self, x):
        return self.inner(x) * self.alpha + self.inner.fc1.bias.sum()


class ParamDirect(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return x @ self.w


class Dropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x) + 1


MLP_FOR_FN = MLP()


def call_global_module(x): return MLP_FOR_FN(x) + 1


def call_module_arg(m, x): return m(x) * 2


def _eval(m):
    return m.eval()


BLOCK_SHAPES = shapes((2, 5, 8), (2, 5, 8), (2, 7, 8), (2, 9, 8))

def _toggle_training(m, i):
    m.train(i < 2)


class Doubler(nn.Module):
    """No __init__ of its own: built inside the compiled frame (frontend/new_modules.py)."""

    def forward(self, x):
        self.calls = 1                 # an attribute of the fresh module, set while tracing
        return x * 2 + self.calls + self.training


def module_created_in_frame(x):
    return Doubler()(x).sin()


PROGRAMS = [
    P(MLP()), P(WithBuffer()), P(TrainingFlag(), [(T(3, 4),)] * 4, recompiles=1, before_call=_toggle_training),
    P(ModuleListNet()), P(ModuleDictNet()), P(_eval(Attention()), BLOCK_SHAPES),
    P(_eval(Block()), BLOCK_SHAPES), P(_eval(ConvNet()), shapes((2, 3, 8, 8), (2, 3, 8, 8))),
    P(Embed(), [(In(lambda: torch.randint(0, 10, (2, 3))),)] * 3),
    P(SubmoduleAttr()), P(ParamDirect()), P(_eval(Dropout())), P(call_global_module),
    P(module_created_in_frame),
    P(call_module_arg, [(MLP_FOR_FN, T(3, 4)), (MLP_FOR_FN, T(3, 4))]),
    P(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), name="Sequential_relu"),
    P(_eval(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1), nn.LayerNorm(4))), name="Sequential_eval_ln"),
]
