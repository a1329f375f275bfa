"""The judging: which trials count, which config to use, and whether the model will wait on its data.

Everything here returns data (a Recommendation, a Fit, a record); `report` only formats it, so `tune`, the
benchmarks and the tests read the decision itself instead of parsing a printed line.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from dataperf.backends import ONE_STREAM
from dataperf.results import (
    DecisionResult,
    E2EResult,
    LimitsResult,
    LoaderConfig,
    LoaderResult,
    Record,
    StepResult,
)
from dataperf.verdict.stages import exposed

NEAR_BEST = 0.95  # without a model: configs within 5% of the best rate count as equally fast
NEAR_CONFIRMED = 0.98  # confirmed in interleaved rounds (fed, or tune's candidates): within 2% of the best is as fast
SPLIT_POINTS = 0.05  # two stall figures closer than this (in fractions of the time) agree
STARVED = 1.25  # a fed step slower than this multiple of the step alone: the training process lacks CPU
FED_STALL = 0.05  # a fed run whose device idles more than this share of the time is input-bound

Outcome = Literal["no_trials", "no_decoded", "input_bound", "feeds", "best_without_model"]
Basis = Literal["all", "verified_cold", "unverified_cold_as_warm"]


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


EffectName = Literal["epoch_restarts", "shared_cpu", "shared_gpu", "idle_workers"]


@dataclass
class Effect:
    """Something that makes a fed run differ from the loader and the step measured apart, or that the loader's
    rate owes to a cause the rate alone does not name: one sentence with its figures and the fix.

    stall_fraction: the model's idle share with this effect paid, where the separate measurements predict it."""

    name: EffectName
    sentence: str
    stall_fraction: float | None = None


@dataclass
class FedRate:
    """One config confirmed end to end (`sweep --confirm`): the loader trial it rests on, the config fed (the
    trial's own, or a variant of it with pin_memory or persistent_workers changed) and its fed runs, one a round."""

    trial: LoaderResult
    runs: list[E2EResult]

    @property
    def config(self) -> LoaderConfig:
        """The config the runs fed (a variant's own)."""
        return self.runs[0].loader_config if self.runs else self.trial.loader_config

    @property
    def variant(self) -> bool:
        return any(r.variant_of for r in self.runs)

    @property
    def samples_per_s(self) -> float:
        """The fed rate pooled over the rounds: every run's samples over every run's wall time."""
        walls = [run_wall_s(r) for r in self.runs]
        return sum(run_samples(r) for r in self.runs) / sum(walls) if sum(walls) > 0 else float("nan")

    @property
    def rounds_samples_per_s(self) -> list[float]:
        return [r.samples_per_s for r in self.runs]

    @property
    def stall_fraction(self) -> float:
        """The device's idle share pooled over the rounds (GPU idle on CUDA, host wait on CPU), weighted by time."""
        walls = [run_wall_s(r) for r in self.runs]
        return sum(r.data_stall_fraction * w for r, w in zip(self.runs, walls, strict=True)) / sum(walls) \
            if sum(walls) > 0 else float("nan")

    @property
    def effects(self) -> list[str]:
        """Effects any of its runs named, in first-seen order."""
        return list(dict.fromkeys(e for r in self.runs for e in r.effects))


def run_samples(r: E2EResult) -> int:
    """Samples a fed run timed: its timed steps x batch."""
    return sum(r.timed_steps()) * r.batch_size


def run_wall_s(r: E2EResult) -> float:
    """Seconds a fed run's timed steps took, from its pooled rate."""
    return run_samples(r) / r.samples_per_s if r.samples_per_s and r.samples_per_s > 0 else 0.0


