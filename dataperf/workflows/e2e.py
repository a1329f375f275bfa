"""End to end: the real loader feeding the real train step. Per step: time waiting on next(loader), the
host-to-device copy, and compute; the data-stall fraction; and the prediction from separate measurements.

The stall is the compute device's idle share. On CUDA the step only enqueues work, so host time spent waiting
for a batch overlaps GPU compute: idle = 1 - sum(h2d + compute, from CUDA events) / wall, with host wait kept
beside it. On CPU the step is synchronous, so the device is idle exactly while the host waits."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from dataperf import backends, verdict
from dataperf.data import Data, as_data
from dataperf.errors import UserError
from dataperf.measure import breakdown, cache
from dataperf.measure.fed import EpochStream, StartSplit, StepTimes, shape_for_model, train_loop, warm_up
from dataperf.measure.step import StepOptions, Trainer, is_oom, measure_step, oom_error
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import E2EResult, LoaderConfig, LoaderResult, StepResult, percentile, summarize


def idle_fraction(busy_ms: list[float], wall_s: float) -> float:
    """The device's idle share of the wall time, from what it was busy with (h2d + compute per step)."""
    if wall_s <= 0:
        return float("nan")
    return min(1.0, max(0.0, 1 - sum(busy_ms) / 1000 / wall_s))


@dataclass(frozen=True)
class FedPlan:
    """What a fed run times and adds (the e2e command's own options): steps per repeat and repeats, the untimed
    warm-up steps, whether the loader and the step measured apart predict the stall beside it, and whether a CUDA
    step is synchronized each time."""

    steps: int = 20
    repeats: int = 3
    warmup: int = 3
    predict: bool = True
    sync_each_step: bool = False
    # more repeats of `steps` while the pooled rate's 95% interval is wider than this share of it (a few slow
    # samples make the short runs disagree: the 2026-12-06 audit's heavy tail fed 202 and 157 in two rounds of
    # one config, truth 212), until an epoch is timed or MAX_EXTRA x the planned steps; None: as planned
    until_ci: float | None = None


@dataclass
class _Timed:
    """What the timed repeats measured: per repeat (the headline's spread, the cache check), per step (medians)."""

    walls: list[float] = field(default_factory=list)  # ms a step, each repeat
    wall_s: list[float] = field(default_factory=list)
    sps: list[float] = field(default_factory=list)
    host: list[float] = field(default_factory=list)  # host wait / wall
    idle: list[float] = field(default_factory=list)  # CUDA: GPU idle / wall
    stalls: list[float] = field(default_factory=list)
    busy_ms: list[float] = field(default_factory=list)  # CUDA: h2d + compute
    samples: list[int] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)  # bytes read from storage
    resident: list[int | None] = field(default_factory=list)  # bytes of the data in the page cache at the start
    fed: list[tuple] = field(default_factory=list)  # (arrivals, h2d ms, samples): breakdown.fed_stages
    # per step from here on: data wait, h2d, compute and host ms, padded lengths
    waits: list[float] = field(default_factory=list)
    h2ds: list[float] = field(default_factory=list)
    comps: list[float] = field(default_factory=list)
    hosts: list[float] = field(default_factory=list)
    lens: list[int] = field(default_factory=list)
    split: StartSplit = field(default_factory=StartSplit)  # steady steps and epoch starts apart

    def add(self, t: StepTimes, wall: float, n_steps: int, read: int, cuda: bool, workers: int) -> None:
        """One repeat of n_steps steps over `wall` seconds, having read `read` bytes, from `workers` workers."""
        self.split.add(t, wall, workers, cuda)
        self.reads.append(read)
        self.samples.append(t.samples)
        self.fed.append((t.arrivals, sum(t.h2d_ms) if cuda else None, t.samples))
        self.wall_s.append(wall)
        self.walls.append(wall / n_steps * 1000)
        self.host.append(sum(t.wait_s) / wall)
        if cuda:
            busy = [h + c for h, c in zip(t.h2d_ms, t.compute_ms, strict=True)]
            self.busy_ms.append(sum(busy))
            self.idle.append(idle_fraction(busy, wall))
        self.stalls.append(self.idle[-1] if cuda else self.host[-1])
        self.sps.append(t.samples / wall)
        self.waits += [w * 1000 for w in t.wait_s]
        self.h2ds += t.h2d_ms
        self.comps += t.compute_ms
        self.hosts += t.step_host_ms
        self.lens += t.padded_lengths


