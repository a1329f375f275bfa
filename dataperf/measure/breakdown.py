"""Where a sample's time goes in a trial: the stage books every batch carried (dataperf.stages), summed over the
steady window and written as `stage_ms_per_sample`, beside the consumer's wait.

Definitions (per repeat; the record holds each stage's median over repeats):
- a worker stage (read, decode, transform, collate): the seconds the workers booked to it in the batches of the
  steady window (every stream's first batch left out, as the steady rate leaves it out), over those batches'
  samples, in ms. Summed over stages it is a worker's time per sample; W workers each that busy give
  W / that samples/s.
- transfer: the hand-over, from when a batch was done in its worker and the consumer asked for it (the later of
  the two) to when the consumer had it: pickling into shared memory, the pipe, unpickling, and the pin thread
  where pinning is on; per sample over the same batches.
- main_wait_ms_per_sample: the consumer's time blocked in next() over the same batches, per sample.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch

from dataperf import backends
from dataperf.data import Data
from dataperf.errors import TrialError
from dataperf.results import LoaderConfig
from dataperf.stages import STAGES


def steady(arrivals: list[Any]) -> list[Any]:
    """The batches of the steady window: each stream's first batch left out."""
    seen: set[int] = set()
    out = []
    for a in arrivals:
        if a.worker in seen:
            out.append(a)
        seen.add(a.worker)
    return out


def repeat_stages(arrivals: list[Any]) -> tuple[dict[str, float], float] | None:
    """(ms per sample by stage, the consumer's wait ms per sample) of one repeat's steady window; None where its
    batches carried no stage books (a backend that keeps none: DALI)."""
    window = steady(arrivals)
    samples = sum(a.samples for a in window)
    if not samples or all(a.stage_s is None for a in window):
        return None
    books: dict[str, float] = {}
    for a in window:
        for stage, s in (a.stage_s or {}).items():
            books[stage] = books.get(stage, 0.0) + s
    handovers = [a.handover_s for a in window if a.handover_s is not None]
    if handovers:
        books["transfer"] = sum(handovers)
    ms = {stage: books[stage] * 1000 / samples for stage in STAGES if stage in books}
    return ms, sum(a.wait_s for a in window) * 1000 / samples


READY_BATCHES = 3  # ready batches a trial needs before their hand-over is taken as the consumer's receive cost


def ready_receive(reps: list[Any]) -> float:
    """The consumer's own cost to take a batch, ms a sample: the hand-over of the steady window's batches that
    were done before the consumer asked (their wait is all receive: pipe, unpickle, tensors rebuilt), over their
    samples, every repeat pooled. A batch the consumer waited for also holds its wake-up and the worker's send in
    its hand-over (beside other load, 0.5 ms a sample where a ready batch took 0.1). NaN with fewer than
    READY_BATCHES ready batches."""
    ready = [a for r in reps for a in steady(r.arrivals) if a.handover_s is not None and a.handover_s == a.wait_s]
    samples = sum(a.samples for a in ready)
    if len(ready) < READY_BATCHES or not samples:
        return float("nan")
    return sum(a.handover_s for a in ready) * 1000 / samples


def stage_medians(per_repeat: list[tuple[dict[str, float], float]]) -> tuple[dict[str, float], float]:
    """Each stage's median over the repeats that booked it, and the wait's median."""
    stages = [s for s in STAGES if any(s in ms for ms, _ in per_repeat)]
    out = {s: statistics.median(ms.get(s, 0.0) for ms, _ in per_repeat) for s in stages}
    return out, statistics.median(w for _, w in per_repeat)


LOADER_H2D = "h2d (a loader trial copies nothing to a device; the fed loop does: e2e, sweep --confirm)"
CPU_H2D = "h2d (the step trains on the CPU: no copy to a device)"


def unseen(cfg: LoaderConfig, stages: dict[str, float], user_dataset: bool, h2d: str | None = LOADER_H2D) -> list[str]:
    """The stages left out of the breakdown, each with why (a note says so); `h2d`: why the copy to the device is
    left out, None where it was measured."""
    why = []
    if not stages:
        return [f"every stage ({cfg.backend} keeps no stage books: its pipeline runs outside dataperf's code)"]
    if backends.of(cfg).own_pipeline:  # timed apart by its own probe (fill): its hand-over and copies are its own
        return [f"collate, transfer, pin and h2d ({backends.of(cfg).title} batches, pins and copies inside its own "
                "pipeline)"]
    if user_dataset:
        why.append("read and decode (a user's Dataset fetches a sample in its own code: booked as transform)")
    elif "decode" not in stages:
        why.append("decode (off: raw bytes)" if not cfg.decode else "decode (not booked by this backend)")
    if "read" not in stages and not user_dataset:
        why.append("read (not booked by this backend)")
    if "transform" not in stages and cfg.decode and not user_dataset:
        why.append("transform (none: tokens are not transformed)")
    if not cfg.pin_memory:
        why.append("pin (off)")
    elif not torch.cuda.is_available():
        why.append("pin (no CUDA device: torch does not pin)")
    else:
        why.append("pin (the DataLoader's pin thread sits between worker and consumer: inside transfer)")
    return why + ([h2d] if h2d else [])


def fill(res: Any, reps: list[Any], cfg: LoaderConfig, data: Data) -> None:
    """The trial record's breakdown: stage_ms_per_sample, main_wait_ms_per_sample, and a note naming the stages
    left out. A backend whose pipeline keeps no books but has a probe of its own (DALI) is timed by it."""
    per_repeat = [x for x in (repeat_stages(r.arrivals) for r in reps) if x is not None]
    if per_repeat:
        res.stage_ms_per_sample, res.main_wait_ms_per_sample = stage_medians(per_repeat)
        res.receive_ms_per_sample = ready_receive(reps)
    elif (probe := backends.of(cfg).stages) is not None:
        try:
            res.stage_ms_per_sample, how = probe(data, cfg)
        except TrialError as e:
            how = f"its stage probe failed: {e}"
        res.notes.append(f"stage breakdown: {how}")
    left = unseen(cfg, res.stage_ms_per_sample, data.is_user)
    if left:
        res.notes.append("stage breakdown leaves out " + "; ".join(left))


def fed_stages(runs: list[tuple[list[Any], float | None, int]], cfg: LoaderConfig,
               user_dataset: bool) -> tuple[dict[str, float], float, list[str]]:
    """A fed run's breakdown from its repeats (each: its batches, its copy-to-device ms or None on a CPU, its
    samples): the loader's stages and hand-over as a trial's, h2d the repeat's copy time over its samples; each
    the median over repeats. Returns it, the step's wait ms a sample, and the stages left out."""
    per_repeat = []
    for arrivals, h2d_ms, samples in runs:
        got = repeat_stages(arrivals)
        if got is None:
            continue
        ms, wait = got
        if samples and h2d_ms is not None:
            ms = {**ms, "h2d": h2d_ms / samples}
        per_repeat.append((ms, wait))
    if not per_repeat:
        return {}, float("nan"), unseen(cfg, {}, user_dataset)
    ms, wait = stage_medians(per_repeat)
    return ms, wait, unseen(cfg, ms, user_dataset, None if "h2d" in ms else CPU_H2D)