@dataclass
class Recommendation:
    """The verdict over a set of loader trials (and the model's step, when there is one).

    outcome: no_trials (nothing succeeded) | no_decoded (a model, but every trial moved undecoded bytes) |
    feeds (`pick` is the cheapest config predicted to feed the model: its training rate has headroom x the step
    rate and its predicted fed run idles the model at most 5%) | input_bound (no config does; `pick` is the
    cheapest within 2% of the best predicted fed rate) | best_without_model (no step: `pick` is the cheapest within
    5% of the best training rate). Configs are ranked by their training rate (rank_rate), never by a steady rate
    their own notes call invalid. Confirmed end to end (fed runs of `sweep --confirm` among the results): `pick`
    is the cheapest config within 2% of the best fed rate, and the outcome is input_bound when its device still
    idles over 5% of the time fed.
    """

    outcome: Outcome
    pick: LoaderResult | None = None  # the loader trial the pick rests on; None when nothing qualifies
    best: LoaderResult | None = None  # the fastest judged trial (by predicted fed rate with a model)
    # which trials were judged: all (as measured: warm, remote, or every one verified cold) | verified_cold (a
    # mix of warm and cold: a training set larger than RAM is read cold, so only verified cold trials count) |
    # unverified_cold_as_warm (cold trials whose eviction was not verified were judged, as warm ones)
    basis: Basis = "all"
    unverified_cold: int = 0  # cold trials not verified as cold among the successful ones
    # with a model: no config feeds it (the line says INPUT-BOUND); `ratio` says by how much: below 1 the model
    # idles 1 - ratio of the time, from 1 to headroom it is fed without the margin
    input_bound: bool | None = None
    ratio: float | None = None  # pick's training rate / the step rate; None without a model
    step_samples_per_s: float | None = None
    headroom: float = 1.2
    # the fed rate the separate measurements predict for the pick (predicted_fed), and the model's idle share
    predicted_samples_per_s: float | None = None
    predicted_stall_fraction: float | None = None
    # the lowest ceiling of the judged config (pick, else best), from its limits record (dataperf.measure.limits);
    # None when no limits record of that config is among the results
    binding_limit: str | None = None
    limits: LimitsResult | None = None
    confirmed: bool = False  # the pick was chosen by fed runs (sweep --confirm), not by the separate figures
    pick_config: LoaderConfig | None = None  # the config to set: the pick's, or the fed variant that won
    fed_samples_per_s: float | None = None  # the pick's fed rate (FedRate.samples_per_s)
    fed_stall_fraction: float | None = None  # the pick's fed idle share (FedRate.stall_fraction)
    fed: list[FedRate] = field(default_factory=list)  # every config confirmed, cheapest first
    gains: list[str] = field(default_factory=list)  # what each fed variant (pinning, persistent workers) gained
    effects: list[Effect] = field(default_factory=list)  # on the judged config: what a fed run would see
    # the pick is the largest worker count tried, it does not feed the model, and more could run: a lower bound
    lower_bound: bool = False
    lower_bound_why: str = ""
    # input-bound (or no model): the stage of the judged config's breakdown to attack, and how (verdict.stages)
    attack: str = ""


def ok_loaders(results: list[Record]) -> list[LoaderResult]:
    return [r for r in results if isinstance(r, LoaderResult) and r.status == "ok"]


def rank_rate(r: LoaderResult) -> float:
    """The rate configs are ranked by: what a training epoch gets (LoaderResult.training_samples_per_s); the
    steady rate in a record from before it was measured."""
    t = r.training_samples_per_s
    return t if _finite(t) and t > 0 else r.samples_per_s_median


def sorted_by_rate(results: list[Record]) -> list[LoaderResult]:
    return sorted(ok_loaders(results), key=lambda r: -rank_rate(r))


def workers_of(c: dict | LoaderConfig) -> int:
    """Workers of a config (DALI: its threads)."""
    d = c if isinstance(c, dict) else c.__dict__
    return (d.get("dali_num_threads") or 0) if d.get("backend") == "dali" else d.get("num_workers", 0)


def cost_key(r: LoaderResult | LoaderConfig) -> tuple:
    """Cheapest first: fewest workers (DALI: threads), then smallest prefetch, then smallest batch, unpinned,
    not persistent."""
    c = r.config if isinstance(r, LoaderResult) else r.__dict__
    prefetch = (c.get("dali_prefetch_queue_depth") if c.get("backend") == "dali" else c.get("prefetch_factor")) or 0
    return (workers_of(c), prefetch, c.get("batch_size", 0), c.get("pin_memory", False),
            c.get("persistent_workers", False))


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
    t, r, prev = max(startup, 0.0) if _finite(startup) else 0.0, steady / len(active), 0.0
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
    if not (_finite(loader) and _finite(model) and trial.samples_per_s_median > 0 and step.samples_per_s > 0):
        return math.inf
    per_sample = loader / trial.samples_per_s_median + model / step.samples_per_s
    return machine_cores(trial) / per_sample if per_sample > 0 else math.inf


