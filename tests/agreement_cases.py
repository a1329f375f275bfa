"""Constructed inputs for the agreement tests, each making one effect large and, where it can be, sleep-based
(a sleep costs no CPU, so its length holds on a loaded machine): samples of a fixed cost (paced on deadlines, so
that each wake-up's lateness is absorbed, not summed), a worker start-up of a fixed cost, and (in tiny_models)
steps of a fixed (paced) length or a fixed CPU time."""

from __future__ import annotations

import os
import time

import torch
from paced import pace
from torch.utils.data import Dataset

SAMPLE_S = 0.01  # every sample sleeps this long
SLOW_SAMPLE_S = 0.1  # ... and every sample of endless_slow()
START_S = 0.5  # a process's first sample sleeps this much more: a fresh worker's start-up, paid every epoch
SPIN_CPU_S = 0.02  # a spinning sample burns this much CPU time
HEAVY_CPU_S = 0.1  # ... and a heavy one this much

_started_in: int | None = None  # the pid that has paid its start-up (a forked worker has another pid)


class Samples(Dataset):
    """`n` samples of shape (3, 8, 8) that take `cost_s` each (paced); with a start-up, the first one a process
    makes also sleeps START_S (non-persistent workers are new processes every epoch, so they pay it every epoch)."""

    def __init__(self, n: int, startup: bool, cost_s: float = SAMPLE_S):
        self.n, self.startup, self.cost_s = n, startup, cost_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        global _started_in
        if self.startup and _started_in != os.getpid():
            _started_in = os.getpid()
            time.sleep(START_S)
        pace(self.cost_s)
        return torch.zeros(3, 8, 8), i % 10


def slow_start() -> Samples:
    """48 samples (12 batches of 4: one epoch), each worker's first paying START_S."""
    return Samples(48, True)


def endless_slow() -> Samples:
    """4096 samples of SLOW_SAMPLE_S (no fed run here reaches an epoch's end, so no worker restarts): a worker slow
    enough that a model it does not feed takes 40 ms a sample, against which a loaded box's hand-over of a batch
    (about 1 ms a sample) is a small share."""
    return Samples(4096, False, SLOW_SAMPLE_S)


class Spinning(Dataset):
    """4096 samples of shape (3, 8, 8) that each burn `cpu_s` of thread CPU time (CPU time does not shrink
    under load, so what a sample costs a core is known)."""

    def __init__(self, cpu_s: float):
        self.cpu_s = cpu_s

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        t0 = time.thread_time()
        while time.thread_time() - t0 < self.cpu_s:
            pass
        return torch.zeros(3, 8, 8), i % 10


def spinning() -> Spinning:
    return Spinning(SPIN_CPU_S)


def heavy() -> Spinning:
    """Samples of HEAVY_CPU_S: a few workers on this machine's cores stay far slower than a 30 ms step, so they
    never wait on a full queue and compete with the step for all of its length."""
    return Spinning(HEAVY_CPU_S)
