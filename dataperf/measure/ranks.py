"""One rank of `sweep --ranks G`: its own DataLoader over its split of the data, fed to a consumer that takes each
batch at the model's step rate, timed while every other rank of the host reads too (docs/distributed.md).

A rank's window: its warm-up takes what its workers queued ahead (so the window sees their steady rate, not a
full queue), then at least `window_s` of timed steps, until it holds whole waves (timed_window); its rate counts
whole waves (measure.fed.steady_totals). Afterwards it goes on consuming, untimed, until every rank has finished
its window, so no rank's window has the host to itself at its end. The CPU its main process and its workers spent
over the window is counted, as is the whole machine's (/proc/stat), against the window's samples."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import psutil

from dataperf import backends
from dataperf.data import Data
from dataperf.measure.distributed import DistContext
from dataperf.measure.fed import (
    EpochStream,
    SteadyStep,
    steady_totals,
    to_device,
    wave_starts,
    wave_threshold_s,
    waves_in,
    whole_waves,
)
from dataperf.measure.step import StepOptions, Trainer
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig

COVER_MAX = 10.0  # a rank keeps consuming for the others at most this many windows (a rank that hangs is not waited)
WINDOW_CAP = 3.0  # a window waiting for its second wave ends at this many window_s (a wave longer than a window)


READY_S = 0.002  # a next() that returned within this found its batch ready (it only unpickled the handles)


class PacedConsumer:
    """The model's step emulated (MLPerf Storage's accelerator emulation): a batch of n samples takes n / rate
    seconds, its end an absolute deadline. A step starts when the last one ended, or when its batch came if the
    consumer had to wait for it; a batch that was ready starts at the last deadline even when this process woke
    late from it, so load on the machine delays no step (a late wake-up is absorbed, never accumulated). It
    sleeps: no CPU, as an accelerator's step leaves the host's cores to the loader."""

    def __init__(self, samples_per_s: float):
        self.rate = samples_per_s
        self.end: float | None = None

    def restart(self) -> None:
        """Forget the last deadline (batches were taken without steps since): the next step starts at its batch."""
        self.end = None

    def step(self, batch: dict[str, Any], ask: float, got: float) -> float:
        """Take one batch asked for at `ask` and in hand at `got` (perf_counter); returns the step's seconds."""
        if self.end is None:
            start = got
        else:
            start = self.end if got - ask < READY_S else max(self.end, got)
        busy = batch["n"] / self.rate
        self.end = start + busy
        left = self.end - time.perf_counter()
        if left > 0:
            time.sleep(left)
        return busy


class ModelConsumer:
    """The real model's train step on this rank's own device (where the host has an accelerator per rank),
    synchronised each step so the data wait is the device's idle time."""

    def __init__(self, sopts: StepOptions):
        self.trainer = Trainer(sopts)

    def restart(self) -> None:
        """Nothing to forget: each step starts when it is called."""

    def step(self, batch: dict[str, Any], ask: float, got: float) -> float:
        t0 = time.perf_counter()
        x, y = to_device(batch, self.trainer.device)
        self.trainer.step(x, y)
        self.trainer.sync()
        return time.perf_counter() - t0


Consumer = PacedConsumer | ModelConsumer


@dataclass
class RankFeed:
    """What one rank measured over its timed window (seconds, samples, CPU seconds): the window whole (the span
    the CPU was counted over) and the part of it its rate counts, whole waves (timed_window)."""

    warmup_steps: int
    steps: int
    samples: int  # the window's
    wall_s: float
    wait_s: float
    main_cpu_s: float  # this rank's main process, all its threads (the pin-memory thread's copies included)
    workers_cpu_s: float  # this rank's DataLoader workers
    host_busy_cpu_s: float  # the whole machine (/proc/stat), every process on it
    counted_samples: int  # the rate's: whole waves of the window (all of it where its workers deliver in none)
    counted_wall_s: float
    waves: int  # whole waves counted; 0: no waves (or one wait), every step of the window counted

    @property
    def samples_per_s(self) -> float:
        """The rank's fed rate: its window counted in whole waves."""
        return self.counted_samples / self.counted_wall_s if self.counted_wall_s > 0 else float("nan")


def _children_cpu(proc: psutil.Process, seen: dict[int, float]) -> float:
    """CPU seconds the process's children (its workers) used since `seen` was last updated; updates `seen`."""
    total = 0.0
    for c in proc.children(recursive=True):
        try:
            t = c.cpu_times()
        except psutil.Error:
            continue
        now = t.user + t.system
        total += now - seen.get(c.pid, 0.0)
        seen[c.pid] = now
    return total