def model_rate(step: StepResult, cfg: LoaderConfig | dict, input_mib_per_sample: float | None = None) -> float:
    """The rate (samples/s) the model takes fed batches of this config at: the step alone, plus on CUDA the copy of
    each batch to the device that the fed loop adds, at the step's measured ms per MiB, pinned or pageable as the
    config says, for the loader's own decoded sample (a trial's `input_mib_per_sample`: float32 after a Normalize
    is 4x the step's uint8 images), else the step's. DALI hands over batches on the device."""
    c = cfg if isinstance(cfg, dict) else cfg.__dict__
    m = step.samples_per_s
    per_mib = step.h2d_pinned_ms_per_mib if c.get("pin_memory") else step.h2d_pageable_ms_per_mib
    mib = input_mib_per_sample or step.input_mib_per_sample
    if not (_finite(m) and m > 0) or per_mib is None or not mib or not _finite(per_mib * mib) \
            or c.get("backend") == "dali":
        return m
    return 1 / (1 / m + per_mib * mib / 1000)


def epoch_start_s(trial: LoaderResult) -> tuple[float, bool]:
    """What the model waits at each epoch start, and whether that is the time to the first batch: the trial's
    `ttfb_s_median` (every worker builds its first batch meanwhile), else, in a record without it, the start-up
    beyond the steady rate (`startup_s_median`, which credits the burst of first batches and so reads low fed:
    0.73-0.99 s against ttfb 2.0-2.5 s for 16 workers on the H200)."""
    if _finite(trial.ttfb_s_median):
        return trial.ttfb_s_median, True
    return (trial.startup_s_median if _finite(trial.startup_s_median) else 0.0), False


def predicted_fed(trial: LoaderResult, step: StepResult, cfg: LoaderConfig | None = None) -> float:
    """The rate (samples/s) a fed run of this config (the trial's own, or `cfg`, a variant of it) is predicted to
    give the model, from the loader trial and the step measured apart:
    - no workers: loading is serial with the step in the training process: 1 / (1/L + h), L the loader's training
      rate and h the step's host time a sample (the whole step on a CPU; on CUDA the CPU time it measured);
    - workers: an epoch of fed_epoch_s (the time to the first batch, the first batches at the model's rate, then
      each phase at the slower of loader and model); where the steady rate is not valid, the same at the flow
      rate (_fed_stream), else one phase at the training rate;
    - in both, no faster than the CPU the two need together allows (cpu_cap), nor than the model (model_rate: the
      step plus the batch's copy to the device).
    """
    m, rate = model_rate(step, cfg or trial.config, trial.input_mib_per_sample), rank_rate(trial)
    if not (_finite(m) and m > 0 and _finite(rate) and rate > 0):
        return float("nan")
    c = trial.config
    if not c.get("num_workers") and c.get("backend") not in ONE_STREAM:
        busy = step.cpu_cores_busy_median
        host = 1 / m if not str(step.device).startswith("cuda") or not _finite(busy) else min(busy, 1.0) / m
        fed = 1 / (1 / rate + host)
    elif (steady := _fed_stream(trial)) > 0:
        # an epoch of unknown length (a user's Dataset without a count) is taken as long: start-up not charged
        start, to_first = epoch_start_s(trial) if trial.epoch_samples else (0.0, False)
        w = workers_of(c) if c.get("backend") not in ONE_STREAM else 1
        loads = trial.epoch_worker_samples or [(trial.epoch_samples or 1) / max(w, 1)] * max(w, 1)
        first = c.get("batch_size", 0) if to_first else 0
        if cfg is not None and cfg.persistent_workers and not c.get("persistent_workers") and first:
            # kept workers skip the start, not the refill: one batch each at a worker's rate
            start = min(start, first * sum(1 for x in loads if x > 0) / steady)
        t = fed_epoch_s(loads, steady, start, m, first)
        fed = sum(loads) / t if _finite(t) and t > 0 else min(rate, m)
    else:
        fed = min(rate, m)
    return min(fed, m, cpu_cap(trial, step))


def _fed_stream(trial: LoaderResult) -> float:
    """The rate the workers' batches come at after an epoch's first ones, for predicted_fed: the steady rate;
    where that is not valid, the flow rate (first batch to last, the first batches left out), which needs no
    window a worker (the H200, 16 workers of 3 batches each: steady 2,173-2,479 and flow 1,935-2,158 samples/s;
    against whole-epoch fed runs the flow's prediction read -3.3% to +7.4%, the repeats' rate +16% to +35%,
    benchmarks/results/2026-12-04-h200-repredict); 0 without either."""
    if trial.steady_valid and _finite(trial.samples_per_s_median):
        return trial.samples_per_s_median
    f = trial.flow_samples_per_s_median
    return f if _finite(f) and f > 0 else 0.0