TAIL_CI = 0.05  # sweep's and tune's fed runs: the pooled rate known to +-5% (95%), FedPlan.until_ci
MAX_EXTRA = 3  # a fed run extended for its tail times at most this many times its planned steps


def run_e2e(data: Data | Path, cfg: LoaderConfig, sopts: StepOptions, steps: int = 20, repeats: int = 3,
            warmup: int = 3, predict: bool = True, topts: TrialOptions | None = None,
            until_ci: float | None = None) -> E2EResult:
    """`run_fed` with the plan's fields as arguments, as the sweep's confirmation, the benchmarks and the tests
    call it (no sync each step: that is the e2e command's own option)."""
    return run_fed(data, cfg, sopts, FedPlan(steps, repeats, warmup, predict, until_ci=until_ci), topts)


def run_fed(data: Data | Path, cfg: LoaderConfig, sopts: StepOptions, plan: FedPlan,
            topts: TrialOptions | None = None) -> E2EResult:
    """Measure the fed loop; with plan.predict, also measure loader and step apart and compare."""
    if plan.steps <= 0 or plan.repeats <= 0:
        raise UserError("--steps and --repeats must be positive")
    data = as_data(data)
    cfg, sopts = shape_for_model(data, cfg, sopts)
    topts = topts or TrialOptions()
    try:
        tr = Trainer(sopts)
        batches, prep = backends.get(cfg.backend).make(data, cfg, topts)
        stream = EpochStream(batches)
        res = E2EResult(data=data.spec, config=asdict(cfg), config_key=cfg.key(), model=sopts.model,
                        device=str(tr.device), batch_size=cfg.batch_size, repeats=plan.repeats,
                        steps_per_repeat=plan.steps, sync_each_step=plan.sync_each_step and tr.device.type == "cuda")
        if not data.cache_managed:
            res.notes.append(data.cache_note())
        elif cfg.cache == "warm":
            cache.prepare(prep.paths, "warm")
        _warm(stream, tr, cfg, plan.warmup, res)
        counts = _timed_counts(batches, plan, res)
        timed = _time_repeats(stream, tr, data, cfg, prep.paths, counts, topts, res,
                              _extend(plan, epoch_steps(batches), topts.deadline))
    except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
        if is_oom(e):
            raise oom_error(e, sopts) from None
        raise
    _headline(res, timed, cfg)
    if data.cache_managed:
        _verify_cache(res, cfg, data, prep.paths, timed.reads, timed.samples, timed.resident)
    _step_figures(res, timed, stream.restarts, cfg, data)
    if cfg.pin_memory and tr.device.type != "cuda":
        res.notes.append("pin_memory only matters with a CUDA device; it was not used")
    del tr
    if plan.predict:
        _predict(data, cfg, sopts, res, topts)
    return res


def _warm(stream: EpochStream, tr: Trainer, cfg: LoaderConfig, warmup: int, res: E2EResult) -> None:
    """Untimed steps before the repeats; past the batches the loader queues ahead, where those are more."""
    queued = in_flight_samples(cfg) // cfg.batch_size
    if queued > warmup:  # else the first timed steps eat the workers' head start and read no stall
        ran = warm_up(stream, tr, max(warmup, cfg.num_workers), queued)
        res.notes.append(f"warm-up raised from {warmup} to {ran} steps of at most {queued} (the batches the "
                         "loader queues ahead: workers x prefetch)"
                         + (", ended once the steps had waited on data as long as one step computes: "
                            "nothing was queued any more"
                            if ran < queued else "") + "; so the timed steps see its steady state")
    else:
        train_loop(stream, tr, warmup)
    stream.restarts = 0


