"""The judging: which trials count, which config to use, and whether the model will wait on its data.

Everything here returns data (a Recommendation, a Fit, a record); `report` only formats it, so `tune`, the
benchmarks and the tests read the decision itself instead of parsing a printed line.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from dataperf.records import E2EResult, LimitsResult, LoaderResult, Record, StepResult

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
    """One config confirmed end to end (`sweep --confirm`): its loader trial and its fed runs, one per round."""

    trial: LoaderResult
    runs: list[E2EResult]

    @property
    def samples_per_s(self) -> float:
        """The fed rate: median over the rounds of each run's samples/s (itself a median over its repeats)."""
        return statistics.median(r.samples_per_s for r in self.runs)

    @property
    def stall_fraction(self) -> float:
        """Median over the rounds of the device's idle share (GPU idle on CUDA, host wait on CPU)."""
        return statistics.median(r.data_stall_fraction for r in self.runs)

    @property
    def effects(self) -> list[str]:
        """Effects any of its runs named, in first-seen order."""
        return list(dict.fromkeys(e for r in self.runs for e in r.effects))


@dataclass
class Recommendation:
    """The verdict over a set of loader trials (and the model's step, when there is one).

    outcome: no_trials (nothing succeeded) | no_decoded (a model, but every trial moved undecoded bytes) |
    feeds (`pick` is the cheapest config sustaining headroom x the step rate) | input_bound (no config does;
    `best` is the fastest) | best_without_model (no step: `pick` is the cheapest within 5% of `best`).
    Confirmed end to end (fed runs of `sweep --confirm` among the results): `pick` is the cheapest config within
    2% of the best fed rate, and the outcome is input_bound when its device still idles over 5% of the time fed.
    """

    outcome: Outcome
    pick: LoaderResult | None = None  # the config to use; None when nothing qualifies
    best: LoaderResult | None = None  # the fastest judged trial
    # which trials were judged: all (as measured: warm, remote, or every one verified cold) | verified_cold (a
    # mix of warm and cold: a training set larger than RAM is read cold, so only verified cold trials count) |
    # unverified_cold_as_warm (cold trials whose eviction was not verified were judged, as warm ones)
    basis: Basis = "all"
    unverified_cold: int = 0  # cold trials not verified as cold among the successful ones
    # with a model: no config sustains headroom x the step rate (the line says INPUT-BOUND); `ratio` says by how
    # much: below 1 the model idles 1 - ratio of the time, from 1 to headroom it is fed without the margin
    input_bound: bool | None = None
    ratio: float | None = None  # pick's rate (else best's) / the step rate; None without a model
    step_samples_per_s: float | None = None
    headroom: float = 1.2
    # the lowest ceiling of the judged config (pick, else best), from its limits record (dataperf.limits);
    # None when no limits record of that config is among the results
    binding_limit: str | None = None
    limits: LimitsResult | None = None
    confirmed: bool = False  # the pick was chosen by fed runs (sweep --confirm), not by the separate figures
    fed_samples_per_s: float | None = None  # the pick's fed rate (FedRate.samples_per_s)
    fed_stall_fraction: float | None = None  # the pick's fed idle share (FedRate.stall_fraction)
    fed: list[FedRate] = field(default_factory=list)  # every config confirmed, cheapest first
    effects: list[Effect] = field(default_factory=list)  # on the judged config: what a fed run would see


def ok_loaders(results: list[Record]) -> list[LoaderResult]:
    return [r for r in results if isinstance(r, LoaderResult) and r.status == "ok"]


def sorted_by_rate(results: list[Record]) -> list[LoaderResult]:
    return sorted(ok_loaders(results), key=lambda r: -r.samples_per_s_median)


def cost_key(r: LoaderResult) -> tuple:
    """Cheapest first: fewest workers (DALI: threads), then smallest prefetch, then smallest batch."""
    c = r.config
    workers = c.get("dali_num_threads") or 0 if c.get("format") == "dali" else c.get("num_workers", 0)
    prefetch = (c.get("dali_prefetch_queue_depth") if c.get("format") == "dali" else c.get("prefetch_factor")) or 0
    return (workers, prefetch, c.get("batch_size", 0), c.get("pin_memory", False),
            c.get("persistent_workers", False))


def cheapest_feeding(results: list[Record], step_sps: float, headroom: float = 1.2) -> LoaderResult | None:
    """The smallest decoded config whose median rate sustains the step rate with headroom, or None."""
    feeding = [r for r in ok_loaders(results) if fit(r.samples_per_s_median, step_sps, headroom).has_headroom
               and r.config.get("decode")]
    return min(feeding, key=cost_key) if feeding else None


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