def feeds(trial: LoaderResult, step: StepResult, headroom: float) -> bool:
    """Predicted to feed the model: the fed run idles it at most FED_STALL, and (with workers) the loader's
    training rate has `headroom` over the model's, a margin for what the separate measurements cannot see."""
    fed, m = predicted_fed(trial, step), model_rate(step, trial.config, trial.input_mib_per_sample)
    if not (_finite(fed) and fed >= (1 - FED_STALL) * m):
        return False
    return not workers_of(trial.config) or rank_rate(trial) >= headroom * m


def latest_step(recs: list[Record]) -> StepResult | None:
    steps = [r for r in recs if isinstance(r, StepResult) and r.status == "ok"]
    return steps[-1] if steps else None


@dataclass
class Judged:
    """The trials a verdict judges, fastest first, and why those (Recommendation.basis)."""

    trials: list[LoaderResult]
    basis: Basis
    unverified_cold: int


def judged(results: list[Record]) -> Judged:
    """Every successful trial; but in a mix of warm and verified cold trials only the cold ones (a training set
    larger than RAM is read cold, so configs are judged by what storage sustains). An unverified cold trial is
    never judged as cold."""
    ok = sorted_by_rate(results)
    cold = [r for r in ok if r.cache_mode == "cold" and r.cache_verified]
    unverified = sum(1 for r in ok if r.cache_mode == "cold" and not r.cache_verified)
    if cold and len(cold) < len(ok):
        return Judged(cold, "verified_cold", unverified)
    return Judged(ok, "unverified_cold_as_warm" if unverified else "all", unverified)


def by_prediction(results: list[Record], step: StepResult) -> list[LoaderResult]:
    """The judged decoded trials, fastest predicted fed rate first (ties: cheapest first)."""
    decoded = [r for r in judged(results).trials if r.config.get("decode")]
    return sorted(decoded, key=lambda r: (-_or0(predicted_fed(r, step)), cost_key(r)))


def _or0(v: float) -> float:
    return v if _finite(v) else 0.0


def confirm_candidates(results: list[Record], step: StepResult, headroom: float, k: int) -> list[LoaderResult]:
    """The configs `sweep --confirm K` feeds to the model: the cheapest predicted to feed it, then those predicted
    within NEAR_BEST of the fastest, cheapest first, then the rest by predicted fed rate, K in all (the cheapest
    and the fastest are the two a fed run most often tells apart). Predictions that close are a tie, not a
    ranking: on the H200 20 workers predicted 1% above 16 were fed alone under a budget and fed 9% less."""
    ranked = by_prediction(results, step)
    feeding = sorted((r for r in ranked if feeds(r, step, headroom)), key=cost_key)
    out = feeding[:1]
    top = _or0(predicted_fed(ranked[0], step)) if ranked else 0.0
    near = sorted((r for r in ranked if _or0(predicted_fed(r, step)) >= NEAR_BEST * top), key=cost_key)
    for r in near + ranked:
        if len(out) >= k:
            break
        if r not in out:
            out.append(r)
    return out[:k]


def variants(trial: LoaderResult, device: str) -> list[LoaderConfig]:
    """The knobs `--confirm` also tries fed on its leading candidate: pin_memory flipped on CUDA (pinned pages copy
    to the GPU faster, at a cost in the main process that a loader alone cannot weigh), and persistent workers
    where the epoch's start is over 5% of it (non-persistent workers pay it every epoch), on the pinned config
    where pinning was the variant: that is what a GPU training script runs (the H200, ResNet-50, 16,000 images,
    16 workers: pinned persistent fed 1,613 samples/s over whole epochs, pinned 1,574; in tune's runs unpinned
    persistent fed 1,337-1,382, pinned 1,385-1,413)."""
    c = trial.loader_config
    out, base = [], c
    if device.startswith("cuda") and c.backend not in ONE_STREAM:
        out.append(replace(c, pin_memory=not c.pin_memory))
        base = out[0] if out[0].pin_memory else c
    start, _ = epoch_start_s(trial)
    short = trial.epoch_estimate_s and start > 0.05 * trial.epoch_estimate_s
    if c.num_workers and not c.persistent_workers and short:
        out.append(replace(base, persistent_workers=True))
    return out


def _same_data(a: Record, b: Record) -> bool:
    da, db = getattr(a, "data", ""), getattr(b, "data", "")
    return da == db or ("://" not in da + db and Path(da).resolve() == Path(db).resolve())


def _same_trial(a: Record, b: Record) -> bool:
    """The same data (however the path was spelled) and the same config key."""
    return _same_data(a, b) and getattr(a, "config_key", None) == getattr(b, "config_key", None)