def _timed_counts(batches: Any, plan: FedPlan, res: E2EResult) -> list[int]:
    """Each repeat's timed steps (epoch_aligned), recorded, with a note where they differ from those asked."""
    epoch = epoch_steps(batches)
    counts = epoch_aligned(plan.steps, plan.repeats, epoch)
    if epoch and sum(counts) != plan.steps * plan.repeats:
        res.notes.append(f"timed steps {plan.steps} x {plan.repeats} -> {'+'.join(map(str, counts))}: "
                         f"{sum(counts)} steps, {sum(counts) // epoch} whole epoch(s) of {epoch}, so the "
                         "run pays the epoch starts a training epoch pays, neither more nor fewer")
    res.steps_repeats, res.repeats = counts, len(counts)
    return counts


def _extend(plan: FedPlan, epoch: int | None, deadline: float | None) -> Callable[[_Timed, list[int]], int]:
    """Steps of one more repeat (0: the run is done): while plan.until_ci is set, the pooled rate's 95% interval
    (1.96 x the repeats' standard error) is wider than that share of it, the run has not timed an epoch nor
    MAX_EXTRA x its planned steps, and one more repeat fits before the deadline."""
    def more(timed: _Timed, counts: list[int]) -> int:
        if plan.until_ci is None or len(timed.sps) < 2:
            return 0
        done, limit = sum(counts), MAX_EXTRA * plan.steps * plan.repeats
        if (epoch and done >= epoch) or done >= limit:
            return 0
        if deadline is not None and time.monotonic() + sum(timed.wall_s) / len(timed.wall_s) > deadline:
            return 0
        rate = sum(timed.samples) / sum(timed.wall_s)
        half = 1.96 * statistics.stdev(timed.sps) / math.sqrt(len(timed.sps))
        return plan.steps if rate > 0 and half > plan.until_ci * rate else 0

    return more


def _time_repeats(stream: EpochStream, tr: Trainer, data: Data, cfg: LoaderConfig, paths: list[Path],
                  counts: list[int], topts: TrialOptions, res: E2EResult,
                  more: Callable[[_Timed, list[int]], int] | None = None) -> _Timed:
    """The timed repeats, each after the cache is made what cfg.cache asks (cold: evicted), with the bytes read
    from storage meanwhile; then, while `more` asks for them (_extend), further repeats of its steps."""
    timed, cuda = _Timed(), tr.device.type == "cuda"
    # warm, small data: residency once before the repeats (asking between them would pause the fed loop)
    held = cache.warm_resident(paths) if cfg.cache == "warm" and data.cache_managed else None
    counts = list(counts)
    i = 0
    while i < len(counts) or (more is not None and (extra := more(timed, counts))):
        if i == len(counts):
            counts.append(extra)
        n_steps = counts[i]
        i += 1
        if cfg.cache == "cold" and data.cache_managed:
            prepared = cache.prepare(paths, "cold", topts.drop_caches)
            res.notes.extend(n for n in prepared.notes if n not in res.notes)
            timed.resident.append(prepared.resident_bytes)
        elif held is not None:
            timed.resident.append(held)
        read0 = cache.tree_read_bytes()
        t, wall = train_loop(stream, tr, n_steps, sync_each_step=res.sync_each_step)
        timed.add(t, wall, n_steps, cache.tree_read_bytes() - read0, cuda, backends.of(cfg).workers(cfg.__dict__))
    if len(counts) > len(res.steps_repeats):
        res.notes.append(f"timed {len(counts) - len(res.steps_repeats)} more repeat(s) of {counts[-1]} steps: the "
                         "repeats' rates disagreed (slow samples), so the run went on until its pooled rate was "
                         f"known to the interval asked, an epoch, or {MAX_EXTRA}x its plan; {sum(counts)} steps")
        res.steps_repeats, res.repeats = counts, len(counts)
    return timed


