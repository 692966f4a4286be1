"""Models from `transformers` and `timm`, built from configs with random weights (no downloads).

Imported by the suite only when the packages are installed; each model is skipped (with the reason
recorded by the runner) if its config class is missing in the installed version.
"""

import torch


def _hf_model(config_name, model_name, **kwargs):
    def build():
        import transformers
        torch.manual_seed(0)
        config = getattr(transformers, config_name)(**kwargs)
        model = getattr(transformers, model_name)(config)
        model.config.use_cache = False
        model.config.return_dict = True
        return model.eval()
    return build


def _hf_tokens(vocab):
    def make(device, dtype, scale):
        shape = (2, 32) if scale == "cpu" else (16, 128)
        return (torch.randint(0, vocab, shape, device=device),)
    return make


def _timm_model(name, **extra):
    def build():
        import timm
        torch.manual_seed(0)
        return timm.create_model(name, pretrained=False, num_classes=10, **extra).eval()
    return build


def _images(device, dtype, scale):
    return (torch.randn(2 if scale == "cpu" else 32, 3, 64, 64, device=device, dtype=dtype),)


def register_all(register, ModelSpec):
    import importlib.util

    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                 vocab_size=512)
    if importlib.util.find_spec("transformers") is not None:
        register(ModelSpec("hf_gpt2", "hf", _hf_model("GPT2Config", "GPT2LMHeadModel", n_embd=64, n_layer=2,
                                                      n_head=4, vocab_size=512), _hf_tokens(512)))
        register(ModelSpec("hf_bert", "hf", _hf_model("BertConfig", "BertModel", **small), _hf_tokens(512)))
        register(ModelSpec("hf_llama", "hf", _hf_model("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2,
                                                       **small), _hf_tokens(512)))
    if importlib.util.find_spec("timm") is not None:
        register(ModelSpec("timm_resnet18", "timm", _timm_model("resnet18"), _images))
        register(ModelSpec("timm_vit_tiny", "timm", _timm_model("vit_tiny_patch16_224", img_size=64), _images))
