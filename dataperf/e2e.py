"""End to end: the real loader feeding the real train step. Per step: time waiting on next(loader), the
host-to-device copy, and compute; the data-stall fraction; and the prediction from separate measurements.

The stall is the compute device's idle share. On CUDA the step only enqueues work, so host time spent waiting
for a batch overlaps GPU compute: idle = 1 - sum(h2d + compute, from CUDA events) / wall, with host wait kept
beside it. On CPU the step is synchronous, so the device is idle exactly while the host waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch.profiler import record_function

from dataperf import cache
from dataperf.errors import UserError
from dataperf.records import E2EResult, LoaderConfig, percentile, summarize
from dataperf.runner import TrialOptions, make_batches, run_trial
from dataperf.sources import Data, as_data
from dataperf.step import StepOptions, Trainer, is_oom, measure_step, oom_error


@dataclass
class StepTimes:
    wait_s: list[float] = field(default_factory=list)
    h2d_ms: list[float] = field(default_factory=list)
    compute_ms: list[float] = field(default_factory=list)
    samples: int = 0
    padded_lengths: list[int] = field(default_factory=list)


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


def idle_fraction(busy_ms: list[float], wall_s: float) -> float:
    """The device's idle share of the wall time, from what it was busy with (h2d + compute per step)."""
    if wall_s <= 0:
        return float("nan")
    return min(1.0, max(0.0, 1 - sum(busy_ms) / 1000 / wall_s))


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
    for _ in range(steps):
        tw = time.perf_counter()
        with record_function("data_wait"):
            b = stream.next()
        t.wait_s.append(time.perf_counter() - tw)
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
        if cuda:
            e[2].record()
            events.append(e)
            if sync_each_step:
                tr.sync()
        else:
            t.compute_ms.append((time.perf_counter() - tc) * 1000)
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


def fed(data: Data, cfg: LoaderConfig, sopts: StepOptions) -> tuple[LoaderConfig, StepOptions]:
    """A loader config that decodes, and step options shaped like its batches (batch size, image size, and
    the input kind of the dataset), for every measurement where the loader feeds the model. Token windows cut
    from a flat stream are --seq-len long, so the step and the loader agree on the sequence length."""
    windows = data.format in ("tokens-bin", "npy")
    cfg = replace(cfg, decode=True, seq_len=cfg.seq_len or (sopts.seq_len if windows else None)).explicit()
    return cfg, replace(sopts, batch_size=cfg.batch_size, image_size=cfg.image_size,
                        input=sopts.input or ("tokens" if data.kind == "tokens" else "image"))


