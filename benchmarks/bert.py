"""A BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072, seq 128) with random weights,
written in plain torch and exported to ONNX: the transformer workload of the optimizer benchmark.

Run:  python benchmarks/bert.py OUT.onnx   (needs torch; see benchmarks/README in the main README)
"""

from __future__ import annotations

import math
import sys


def build_module():
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, hidden=768, heads=12, ffn=3072):
            super().__init__()
            self.heads, self.dim = heads, hidden // heads
            self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, hidden)
            self.ln1, self.ln2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
            self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

        def split(self, x):
            b, s, _ = x.shape
            return x.view(b, s, self.heads, self.dim).transpose(1, 2)

        def forward(self, x, mask):
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dim) + mask
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2)
            ctx = ctx.reshape(x.shape[0], x.shape[1], -1)
            x = self.ln1(x + self.out(ctx))
            return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))

    class Bert(nn.Module):
        def __init__(self, vocab=30522, hidden=768, layers=12, positions=512):
            super().__init__()
            self.words, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
            self.types = nn.Embedding(2, hidden)
            self.ln = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))

        def forward(self, input_ids, attention_mask):
            pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
            x = self.ln(self.words(input_ids) + self.positions(pos) + self.types(torch.zeros_like(input_ids)))
            mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
            for layer in self.layers:
                x = layer(x, mask)
            return x

    torch.manual_seed(0)
    return Bert().eval()


def export(path: str, seq: int = 128) -> None:
    import torch

    model = build_module()
    ids = torch.randint(0, 30522, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False)  # fmt: skip


if __name__ == "__main__":
    export(sys.argv[1])