def _headline(res: E2EResult, timed: _Timed, cfg: LoaderConfig) -> None:
    """The rates and stall fractions, with what the stall was computed from.

    The headline is pooled over the run (total samples, wait or busy over total wall), as a training run sums
    them: a median repeat drops what hits a minority of repeats (an epoch's tail, a restart; audit F5). The
    per-repeat lists stay for the spread."""
    total_s = sum(timed.wall_s)
    res.step_ms_repeats = timed.walls
    res.samples_per_s_repeats, res.samples_per_s = timed.sps, sum(timed.samples) / total_s
    res.host_wait_fraction_repeats = timed.host
    res.host_wait_fraction = sum(timed.waits) / 1000 / total_s
    res.data_stall_fraction_repeats = timed.stalls
    res.data_stall_fraction = res.host_wait_fraction
    if timed.idle:
        res.gpu_idle_fraction_repeats = timed.idle
        res.gpu_idle_fraction = res.data_stall_fraction = idle_fraction(timed.busy_ms, total_s)
        res.stall_basis = ("GPU idle: 1 - (h2d + compute CUDA events) / wall, one sync per step" if res.sync_each_step
                           else "GPU idle: 1 - (h2d + compute CUDA events) / wall")
        if (be := backends.of(cfg)).decodes_on_gpu(cfg.__dict__):
            res.notes.append(f"{be.title}'s GPU decode runs on its own stream, outside the h2d/compute events: GPU "
                             "idle is the model's idle share, not the whole GPU's")
    else:
        res.stall_basis = "host wait / wall (synchronous CPU step: the device is idle exactly while it waits)"
    _steady(res, timed.split)


def _steady(res: E2EResult, split: StartSplit) -> None:
    """Mid-epoch and epoch start apart (measure.fed.StartSplit): the steady rate and idle share over the steps
    that are not an epoch start's, and what each epoch start the run timed cost beyond that rate."""
    res.steady_samples_per_s, res.steady_stall_fraction = split.steady_samples_per_s, split.steady_idle_fraction
    res.steady_waves = split.waves_counted()
    res.steady_step_wall_ms, res.steady_step_wait_ms = split.trace_ms()
    costs = split.start_costs_s()
    res.epoch_starts_timed = len(costs)
    if costs:
        res.epoch_start_s = sum(costs) / len(costs)


def _step_figures(res: E2EResult, timed: _Timed, restarts: int, cfg: LoaderConfig, data: Data) -> None:
    """The per-step medians, the wait's tail, the epoch restarts and where a sample's time went."""
    _medians(res, step_ms_median=timed.walls, data_wait_ms_median=timed.waits, h2d_ms_median=timed.h2ds,
             compute_ms_median=timed.comps, step_host_ms_median=timed.hosts)
    res.data_wait_ms_p99 = percentile(timed.waits, 99)
    res.epoch_restarts = restarts
    res.stage_ms_per_sample, res.main_wait_ms_per_sample, left = breakdown.fed_stages(
        timed.fed, cfg, data.is_user)
    if left:
        res.notes.append("stage breakdown leaves out " + "; ".join(left))
    if timed.lens:
        res.padded_seq_len_mean = sum(timed.lens) / len(timed.lens)


def _medians(res: E2EResult, **values: list[float]) -> None:
    """Each named field of res set to the median of its values."""
    for name, xs in values.items():
        setattr(res, name, summarize(xs)["median"])


def epoch_steps(batches: Any) -> int | None:
    """Batches in one epoch of this loader (this rank's), where it has a length (map-style datasets)."""
    try:
        n = len(batches)
    except TypeError:
        return None
    return n if n > 0 else None


def epoch_aligned(steps: int, repeats: int, epoch: int | None) -> list[int]:
    """Timed steps of each repeat. Where an epoch is at most twice the run (steps x repeats), the run is made k
    whole epochs (k = the nearest whole number, at least 1), split into the repeats as evenly as steps allow: k x
    epoch consecutive steps hold exactly k epoch starts wherever they begin, so every config's fed rate pays the
    restarts training pays. Without that, a run a little shorter than an epoch held one restart or none by
    chance: on the H200 a fed run with none read 1,677 samples/s and 1% idle, whole epochs of the same config
    1,399 and 19% (2026-12-04). Longer epochs: steps x repeats, unchanged."""
    planned = steps * repeats
    if not epoch or epoch > 2 * planned:
        return [steps] * repeats
    total = max(1, int(planned / epoch + 0.5)) * epoch
    n = min(repeats, total)
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def in_flight_samples(cfg: LoaderConfig) -> int:
    """Samples a loader may already hold when a repeat starts (workers x prefetch batches, DALI's queue): read
    before that repeat's eviction, so a cold repeat is not expected to read them from storage."""
    return backends.of(cfg).in_flight(cfg)


