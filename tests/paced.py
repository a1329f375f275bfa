"""Known answers: samples, transforms and train steps that each cost a fixed wall time, paced on absolute
deadlines, so that load on the machine cannot shift the rates they give (a plain sleep per sample accumulates
each wake-up's latency; a deadline absorbs it). A worker that keeps working delivers exactly 1/T samples/s and
W workers W/T; a paced model's back-to-back steps take exactly STEP_S each.

Used by the tests and by benchmarks/pick_quality.py (PYTHONPATH=tests), as `--dataset paced:sleep_map`,
`--transform paced:sleep_transform`, `--model paced:paced_model` (`paced:fixed_step_model`: a step busy a fixed
time even when it waits for data). Settings come from the environment, so that the DataLoader workers (forked
or spawned) and a command run as a subprocess see the same ones: PACED_T (seconds a sample, 0.02), PACED_N
(samples, 4000), PACED_SHARDS (an iterable's equal shards dealt round-robin to workers, as webdataset's
split_by_worker does, 5), PACED_START (a worker's start-up sleep at its first sample of an epoch, 0),
PACED_STEP_S (seconds a train step, 0.05), PACED_SIZE (image side, 8).
"""

from __future__ import annotations

import os
import threading
import time

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import Dataset, IterableDataset, get_worker_info


def _env(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


_local = threading.local()  # per thread: thread-worker backends pace each thread on its own schedule


def pace(period_s: float, key: str = "sample") -> None:
    """Return `period_s` after the last call's deadline (or now, after an idle gap longer than the period, such
    as a wait for the consumer): back-to-back calls take exactly period_s each on average, however late each
    sleep wakes."""
    deadlines = _local.__dict__.setdefault("deadlines", {})
    now = time.perf_counter()
    d = deadlines.get(key)
    if d is None or now > d + period_s:
        d = now
    d += period_s
    deadlines[key] = d
    left = d - time.perf_counter()
    if left > 0:
        time.sleep(left)


def sample_s() -> float:
    """PACED_T: the seconds each paced sample or transform takes."""
    return _env("PACED_T", 0.02)


def _startup() -> None:
    """PACED_START seconds at a worker's first sample of an iterator (a fresh worker, or a new epoch). Keyed by
    the process: a worker forked from a parent that read a sample (to shape the model's input) starts afresh."""
    start = _env("PACED_START", 0.0)
    if start and _local.__dict__.get("started") != os.getpid():
        time.sleep(start)
        _local.started = os.getpid()
        _local.__dict__.setdefault("deadlines", {}).pop("sample", None)


def _image() -> torch.Tensor:
    s = int(_env("PACED_SIZE", 8))
    return torch.zeros(3, s, s)


class SleepMap(Dataset):
    """A map-style dataset of PACED_N samples, each taking PACED_T seconds: W workers give W / PACED_T."""

    def __len__(self) -> int:
        return int(_env("PACED_N", 4000))

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        _startup()
        pace(sample_s())
        return _image(), i % 10


class SleepShards(IterableDataset):
    """An iterable of PACED_N samples in PACED_SHARDS equal shards, dealt round-robin to the workers: with
    shards not a multiple of the workers, some workers run out first and the epoch ends on the others alone."""

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        n, shards = int(_env("PACED_N", 4000)), int(_env("PACED_SHARDS", 5))
        per = n // shards
        _local.started = False
        _startup()
        for s in range(wid, shards, nw):
            for j in range(per):
                pace(sample_s())
                yield _image(), (s * per + j) % 10


class SleepTransform:
    """A transform taking PACED_T seconds a sample (over a real decoded image)."""

    def __call__(self, img):
        pace(sample_s())
        return _image()


class Paced(torch.nn.Module):
    """A train step of known length: forward returns at an absolute deadline, so back-to-back steps take exactly
    PACED_STEP_S each (backward and the optimizer included, as long as they fit in it)."""

    input_kind = "image"

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pace(_env("PACED_STEP_S", 0.05), "step")
        return self.lin(x.float().mean((2, 3)))


_steps = threading.local()  # when this thread's last optimizer step returned


def _optimizer_stepped(optimizer, args, kwargs) -> None:
    _steps.done_s = time.perf_counter()


# every optimizer in a process that imports this module: FixedStep counts its optimizer's time into the step
register_optimizer_step_post_hook(_optimizer_stepped)


class _EndsAt(torch.autograd.Function):
    """Identity forward; its backward returns at a deadline set in the model's forward, and records on the
    model when it woke and how late (or how far the step's own work overran), for the next step to pay back."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, deadline: float, model: FixedStep) -> torch.Tensor:
        ctx.deadline, ctx.model = deadline, model
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        left = ctx.deadline - time.perf_counter()
        if left > 0:
            time.sleep(left)
        ctx.model.woke_s = time.perf_counter()
        ctx.model.late_s = ctx.model.woke_s - ctx.deadline
        return grad, None, None


class FixedStep(Paced):
    """A train step busy PACED_STEP_S from forward to the end of its optimizer step, however it is called:
    Paced's deadlines hold only for back-to-back steps (a fed step that waited for data about one step since its
    last deadline may find that deadline already due and return at once). Here each step's deadline is its own
    start + PACED_STEP_S, met in backward, less what the last step ran over it (a late wake-up, and the
    optimizer after backward, which load stretches): over steps each is busy PACED_STEP_S, waiting or not."""

    def __init__(self) -> None:
        super().__init__()
        self.late_s = 0.0
        self.woke_s: float | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        over = self.late_s
        done = getattr(_steps, "done_s", None)
        if self.woke_s is not None and done is not None and done > self.woke_s:
            over += done - self.woke_s  # the last step's optimizer, after its backward returned
        deadline = time.perf_counter() + _env("PACED_STEP_S", 0.05) - over
        return _EndsAt.apply(self.lin(x.float().mean((2, 3))), deadline, self)


def sleep_map() -> SleepMap:
    return SleepMap()


def sleep_shards() -> SleepShards:
    return SleepShards()


def sleep_transform() -> SleepTransform:
    return SleepTransform()


def paced_model() -> Paced:
    return Paced()


def fixed_step_model() -> FixedStep:
    return FixedStep()
