"""Image transforms a training run really applies (--transform): presets or the user's MODULE:FACTORY.

Presets use torchvision.transforms.v2 when torchvision imports beside this torch; otherwise the same ops
written with PIL and torch (RandomResizedCrop's sampling as torchvision does it: 10 tries at scale
(0.08, 1) and ratio (3/4, 4/3), then a centre crop). PyPI's torchvision 0.28.0, the release for torch
2.13.0, is a CUDA build that does not load beside the CPU torch ("operator torchvision::nms does not
exist"), so on such a machine the PIL/torch version runs; `transform_backend()` says which ran.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

PRESETS = ("resize", "imagenet-train", "imagenet-val")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
VAL_RESIZE_RATIO = 256 / 224  # resize 256 then centre-crop 224, scaled to --image-size


def _torchvision_v2():
    try:
        from torchvision.transforms import v2

        return v2
    except Exception:  # ImportError, or the RuntimeError of a torchvision built for another torch
        return None


def transform_backend() -> str:
    return "torchvision.transforms.v2" if _torchvision_v2() is not None else "PIL+torch"


def build(spec: str | None, size: int) -> Callable[[Any], torch.Tensor] | None:
    """A callable PIL image -> tensor; None means today's behaviour (resize to size x size, uint8 CHW)."""
    if spec in (None, "resize"):
        return None
    if spec in PRESETS:
        v2 = _torchvision_v2()
        if v2 is not None:
            tail = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
            if spec == "imagenet-train":
                return v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip()] + tail)
            return v2.Compose([v2.Resize(round(size * VAL_RESIZE_RATIO), antialias=True), v2.CenterCrop(size)]
                              + tail)
        return TrainPreset(size) if spec == "imagenet-train" else ValPreset(size)
    from dataperf.data.user import load_factory
    from dataperf.errors import UserError

    try:
        fn = load_factory(spec, "--transform")()
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"transform factory {spec} failed: {type(e).__name__}: {e}") from None
    if not callable(fn):
        raise UserError(f"transform factory {spec} returned {type(fn).__name__}, not a callable")
    return fn


def check(spec: str | None) -> None:
    """Build the transform once, before measuring: a bad MODULE:FACTORY is an error line, not a failed trial."""
    if spec is not None and spec not in PRESETS:
        if ":" not in spec:
            from dataperf.errors import UserError

            raise UserError(f"unknown --transform preset {spec!r}; choose {', '.join(PRESETS)}, or give your own as "
                            "MODULE:FACTORY")
        build(spec, 224)


def apply(fn: Callable[[Any], Any], spec: str | None, img: Any, where: str = "") -> torch.Tensor:
    """The transform on one decoded image. What a user's transform raises, or returns instead of a tensor, is
    its own failure: named as the transform's (with the sample it was given), never as corrupt data, which
    --on-corrupt skip would then skip sample after sample."""
    from dataperf.errors import TrialError

    on = f" on sample {where}" if where else ""
    try:
        x = fn(img)
    except Exception as e:
        raise TrialError(f"--transform {spec} raised {type(e).__name__}: {e}{on}; the sample decoded, so fix the "
                         "transform") from None
    if not isinstance(x, torch.Tensor):
        raise TrialError(f"--transform {spec} returned {_what(x)}{on}, not a tensor; it must turn a PIL image into "
                         "a CHW tensor") from None
    return x


def _what(x: Any) -> str:
    """A returned value as a message shows it: None, or its type and a short repr."""
    if x is None:
        return "None"
    text = repr(x)
    return f"a {type(x).__name__} ({text if len(text) <= 40 else text[:37] + '...'})"


def to_normalized(img) -> torch.Tensor:
    x = torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1).float().div_(255.0)
    return (x - torch.tensor(MEAN).view(3, 1, 1)) / torch.tensor(STD).view(3, 1, 1)


class TrainPreset:
    """RandomResizedCrop(size) + RandomHorizontalFlip + to float tensor + Normalize, with PIL and torch."""

    def __init__(self, size: int, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
        self.size, self.scale, self.ratio = size, scale, ratio

    def box(self, w: int, h: int) -> tuple[int, int, int, int]:
        area = w * h
        log_r = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * random.uniform(*self.scale)
            ar = math.exp(random.uniform(*log_r))
            cw, ch = round(math.sqrt(target * ar)), round(math.sqrt(target / ar))
            if 0 < cw <= w and 0 < ch <= h:
                left, top = random.randint(0, w - cw), random.randint(0, h - ch)
                return left, top, left + cw, top + ch
        r = w / h  # fallback: centre crop at the nearest allowed ratio
        cw, ch = (w, round(w / self.ratio[0])) if r < self.ratio[0] else \
            (round(h * self.ratio[1]), h) if r > self.ratio[1] else (w, h)
        left, top = (w - cw) // 2, (h - ch) // 2
        return left, top, left + cw, top + ch

    def __call__(self, img) -> torch.Tensor:
        from PIL import Image

        img = img.resize((self.size, self.size), Image.BILINEAR, box=self.box(*img.size))
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        return to_normalized(img)


class ValPreset:
    """Resize the short side to size*256/224, centre-crop size, to float tensor, Normalize."""

    def __init__(self, size: int):
        self.size = size

    def __call__(self, img) -> torch.Tensor:
        from PIL import Image

        w, h = img.size
        short = round(self.size * VAL_RESIZE_RATIO)
        nw, nh = (short, max(1, round(h * short / w))) if w <= h else (max(1, round(w * short / h)), short)
        img = img.resize((nw, nh), Image.BILINEAR)
        left, top = (nw - self.size) // 2, (nh - self.size) // 2
        return to_normalized(img.crop((left, top, left + self.size, top + self.size)))
