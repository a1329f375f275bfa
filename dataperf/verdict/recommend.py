"""The pick: which trials are judged, which configs `--confirm` feeds, the fed runs grouped by the config they fed,
and the Recommendation (the config to use; input-bound or not, and by how much)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from dataperf import backends
from dataperf.backends import ONE_STREAM
from dataperf.results import DecisionResult, E2EResult, LimitsResult, LoaderConfig, LoaderResult, Record, StepResult
from dataperf.verdict.binding import Binding, judge
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
    predicted_steady,
    rank_rate,
    run_samples,
    run_wall_s,
    sorted_by_rate,
    stream_or_rank,
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

    def _steady(self, name: str, whole: float) -> float:
        """A mid-epoch figure pooled over the runs that measured it, weighted by their wall time; a run from
        before it was measured counts its whole-run figure."""
        walls = [run_wall_s(r) for r in self.runs]
        vals = [getattr(r, name) if finite(getattr(r, name)) else None for r in self.runs]
        if all(v is None for v in vals) or sum(walls) <= 0:
            return whole
        own = [(v, w) for v, w in zip(vals, walls, strict=True) if v is not None]
        return sum(v * w for v, w in own) / sum(w for _, w in own)

    @property
    def steady_samples_per_s(self) -> float:
        """The fed rate mid-epoch (E2EResult.steady_samples_per_s), pooled over the rounds."""
        return self._steady("steady_samples_per_s", self.samples_per_s)

    @property
    def steady_stall_fraction(self) -> float:
        """The device's idle share mid-epoch (E2EResult.steady_stall_fraction): what INPUT-BOUND is judged on."""
        return self._steady("steady_stall_fraction", self.stall_fraction)

    @property
    def epoch_start_s(self) -> float:
        """What an epoch start cost fed beyond the steady rate, over the starts the runs timed (NaN: none)."""
        starts = [(r.epoch_start_s, r.epoch_starts_timed) for r in self.runs
                  if r.epoch_starts_timed and finite(r.epoch_start_s)]
        n = sum(k for _, k in starts)
        return sum(v * k for v, k in starts) / n if n else float("nan")

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
    # the binding limit as the verdict judged it (never the model beside INPUT-BOUND), with its advice
    binding: Binding | None = None
    # mid-epoch and epoch start apart: the pick's fed rate and idle mid-epoch (fed where the fed loop measured
    # it, else predicted), what each epoch start costs the model (seconds waiting beyond the steady rate), and its
    # share of an epoch of `epoch_samples` samples
    steady_samples_per_s: float | None = None
    steady_stall_fraction: float | None = None
    epoch_start_s: float | None = None
    epoch_start_measured: bool = False
    epoch_samples: int | None = None
    epoch_start_fraction: float | None = None

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


