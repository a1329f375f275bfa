"""What a config gives the model: the rates every judgement compares (a trial's training rate, the model's rate
fed, the fed rate predicted from the loader and the step measured apart, the CPU both need), the order configs cost
in, and the thresholds the verdict decides by."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from dataperf import backends
from dataperf.backends import ONE_STREAM
from dataperf.results import BUFFER_HID_READS, E2EResult, LoaderConfig, LoaderResult, Record, StepResult, ranked
from dataperf.stages import WORKER_STAGES

NEAR_BEST = 0.95  # without a model: configs within 5% of the best rate count as equally fast
NEAR_CONFIRMED = 0.98  # confirmed in interleaved rounds (fed, or tune's candidates): within 2% of the best is as fast
SPLIT_POINTS = 0.05  # two stall figures closer than this (in fractions of the time) agree
STARVED = 1.25  # a fed step slower than this multiple of the step alone: the training process lacks CPU
FED_STALL = 0.05  # a fed run whose device idles more than this share of the time is input-bound


@dataclass
class Fit:
    """One loader rate against the model's consumption rate (both in samples/s)."""

    ratio: float  # loader / step; < 1: the model idles 1 - ratio of the time (loader and step overlapping)
    headroom: float

    @property
    def input_bound(self) -> bool:
        return self.ratio < 1

    @property
    def idle_fraction(self) -> float:
        return max(0.0, 1 - self.ratio)

    @property
    def has_headroom(self) -> bool:
        return self.ratio >= self.headroom


def fit(loader_sps: float, step_sps: float, headroom: float = 1.2) -> Fit:
    return Fit(loader_sps / step_sps, headroom)


def restart_stall(steady_sps: float, startup_s: float, samples: float, restarts: float, step_sps: float) -> float:
    """The model's idle share over `samples` fed samples when the loader starts `restarts` times (non-persistent
    workers at every epoch): during each start-up the model waits, between them the run goes at the slower of
    loader and step. With no restarts it is fit's idle share."""
    if not (samples > 0 and steady_sps > 0 and step_sps > 0):
        return float("nan")
    startup = startup_s if startup_s is not None and math.isfinite(startup_s) else 0.0
    return max(0.0, 1 - (samples / step_sps) / (samples / min(steady_sps, step_sps) + restarts * startup))


def run_samples(r: E2EResult) -> int:
    """Samples a fed run timed: its timed steps x batch."""
    return sum(r.timed_steps()) * r.batch_size


def run_wall_s(r: E2EResult) -> float:
    """Seconds a fed run's timed steps took, from its pooled rate."""
    return run_samples(r) / r.samples_per_s if r.samples_per_s and r.samples_per_s > 0 else 0.0


def ok_loaders(results: list[Record]) -> list[LoaderResult]:
    return [r for r in results if isinstance(r, LoaderResult) and r.status == "ok"]


def rank_rate(r: LoaderResult) -> float:
    """The rate configs are ranked by: what a training epoch gets (LoaderResult.training_samples_per_s); the
    steady rate in a record from before it was measured."""
    t = r.training_samples_per_s
    return t if finite(t) and t > 0 else r.samples_per_s_median


def sorted_by_rate(results: list[Record]) -> list[LoaderResult]:
    return sorted(ok_loaders(results), key=lambda r: -rank_rate(r))


def workers_of(c: dict | LoaderConfig) -> int:
    """Workers of a config (a backend with its own: those, as DALI's threads)."""
    d = c if isinstance(c, dict) else c.__dict__
    return backends.of(d).workers(d)


COST = ranked("cost")  # the DataLoader knobs that cost, in their declared order (results.config.loader_knob)


def cost_key(r: LoaderResult | LoaderConfig) -> tuple:
    """Cheapest first, knob by knob in COST: fewest workers (DALI: threads), then smallest prefetch (DALI: its
    queue), then smallest batch, unpinned, not persistent."""
    c = r.config if isinstance(r, LoaderResult) else r.__dict__
    return tuple(backends.of(c).counted(c, k.name) for k in COST)


