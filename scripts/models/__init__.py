"""The model suite: real architectures with random weights, defined in this repository.

`SUITE` maps a model name to a `ModelSpec`. `spec.build()` returns the module (eval mode, seeded
weights) and `spec.inputs(device, dtype, scale)` its example inputs. `scale` is "cpu" (tiny, so the
whole suite runs in minutes on two cores) or "gpu" (larger batches and sequences). Models from
`transformers` and `timm` are added when those packages are installed (the GPU machine has them).
"""

from dataclasses import dataclass
from typing import Callable

import torch

from . import misc_zoo, transformers_zoo, vision_zoo


@dataclass(frozen=True)
class ModelSpec:
    name: str
    category: str
    build: Callable[[], torch.nn.Module]
    make_inputs: Callable[[str, torch.dtype, str], tuple]
    trainable: bool = True
    # Models whose Python code is meant to break the graph (data-dependent control flow, .item()).
    expects_graph_breaks: bool = False

    def inputs(self, device="cpu", dtype=torch.float32, scale="cpu"):
        return self.make_inputs(device, dtype, scale)


def _seeded(factory):
    def build():
        torch.manual_seed(0)
        model = factory()
        transformers_zoo.scale_init(model)
        return model.eval()
    return build


def _float(shape, device, dtype):
    return torch.randn(*shape, device=device, dtype=dtype)


def _tokens(shape, vocab, device):
    return torch.randint(0, vocab, shape, device=device)


def _pick(scale, cpu, gpu):
    return cpu if scale == "cpu" else gpu


def _gpt_inputs(device, dtype, scale):
    return (_tokens(_pick(scale, (2, 32), (16, 64)), 256, device),)


def _bert_inputs(device, dtype, scale):
    b, t = _pick(scale, (2, 24), (16, 64))
    mask = torch.ones(b, t, dtype=torch.long, device=device)
    mask[0, t // 2:] = 0
    return (_tokens((b, t), 256, device), torch.zeros(b, t, dtype=torch.long, device=device), mask)


def _t5_inputs(device, dtype, scale):
    b, t = _pick(scale, (2, 16), (16, 64))
    return (_tokens((b, t), 256, device), _tokens((b, t // 2), 256, device))


def _hidden_inputs(device, dtype, scale):
    return (_float(_pick(scale, (2, 16, 64), (16, 256, 64)), device, dtype),)


def _image_inputs(channels=3, size=32):
    def make(device, dtype, scale):
        return (_float((_pick(scale, 2, 32), channels, size, size), device, dtype),)
    return make


def _features(device, dtype, scale):
    return (_float((_pick(scale, 8, 256), 32), device, dtype),)


def _lstm_inputs(device, dtype, scale):
    return (_tokens(_pick(scale, (2, 12), (32, 64)), 128, device),)


def _gnn_inputs(device, dtype, scale):
    nodes, edges = _pick(scale, (20, 60), (2000, 8000))
    g = torch.Generator().manual_seed(1)
    edge_index = torch.randint(0, nodes, (2, edges), generator=g).to(device)
    return (_float((nodes, 32), device, dtype), edge_index)


def _dlrm_inputs(device, dtype, scale):
    b = _pick(scale, 4, 256)
    per_bag = 3
    g = torch.Generator().manual_seed(2)
    indices = torch.randint(0, 100, (4, b * per_bag), generator=g).to(device)
    offsets = (torch.arange(b) * per_bag).repeat(4, 1).to(device)
    return (_float((b, 13), device, dtype), indices, offsets)


def _diffusion_inputs(device, dtype, scale):
    b = _pick(scale, 2, 32)
    return (_float((b, 16, 16, 16), device, dtype), torch.randint(0, 1000, (b,), device=device))


SUITE: dict[str, ModelSpec] = {}


def register(spec: ModelSpec):
    SUITE[spec.name] = spec
    return spec


for _spec in [
    ModelSpec("gpt2", "nlp", _seeded(transformers_zoo.GPT2), _gpt_inputs),
    ModelSpec("bert", "nlp", _seeded(transformers_zoo.Bert), _bert_inputs),
    ModelSpec("t5", "nlp", _seeded(transformers_zoo.T5), _t5_inputs),
    ModelSpec("llama_block", "nlp", _seeded(transformers_zoo.LlamaBlock), _hidden_inputs),
    ModelSpec("vit", "vision", _seeded(transformers_zoo.ViT), _image_inputs()),
    ModelSpec("resnet18", "vision", _seeded(vision_zoo.resnet18), _image_inputs()),
    ModelSpec("resnet50", "vision", _seeded(vision_zoo.resnet50), _image_inputs()),
    ModelSpec("mobilenet_v2", "vision", _seeded(vision_zoo.MobileNetV2), _image_inputs()),
    ModelSpec("mlp_mixer", "vision", _seeded(vision_zoo.MLPMixer), _image_inputs()),
    ModelSpec("unet_block", "vision", _seeded(vision_zoo.UNetBlock), _image_inputs(channels=4, size=16)),
    ModelSpec("lstm_gru", "sequence", _seeded(misc_zoo.LSTMTagger), _lstm_inputs),
    ModelSpec("gnn", "graph", _seeded(misc_zoo.GraphConv), _gnn_inputs),
    ModelSpec("dlrm", "recsys", _seeded(misc_zoo.DLRM), _dlrm_inputs),
    ModelSpec("diffusion_block", "generative", _seeded(misc_zoo.DiffusionResBlock), _diffusion_inputs),
    ModelSpec("data_dependent_branch", "dynamic", _seeded(misc_zoo.DataDependentBranch), _features,
              expects_graph_breaks=True),
    ModelSpec("layer_list_loop", "dynamic", _seeded(misc_zoo.LayerListLoop), _features),
    ModelSpec("item_call", "dynamic", _seeded(misc_zoo.ItemCall), _features, expects_graph_breaks=True),
]:
    register(_spec)

try:  # optional: Hugging Face and timm models built from configs, random weights, no downloads
    from . import external_zoo
    external_zoo.register_all(register, ModelSpec)
except ImportError:
    pass
