"""The loader feeding the train step: the shapes the two must agree on, and the loop that `e2e` times and
`profile` traces (per step: the wait on next(loader), the host-to-device copy, the compute)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch.profiler import record_function

from dataperf.data import Data
from dataperf.errors import UserError
from dataperf.measure.step import StepOptions, Trainer
from dataperf.measure.trial import Arrival
from dataperf.results import LoaderConfig


def shape_for_model(data: Data, cfg: LoaderConfig, sopts: StepOptions) -> tuple[LoaderConfig, StepOptions]:
    """A loader config that decodes, and step options shaped like its batches (batch size, image size, and
    the input kind of the dataset), for every measurement where the loader feeds the model. Token windows cut
    from a flat stream are --seq-len long, so the step and the loader agree on the sequence length. Where a
    user's Dataset or transform makes the images, their shape and dtype are read off one real sample."""
    windows = data.windowed
    cfg = replace(cfg, decode=True, seq_len=cfg.seq_len or (sopts.seq_len if windows else None)).explicit()
    sopts = replace(sopts, batch_size=cfg.batch_size, image_size=cfg.image_size,
                    input=sopts.input or ("tokens" if data.kind == "tokens" else "image"))
    return cfg, shape_step(sopts, [(data, cfg)])


def shape_step(sopts: StepOptions, trials: list[tuple[Data, LoaderConfig]]) -> StepOptions:
    """The step shaped by the first trial's loader (a sweep's trials read one dataset): its image samples'
    shape where a user's Dataset or transform decides it; otherwise the options as given."""
    if not trials or (sopts.input or "image") != "image":
        return sopts
    data, cfg = trials[0]
    shape = loader_image(data, replace(cfg, decode=True))
    return sopts if shape is None else replace(sopts, image_shape=shape[0], image_dtype=shape[1])


def loader_image(data: Data, cfg: LoaderConfig) -> tuple[tuple[int, ...], str] | None:
    """One image sample's (C, H, W) and dtype name as the loader delivers it, where dataperf cannot know them in
    advance (a user's Dataset, or a user's MODULE:FACTORY transform; dataperf's own decode gives 3 x image_size^2
    uint8): read off one real sample, with no workers (each time: a dataset may change between runs). None where
    the decode is dataperf's own, the sample is no image (C, H, W), or reading it failed (the trials then name
    the failure); a sample that never comes is one error line (dataperf.watchdog)."""
    user_transform = ":" in (cfg.transform or "")
    if not data.is_user and not user_transform:
        return None
    from dataperf import backends, watchdog
    from dataperf.measure.trial import TrialOptions

    one = replace(cfg, decode=True, batch_size=1, num_workers=0, prefetch_factor=None, pin_memory=False,
                  persistent_workers=False)
    x = None
    try:
        with watchdog.bounded(f"the first sample of {data.spec}, read to shape the model's input, has not come "
                              "(blocked: a lock, a download?)"):
            x = next(iter(backends.get(one.backend).make(data, one, TrialOptions())[0])).get("x")
    except UserError:
        raise
    except Exception:  # the trials read the same sample and say what is wrong with it
        return None
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        return None
    return tuple(x.shape[1:]), str(x.dtype).removeprefix("torch.")



@dataclass
class StepTimes:
    wait_s: list[float] = field(default_factory=list)
    h2d_ms: list[float] = field(default_factory=list)
    compute_ms: list[float] = field(default_factory=list)
    step_host_ms: list[float] = field(default_factory=list)  # host time inside the step call (CUDA: launching)
    samples: int = 0
    padded_lengths: list[int] = field(default_factory=list)
    arrivals: list[Arrival] = field(default_factory=list)  # each batch with its stage books (measure.breakdown)
    # host time before each step's ask for data since the last step returned: bookkeeping and the on_step hook (a
    # profiler's own work); with the loader behind, the next batch comes on meanwhile and the wait is that much less
    between_ms: list[float] = field(default_factory=list)
    asks_s: list[float] = field(default_factory=list)  # when each step asked for its batch, seconds after t0
    starts: list[bool] = field(default_factory=list)  # whether the step's batch began an epoch (a new iterator)


