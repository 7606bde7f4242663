"""Small PyTorch models of the architectures people import (built in code, random weights):
each factory returns ``(module, example_args, dynamic_shapes)``."""

from __future__ import annotations

import torch
from torch import nn


def _inverted_residual(cin: int, cout: int, stride: int, expand: int) -> nn.Module:
    hidden = cin * expand

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
                nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
                nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout),
            )  # fmt: skip
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.conv(x) if self.residual else self.conv(x)

    return Block()


def mobilenet_v2(width: int = 8):
    """MobileNetV2's structure (inverted residuals, depthwise convs, ReLU6), narrowed."""
    layers = [nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU6()]
    cfg = [(1, width, 1, 1), (6, 2 * width, 2, 2), (6, 3 * width, 2, 2), (6, 4 * width, 1, 2)]
    cin = width
    for t, c, n, s in cfg:
        for i in range(n):
            layers.append(_inverted_residual(cin, c, s if i == 0 else 1, t))
            cin = c
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(cin, 10))
    return model.eval(), (torch.randn(2, 3, 64, 64),), None


class _Bottleneck(nn.Module):
    def __init__(self, cin: int, mid: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv2, self.bn2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = nn.Conv2d(mid, mid * 4, 1, bias=False), nn.BatchNorm2d(mid * 4)
        self.down = None
        if stride != 1 or cin != mid * 4:
            self.down = nn.Sequential(nn.Conv2d(cin, mid * 4, 1, stride, bias=False), nn.BatchNorm2d(mid * 4))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def resnet50(width: int = 8, blocks=(3, 4, 6, 3)):
    """ResNet-50's structure (bottlenecks 3-4-6-3, max pool stem), narrowed."""
    layers = [nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = width
    for i, n in enumerate(blocks):
        mid = width * 2**i
        for j in range(n):
            layers.append(_Bottleneck(cin, mid, 2 if j == 0 and i > 0 else 1))
            cin = mid * 4
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(cin, 10))
    return model.eval(), (torch.randn(1, 3, 64, 64),), None


class _Bert(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int):
        super().__init__()
        self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(seq, d), nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = nn.Linear(d, d)

    def forward(self, ids, mask):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.tok(ids) + self.pos(positions)[None] + self.typ(torch.zeros_like(ids)))
        x = self.encoder(x, src_key_padding_mask=mask == 0)
        return x, torch.tanh(self.pool(x[:, 0]))


def bert(vocab: int = 100, d: int = 32, heads: int = 4, layers: int = 2, seq: int = 16, dynamic: bool = False):
    """A BERT-style encoder: embeddings, padding mask, post-norm transformer layers, pooler."""
    model = _Bert(vocab, d, heads, layers, seq).eval()
    ids = torch.randint(0, vocab, (2, seq))
    mask = torch.ones(2, seq, dtype=torch.int64)
    mask[1, seq // 2:] = 0
    dyn = None
    if dynamic:
        batch = torch.export.Dim("batch", max=64)
        dyn = {"ids": {0: batch}, "mask": {0: batch}}
    return model, (ids, mask), dyn


class _VitBlock(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4, patch: int = 4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        b, n, d = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.n2(x))


def vit_block():
    """A ViT encoder block: patch embedding, class token, fused-qkv SDPA attention, tanh-GELU MLP."""
    return _VitBlock().eval(), (torch.randn(2, 3, 16, 16),), None


class _Recurrent(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        cls = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
        self.rnn = cls(8, 16, num_layers=2, batch_first=True, bidirectional=kind == "gru")
        self.head = nn.Linear(32 if kind == "gru" else 16, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


def lstm():
    return _Recurrent("lstm").eval(), (torch.randn(2, 5, 8),), None


def gru():
    return _Recurrent("gru").eval(), (torch.randn(2, 5, 8),), None


def dynamic_batch_cnn():
    """A CNN exported with a named dynamic batch dim."""
    model, _, _ = mobilenet_v2(width=4)
    return model, (torch.randn(3, 3, 32, 32),), ({0: torch.export.Dim("batch", max=128)},)


MODELS = {"mobilenet_v2": mobilenet_v2, "resnet50": resnet50, "bert": bert, "vit_block": vit_block, "lstm": lstm,
          "gru": gru, "dynamic_batch_cnn": dynamic_batch_cnn}  # fmt: skip


def bert_dynamic():
    return bert(dynamic=True)


MODELS["bert_dynamic"] = bert_dynamic
