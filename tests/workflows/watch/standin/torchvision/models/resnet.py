"""ResNet-shaped classifiers, small: builders differ only in width and depth, as torchvision's do."""

from __future__ import annotations

from torch import nn


class ResNet(nn.Module):
    def __init__(self, width: int, stages: int, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, width, 3, 2, 1), nn.ReLU()]
        for _ in range(stages - 1):
            layers += [nn.Conv2d(width, width, 3, 2, 1), nn.ReLU()]
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))


def resnet18(num_classes: int = 1000) -> ResNet:
    return ResNet(64, 4, num_classes)


def tinynet(num_classes: int = 1000) -> ResNet:
    return ResNet(8, 2, num_classes)