def run_e2e(data: Data | Path, cfg: LoaderConfig, sopts: StepOptions, steps: int = 20, repeats: int = 3,
            warmup: int = 3, predict: bool = True, topts: TrialOptions | None = None,
            sync_each_step: bool = False) -> E2EResult:
    """Measure the fed loop; with predict, also measure loader and step apart and compare."""
    if steps <= 0 or repeats <= 0:
        raise UserError("--steps and --repeats must be positive")
    data = as_data(data)
    cfg, sopts = fed(data, cfg, sopts)
    topts = topts or TrialOptions()
    try:
        tr = Trainer(sopts)
        stream = EpochStream(make_batches(data, cfg, topts))
        res = E2EResult(data=data.spec, config=asdict(cfg), config_key=cfg.key(), model=sopts.model,
                        device=str(tr.device), batch_size=cfg.batch_size, repeats=repeats, steps_per_repeat=steps)
        cuda = tr.device.type == "cuda"
        res.sync_each_step = sync_each_step and cuda
        train_loop(stream, tr, warmup)
        stream.restarts = 0
        walls, stalls, host, idle, sps, waits, h2ds, comps, lens = [], [], [], [], [], [], [], [], []
        for _ in range(repeats):
            if cfg.cache == "cold" and data.cache_managed:
                cache.evict(data.local_paths())
            t, wall = train_loop(stream, tr, steps, sync_each_step=res.sync_each_step)
            walls.append(wall / steps * 1000)
            host.append(sum(t.wait_s) / wall)
            if cuda:
                idle.append(idle_fraction([h + c for h, c in zip(t.h2d_ms, t.compute_ms, strict=True)], wall))
            stalls.append(idle[-1] if cuda else host[-1])
            sps.append(t.samples / wall)
            waits += [w * 1000 for w in t.wait_s]
            h2ds += t.h2d_ms
            comps += t.compute_ms
            lens += t.padded_lengths
    except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
        if is_oom(e):
            raise oom_error(e, sopts) from None
        raise
    res.step_ms_repeats, res.step_ms_median = walls, summarize(walls)["median"]
    res.samples_per_s_repeats, res.samples_per_s = sps, summarize(sps)["median"]
    res.data_stall_fraction_repeats = stalls
    res.data_stall_fraction = summarize(stalls)["median"]
    res.host_wait_fraction_repeats = host
    res.host_wait_fraction = summarize(host)["median"]
    if idle:
        res.gpu_idle_fraction_repeats, res.gpu_idle_fraction = idle, summarize(idle)["median"]
        res.stall_basis = ("GPU idle: 1 - (h2d + compute CUDA events) / wall, one sync per step" if res.sync_each_step
                           else "GPU idle: 1 - (h2d + compute CUDA events) / wall")
        if cfg.format == "dali" and cfg.dali_decode_device == "mixed":
            res.notes.append("DALI's GPU decode runs on its own stream, outside the h2d/compute events: GPU idle "
                             "is the model's idle share, not the whole GPU's")
    else:
        res.stall_basis = "host wait / wall (synchronous CPU step: the device is idle exactly while it waits)"
    if cfg.cache == "cold":
        res.notes.append("cold e2e: the page cache is evicted between repeats while batches are already "
                         "prefetched, and is not verified; use diagnose for a verified cold figure")
    res.data_wait_ms_median = summarize(waits)["median"]
    res.data_wait_ms_p99 = percentile(waits, 99)
    res.epoch_restarts = stream.restarts
    res.h2d_ms_median = summarize(h2ds)["median"]
    res.compute_ms_median = summarize(comps)["median"]
    if lens:
        res.padded_seq_len_mean = sum(lens) / len(lens)
    if cfg.pin_memory and tr.device.type != "cuda":
        res.notes.append("pin_memory only matters with a CUDA device; it was not used")
    del tr
    if predict:
        _predict(data, cfg, sopts, res, topts)
    return res


def _predict(data: Data, cfg: LoaderConfig, sopts: StepOptions, res: E2EResult, topts: TrialOptions) -> None:
    """Separate loader and step measurements, and the stall they predict: 1 - loader rate / step rate."""
    lr = run_trial(data, cfg, replace(topts, collect=False))
    if lr.status != "ok":
        res.notes.append(f"prediction skipped: loader trial failed: {lr.error}")
        return
    seq = round(res.padded_seq_len_mean) if res.padded_seq_len_mean else sopts.seq_len
    st = measure_step(replace(sopts, seq_len=seq, repeats=3, steps=max(3, res.steps_per_repeat // 2)))
    res.loader_samples_per_s, res.step_samples_per_s = lr.samples_per_s_median, st.samples_per_s
    res.loader_epoch_samples_per_s, res.loader_startup_s = lr.epoch_samples_per_s_median, lr.startup_s_median
    res.predicted_loader_samples_per_s = fed_loader_rate(lr.samples_per_s_median, lr.startup_s_median,
                                                         res.steps_per_repeat * res.batch_size,
                                                         res.epoch_restarts / max(res.repeats, 1))
    res.predicted_stall_fraction = max(0.0, 1 - res.predicted_loader_samples_per_s / st.samples_per_s)
    gap = res.data_stall_fraction - res.predicted_stall_fraction
    if gap > 0.1:
        why = "loader workers and the model compete for the same CPU cores"
        if cfg.format == "dali" and cfg.dali_decode_device == "mixed":
            why = "DALI's GPU decode and the model share the GPU (and the host threads feeding both)"
        if res.epoch_restarts and not cfg.persistent_workers:
            why += f"; the loader restarted {res.epoch_restarts} times at epoch ends (try --persistent-workers)"
        res.notes.append(f"measured stall exceeds the prediction by {gap * 100:.0f} points: {why}")


def fed_loader_rate(steady_sps: float, startup_s: float, samples: float, restarts: float) -> float:
    """The loader rate a fed run of `samples` samples sees when it also pays `restarts` epoch starts."""
    if not steady_sps or steady_sps != steady_sps:
        return float("nan")
    startup = startup_s if startup_s == startup_s else 0.0
    return samples / (samples / steady_sps + restarts * startup)
