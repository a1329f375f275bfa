"""A stand-in for the ImageNet example's main.py (no dataperf import): ImageFolder train and val loaders,
a torchvision model, SGD, a validation pass after each epoch. Run under `dataperf watch` by test_next_step."""

import argparse
import os

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, models

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
TRANSFORMS = {
    "train": lambda s: T.Compose([T.RandomResizedCrop(s), T.RandomHorizontalFlip(), T.ToTensor(),
                                  T.Normalize(MEAN, STD)]),
    "val": lambda s: T.Compose([T.Resize(s + s // 7), T.CenterCrop(s), T.ToTensor(), T.Normalize(MEAN, STD)]),
    "jitter": lambda s: T.Compose([T.Resize((s, s)), T.ColorJitter(0.4), T.ToTensor()]),
}


class InMemory(Dataset):
    """Images made in memory: a dataset that keeps no path."""

    def __init__(self, n, size, transform):
        from PIL import Image

        self.images = [Image.new("RGB", (size, size), (i % 255, 0, 0)) for i in range(n)]
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), 0


p = argparse.ArgumentParser()
p.add_argument("data", help="folder with train/ and val/, or 'memory'")
p.add_argument("--workers", type=int, default=0)
p.add_argument("--batch-size", type=int, default=4)
p.add_argument("--val-batch-size", type=int, default=1)
p.add_argument("--transform", default="train", choices=sorted(TRANSFORMS))
p.add_argument("--size", type=int, default=32)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--pin-memory", action="store_true")
args = p.parse_args()
torch.set_num_threads(1)
tf = TRANSFORMS[args.transform](args.size)
if args.data == "memory":
    train, val = InMemory(24, args.size, tf), None
else:
    train = datasets.ImageFolder(os.path.join(args.data, "train"), tf)
    val = datasets.ImageFolder(os.path.join(args.data, "val"), TRANSFORMS["val"](args.size))
kw = {"num_workers": args.workers, "pin_memory": args.pin_memory}
train_loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, **kw)
val_loader = DataLoader(val, batch_size=args.val_batch_size, **kw) if val is not None else None
model = models.tinynet(num_classes=1000)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(args.epochs):
    model.train()
    for x, y in train_loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    if val_loader is not None:
        model.eval()
        with torch.no_grad():
            for x, _ in val_loader:
                model(x)
print("trained")