def _host_busy() -> float:
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def feed_rank(data: Data, cfg: LoaderConfig, topts: TrialOptions, consumer: Consumer, window_s: float,
              min_steps: int, ctx: DistContext, key: str) -> RankFeed:
    """Feed `consumer` from this rank's loader: warm up, time `window_s` or more (timed_window: at least
    `min_steps` steps, whole waves), then keep consuming until every rank has done the same (ctx.arrive under `key`)."""
    batches, _ = backends.get(cfg.backend).make(data, cfg, replace(topts, rank=ctx.rank, world_size=ctx.world_size))
    stream = EpochStream(batches)
    proc, seen = psutil.Process(), {}
    try:
        warm = _warm_up(stream, consumer, max(cfg.num_workers, 1), window_s)
        _children_cpu(proc, seen)
        consumer.restart()
        main0, host0 = time.process_time(), _host_busy()
        steps, wall = timed_window(stream, consumer, window_s, min_steps)
        main_cpu, workers_cpu, host_cpu = time.process_time() - main0, _children_cpu(proc, seen), _host_busy() - host0
        counted, counted_wall, _ = steady_totals([steps])
        feed = RankFeed(warm, len(steps), sum(s.samples for s in steps), wall, sum(s.wait_s for s in steps),
                        main_cpu, workers_cpu, host_cpu, counted, counted_wall, waves_in([steps]))
        ctx.arrive(key)
        cover_end = time.perf_counter() + COVER_MAX * max(window_s, wall)
        while ctx.arrived(key) < ctx.world_size and time.perf_counter() < cover_end:
            ask = time.perf_counter()
            b = stream.next()
            consumer.step(b, ask, time.perf_counter())
        return feed
    finally:
        it = stream.it
        if hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()


def timed_window(stream: EpochStream, consumer: Consumer, window_s: float, min_steps: int
                 ) -> tuple[list[SteadyStep], float]:
    """The timed steps of a rank's window and its wall seconds. Each step: its wall from its ask for a batch to the
    next ask, its samples, its wait for the batch (its idle: a paced consumer is busy otherwise) and the
    consumer's step seconds. Workers that share the cores finish their batches together and deliver in waves
    (one wait, then W ready batches); a window cut at `window_s` would count wherever in a wave it ended, so it
    ends only on a step that began a wave (measure.fed.wave_starts), once the whole waves since the first such
    step span `window_s` (and the window holds `min_steps`), or at `window_s` where its steps hold no wave at
    all; at WINDOW_CAP x `window_s` in any case (a wave longer than a window: counted whole, steady_totals).
    Whole waves spanning `window_s`, not just two waits: where the waits come irregularly (a loaded box) two
    of them may fall late in the window, and their span alone would be a fraction of it."""
    steps: list[SteadyStep] = []
    t0 = ask = time.perf_counter()
    while True:
        b = stream.next()
        got = time.perf_counter()
        busy = consumer.step(b, ask, got)
        now = time.perf_counter()
        steps.append(SteadyStep(now - ask, b["n"], got - ask, got - ask, busy))
        ask = now
        if now - t0 < window_s or len(steps) < min_steps:
            continue
        if now - t0 >= WINDOW_CAP * window_s:
            break
        wave = wave_threshold_s(steps)
        starts = wave_starts(steps, wave)
        if not starts:
            break
        # ended on a wave's start: whole_waves counts from the first wave's batch to this one's
        if len(starts) >= 2 and starts[-1] == len(steps) - 1 and whole_waves(steps, wave)[1] >= window_s:
            break
    return steps, time.perf_counter() - t0


def _warm_up(stream: EpochStream, consumer: Consumer, workers: int, most_s: float) -> int:
    """Untimed steps until the rank is in its steady state, so the window measures it: one step of each worker's
    first batch (the consumer warms up too); then batches taken as fast as they come, with no step, until one is
    waited for longer than half a step (the queue is empty) or for `most_s`; then paced steps until one finds its
    batch ready (at most workers + 2). A queue left full would add its batches to the window's samples, none of
    their CPU (a paced consumer draining 32 queued batches only 15% faster than the workers refill them would take
    a whole window); an empty one where the workers outpace the consumer would cost the window the wait for its
    first batch (3% of a 3-s window, one worker at twice the step rate). Workers slower than the consumer keep
    the queue empty through the paced steps, as through the window. Returns the batches taken."""
    n, busy = 0, 0.0
    for _ in range(workers):
        ask = time.perf_counter()
        b = stream.next()
        busy = consumer.step(b, ask, time.perf_counter())
        n += 1
    end = time.perf_counter() + most_s
    while True:
        ask = time.perf_counter()
        b = stream.next()
        got = time.perf_counter()
        n += 1
        if got - ask >= busy / 2 or got >= end:
            break
    consumer.restart()
    for _ in range(workers + 2):
        ask = time.perf_counter()
        b = stream.next()
        got = time.perf_counter()
        consumer.step(b, ask, got)
        n += 1
        if got - ask < READY_S:
            break
    return n