def fed_rates(results: list[Record], trials: list[LoaderResult]) -> list[FedRate]:
    """The confirmation runs (e2e records of `sweep --confirm`) grouped by the config they fed (a trial's own, or
    a variant of it), cheapest first; configs without a successful run are left out."""
    runs = [r for r in results if isinstance(r, E2EResult) and r.status == "ok" and r.confirm_round is not None]
    out: list[FedRate] = []
    for t in trials:
        own = [r for r in runs if _same_data(r, t) and r.config_key == t.config_key and not r.variant_of]
        if own:
            out.append(FedRate(t, own))
        mine = [r for r in runs if _same_data(r, t) and r.variant_of == t.config_key]
        for key in dict.fromkeys(r.config_key for r in mine):
            out.append(FedRate(t, [r for r in mine if r.config_key == key]))
    return sorted(out, key=lambda f: cost_key(f.config))


def latest_limits(results: list[Record], trial: LoaderResult) -> LimitsResult | None:
    """The last limits record measured on this trial's data and config."""
    mine = [r for r in results if isinstance(r, LimitsResult) and r.status == "ok" and _same_trial(r, trial)]
    return mine[-1] if mine else None


def recommend(results: list[Record], step: StepResult | None = None, headroom: float = 1.2) -> Recommendation:
    """The config to use: with a model, the cheapest predicted to feed it (or, confirmed end to end, the cheapest
    within 2% of the best fed rate); without, the cheapest within 5% of the best training rate. An unverified
    cold trial is never judged as cold."""
    j = judged(results)
    ok = j.trials
    if not ok:
        return Recommendation("no_trials", headroom=headroom)
    rec = Recommendation("best_without_model", basis=j.basis, unverified_cold=j.unverified_cold, headroom=headroom)
    if step is None:
        rec.best = ok[0]
        near = [r for r in ok if rank_rate(r) >= NEAR_BEST * rank_rate(rec.best)]
        rec.pick = min(near, key=cost_key)
        rec.pick_config = rec.pick.loader_config
        rec.predicted_samples_per_s = rank_rate(rec.pick)
        _describe_pick(rec, results, step)
        return rec
    rec.step_samples_per_s = step.samples_per_s
    ranked = by_prediction(results, step)
    if not ranked:
        rec.outcome = "no_decoded"
        return rec
    rec.best = ranked[0]
    top = _or0(predicted_fed(rec.best, step))
    feeding = [r for r in ranked if feeds(r, step, headroom)]
    rec.pick = min(feeding or [r for r in ranked if _or0(predicted_fed(r, step)) >= NEAR_CONFIRMED * top],
                   key=cost_key)
    rec.input_bound = top < (1 - FED_STALL) * model_rate(step, rec.best.config, rec.best.input_mib_per_sample)
    rec.outcome = "input_bound" if rec.input_bound else "feeds"
    rec.fed = fed_rates(results, ranked)
    if rec.fed and not outshone(rec.fed, ranked, step):
        top_fed = fastest(rec.fed)
        near = [f for f in rec.fed if f.samples_per_s >= NEAR_CONFIRMED * top_fed.samples_per_s]
        win = min(near, key=lambda f: cost_key(f.config))
        rec.pick, rec.confirmed, rec.pick_config = win.trial, True, win.config
        rec.fed_samples_per_s, rec.fed_stall_fraction = win.samples_per_s, win.stall_fraction
        # the job is input-bound when even the best fed config leaves the device idle (the pick, within 2% of its
        # rate, may wait a little more)
        rec.input_bound = top_fed.stall_fraction > FED_STALL
        rec.outcome = "input_bound" if rec.input_bound else "feeds"
        rec.gains = variant_gains(rec.fed)
    rec.pick_config = rec.pick_config or rec.pick.loader_config
    fed_m = model_rate(step, rec.pick_config, rec.pick.input_mib_per_sample)
    rec.ratio = fit(rank_rate(rec.pick), fed_m, headroom).ratio
    rec.predicted_samples_per_s = predicted_fed(rec.pick, step, rec.pick_config)
    rec.predicted_stall_fraction = max(0.0, 1 - rec.predicted_samples_per_s / fed_m) \
        if _finite(rec.predicted_samples_per_s) else None
    _describe_pick(rec, results, step)
    return rec


def fastest(fed: list[FedRate]) -> FedRate:
    """The config that fed the model fastest (pooled over its rounds)."""
    return max(fed, key=lambda f: f.samples_per_s)