def confirm_candidates(results: list[Record], step: StepResult, headroom: float, k: int) -> list[LoaderResult]:
    """The configs `sweep --confirm K` feeds to the model: the K cheapest decoded ones that the separate
    measurements say feed it with headroom, or, when fewer than K do, the K fastest."""
    decoded = [r for r in judged(results).trials if r.config.get("decode")]
    feeding = sorted((r for r in decoded if fit(r.samples_per_s_median, step.samples_per_s, headroom).has_headroom),
                     key=cost_key)
    return feeding[:k] if len(feeding) >= k else decoded[:k]


def _same_trial(a: Record, b: Record) -> bool:
    """The same data (however the path was spelled) and the same config key."""
    da, db = getattr(a, "data", ""), getattr(b, "data", "")
    same = da == db or ("://" not in da + db and Path(da).resolve() == Path(db).resolve())
    return same and getattr(a, "config_key", None) == getattr(b, "config_key", None)


def fed_rates(results: list[Record], trials: list[LoaderResult]) -> list[FedRate]:
    """The confirmation runs (e2e records of `sweep --confirm`) grouped by the trial they confirm, cheapest
    first; trials without a successful run are left out."""
    runs = [r for r in results if isinstance(r, E2EResult) and r.status == "ok" and r.confirm_round is not None]
    out = [FedRate(t, [r for r in runs if _same_trial(r, t)]) for t in trials]
    return sorted((f for f in out if f.runs), key=lambda f: cost_key(f.trial))


def latest_limits(results: list[Record], trial: LoaderResult) -> LimitsResult | None:
    """The last limits record measured on this trial's data and config."""
    mine = [r for r in results if isinstance(r, LimitsResult) and r.status == "ok" and _same_trial(r, trial)]
    return mine[-1] if mine else None


def recommend(results: list[Record], step: StepResult | None = None, headroom: float = 1.2) -> Recommendation:
    """The config to use: with a model, the cheapest that feeds it with headroom (or, confirmed end to end, the
    cheapest within 2% of the best fed rate); without, the cheapest within 5% of the best. An unverified cold
    trial is never judged as cold."""
    j = judged(results)
    ok = j.trials
    if not ok:
        return Recommendation("no_trials", headroom=headroom)
    rec = Recommendation("best_without_model", basis=j.basis, unverified_cold=j.unverified_cold, headroom=headroom)
    if step is None:
        rec.best = ok[0]
        near = [r for r in ok if r.samples_per_s_median >= NEAR_BEST * rec.best.samples_per_s_median]
        rec.pick = min(near, key=cost_key)
        _describe_pick(rec, results, step)
        return rec
    rec.step_samples_per_s = step.samples_per_s
    decoded = [r for r in ok if r.config.get("decode")]
    if not decoded:
        rec.outcome = "no_decoded"
        return rec
    rec.best = decoded[0]
    rec.pick = cheapest_feeding(ok, step.samples_per_s, headroom)
    judged_rate = (rec.pick or rec.best).samples_per_s_median
    rec.ratio = fit(judged_rate, step.samples_per_s, headroom).ratio
    rec.input_bound = rec.pick is None
    rec.outcome = "input_bound" if rec.input_bound else "feeds"
    rec.fed = fed_rates(results, decoded)
    if rec.fed:
        top = max(f.samples_per_s for f in rec.fed)
        win = min((f for f in rec.fed if f.samples_per_s >= NEAR_CONFIRMED * top), key=lambda f: cost_key(f.trial))
        rec.pick, rec.confirmed = win.trial, True
        rec.fed_samples_per_s, rec.fed_stall_fraction = win.samples_per_s, win.stall_fraction
        rec.input_bound = win.stall_fraction > FED_STALL
        rec.outcome = "input_bound" if rec.input_bound else "feeds"
        rec.ratio = fit(win.trial.samples_per_s_median, step.samples_per_s, headroom).ratio
    _describe_pick(rec, results, step)
    return rec


def _describe_pick(rec: Recommendation, results: list[Record], step: StepResult | None) -> None:
    """The judged config's limits record, binding limit and effects."""
    chosen = rec.pick or rec.best
    if chosen is None:
        return
    rec.limits = latest_limits(results, chosen)
    rec.binding_limit = (rec.limits.binding_limit or None) if rec.limits else None
    rec.effects = loader_effects(chosen, step)


# --- effects: why a fed run and the separate measurements can disagree -----------------------------------------


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
    if not c.get("num_workers") or c.get("persistent_workers") or not _finite(trial.startup_s_median):
        return None
    n = trial.epoch_samples or trial.samples_per_repeat
    steady = restart_stall(trial.samples_per_s_median, 0.0, n, 0, step_sps)
    epoch = restart_stall(trial.samples_per_s_median, trial.startup_s_median, n, 1, step_sps)
    if not epoch - steady >= SPLIT_POINTS:
        return None
    basis = "an epoch" if trial.epoch_samples else "a repeat (the epoch's length unknown; a longer one pays less)"
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
    if c.get("format") != "dali" or c.get("dali_decode_device") != "mixed" or not device.startswith("cuda"):
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
