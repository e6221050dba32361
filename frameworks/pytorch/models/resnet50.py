"""ResNet-50 v1.5 in plain PyTorch (no torchvision), trained in the plain data-parallel session.

The definition every other framework matches (frameworks/<name>/models.py): the same layers,
the same parameter count (tests/unit/test_models.py), the same loss.
Standard library + torch only: this runs in the framework's Python.
"""
import torch
from torch import nn
import torch.nn.functional as F

from frameworks.pytorch.session import TorchSession


# --- ResNet-50 v1.5 -------------------------------------------------------------

class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        # v1.5: the stride sits on the 3x3 convolution, not the first 1x1.
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        return F.relu(x + identity)


class ResNet(nn.Module):
    def __init__(self, layers=(3, 4, 6, 3), width=64, num_classes=1000, **_):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        blocks, cin = [], width
        for stage, n in enumerate(layers):
            w = width * 2 ** stage
            for i in range(n):
                blocks.append(Bottleneck(cin, w, 2 if (i == 0 and stage > 0) else 1))
                cin = w * Bottleneck.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def loss_fn(out, y):
    return F.cross_entropy(out.float(), y)


Model = ResNet
session = TorchSession   # device, DDP, compile, AMP: the plain data-parallel session
