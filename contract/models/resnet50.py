"""ResNet-50 v1.5 (conf/model/resnet50.yaml): every framework's, images, data=files.

FLOPs (docs/flops.md): every convolution and the classifier, from the layer shapes of
frameworks/pytorch/models/resnet50.py (v1.5: the stride on the 3x3 convolution). A convolution of
k x k x c_in x c_out on an output of H x W costs H*W*k*k*c_in*c_out multiply-adds. At 224 x 224
with 1000 classes that is 4,089,184,256 multiply-adds, the "4.1 GFLOPs" usually quoted (which
counts multiply-adds): 8.18 GFLOPs forward, 24.5 GFLOPs per image trained (3 x forward, a
multiply-add 2 FLOPs).
"""
from collections.abc import Sequence
from typing import Any

from contract.models import IMAGES, Model, ModelSpec

SHAPE = ("layers", "width", "image_size", "num_classes")
Conv = tuple[str, int, int, int, int, int]   # (name, k, c_in, c_out, out_h, out_w)


def _out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def layers(layers: Sequence[int] = (3, 4, 6, 3), width: int = 64, image_size: int = 224, num_classes: int = 1000,
           **_: Any) -> list[Conv]:
    """Every convolution and the classifier of ResNet v1.5 as frameworks/pytorch/models/resnet50.py
    builds it: (name, k, c_in, c_out, out_h, out_w), the classifier as a 1x1 "convolution"
    on a 1x1 output."""
    out: list[Conv] = []
    n = _out(image_size, 7, 2, 3)
    out.append(("stem", 7, 3, width, n, n))
    n = _out(n, 3, 2, 1)                                   # max pool
    cin = width
    for stage, blocks in enumerate(layers):
        w = width * 2 ** stage
        for i in range(blocks):
            stride = 2 if (i == 0 and stage > 0) else 1
            name = f"stage{stage + 1}.block{i + 1}"
            m = _out(n, 3, stride, 1)                       # v1.5: the stride on the 3x3
            out.append((f"{name}.conv1", 1, cin, w, n, n))
            out.append((f"{name}.conv2", 3, w, w, m, m))
            out.append((f"{name}.conv3", 1, w, 4 * w, m, m))
            if stride != 1 or cin != 4 * w:
                out.append((f"{name}.down", 1, cin, 4 * w, m, m))
            cin, n = 4 * w, m
    out.append(("fc", 1, cin, num_classes, 1, 1))
    return out


def forward_macs(**model: Any) -> int:
    """Multiply-adds of one image's forward pass (the "4.1 GFLOPs" of ResNet-50 at 224)."""
    return sum(h * w * k * k * cin * cout for _, k, cin, cout, h, w in layers(**model))


def flops_per_sample(model: Model) -> int:
    """Training FLOPs of one image: 3 x forward, 2 FLOPs a multiply-add."""
    return 3 * 2 * forward_macs(**{k: model[k] for k in SHAPE if k in model})


SPEC = ModelSpec(
    name="resnet50",
    pytorch_session="frameworks.pytorch.models.resnet50:session",
    flops=flops_per_sample, flops_keys=SHAPE,
    inputs=IMAGES, files=True, checkpoint=True)
