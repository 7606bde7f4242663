"""ResNet-50 and MobileNetV2 written in plain torch (torchvision's architectures, random weights),
and the BERT-base encoder of ``bert.py``: the models of the backend benchmark, exported to ONNX
so that every engine runs the same network."""

from __future__ import annotations

from bert import build_module as bert_module


def resnet50():
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4),
            )  # fmt: skip
            self.short = (nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False), nn.BatchNorm2d(width * 4))
                          if stride != 1 or cin != width * 4 else nn.Identity())  # fmt: skip

        def forward(self, x):
            return torch.relu(self.body(x) + self.short(x))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    torch.manual_seed(0)
    return _randomize_bn(nn.Sequential(*layers).eval())


def mobilenet_v2():
    import torch
    from torch import nn

    def cbr(cin, cout, k, stride=1, groups=1, act=True):
        mods = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return mods + ([nn.ReLU6()] if act else [])

    class Inverted(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            mods = (cbr(cin, hidden, 1) if expand != 1 else []) + cbr(hidden, hidden, 3, stride, hidden)
            self.body = nn.Sequential(*mods, *cbr(hidden, cout, 1, act=False))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    layers, cin = cbr(3, 32, 3, 2), 32
    for expand, cout, repeats, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                                          (6, 160, 3, 2), (6, 320, 1, 1)):  # fmt: skip
        for i in range(repeats):
            layers.append(Inverted(cin, cout, stride if i == 0 else 1, expand))
            cin = cout
    layers += [*cbr(cin, 1280, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
    torch.manual_seed(0)
    return _randomize_bn(nn.Sequential(*layers).eval())


def _randomize_bn(model):
    """Non-trivial batch-norm statistics, as a trained network has."""
    import torch

    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.0, generator=g)
                m.bias.uniform_(-0.1, 0.1, generator=g)
                m.running_mean.uniform_(-0.1, 0.1, generator=g)
                m.running_var.uniform_(0.5, 1.5, generator=g)
    return model


def models():
    """name -> (torch module, example inputs, input names)."""
    import torch

    image = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    ids = torch.randint(0, 30522, (1, 128), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(1, 128, dtype=torch.int64)
    return {
        "resnet50": (resnet50(), (image,), ["image"]),
        "mobilenet_v2": (mobilenet_v2(), (image,), ["image"]),
        "bert-base": (bert_module(), (ids, mask), ["input_ids", "attention_mask"]),
    }


def export(module, inputs, names, path: str) -> None:
    import torch

    with torch.no_grad():
        torch.onnx.export(module, inputs, path, input_names=names, output_names=["output"], opset_version=17,
                          dynamo=False)  # fmt: skip
