"""The transforms of the ImageNet example, with torchvision's attributes (`transforms`, `size` as (h, w))."""

from __future__ import annotations

import math
import random

import numpy as np
import torch
from PIL import Image


def _pair(size) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else tuple(size)


class Transform:
    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in vars(self).items())})"


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self) -> str:  # torchvision's: one op a line
        return "Compose(" + "".join(f"\n    {t}" for t in self.transforms) + "\n)"


class RandomResizedCrop(Transform):
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
        self.size, self.scale, self.ratio = _pair(size), scale, ratio

    def __call__(self, img):
        w, h = img.size
        for _ in range(10):
            area = w * h * random.uniform(*self.scale)
            ar = math.exp(random.uniform(math.log(self.ratio[0]), math.log(self.ratio[1])))
            cw, ch = round(math.sqrt(area * ar)), round(math.sqrt(area / ar))
            if 0 < cw <= w and 0 < ch <= h:
                left, top = random.randint(0, w - cw), random.randint(0, h - ch)
                return img.resize(self.size[::-1], Image.BILINEAR, box=(left, top, left + cw, top + ch))
        return img.resize(self.size[::-1], Image.BILINEAR)


class RandomHorizontalFlip(Transform):
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        return img.transpose(Image.FLIP_LEFT_RIGHT) if random.random() < self.p else img


class Resize(Transform):
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        if isinstance(self.size, int):
            s = self.size
            return img.resize((s, max(1, round(h * s / w))) if w <= h else (max(1, round(w * s / h)), s))
        return img.resize(tuple(self.size)[::-1])


class CenterCrop(Transform):
    def __init__(self, size):
        self.size = _pair(size)

    def __call__(self, img):
        w, h = img.size
        th, tw = self.size
        left, top = (w - tw) // 2, (h - th) // 2
        return img.crop((left, top, left + tw, top + th))


class ColorJitter(Transform):
    def __init__(self, brightness=0.0):
        self.brightness = brightness

    def __call__(self, img):
        f = 1 + random.uniform(-self.brightness, self.brightness)
        return Image.fromarray(np.clip(np.asarray(img, dtype=np.float32) * f, 0, 255).astype(np.uint8))


class ToTensor(Transform):
    def __call__(self, img):
        return torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1).float().div_(255)


class Normalize(Transform):
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, x):
        return (x - torch.tensor(self.mean).view(3, 1, 1)) / torch.tensor(self.std).view(3, 1, 1)
