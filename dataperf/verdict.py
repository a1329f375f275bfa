"""The judging: which trials count, which config to use, and whether the model will wait on its data.

Everything here returns data (a Recommendation, a Fit, a record); `report` only formats it, so `tune`, the
benchmarks and the tests read the decision itself instead of parsing a printed line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dataperf.records import LoaderResult, Record, StepResult

NEAR_BEST = 0.95  # without a model: configs within 5% of the best rate count as equally fast

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


@dataclass
class Recommendation:
    """The verdict over a set of loader trials (and the model's step, when there is one).

    outcome: no_trials (nothing succeeded) | no_decoded (a model, but every trial moved undecoded bytes) |
    feeds (`pick` is the cheapest config sustaining headroom x the step rate) | input_bound (no config does;
    `best` is the fastest) | best_without_model (no step: `pick` is the cheapest within 5% of `best`).
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
    # the limit that holds the loader back when input-bound (storage, cores, ...): filled by the ceilings
    # table of issue 13 (dataperf/limits.py); None until that is measured
    binding_limit: str | None = None


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


def recommend(results: list[Record], step: StepResult | None = None, headroom: float = 1.2) -> Recommendation:
    """The config to use: with a model, the cheapest that feeds it with headroom; without, the cheapest within
    5% of the best. An unverified cold trial is never judged as cold."""
    ok = sorted_by_rate(results)
    if not ok:
        return Recommendation("no_trials", headroom=headroom)
    cold = [r for r in ok if r.cache_mode == "cold" and r.cache_verified]
    unverified = sum(1 for r in ok if r.cache_mode == "cold" and not r.cache_verified)
    basis: Basis = "unverified_cold_as_warm" if unverified else "all"
    judged: list[Record] = list(results)
    if cold and len(cold) < len(ok):
        # a training set larger than RAM is read cold: judge configs by what storage sustains
        ok, judged, basis = cold, list(cold), "verified_cold"
    rec = Recommendation("best_without_model", basis=basis, unverified_cold=unverified, headroom=headroom)
    if step is None:
        rec.best = ok[0]
        near = [r for r in ok if r.samples_per_s_median >= NEAR_BEST * rec.best.samples_per_s_median]
        rec.pick = min(near, key=cost_key)
        return rec
    rec.step_samples_per_s = step.samples_per_s
    decoded = [r for r in ok if r.config.get("decode")]
    if not decoded:
        rec.outcome = "no_decoded"
        return rec
    rec.best = decoded[0]
    rec.pick = cheapest_feeding(judged, step.samples_per_s, headroom)
    judged_rate = (rec.pick or rec.best).samples_per_s_median
    rec.ratio = fit(judged_rate, step.samples_per_s, headroom).ratio
    rec.input_bound = rec.pick is None
    rec.outcome = "input_bound" if rec.input_bound else "feeds"
    return rec
