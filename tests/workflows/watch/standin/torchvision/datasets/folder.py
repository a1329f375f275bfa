"""ImageFolder: root/class/image, label = sorted class index; keeps `root` and `transform` as torchvision."""

from __future__ import annotations

import os

from PIL import Image
from torch.utils.data import Dataset

EXTS = (".jpg", ".jpeg", ".png", ".webp")


class ImageFolder(Dataset):
    def __init__(self, root, transform=None):
        self.root = os.fspath(root)
        self.transform = transform
        self.classes = sorted(d.name for d in os.scandir(self.root) if d.is_dir())
        self.samples = [(os.path.join(self.root, c, f), i) for i, c in enumerate(self.classes)
                        for f in sorted(os.listdir(os.path.join(self.root, c))) if f.lower().endswith(EXTS)]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with Image.open(path) as im:
            img = im.convert("RGB")
        return (self.transform(img) if self.transform is not None else img), label
