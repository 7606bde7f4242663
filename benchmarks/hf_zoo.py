"""The models users bring, built from ``transformers`` configs with random weights (no downloads).

Each factory takes ``small`` (two layers, narrow: what the tests run) and returns ``(module, args)``:
a module whose forward returns one tensor (the last hidden state), and example inputs that keep its
activations in a realistic range (a padding mask for the encoders, images and spectrograms of unit
scale).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class LastHidden(nn.Module):
    """A ``transformers`` model whose forward returns its first output only."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.eval()  # the wrapper too: an exporter that restores the training mode restores eval

    def forward(self, *args):
        return self.model(*args, return_dict=False)[0]


def _tokens(seq: int, vocab: int, mask: bool):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, seq), generator=g)
    if not mask:
        return (ids,)
    m = torch.ones(1, seq, dtype=torch.long)
    m[:, seq * 3 // 4 :] = 0  # padding at the end, as a tokenizer leaves it
    return ids, m


def _reinitialised(model: nn.Module) -> nn.Module:
    """Convolutions He-initialised and batch norms reset: ``transformers``' default init (normal,
    std 0.02) shrinks a deep CNN's activations to ~1e-25, where every engine agrees on noise."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            fan_in = m.weight[0].numel()
            nn.init.normal_(m.weight, std=(2.0 / fan_in) ** 0.5, generator=torch.Generator().manual_seed(fan_in))
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
            m.reset_running_stats()
    return model


def _pixels(size: int, channels: int = 3):
    return (torch.randn(1, channels, size, size, generator=torch.Generator().manual_seed(0)),)


def bert(small: bool = True):
    from transformers import BertConfig, BertModel

    c = BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                   max_position_embeddings=64) if small else BertConfig()  # fmt: skip
    return LastHidden(BertModel(c, add_pooling_layer=False)), _tokens(16 if small else 128, c.vocab_size, True)


def distilbert(small: bool = True):
    from transformers import DistilBertConfig, DistilBertModel

    c = DistilBertConfig(vocab_size=128, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                         max_position_embeddings=64) if small else DistilBertConfig()  # fmt: skip
    return LastHidden(DistilBertModel(c)), _tokens(16 if small else 128, c.vocab_size, True)


def gpt2(small: bool = True):
    from transformers import GPT2Config, GPT2Model

    c = GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=64) if small else GPT2Config()
    c.use_cache = False
    if small:
        c.vocab_size, c.bos_token_id, c.eos_token_id = 128, 0, 0
    return LastHidden(GPT2Model(c)), _tokens(16 if small else 64, c.vocab_size, False)


def llama(small: bool = True):
    from transformers import LlamaConfig, LlamaModel

    c = LlamaConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2 if small else 4, num_attention_heads=8,
                    num_key_value_heads=2, intermediate_size=128 if small else 512, use_cache=False,
                    max_position_embeddings=128)  # fmt: skip
    return LastHidden(LlamaModel(c)), _tokens(16 if small else 64, c.vocab_size, False)


def t5_encoder(small: bool = True):
    from transformers import T5Config, T5EncoderModel

    c = T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4) if small else \
        T5Config.from_dict({})  # fmt: skip
    return LastHidden(T5EncoderModel(c)), _tokens(16 if small else 128, c.vocab_size, True)


def vit(small: bool = True):
    from transformers import ViTConfig, ViTModel

    c = ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32,
                  patch_size=8) if small else ViTConfig()  # fmt: skip
    return LastHidden(ViTModel(c, add_pooling_layer=False)), _pixels(c.image_size)


def whisper_encoder(small: bool = True):
    from transformers import WhisperConfig, WhisperModel

    c = WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128, num_mel_bins=16,
                      max_source_positions=32, decoder_layers=1, decoder_attention_heads=4) if small else \
        WhisperConfig()  # fmt: skip
    encoder = WhisperModel(c).get_encoder()
    mel = torch.randn(1, c.num_mel_bins, 2 * c.max_source_positions, generator=torch.Generator().manual_seed(0))
    return LastHidden(encoder), (mel,)


def resnet(small: bool = True):
    from transformers import ResNetConfig, ResNetModel

    c = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic") if small else \
        ResNetConfig()  # fmt: skip
    return LastHidden(_reinitialised(ResNetModel(c))), _pixels(32 if small else 224)


def convnext(small: bool = True):
    from transformers import ConvNextConfig, ConvNextModel

    c = ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2) if small else ConvNextConfig()
    return LastHidden(_reinitialised(ConvNextModel(c))), _pixels(32 if small else 224)


def mobilenet_v2(small: bool = True):
    from transformers import MobileNetV2Config, MobileNetV2Model

    c = MobileNetV2Config(image_size=32, depth_multiplier=0.35) if small else MobileNetV2Config()
    return LastHidden(_reinitialised(MobileNetV2Model(c, add_pooling_layer=False))), _pixels(c.image_size)


def efficientnet(small: bool = True):
    from transformers import EfficientNetConfig, EfficientNetModel

    # full size: B0 (the config's defaults are B7: 600x600, 2.0 wide, 3.1 deep)
    if small:
        c = EfficientNetConfig(image_size=32, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320)
    else:
        c = EfficientNetConfig(image_size=224, width_coefficient=1.0, depth_coefficient=1.0, hidden_dim=1280)
    return LastHidden(_reinitialised(EfficientNetModel(c))), _pixels(c.image_size)


IMPORTS = ("from_torch", "export")
"""The two ways a user brings a PyTorch model: ``irforge.from_torch``, or ``torch.onnx.export``'s
file loaded with ``irforge.from_onnx``."""


def exported(module: nn.Module, args: tuple):
    """``torch.onnx.export``'s model of ``module`` (the dynamo exporter), as a ``ModelProto``."""
    import io
    import warnings

    import onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, verbose=False)
    buf = io.BytesIO()
    program.save(buf)
    return onnx.load_from_string(buf.getvalue())


def imported(module: nn.Module, args: tuple, how: str):
    """``module`` as an irforge model, imported ``how`` (one of :data:`IMPORTS`)."""
    import irforge

    if how == "from_torch":
        return irforge.from_torch(module, args)
    return irforge.from_onnx(exported(module, args))


ZOO: dict[str, Callable] = {
    "bert": bert, "distilbert": distilbert, "gpt2": gpt2, "llama": llama, "t5-encoder": t5_encoder, "vit": vit,
    "whisper-encoder": whisper_encoder, "resnet": resnet, "convnext": convnext, "mobilenet-v2": mobilenet_v2,
    "efficientnet": efficientnet,
}  # fmt: skip
"""name -> factory(small) -> (module, example args)."""