def saved_bound(rec: Recommendation, results: list[Record]) -> None:
    """A lower bound rests on the sweep's plan (the worker counts it could still have tried), which a results file
    does not hold: take it from the sweep's own decision record where that decided on these same records (the
    same pick, the same number of trials), so that `report` gives the verdict the sweep gave."""
    d = next((r for r in reversed(results) if isinstance(r, DecisionResult) and r.command == "sweep"), None)
    if d and rec.pick_config is not None and d.config_key == rec.pick_config.key() \
            and d.trials == len(ok_loaders(results)):
        rec.lower_bound, rec.lower_bound_why = d.lower_bound, d.lower_bound_why


def outshone(fed: list[FedRate], ranked: list[LoaderResult], step: StepResult) -> bool:
    """A trial that was not fed is predicted to beat the best fed config by more than 1 - NEAR_BEST: then the
    fed runs did not confirm the configs that matter (they came before it), and the pick rests on the
    predictions. Prediction against prediction (the fed config's own, where it has one), like with like: on
    the H200 the predictions read 17-20% above the fed runs, so 20 workers predicted at 1,764 samples/s
    outshone 16 workers fed at 1,506 (predicted 1,815) and left a pick resting on the higher predictions."""
    fed_keys = {f.trial.config_key for f in fed}
    others = [_or0(predicted_fed(r, step)) for r in ranked if r.config_key not in fed_keys]
    best = fastest(fed)
    own = predicted_fed(best.trial, step)
    return bool(others) and max(others) * NEAR_BEST > (own if _finite(own) and own > 0 else best.samples_per_s)


def variant_gains(fed: list[FedRate]) -> list[str]:
    """What each fed variant gained (or lost) against the config it varies, fed, in words."""
    out = []
    knobs = ("pin_memory", "persistent_workers")
    def apart(a: LoaderConfig, b: LoaderConfig) -> int:
        return sum(getattr(a, k) != getattr(b, k) for k in knobs)

    for v in (f for f in fed if f.variant):
        # against the fed config of the same trial one knob away and nearer the trial's own (pinned persistent:
        # against pinned; pinned never against pinned persistent)
        own = v.trial.loader_config
        near = [f for f in fed if f.trial is v.trial and f is not v and apart(v.config, f.config) == 1
                and apart(f.config, own) < apart(v.config, own)]
        base = min(near, key=lambda f: f.variant, default=None) or \
            next((f for f in fed if f.trial is v.trial and not f.variant), None)
        if base is None or not base.samples_per_s > 0:
            continue
        knob = [k for k in knobs if getattr(v.config, k) != getattr(base.config, k)]
        what = " and ".join(f"{k}={getattr(v.config, k)}" for k in knob) or "the variant"
        out.append(f"{what} fed {v.samples_per_s:,.0f} samples/s against {base.samples_per_s:,.0f} "
                   f"({(v.samples_per_s / base.samples_per_s - 1) * 100:+.0f}%) on {base.config.short()}")
    return out


def _describe_pick(rec: Recommendation, results: list[Record], step: StepResult | None) -> None:
    """The judged config's limits record, binding limit and effects."""
    chosen = rec.pick or rec.best
    if chosen is None:
        return
    rec.limits = latest_limits(results, chosen)
    rec.binding_limit = (rec.limits.binding_limit or None) if rec.limits else None
    rec.effects = loader_effects(chosen, step)
    e = exposed(chosen) if rec.outcome in ("input_bound", "best_without_model") else None
    rec.attack = e.sentence() if e else ""


# --- effects: why a fed run and the separate measurements can disagree -----------------------------------------


CORES_FULL = 0.9  # a loader trial whose process tree keeps this share of the machine's cores busy has none left


def cores_full(trial: LoaderResult) -> bool:
    """Whether the trial's process tree (main process and workers) kept CORES_FULL of the machine's cores busy:
    then more workers only share the same cores, and a larger count is settled without a trial. Unmeasured
    (--no-collect) is not full."""
    busy = trial.cpu_cores_busy_median
    return _finite(busy) and busy >= CORES_FULL * machine_cores(trial)


def machine_cores(r: Record | None = None) -> int:
    """The cores of the machine that measured r (its provenance), else this process's affinity."""
    n = (getattr(r, "env", None) or {}).get("cpu_count") if r is not None else None
    if isinstance(n, int) and n > 0:
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def idle_workers(trial: LoaderResult) -> Effect | None:
    w, a = trial.config.get("num_workers", 0), trial.active_workers
    if not w or a is None or a >= w:
        return None
    shards = f"{trial.shards} shards for {w} workers" if trial.shards is not None else f"{w} workers"
    need = w * max(trial.world_size, 1)
    return Effect("idle_workers", f"idle workers: only {a} of {w} workers delivered samples ({shards}), so the rate "
                                  f"is {a} workers' rate; reshard to at least {need} shards (dataperf shards convert "
                                  f"SRC OUT --shards {need}) or use {a} workers")


