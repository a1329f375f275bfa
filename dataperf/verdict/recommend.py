"""The pick: which trials are judged, which configs `--confirm` feeds, the fed runs grouped by the config they fed,
and the Recommendation (the config to use; input-bound or not, and by how much)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from dataperf.backends import ONE_STREAM
from dataperf.results import DecisionResult, E2EResult, LimitsResult, LoaderConfig, LoaderResult, Record, StepResult
from dataperf.verdict.attack import exposed
from dataperf.verdict.effects import Effect, loader_effects
from dataperf.verdict.findings import table_findings
from dataperf.verdict.fits import TrialFit, trial_fits
from dataperf.verdict.rates import (
    FED_STALL,
    NEAR_BEST,
    NEAR_CONFIRMED,
    cost_key,
    epoch_start_s,
    feeds,
    finite,
    fit,
    model_rate,
    ok_loaders,
    predicted_fed,
    rank_rate,
    run_samples,
    run_wall_s,
    sorted_by_rate,
)

Outcome = Literal["no_trials", "no_decoded", "input_bound", "feeds", "best_without_model"]
Basis = Literal["all", "verified_cold", "unverified_cold_as_warm"]


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
    # input-bound (or no model): the stage of the judged config's breakdown to attack, and how (verdict.attack)
    attack: str = ""
    # what the answer shows beside the pick, judged here so that a renderer only formats it: the step judged
    # against (None without a model), each decoded trial against it (the loader table's "vs model" cells), and
    # what the table cannot show by itself (idle workers, the verdict's caveats)
    step: StepResult | None = None
    fits: list[TrialFit] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)

    def fit_of(self, trial: LoaderResult) -> TrialFit | None:
        """The trial's row against the model; None without a model, for an undecoded or a failed trial."""
        return next((f for f in self.fits if f.trial is trial), None)


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
    return v if finite(v) else 0.0


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


def fullest(trial: LoaderResult, device: str) -> LoaderConfig:
    """The trial's config with every knob `variants` would try turned on (pinned on CUDA, persistent where the
    epoch's start counts): what a GPU training script runs, fed alone where the gain of each is not wanted."""
    c = trial.loader_config
    for v in variants(trial, device):
        c = replace(c, pin_memory=c.pin_memory or v.pin_memory,
                    persistent_workers=c.persistent_workers or v.persistent_workers)
    return c


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
    shown = {"step": step, "fits": trial_fits(results, step, headroom), "findings": table_findings(results, step)}
    if not ok:
        return Recommendation("no_trials", headroom=headroom, **shown)
    rec = Recommendation("best_without_model", basis=j.basis, unverified_cold=j.unverified_cold, headroom=headroom,
                         **shown)
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
        if finite(rec.predicted_samples_per_s) else None
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
    return bool(others) and max(others) * NEAR_BEST > (own if finite(own) and own > 0 else best.samples_per_s)


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