def fed_epoch_s(loads: list[float], steady: float, startup: float, model_sps: float, first: float = 0.0) -> float:
    """Seconds of one fed epoch: the start-up (the model waits), then the DataLoader's in-order, round-robin
    hand-over of the workers' batches: all active workers deliver alike until the lightest runs out, then one
    fewer, and so on; each phase runs at the slower of its workers' rate (k x steady / active) and the model's.
    With `first` (a batch's samples), the start-up is the time to the first batch, by which every worker has
    built its first batch: those are taken at the model's rate, however fast they came (the H200: 16 workers'
    first batches burst in together, and the model still takes 1.9 s to eat them). With the model infinitely
    fast and no `first` this is the loader's own epoch (tail_s)."""
    active = sorted(x for x in loads if x > 0)
    if not active or not steady > 0:
        return float("nan")
    t, r, prev = max(startup, 0.0) if finite(startup) else 0.0, steady / len(active), 0.0
    if first > 0:  # a worker's rate stays steady / active: those that had one batch only are done, not faster
        t += sum(min(x, first) for x in active) / model_sps
        active = sorted(x - first for x in active if x > first)
    for i, level in enumerate(active):
        k = len(active) - i
        t += k * (level - prev) / min(k * r, model_sps)
        prev = level
    return t


def cpu_cap(trial: LoaderResult, step: StepResult) -> float:
    """The fastest rate at which loader and step together use no more CPU than the machine has: each one's CPU
    time a sample (its busy cores over its rate, measured alone) adds up to 1 / rate cores. inf unmeasured."""
    loader, model = trial.cpu_cores_busy_median, step.cpu_cores_busy_median
    if not (finite(loader) and finite(model) and trial.samples_per_s_median > 0 and step.samples_per_s > 0):
        return math.inf
    per_sample = loader / trial.samples_per_s_median + model / step.samples_per_s
    return machine_cores(trial) / per_sample if per_sample > 0 else math.inf


def model_rate(step: StepResult, cfg: LoaderConfig | dict, input_mib_per_sample: float | None = None) -> float:
    """The rate (samples/s) the model takes fed batches of this config at: the step alone, plus on CUDA the copy of
    each batch to the device that the fed loop adds, at the step's measured ms per MiB, pinned or pageable as the
    config says, for the loader's own decoded sample (a trial's `input_mib_per_sample`: float32 after a Normalize
    is 4x the step's uint8 images), else the step's. A backend with its own pipeline (DALI) hands over batches on
    the device."""
    c = cfg if isinstance(cfg, dict) else cfg.__dict__
    m = step.samples_per_s
    per_mib = step.h2d_pinned_ms_per_mib if c.get("pin_memory") else step.h2d_pageable_ms_per_mib
    mib = input_mib_per_sample or step.input_mib_per_sample
    if not (finite(m) and m > 0) or per_mib is None or not mib or not finite(per_mib * mib) \
            or backends.of(c).own_pipeline:
        return m
    return 1 / (1 / m + per_mib * mib / 1000)


def epoch_start_s(trial: LoaderResult) -> tuple[float, bool]:
    """What the model waits at each epoch start, and whether that is the time to the first batch: the trial's
    `ttfb_s_median` (every worker builds its first batch meanwhile), else, in a record without it, the start-up
    beyond the steady rate (`startup_s_median`, which credits the burst of first batches and so reads low fed:
    0.73-0.99 s against ttfb 2.0-2.5 s for 16 workers on the H200)."""
    if finite(trial.ttfb_s_median):
        return trial.ttfb_s_median, True
    return (trial.startup_s_median if finite(trial.startup_s_median) else 0.0), False


GIL_BOUND = 0.5  # a worker whose CPU time is this share of its wall time a sample holds its GIL most of the time
LOADED_CORES = 0.25  # other processes' cores beside a trial past which a waited-for hand-over is not a cost