def to_device(batch: dict[str, Any], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if "x" not in batch:
        raise UserError("end-to-end runs need decoded batches (the loader was built without --decode)")
    nb = device.type == "cuda"
    return batch["x"].to(device, non_blocking=nb), batch["y"].to(device, non_blocking=nb)


class EpochStream:
    """Batches across epochs, as a training loop sees them: one iterator until the epoch ends, then a new one
    (for non-persistent workers that restart is real start-up cost, and it is counted)."""

    def __init__(self, batches):
        self.batches = batches
        self.it = iter(batches)
        self.restarts = 0

    def next(self) -> dict[str, Any]:
        try:
            return next(self.it)
        except StopIteration:
            self.restarts += 1
            self.it = iter(self.batches)
            return next(self.it)


def warm_up(stream: EpochStream, tr: Trainer, least: int, most: int) -> int:
    """Untimed steps until the batches the loader queued ahead are spent, so the timed steps see its steady state:
    at most `most` (all it can queue: workers x prefetch), no fewer than `least` (every worker's first batch
    in), and after that, once the steps have waited on data as long as one step computes, nothing was queued
    any more and the warm-up ends. Waits summed, not a run of waiting steps: workers deliver in waves (two
    workers: a wait, a ready batch, a wait, ...), and a ready batch's scheduling hiccup is a few ms, never a
    step's worth. A loader that feeds the model never makes a step wait and gets all `most`, as before; one that
    cannot stops early (the H200: up to 80 warm-up steps of 256 at 20 workers x prefetch 4, more than an epoch).
    Each step is synced: the wait is what the model, done, waited for. Returns the steps run."""
    waited_s, busy_s = 0.0, []
    for n in range(1, most + 1):
        t, wall = train_loop(stream, tr, 1)
        busy_s.append(max(wall - t.wait_s[0], 0.0))
        if n > least:
            waited_s += t.wait_s[0]
            if waited_s >= sum(busy_s) / len(busy_s):
                return n
    return most


def train_loop(stream: EpochStream, tr: Trainer, steps: int,
               on_step: Callable[[], None] | None = None, sync_each_step: bool = False) -> tuple[StepTimes, float]:
    """Run `steps` real steps fed by the loader; returns times and wall seconds.

    On CUDA, copy and compute are timed with CUDA events (read once at the end), so timing adds no syncs;
    with sync_each_step the host also waits for each step, so host wait equals GPU idle (at some cost).
    """
    cuda = tr.device.type == "cuda"
    t = StepTimes()
    events = []
    t0 = time.perf_counter()
    returned = t0
    for _ in range(steps):
        tw = time.perf_counter()
        t.between_ms.append((tw - returned) * 1000)
        restarts = stream.restarts
        with record_function("data_wait"):
            b = stream.next()
        now = time.perf_counter()
        t.wait_s.append(now - tw)
        t.asks_s.append(tw - t0)
        t.starts.append(stream.restarts > restarts)
        t.arrivals.append(Arrival.of(b, t0, tw, now))
        if cuda:
            e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            e[0].record()
        th = time.perf_counter()
        with record_function("h2d"):
            x, y = to_device(b, tr.device)
        if cuda:
            e[1].record()
        else:
            t.h2d_ms.append((time.perf_counter() - th) * 1000)
        tc = time.perf_counter()
        tr.step(x, y)
        returned = time.perf_counter()
        t.step_host_ms.append((returned - tc) * 1000)
        if cuda:
            e[2].record()
            events.append(e)
            if sync_each_step:
                tr.sync()
        else:
            t.compute_ms.append(t.step_host_ms[-1])
        t.samples += b["n"]
        if x.dim() == 2:
            t.padded_lengths.append(int(x.shape[1]))
        if on_step:
            on_step()
    tr.sync()
    wall = time.perf_counter() - t0
    for e in events:
        t.h2d_ms.append(e[0].elapsed_time(e[1]))
        t.compute_ms.append(e[1].elapsed_time(e[2]))
    return t, wall


AHEAD_SHARE = 0.05  # waits beyond the usual at most this share of the wall: the loader is ahead, no waves
WAVE_WAIT = 0.25  # a steady step that waited this share of a step's busy time, and of the longest wait, beyond
# the usual (a ready batch's hand-over) began a wave


@dataclass
class SteadyStep:
    """A step outside an epoch start's window: its wall (ask to next ask), samples, idle, wait for its batch and
    busy time (the copy and compute)."""

    wall_s: float
    samples: int
    idle_s: float
    wait_s: float
    busy_s: float


def whole_waves(steps: list[SteadyStep], wave_wait_s: float) -> tuple[int, float, float] | None:
    """A run of steady steps' samples, wall and idle seconds, in whole waves: from the batch of the first step
    that waited wave_wait_s or more (steady_totals: beyond a ready batch's hand-over by WAVE_WAIT of a step's
    busy time and of the longest wait; a hiccup is no wave) coming to the last such batch coming, the
    batches between counted. Workers that share the cores finish their batches together and deliver in waves,
    one wait a wave (the unmodified ImageNet script, ResNet-18 on the H100 at 12 workers: 116-277 ms once every
    12 steps, 32 ms between); a window that starts just after a wave (warm-up ends on a wait) and ends inside
    one counts more batches than it has waited for: 20 steps of 16 workers' waves of 16 batches hold one wait
    and read 20 / 16 of the rate. A run without such a wait (fed: the loader ahead) counts whole; one with a
    single wait is part of a wave and cannot be counted in whole ones: None."""
    waits = wave_starts(steps, wave_wait_s)
    if not waits:
        return _totals(steps)
    if len(waits) < 2:
        return None
    a, b = steps[waits[0]], steps[waits[-1]]
    cut = steps[waits[0]:waits[-1]]
    return (sum(s.samples for s in cut), sum(s.wall_s for s in cut) - a.wait_s + b.wait_s,
            max(sum(s.idle_s for s in cut) - min(a.wait_s, a.idle_s) + min(b.wait_s, b.idle_s), 0.0))


def wave_threshold_s(steps: list[SteadyStep]) -> float:
    """The wait that begins a wave among these steps: the usual wait (the median: a ready batch's hand-over) and
    WAVE_WAIT of a step's busy time (the median) and of the longest wait beyond the usual, whichever is more;
    none (inf) where the waits beyond the usual are at most AHEAD_SHARE of the wall: the loader is ahead and a
    wait is a hiccup, not a wave (cutting a fed run to the span between two hiccups counts one of them over a
    shorter wall: its idle share reads up to 1.5x)."""
    usual = sorted(s.wait_s for s in steps)[len(steps) // 2]
    wall = sum(s.wall_s for s in steps)
    if wall <= 0 or sum(max(s.wait_s - usual, 0.0) for s in steps) <= AHEAD_SHARE * wall:
        return math.inf
    busy = max(sorted(s.busy_s for s in steps)[len(steps) // 2], 0.0)
    return usual + WAVE_WAIT * max(busy, max(s.wait_s for s in steps) - usual)


def wave_starts(steps: list[SteadyStep], wave_wait: float) -> list[int]:
    """The steps that began a wave (whole_waves counts from the first to the last of them)."""
    return [i for i, s in enumerate(steps) if s.wait_s > 0 and s.wait_s >= wave_wait]


def steady_totals(runs: list[list[SteadyStep]]) -> tuple[int, float, float]:
    """Samples, wall and idle seconds of runs of steady steps, each in whole waves (whole_waves: a wave's wait is
    beyond the usual wait by WAVE_WAIT of a step's busy time and of the longest wait, over all the runs); where
    no run holds whole waves (short runs, one wave), every step."""
    steps = [s for run in runs for s in run]
    if not steps:
        return 0, 0.0, 0.0
    wave = wave_threshold_s(steps)
    counted = [r for run in runs if run and (r := whole_waves(run, wave)) is not None]
    if not any(r[1] > 0 for r in counted):
        return _totals(steps)
    return sum(r[0] for r in counted), sum(r[1] for r in counted), sum(r[2] for r in counted)


def waves_in(runs: list[list[SteadyStep]]) -> int:
    """The whole waves steady_totals counts in these runs (between a run's first and last wave wait: one fewer than
    its waits, in each run that holds two or more); 0 where every run counted whole. The one count both a fed
    record's `steady_waves` and a rank's `waves_per_rank` give."""
    steps = [s for run in runs for s in run]
    if not steps:
        return 0
    wave = wave_threshold_s(steps)
    return sum(len(w) - 1 for run in runs if len(w := wave_starts(run, wave)) >= 2)


def _totals(steps: list[SteadyStep]) -> tuple[int, float, float]:
    """Every step counted: samples, wall and idle seconds."""
    return sum(s.samples for s in steps), sum(s.wall_s for s in steps), sum(s.idle_s for s in steps)


@dataclass
class StartSplit:
    """A fed run's steps taken apart: the steady steps (mid-epoch, the rate and wait a training epoch has once its
    loader is running) and, for each epoch start the run timed, its window: the step that began the epoch and
    the next workers - 1 (every worker's first batch of the epoch, built while the model waits: the refill).
    The steady steps between two starts are one run, across repeats (training goes on between them), and count
    in whole waves (whole_waves)."""

    runs: list[list[SteadyStep]] = field(default_factory=lambda: [[]])  # steady steps, a run between epoch starts
    windows: list[tuple[float, int]] = field(default_factory=list)  # (wall seconds, samples) of each start's steps

    def add(self, t: StepTimes, wall: float, workers: int, cuda: bool) -> None:
        """One repeat's steps (train_loop's times, its wall seconds): a step's wall runs from its ask for data to
        the next step's (the last: to the repeat's end), its idle is its wait (CPU: the step is synchronous) or
        its wall beyond the copy and compute the GPU was busy with (CUDA events)."""
        ends = [*t.asks_s[1:], wall]
        left = 0
        for i, (ask, end) in enumerate(zip(t.asks_s, ends, strict=True)):
            step_wall, n = end - ask, t.arrivals[i].samples
            if t.starts[i]:
                self.runs.append([])
                left = max(workers, 1)
                self.windows.append((0.0, 0))
            if left > 0:
                w, s = self.windows[-1]
                self.windows[-1] = (w + step_wall, s + n)
                left -= 1
                continue
            busy = (t.h2d_ms[i] + t.compute_ms[i]) / 1000 if cuda else step_wall - t.wait_s[i]
            self.runs[-1].append(SteadyStep(step_wall, n, max(step_wall - busy, 0.0), t.wait_s[i], busy))

    def _steady(self) -> tuple[int, float, float]:
        return steady_totals(self.runs)

    def waves_counted(self) -> int:
        """The whole waves the steady count spans (waves_in)."""
        return waves_in(self.runs)

    def trace_ms(self) -> tuple[list[float], list[float]]:
        """Each steady step's wall and wait (ms, in order, the runs one after another): what the steady figure
        was counted from, kept so a reading can be taken apart later."""
        steps = [s for run in self.runs for s in run]
        return [round(s.wall_s * 1000, 2) for s in steps], [round(s.wait_s * 1000, 2) for s in steps]

    @property
    def steady_samples_per_s(self) -> float:
        samples, wall, _ = self._steady()
        return samples / wall if wall > 0 else float("nan")

    @property
    def steady_idle_fraction(self) -> float:
        _, wall, idle = self._steady()
        return min(1.0, idle / wall) if wall > 0 else float("nan")

    def start_costs_s(self) -> list[float]:
        """What each epoch start cost beyond the steady rate: its window's wall less its samples at that rate."""
        rate = self.steady_samples_per_s
        if not rate > 0:
            return []
        return [max(w - s / rate, 0.0) for w, s in self.windows]
