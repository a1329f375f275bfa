"""Constructed costs for the limits tests, each known in advance: a transform that burns a fixed CPU time, and a
batch whose unpickling (in the main process, which receives it) sleeps a fixed time."""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset

SPIN_CPU_S = 0.02  # CPU time the spin transform burns per sample
UNPICKLE_S = 0.05  # sleep of the process that unpickles a SlowUnpickle: the main process, once per batch


def _spin(img) -> torch.Tensor:
    t0 = time.thread_time()
    while time.thread_time() - t0 < SPIN_CPU_S:
        pass
    return torch.zeros(3, 8, 8)


def spin():
    """--transform limits_cases:spin: SPIN_CPU_S of thread CPU time per sample (CPU time does not stretch when
    other processes share the core, so the decode probe's CPU per sample is known)."""
    return _spin


def _rebuild() -> SlowUnpickle:
    time.sleep(UNPICKLE_S)
    return SlowUnpickle()


class SlowUnpickle:
    """Free to make and to send; whoever unpickles it sleeps UNPICKLE_S."""

    def __reduce__(self):
        return (_rebuild, ())


def _collate(samples):
    return (torch.stack([x for x, _ in samples]), torch.tensor([y for _, y in samples]), SlowUnpickle())


class Cheap(Dataset):
    """Samples that cost nothing, batched with a SlowUnpickle: only the main process pays, UNPICKLE_S a batch."""

    collate_fn = staticmethod(_collate)

    def __len__(self) -> int:
        return 512

    def __getitem__(self, i: int):
        return torch.zeros(4), i % 10


def cheap():
    return Cheap()