def receive_s(trial: LoaderResult) -> float:
    """Seconds a sample costs the training process to take from the workers (the batch received and unpickled),
    paid in the same process as the step and serial with it: the hand-over of the batches that were ready when
    asked (`receive_ms_per_sample`), else the whole `transfer` stage; 0 with no workers (loading is then all in
    the training process, predicted_fed counts it whole), where the trial has no breakdown, where none was
    ready and other processes loaded the cores (a waited-for hand-over then holds the wake-up), or where the
    workers keep their cores busy: then the hand-over also holds the worker's own send, its queue's feeder
    thread waiting for the GIL its next sample holds (a latency the prefetch covers, not the training process's
    time: CPU-burning samples on the lent H100's 2-core cpusets read transfer 10.4 ms a sample at 1 worker, its
    whole period, where the fed step was not slowed)."""
    if not trial.config.get("num_workers") or trial.config.get("backend") in ONE_STREAM:
        return 0.0
    stages = trial.stage_ms_per_sample or {}
    worker_ms = sum(v for k, v in stages.items() if k in WORKER_STAGES and finite(v))
    busy, rate = trial.cpu_cores_busy_median, trial.samples_per_s_median
    # CPU a sample (the whole tree's: the workers' and the consumer's, so at most a little high) against a
    # worker's wall time a sample: a batch "done" may not be sent yet, its feeder waiting for the GIL
    if finite(busy) and finite(rate) and rate > 0 and worker_ms > 0 and 1000 * busy / rate >= GIL_BOUND * worker_ms:
        return 0.0
    if finite(trial.receive_ms_per_sample):  # the hand-over of batches that were ready: the consumer's own cost
        return max(trial.receive_ms_per_sample, 0.0) / 1000
    ms, others = stages.get("transfer", 0.0), trial.other_cores_busy_median
    if not (finite(ms) and ms > 0) or (finite(others) and others >= LOADED_CORES):
        return 0.0  # none ready, and beside other load the hand-over holds wake-ups waiting for a core
    return ms / 1000


def host_s(step: StepResult, m: float) -> float:
    """Seconds a sample's step keeps the training process busy: the whole step on a CPU; on CUDA the host time it
    measured (its busy cores over the rate), the rest runs on the GPU meanwhile."""
    busy = step.cpu_cores_busy_median
    return 1 / m if not str(step.device).startswith("cuda") or not finite(busy) else min(busy, 1.0) / m


def consumer_rate(trial: LoaderResult, step: StepResult, cfg: LoaderConfig | None = None) -> float:
    """The rate the training process can take this config's batches at: the model's (model_rate), and with
    workers no faster than its own time a sample allows, the step's host time plus the hand-over (receive_s),
    one after the other (the 2026-12-06 audit's S5: a 5 ms unpickle a sample in the main process, predicted 231
    fed without it, fed 108, truth 116)."""
    m = model_rate(step, cfg or trial.config, trial.input_mib_per_sample)
    recv = receive_s(trial)
    if not (finite(m) and m > 0) or recv <= 0:
        return m
    return min(m, 1 / (host_s(step, m) + recv))


def predicted_steady(trial: LoaderResult, step: StepResult, cfg: LoaderConfig | None = None) -> float:
    """The fed rate mid-epoch (samples/s), the loader running: no epoch start, no tail. No workers: loading serial
    with the step, 1 / (1/L + h) (L the training rate); workers: the slower of the batches' stream
    (stream_rate, else the training rate) and the training process (consumer_rate); in both no faster than the
    CPU the two need together allows (cpu_cap)."""
    m = model_rate(step, cfg or trial.config, trial.input_mib_per_sample)
    rate = rank_rate(trial)
    if not (finite(m) and m > 0 and finite(rate) and rate > 0):
        return float("nan")
    if not trial.config.get("num_workers") and trial.config.get("backend") not in ONE_STREAM:
        fed = 1 / (1 / rate + host_s(step, m))
    else:
        fed = min(stream_or_rank(trial), consumer_rate(trial, step, cfg))
    return min(fed, m, cpu_cap(trial, step))


def predicted_fed(trial: LoaderResult, step: StepResult, cfg: LoaderConfig | None = None) -> float:
    """The rate (samples/s) a fed run of this config (the trial's own, or `cfg`, a variant of it) is predicted to
    give the model over a whole epoch, from the loader trial and the step measured apart:
    - no workers: loading is serial with the step in the training process: 1 / (1/L + h), L the loader's training
      rate and h the step's host time a sample (host_s);
    - workers: an epoch of fed_epoch_s (the time to the first batch, the first batches at the model's rate, then
      each phase at the slower of loader and training process); where the steady rate is not valid, the same at
      the flow rate, or where a shuffle buffer hid reads at the steady rate (stream_rate), else one phase at the
      training rate; the training process takes batches no faster than consumer_rate (the step and the
      hand-over, serial);
    - in both, no faster than the CPU the two need together allows (cpu_cap), nor than the model (model_rate: the
      step plus the batch's copy to the device).
    """
    m, rate = model_rate(step, cfg or trial.config, trial.input_mib_per_sample), rank_rate(trial)
    if not (finite(m) and m > 0 and finite(rate) and rate > 0):
        return float("nan")
    c = trial.config
    if not c.get("num_workers") and c.get("backend") not in ONE_STREAM:
        return predicted_steady(trial, step, cfg)
    take = consumer_rate(trial, step, cfg)
    if (steady := stream_rate(trial)[0]) > 0:
        # an epoch of unknown length (a user's Dataset without a count) is taken as long: start-up not charged
        start, to_first = epoch_start_s(trial) if trial.epoch_samples else (0.0, False)
        w = workers_of(c) if c.get("backend") not in ONE_STREAM else 1
        loads = trial.epoch_worker_samples or [(trial.epoch_samples or 1) / max(w, 1)] * max(w, 1)
        first = c.get("batch_size", 0) if to_first else 0
        if cfg is not None and cfg.persistent_workers and not c.get("persistent_workers") and first:
            # kept workers skip the start, not the refill: one batch each at a worker's rate
            start = min(start, first * sum(1 for x in loads if x > 0) / steady)
        t = fed_epoch_s(loads, steady, start, take, first)
        fed = sum(loads) / t if finite(t) and t > 0 else min(rate, take)
    else:
        fed = min(rate, take)
    return min(fed, m, cpu_cap(trial, step))