def epoch_restarts(trial: LoaderResult, step_sps: float) -> Effect | None:
    """Non-persistent workers start again every epoch: a fed run pays that start-up, the steady rate does not.
    Named when the epoch rate (start-up included) predicts the model idle SPLIT_POINTS more than the steady rate."""
    c = trial.config
    if not c.get("num_workers") or c.get("persistent_workers") or not _finite(trial.startup_s_median) \
            or not trial.epoch_samples:
        return None  # an epoch of unknown length: its start-up's share is not known (predicted_fed leaves it out)
    n = trial.epoch_samples
    steady = restart_stall(trial.samples_per_s_median, 0.0, n, 0, step_sps)
    epoch = restart_stall(trial.samples_per_s_median, trial.startup_s_median, n, 1, step_sps)
    if not epoch - steady >= SPLIT_POINTS:
        return None
    basis = "an epoch"
    return Effect("epoch_restarts",
                  f"epoch restarts: non-persistent workers start again every epoch ({trial.startup_s_median:.2f} s "
                  f"each, while the model waits), so over {basis} of {n} samples the model would idle "
                  f"{epoch * 100:.0f}% of the time, not the {steady * 100:.0f}% of the steady rate; use "
                  "--persistent-workers", epoch)


def shared_cpu(trial: LoaderResult, step: StepResult) -> Effect | None:
    """Loader and step measured apart each had the cores to themselves: at the rate they would run at together
    (the slower one's), the CPU time each spends per sample (its busy cores over its rate, measured alone)
    adds up to more cores than the machine has."""
    loader, model = trial.cpu_cores_busy_median, step.cpu_cores_busy_median
    if not trial.config.get("num_workers"):
        return None  # no workers: the training process loads between its steps, not beside them
    if not (_finite(loader) and _finite(model) and trial.samples_per_s_median > 0 and step.samples_per_s > 0):
        return None
    rate = min(trial.samples_per_s_median, step.samples_per_s)
    lc, sc = loader / trial.samples_per_s_median, model / step.samples_per_s
    cores = machine_cores(trial)
    if rate * (lc + sc) <= cores:
        return None
    return Effect("shared_cpu", f"shared CPU: at the {rate:,.0f} samples/s they would run at together, the loader "
                                f"needs {rate * lc:.1f} cores ({lc * 1000:.2f} ms of CPU a sample, measured alone) and "
                                f"the train step {rate * sc:.1f} ({sc * 1000:.2f} ms), more than the {cores} there "
                                "are: both run slower fed than measured apart (sweep --confirm or e2e measures it); "
                                "leave a core for the training process")


def shared_gpu(trial: LoaderResult, device: str) -> Effect | None:
    c = trial.config
    if c.get("backend") != "dali" or c.get("dali_decode_device") != "mixed" or not device.startswith("cuda"):
        return None
    return Effect("shared_gpu", "shared GPU: DALI decodes on the GPU the model trains on; measured apart neither "
                                "sees the other's GPU time (e2e's GPU idle measures the fed run)")


def loader_effects(trial: LoaderResult, step: StepResult | None) -> list[Effect]:
    """What the separate measurements of one config predict a fed run will see: idle workers always; with a
    model, epoch restarts, a shared CPU and a shared GPU."""
    found = [idle_workers(trial)]
    if step is not None and step.status == "ok":
        found += [epoch_restarts(trial, step.samples_per_s), shared_cpu(trial, step), shared_gpu(trial, step.device)]
    return [e for e in found if e is not None]