def recommend(results: list[Record], step: StepResult | None = None, headroom: float = 1.2,
              epoch_samples: int | None = None) -> Recommendation:
    """The config to use: with a model, the cheapest predicted to feed it (or, confirmed end to end, the cheapest
    within 2% of the best fed rate); without, the cheapest within 5% of the best training rate. An unverified
    cold trial is never judged as cold. `epoch_samples`: the user's epoch, which the epoch start's share is of
    (default: the data's size)."""
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
    run_as = {r.config_key: _pinned(r.loader_config, r, step) for r in ranked}  # as the user would run each
    feeding = [r for r in ranked if feeds(r, step, headroom, run_as[r.config_key])]
    rec.pick = min(feeding or [r for r in ranked if _or0(predicted_fed(r, step)) >= NEAR_CONFIRMED * top],
                   key=cost_key)
    # input-bound: no config is predicted to keep the model busy mid-epoch (an epoch start is its own finding)
    rec.input_bound = not any(_or0(predicted_steady(r, step, run_as[r.config_key])) >= (1 - FED_STALL) * model_rate(
        step, run_as[r.config_key], r.input_mib_per_sample) for r in ranked)
    rec.outcome = "input_bound" if rec.input_bound else "feeds"
    rec.fed = fed_rates(results, ranked)
    judged_rate = None
    if rec.fed and not outshone(rec.fed, ranked, step):
        # the job is input-bound when even the least idle fed config leaves the device idle mid-epoch; where one
        # feeds it, the pick is one that feeds (the cheapest within 2% of the best rate may otherwise wait more)
        fed_ok = [f for f in rec.fed if judged_wait(f, step) <= FED_STALL]
        pool = fed_ok or rec.fed
        top_fed = fastest(pool)
        near = [f for f in pool if f.samples_per_s >= NEAR_CONFIRMED * top_fed.samples_per_s]
        win = min(near, key=lambda f: cost_key(f.config))
        rec.pick, rec.confirmed, rec.pick_config = win.trial, True, win.config
        rec.fed_samples_per_s, rec.fed_stall_fraction = win.samples_per_s, win.stall_fraction
        rec.input_bound = not fed_ok  # a fed figure outranks every prediction
        rec.outcome = "input_bound" if rec.input_bound else "feeds"
        rec.gains = variant_gains(rec.fed)
        rec.steady_samples_per_s, rec.steady_stall_fraction = win.steady_samples_per_s, judged_wait(win, step)
        if finite(win.epoch_start_s):
            rec.epoch_start_s, rec.epoch_start_measured = win.epoch_start_s, True
        judged_rate = win.steady_samples_per_s
    rec.pick_config = rec.pick_config or rec.pick.loader_config
    if not rec.confirmed:
        rec.pick_config = run_as[rec.pick.config_key]
    fed_m = model_rate(step, rec.pick_config, rec.pick.input_mib_per_sample)
    rec.ratio = fit(rank_rate(rec.pick), fed_m, headroom).ratio
    rec.predicted_samples_per_s = predicted_fed(rec.pick, step, rec.pick_config)
    rec.predicted_stall_fraction = max(0.0, 1 - rec.predicted_samples_per_s / fed_m) \
        if finite(rec.predicted_samples_per_s) else None
    if rec.steady_samples_per_s is None:
        steady = predicted_steady(rec.pick, step, rec.pick_config)
        rec.steady_samples_per_s = steady
        rec.steady_stall_fraction = max(0.0, 1 - steady / fed_m) if finite(steady) else None
        judged_rate = steady
    _epoch_start(rec, epoch_samples)
    _describe_pick(rec, results, step, judged_rate)
    return rec


def _pinned(cfg: LoaderConfig, trial: LoaderResult, step: StepResult) -> LoaderConfig:
    """A config as the user should run it on a GPU: pinned where the backend pins and pinned copies make the
    model faster (model_rate). Loader trials run unpinned (no copy to time), so configs were judged and answered
    with pageable copies: on the H100, ResNet-50 answered pin_memory=False and expected at 1,657 samples/s where
    its pinned fed runs gave 1,807-1,842 (issue 50)."""
    if cfg.pin_memory or "pin_memory" not in backends.of(cfg.__dict__).knobs:
        return cfg
    pinned = replace(cfg, pin_memory=True)
    mib = trial.input_mib_per_sample
    return pinned if model_rate(step, pinned, mib) > model_rate(step, cfg, mib) else cfg


def _epoch_start(rec: Recommendation, epoch_samples: int | None) -> None:
    """The pick's epoch start (fed where measured, else the loader trial's time to its first batch, which the
    model waits out) and its share of one epoch (`epoch_samples`, else the pick's data) at the steady fed rate,
    with the finding that states it where it is over FED_STALL of the epoch."""
    pick = rec.pick
    if pick is None:
        return
    if rec.epoch_start_s is None:
        start, _ = epoch_start_s(pick)
        if rec.pick_config is not None and rec.pick_config.persistent_workers and pick.config.get("num_workers"):
            start = min(start, pick.config.get("batch_size", 0) * (pick.active_workers or 1) /
                        max(stream_or_rank(pick), 1e-9))
        rec.epoch_start_s = start
    rec.epoch_samples = epoch_samples or pick.epoch_samples or None
    steady = rec.steady_samples_per_s
    if rec.epoch_samples and steady and finite(steady) and steady > 0 and finite(rec.epoch_start_s):
        epoch = rec.epoch_samples / steady + rec.epoch_start_s
        rec.epoch_start_fraction = rec.epoch_start_s / epoch
        if rec.epoch_start_fraction > FED_STALL:
            rec.findings.append(epoch_start_finding(rec))