def stream_rate(trial: LoaderResult) -> tuple[float, str]:
    """The rate the workers' batches come at after an epoch's first ones, with which rate it is ("steady" or
    "flow"): predicted_fed's stream, and what a prediction of workers x one worker's rate is held against. The
    steady rate;
    where that is not valid, the flow rate (first batch to last, the first batches left out), which needs no
    window a worker (the H200, 16 workers of 3 batches each: steady 2,173-2,479 and flow 1,935-2,158 samples/s;
    against whole-epoch fed runs the flow's prediction read -3.3% to +7.4%, the repeats' rate +16% to +35%,
    benchmarks/results/2026-12-04-h200-repredict). Where a shuffle buffer hid reads there is no flow rate, and
    the steady rate serves again: the start-up measured beside it (the repeat's time beyond its samples at that
    rate) holds the buffer's fill, so the two give back the repeat's own time, and the epoch's phases add its
    tail and each epoch's start (the H100, 37 WebDataset shards, buffer 1000, ResNet-50 bf16, pinned: 12 and
    16 workers predicted -8.6% and +1.2% of their whole-epoch fed runs, +3.8% for 16 pinned persistent; the
    repeats' rate with no phases read +29% to +48%, benchmarks/results/2026-12-05-h100-pick_quality-tokens-wds).
    (0, "") without either."""
    if finite(trial.samples_per_s_median) and (trial.steady_valid or BUFFER_HID_READS in trial.training_basis):
        return trial.samples_per_s_median, "steady"
    f = trial.flow_samples_per_s_median
    return (f, "flow") if finite(f) and f > 0 else (0.0, "")


def stream_or_rank(trial: LoaderResult) -> float:
    """The rate a trial's batches stream at (stream_rate), else its training rate."""
    s = stream_rate(trial)[0]
    return s if s > 0 else rank_rate(trial)


def feeds(trial: LoaderResult, step: StepResult, headroom: float, cfg: LoaderConfig | None = None) -> bool:
    """Predicted to feed the model mid-epoch: the fed steady rate (predicted_steady) idles it at most FED_STALL,
    and (with workers) the loader's training rate has `headroom` over the model's, a margin for what the
    separate measurements cannot see. An epoch start's cost is not starving the model: it is its own finding
    (paid once an epoch, with remedies of its own). `cfg`: the trial's config as it would be run (pinned)."""
    fed = predicted_steady(trial, step, cfg)
    m = model_rate(step, cfg or trial.config, trial.input_mib_per_sample)
    if not (finite(fed) and fed >= (1 - FED_STALL) * m):
        return False
    return not workers_of(trial.config) or rank_rate(trial) >= headroom * m


def latest_step(recs: list[Record]) -> StepResult | None:
    steps = [r for r in recs if isinstance(r, StepResult) and r.status == "ok"]
    return steps[-1] if steps else None


def machine_cores(r: Record | None = None) -> int:
    """The cores the process that measured r could use (its provenance: its affinity, else the machine's count),
    else this process's affinity."""
    env = (getattr(r, "env", None) or {}) if r is not None else {}
    n = env.get("usable_cores") or env.get("cpu_count")  # affinity where recorded (taskset, cpusets)
    if isinstance(n, int) and n > 0:
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)