def _verify_cache(res: E2EResult, cfg: LoaderConfig, data: Data, paths: list[Path], reads: list[int],
                  samples: list[int], resident: list[int | None]) -> None:
    """The runner's cache verification (cache.verify) on the fed repeats. The workers keep running across
    repeats, so the samples in flight at a repeat's start may be read around its eviction: a cold repeat
    must read from storage the files of the samples it consumed beyond those, and may find those resident."""
    ahead = in_flight_samples(cfg) if cfg.cache == "cold" else 0
    fresh = [max(0, s - ahead) for s in samples]
    allowance = cache.expected_read_bytes(paths, data.count, [ahead])[0] if ahead else 0
    left = [None if r is None else max(0, r - allowance) for r in resident] or [None] * len(reads)
    v = cache.verify(cfg.cache, reads, cache.expected_read_bytes(paths, data.count, fresh), left,
                     cache.file_bytes(paths))
    res.cache_verified = v.verified
    if v.note:
        res.notes.append(v.note)


def _predict(data: Data, cfg: LoaderConfig, sopts: StepOptions, res: E2EResult, topts: TrialOptions) -> None:
    """Loader and step measured apart (the step at the fed run's batch and padded length), then `compare`."""
    lr = run_trial(data, cfg, replace(topts, collect=False))
    if lr.status != "ok":
        res.notes.append(f"prediction skipped: loader trial failed: {lr.error}")
        return
    seq = round(res.padded_seq_len_mean) if res.padded_seq_len_mean else sopts.seq_len
    st = measure_step(replace(sopts, seq_len=seq, repeats=3, steps=max(3, res.steps_per_repeat // 2)))
    compare(res, lr, st)


def compare(res: E2EResult, trial: LoaderResult, step: StepResult) -> None:
    """A fed run beside its config's loader trial and the step alone: the stall they predict, paying the run's
    epoch restarts (verdict.restart_stall), and the effects that split measured from predicted
    (verdict.fed_effects), each named in res.effects with a note; a gap beyond the noise no effect explains is
    said too."""
    res.loader_samples_per_s, res.step_samples_per_s = trial.samples_per_s_median, step.samples_per_s
    res.loader_repeat_samples_per_s, res.loader_startup_s = trial.repeat_samples_per_s_median, trial.startup_s_median
    per_repeat = verdict.run_samples(res) / max(res.repeats, 1)
    res.predicted_loader_samples_per_s = fed_loader_rate(trial.samples_per_s_median, trial.startup_s_median,
                                                         per_repeat,
                                                         res.epoch_restarts / max(res.repeats, 1))
    res.predicted_stall_fraction = verdict.restart_stall(trial.samples_per_s_median, trial.startup_s_median,
                                                         per_repeat,
                                                         res.epoch_restarts / max(res.repeats, 1),
                                                         step.samples_per_s)
    effects = verdict.fed_effects(res, trial, step)
    res.effects = [e.name for e in effects]
    res.notes += [f"effect: {e.sentence}" for e in effects]
    gap = res.data_stall_fraction - res.predicted_stall_fraction
    noise = max(verdict.SPLIT_POINTS, max(res.data_stall_fraction_repeats, default=0)
                - min(res.data_stall_fraction_repeats, default=0))
    if abs(gap) > noise:
        why = "named above" if effects else ("no known effect (epoch restarts, shared CPU, shared GPU, idle "
                                             "workers) explains it")
        res.notes.append(f"measured stall {res.data_stall_fraction * 100:.0f}% vs "
                         f"{res.predicted_stall_fraction * 100:.0f}% predicted from the separate measurements "
                         f"({gap * 100:+.0f} points, beyond the noise of {noise * 100:.0f}): {why}")


def fed_loader_rate(steady_sps: float, startup_s: float, samples: float, restarts: float) -> float:
    """The loader rate a fed run of `samples` samples sees when it also pays `restarts` epoch starts."""
    if not steady_sps or steady_sps != steady_sps:
        return float("nan")
    startup = startup_s if startup_s == startup_s else 0.0
    return samples / (samples / steady_sps + restarts * startup)