def fed_effects(run: E2EResult, trial: LoaderResult | None, step: StepResult | None) -> list[Effect]:
    """The effects that split a fed run from the prediction of its separate measurements (run's own loader_* and
    step_* figures: the loader trial and the step alone), as measured.

    idle workers: from the trial. Epoch restarts: the run restarted its workers and paying that start-up moves the
    prediction by SPLIT_POINTS or more. Shared CPU: with workers, the fed step's host time is over STARVED x the
    step alone (its slowest repeat, when the step is given): the workers starve the training process; or the
    measured stall exceeds the prediction beyond the noise while loader and step together need more cores than
    there are. Shared GPU: DALI's GPU decode on a CUDA model whose fed compute or stall exceeds what was
    measured apart."""
    out: list[Effect] = []
    if trial is not None and (e := idle_workers(trial)):
        out.append(e)
    if not (_finite(run.step_samples_per_s) and _finite(run.loader_samples_per_s)):
        return out
    cfg = run.config
    steady = restart_stall(run.loader_samples_per_s, 0.0, 1, 0, run.step_samples_per_s)
    paid = run.predicted_stall_fraction if _finite(run.predicted_stall_fraction) else steady
    if run.epoch_restarts and cfg.get("num_workers") and not cfg.get("persistent_workers") \
            and paid - steady >= SPLIT_POINTS:
        out.append(Effect("epoch_restarts",
                          f"epoch restarts: the workers started again {run.epoch_restarts} times while measured "
                          f"({run.loader_startup_s:.2f} s each alone); paying that, the prediction is "
                          f"{paid * 100:.0f}% idle, at the steady rate alone {steady * 100:.0f}%; use "
                          "--persistent-workers", paid))
    alone_ms = 1000 * run.batch_size / run.step_samples_per_s
    slowest_alone = max(alone_ms, step.step_ms_max if step is not None and _finite(step.step_ms_max) else 0)
    beyond = run.data_stall_fraction - paid > max(SPLIT_POINTS, _spread(run.data_stall_fraction_repeats))
    w = cfg.get("num_workers", 0)
    if w and _finite(run.step_host_ms_median) and run.step_host_ms_median > STARVED * slowest_alone:
        out.append(Effect("shared_cpu",
                          f"shared CPU: fed, the train step took {run.step_host_ms_median:.1f} ms of host time "
                          f"against {alone_ms:.1f} ms alone: the loader's {w} workers starve the training process "
                          f"of CPU; leave cores for it (fewer workers, e.g. {max(w // 2, 1)})",
                          run.data_stall_fraction))
    elif beyond and trial is not None and step is not None and (e := shared_cpu(trial, step)):
        out.append(e)
    if trial is not None and (e := shared_gpu(trial, run.device)):
        slower = _finite(run.compute_ms_median) and run.compute_ms_median > (1 + SPLIT_POINTS) * alone_ms
        if slower or beyond:
            out.append(e)
    return out


def _spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0


# --- the answer in the user's terms -------------------------------------------------------------------------------


def dataloader_args(c: LoaderConfig) -> str:
    """The pick as the arguments to set in the training script."""
    if c.backend == "dali":
        return (f"DALI pipeline: batch_size={c.batch_size}, num_threads={c.dali_num_threads}, "
                f"prefetch_queue_depth={c.dali_prefetch_queue_depth}, decode on {c.dali_decode_device}")
    kw = [f"batch_size={c.batch_size}", f"num_workers={c.num_workers}"]
    if c.num_workers:
        kw += [f"prefetch_factor={c.prefetch_factor}", f"persistent_workers={c.persistent_workers}"]
    kw.append(f"pin_memory={c.pin_memory}")
    where = "" if c.backend in ("files", "user-dataset") else f"  ({c.backend} backend)"
    return "DataLoader(dataset, " + ", ".join(kw) + ")" + where


def answer(rec: Recommendation) -> list[str]:
    """The decision as a user acts on it: the DataLoader arguments to set, the rate and data wait to expect, and
    how sure (the spread of the fed rounds, or that the rate is a prediction)."""
    if rec.pick is None or rec.pick_config is None:
        return []
    out = [f"answer: {dataloader_args(rec.pick_config)}"]
    if rec.step_samples_per_s is None:
        out.append(f"expect: about {rank_rate(rec.pick):,.0f} samples/s from the loader over a training epoch "
                   "(no model given: whether training waits on it is not measured; add --model)")
        return out + ([f"attack: {rec.attack}"] if rec.attack else [])
    fed = next((f for f in rec.fed if rec.confirmed and f.trial is rec.pick
                and f.config.key() == rec.pick_config.key()), None)
    if fed is not None:
        rounds = fed.rounds_samples_per_s
        out.append(f"expect: {fed.samples_per_s:,.0f} samples/s fed (rounds {min(rounds):,.0f}-{max(rounds):,.0f}), "
                   f"training waiting on data {fed.stall_fraction * 100:.0f}% of the time")
    elif _finite(rec.predicted_samples_per_s):
        out.append(f"expect: about {rec.predicted_samples_per_s:,.0f} samples/s fed, training waiting on data "
                   f"{(rec.predicted_stall_fraction or 0) * 100:.0f}% of the time (predicted from the loader and the "
                   "step measured apart, not confirmed fed: --confirm 2 checks it)")
    if rec.attack:
        out.append(f"attack: {rec.attack}")
    return out