def epoch_start_finding(rec: Recommendation) -> str:
    """The epoch start as its own finding: what it costs, how it was found, and what acts on it."""
    c = rec.pick_config
    how = "measured fed" if rec.epoch_start_measured else "predicted from the loader's time to its first batch"
    fix = []
    if c is not None and c.num_workers and not c.persistent_workers:
        fix.append("persistent_workers=True keeps the workers between epochs (their start-up is not paid again)")
    if c is not None and c.num_workers:
        fix.append(f"the refill remains: every worker builds a whole batch of {c.batch_size} before the model gets "
                   "one; a smaller batch a worker, or fewer epochs over more data, shortens its share")
    return (f"epoch start: each epoch start keeps the model waiting {rec.epoch_start_s:.2f} s ({how}), "
            f"{rec.epoch_start_fraction:.0%} of an epoch of {rec.epoch_samples:,} samples; mid-epoch it waits "
            f"{(rec.steady_stall_fraction or 0):.0%}" + (": " + "; ".join(fix) if fix else ""))


def judged_wait(f: FedRate, step: StepResult) -> float:
    """The share of mid-epoch time a fed config leaves the model waiting on data, which INPUT-BOUND is judged on:
    the runs' own idle share (host wait on the CPU, where the step is synchronous and the wait exact), on CUDA no
    more than the fed rate's shortfall from the step alone (the copies to the device counted as the input's).
    CUDA events count as idle the gaps a step leaves between its last kernel and the next step's copy, gaps the
    step alone pays as well: on the H100 ResNet-50 fp32 fed 1,830-1,848 samples/s mid-epoch against 1,852 alone
    read 6-8% "idle", while pytorch/examples' unmodified ImageNet script ran flat at 1,765-1,778 from 8 to 16
    workers, the model its limit (issue 50, benchmarks/real_scripts.py)."""
    idle = f.steady_stall_fraction
    if not (f.runs and f.runs[0].device.startswith("cuda")):
        return idle
    m, steady = step.samples_per_s, f.steady_samples_per_s
    if not (finite(m) and m > 0 and finite(steady)):
        return idle
    short = max(0.0, 1 - steady / m)
    return min(idle, short) if finite(idle) else short


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


def saved_epoch(results: list[Record]) -> int | None:
    """The epoch the sweep's decision took the epoch start's share of (its --epoch-samples), so that `report`
    states the share the sweep stated."""
    d = next((r for r in reversed(results) if isinstance(r, DecisionResult) and r.command == "sweep"), None)
    return d.epoch_samples if d is not None else None


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


def cheaper_feeding(rec: Recommendation, ranked: list[LoaderResult], step: StepResult, headroom: float) -> bool:
    """A trial that was not fed, cheaper than the fed pick, is predicted to feed the model: the fed runs came
    before it (a budget runs the larger counts first), and the cheapest config that feeds has not been fed (the
    2026-12-06 audit's S4 and S1b: w=2 fed where w=0 and w=1, run later and marked "feeds", fed as well)."""
    if not rec.confirmed or rec.pick_config is None:
        return False
    fed_keys = {f.trial.config_key for f in rec.fed}
    return any(cost_key(r) < cost_key(rec.pick_config) and feeds(r, step, headroom)
               for r in ranked if r.config_key not in fed_keys)


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


def _describe_pick(rec: Recommendation, results: list[Record], step: StepResult | None,
                   rate: float | None = None) -> None:
    """The judged config's limits record, its binding limit (verdict.binding, at the judged rate: the fed rate
    mid-epoch where measured, else the prediction; without a model the training rate) and advice, and effects."""
    chosen = rec.pick or rec.best
    if chosen is None:
        return
    rec.limits = latest_limits(results, chosen)
    cuda = step is not None and str(step.device).startswith("cuda")
    rate = rate if rate is not None and finite(rate) else rank_rate(chosen)
    rec.binding = judge(chosen, step, rec.input_bound, rate, rec.limits, ok_loaders(results), cuda)
    rec.binding_limit = rec.binding.limit or None
    # the epoch start, where the decision states it, is one figure and one finding (_epoch_start): the loader
    # trial's own restart estimate beside it would be a second, other figure, and its "use --persistent-workers"
    # wrong where the pick is persistent (the H100: "0.81 s each ... use --persistent-workers" beside "each epoch
    # start 2.7 s" and a persistent variant fed +0%)
    rec.effects = [e for e in loader_effects(chosen, step)
                   if not (e.name == "epoch_restarts" and rec.epoch_start_s is not None and finite(rec.epoch_start_s))]
    rec.attack = rec.binding.advice if rec.outcome in ("input_bound", "best_without_model") else ""
