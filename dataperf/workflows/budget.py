"""A sweep against the clock: how long its plan will take, and what to leave out so it fits a time budget.

It estimates from the trial options (repeats x repeat budget, plus a per-trial overhead that finished trials
refine) and thins the plan; `sweep.run` enforces the budget while running: it measures the model's step first
(in one process; under torchrun after the grid), gives the grid what the budget leaves after the step and the
work that follows the grid (after_grid_s), starts no trial that would end past that, and then confirms end to
end only what still fits (fit_confirm). Fewer repeats go first (down to MIN_REPEATS), then fewer trials, then
fewer fed runs (two configs once each before one twice), and every cut is said.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from dataperf import backends
from dataperf.data import Data
from dataperf.errors import UserError
from dataperf.measure.step import StepOptions
from dataperf.measure.trial import TrialOptions, estimate_trial_s
from dataperf.results import WORKERS, LoaderConfig, LoaderResult, StepResult, ranked, summarize
from dataperf.workflows.e2e import epoch_aligned, in_flight_samples

MIN_REPEATS = 3  # fewer and a median is one repeat's luck
# before any trial has finished: preparing, warm-up batches (and worker start), the harness's no-op baseline;
# measured on the 2-core box and the H200 at 3-6 s for decoded images, so the plan errs long, and finished
# trials replace it (measure.trial.estimate_trial_s)
TRIAL_OVERHEAD_S = 5.0
# what a whole-epoch repeat is assumed to last before one has been timed (no repeat budget: --repeat-seconds 0)
EPOCH_GUESS_S = 30.0
# under torchrun, where the step is measured after the grid, the part of what is left that the grid leaves for
# the step, the limits and --confirm
MODEL_SHARE = 0.25
# before the step is measured, the plan's guesses for the work after the grid, from the H200 (2026-12-03:
# ResNet-50's step 20-41 s with its model build; fed runs 19-22 s); sweep.run re-costs them once the step is known
STEP_GUESS_S = 30.0
FED_GUESS_S = 20.0
# the shortest repeat a budget cuts to: a steady window still holds 3 batches a worker and the repeat runs on
# until it does (trial.time_repeat), so a shorter budget only changes how far past 3 batches a repeat goes
MIN_REPEAT_S = 2.0
DEFAULT_MODEL_BUDGET = "5m"  # sweep --model without --budget: a verdict within 5 minutes (--budget none: the grid)
# the limits of the verdict's config (storage, decode, main-process and h2d probes) and the report after them:
# 16-21 s on the H200 (2026-12-03), where a fixed quarter of 5 minutes (75 s) was less than the step, the
# limits and four fed runs took (111 s)
LIMITS_GUESS_S = 25.0
# a fed run beside its batches: building the model and optimizer, moving it to the device, starting the loader,
# and the fed loop running below both rates apart (they share cores and copies): on the H200 (2026-12-03) fed
# runs of ResNet-50 took 19-22 s, 8 s more than their batches at the slower rate apart
FED_OVERHEAD_S = 8.0
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}

Trial = tuple[Data, LoaderConfig]


def parse_duration(text: str) -> float:
    """'300', '90s', '10m', '1.5h', '1m30s' -> seconds, or a UserError naming the form."""
    t = str(text).strip().lower()
    body = t.removeprefix("-")  # a negative duration is a duration, and told to be positive
    if re.fullmatch(r"\d+(\.\d+)?", body):
        seconds = float(body)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([smh])", body)
        if not parts or "".join(n + u for n, u in parts) != body:
            raise UserError(f"--budget {text!r} is not a duration; write seconds (300) or with a unit: 90s, 10m, 1h")
        seconds = sum(float(n) * UNITS[u] for n, u in parts)
    if body != t or seconds <= 0:
        raise UserError(f"--budget must be positive, got {text!r}")
    return seconds


def trial_seconds(opts: TrialOptions, finished: Iterable[LoaderResult] = (), cfg: LoaderConfig | None = None) -> float:
    """One trial's expected duration (of cfg, where given): measure.trial.estimate_trial_s once trials have finished,
    else the options' repeats at their budget plus TRIAL_OVERHEAD_S (an epoch guess for whole-epoch repeats)."""
    done = [r for r in finished if r.status == "ok" and r.repeat_s]
    est = estimate_trial_s(opts, done, cfg)
    if done and est is not None:
        return est
    return opts.repeats * (opts.repeat_seconds or EPOCH_GUESS_S) + TRIAL_OVERHEAD_S


@dataclass
class Plan:
    """What a sweep will run and how long that should take; `dropped` says what the budget cut."""

    trials: list[Trial]
    opts: TrialOptions
    trial_s: float  # expected seconds per trial
    reserve_s: float = 0.0  # kept for what follows the grid (model step, limits, confirmation)
    budget_s: float | None = None
    dropped: list[str] = field(default_factory=list)
    # trials the budget cut, the most telling first (the last cut first: workers before batch sizes before
    # prefetch); run at the end if the grid finishes early (the plan errs long before trials are timed)
    spare: list[Trial] = field(default_factory=list)

    @property
    def expected_s(self) -> float:
        return len(self.trials) * self.trial_s + self.reserve_s

    @property
    def loader_budget_s(self) -> float | None:
        """The seconds the grid may use: the budget less the reserve."""
        return None if self.budget_s is None else self.budget_s - self.reserve_s

    def describe(self) -> str:
        per = (f"{self.opts.repeats} x {self.opts.repeat_seconds:g} s repeats" if self.opts.repeat_seconds
               else f"{self.opts.repeats} whole-epoch repeats")
        # --max-batches may end a repeat before its budget: the plan is then an upper bound
        per += f" (or {self.opts.max_batches} batches)" if self.opts.max_batches else ""
        about = "at most" if self.opts.max_batches and self.opts.repeat_seconds else "about"
        s = (f"plan: {len(self.trials)} trials, {per}: {about} {minutes(self.expected_s)} "
             f"({self.trial_s:.0f} s a trial")
        s += f", {self.reserve_s:.0f} s for the model's step, the limits and --confirm" if self.reserve_s else ""
        s += f"; budget {minutes(self.budget_s)}" if self.budget_s is not None else ""
        return s + ")"


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def after_grid_guess_s(model: bool, fed_runs: int) -> float:
    """What the plan keeps for the work after the grid before the step is measured: the step, the limits and
    --confirm's fed runs (fed_runs: configs x rounds, the variants a CUDA run adds not counted)."""
    return STEP_GUESS_S + LIMITS_GUESS_S + fed_runs * FED_GUESS_S if model else 0.0


def make_plan(trials: list[Trial], opts: TrialOptions, budget_s: float | None = None, model: bool = False,
              finished: Iterable[LoaderResult] = (), fed_runs: int = 0) -> Plan:
    """The plan, counting the step, the limits and --confirm's fed_runs (after_grid_guess_s), fitted to budget_s
    when given: first fewer repeats (not below MIN_REPEATS), then shorter ones (not below MIN_REPEAT_S), then
    fewer trials (thinning the axes that least often decide the pick first: prefetch, then pin/persistent, then
    every other batch size, and worker counts last, keeping them spread: every other from the largest), never
    fewer than one trial. Under a budget the trials run in cut_order, so a grid stopped by the deadline leaves
    out what thinning would have cut next."""
    finished = list(finished)
    reserve = after_grid_guess_s(model, fed_runs)
    if budget_s is not None:
        reserve = min(reserve, budget_s / 2)
    plan = Plan(cut_order(trials) if budget_s is not None else list(trials), opts, trial_seconds(opts, finished),
                reserve, budget_s)
    if budget_s is None or plan.expected_s <= budget_s:
        return plan
    per, overhead = _repeat_cost(plan, finished)
    fit_repeats = int(((plan.loader_budget_s or 0) / len(plan.trials) - overhead) // per)
    repeats = max(MIN_REPEATS, min(opts.repeats, fit_repeats))
    if repeats < opts.repeats:
        plan.dropped.append(f"repeats {opts.repeats} -> {repeats}")
        plan.opts = replace(opts, repeats=repeats)
        plan.trial_s = trial_seconds(plan.opts, finished)
    rs = plan.opts.repeat_seconds
    if plan.expected_s > budget_s and rs and rs > MIN_REPEAT_S:
        fit_rs = ((plan.loader_budget_s or 0) / len(plan.trials) - overhead) / plan.opts.repeats
        short = max(MIN_REPEAT_S, min(rs, fit_rs))
        if short < rs:
            plan.dropped.append(f"repeat seconds {rs:g} -> {short:.1f}")
            plan.opts = replace(plan.opts, repeat_seconds=short)
            plan.trial_s = trial_seconds(plan.opts, finished)
    for axis in THINNING:
        if plan.expected_s <= budget_s:
            break
        kept = thin(plan.trials, axis)
        if len(kept) < len(plan.trials):
            plan.dropped.append(f"{axis.replace('_', ' ')}: {_values(plan.trials, axis)} -> {_values(kept, axis)} "
                                f"({len(plan.trials) - len(kept)} trials)")
            plan.spare[:0] = [t for t in plan.trials if t not in kept]
            plan.trials = kept
    if plan.expected_s > budget_s and len(plan.trials) > 1:
        fit = max(1, int((plan.loader_budget_s or 0) // plan.trial_s))
        if fit < len(plan.trials):
            plan.dropped.append(f"the last {len(plan.trials) - fit} trials of the plan")
            plan.spare[:0] = plan.trials[fit:]
            plan.trials = plan.trials[:fit]
    return plan


def _repeat_cost(plan: Plan, finished: list[LoaderResult]) -> tuple[float, float]:
    """(seconds one more repeat adds to a trial, seconds a trial spends outside its repeats)."""
    one = trial_seconds(replace(plan.opts, repeats=1), finished)
    per = max(trial_seconds(replace(plan.opts, repeats=2), finished) - one, 1e-3)
    return per, one - per


# the prefetch and worker knobs of the backends that have their own (DALI's queue and threads)
_OWN_PREFETCH = tuple(b.prefetch_knob for b in backends.REGISTRY.values() if b.prefetch_knob != "prefetch_factor")
_OWN_WORKERS = tuple(b.workers_knob for b in backends.REGISTRY.values() if b.workers_knob != WORKERS)
# axes thinned in this order, the DataLoader's by their declared rank (results.config.loader_knob: thin); prefetch
# and the pin/persistent flags rarely decide the pick (the workers do). A backend's own prefetch thins after the
# DataLoader's one-value axes, its own workers just before the DataLoader's
_SPREAD = tuple(k.name for k in ranked("thin") if not k.metadata["one"])
ONE_VALUE = (*(k.name for k in ranked("thin") if k.metadata["one"]), *_OWN_PREFETCH)
THINNING = (*ONE_VALUE, *_SPREAD[:_SPREAD.index(WORKERS)], *_OWN_WORKERS, *_SPREAD[_SPREAD.index(WORKERS):])
KEEP = {k.name: k.metadata["keep"] for k in ranked("thin")}  # the value a one-value axis keeps where planned


def thin(trials: list[Trial], axis: str) -> list[Trial]:
    """Keep fewer values of one axis: one value for the flag-like axes (prefetch: torch's default when it is in
    the plan), every other value counted down from the largest for batch size, DALI threads and workers."""
    values = sorted({getattr(c, axis) for _, c in trials if getattr(c, axis) is not None})
    if len(values) < 2:
        return trials
    if axis in ONE_VALUE:
        default = KEEP.get(axis)
        keep = {default if default in values else values[0]}
    else:
        keep = set(values[::-1][::2])
    return [(d, c) for d, c in trials if getattr(c, axis) is None or getattr(c, axis) in keep]


def cut_order(trials: list[Trial]) -> list[Trial]:
    """The trials, those thinning would cut last first: each ranked by the thinning step that removes it (the
    axes of THINNING in turn, round after round, until one trial is left or none can go), the survivors first.
    In the grid's order, a deadline drops the largest worker counts, which most often decide the pick; in this
    order it drops what the plan itself would have dropped next. Among the trials one step removes, the larger
    worker counts first (on the H200 a 5-minute sweep ran 1 worker and never 12), then the grid's order."""
    alive = list(trials)
    removed_at: dict[int, int] = {}  # id(config) -> thinning step that removed it
    step = 0
    while len(alive) > 1:
        before = len(alive)
        for axis in THINNING:
            step += 1
            kept = thin(alive, axis)
            ids = {id(c) for _, c in kept}
            removed_at.update({id(c): step for _, c in alive if id(c) not in ids})
            alive = kept
        if len(alive) == before:
            break
    return sorted(trials, key=lambda t: (-removed_at.get(id(t[1]), step + 1), -t[1].num_workers))


def _values(trials: list[Trial], axis: str) -> list:
    return sorted({getattr(c, axis) for _, c in trials if getattr(c, axis) is not None})


def eta_s(plan: Plan, done: list[LoaderResult], left: int) -> float:
    """Seconds still to go: the trials left at the rate finished trials took, plus the reserve."""
    timed = [r.trial_s for r in done if r.status == "ok" and r.trial_s == r.trial_s]
    per = summarize(timed)["median"] if timed else plan.trial_s
    return left * per + plan.reserve_s


def fed_run_s(cfg: LoaderConfig, step: StepResult, steps: int, repeats: int, warmup: int,
              loader_samples_per_s: float | None = None, startup_s: float = 0.0,
              epoch_samples: int | None = None) -> float:
    """One fed run's expected seconds (e2e's loop): its warm-up, at most the batches the workers queue ahead,
    and its timed steps (whole epochs where an epoch of epoch_samples is near the run: e2e.epoch_aligned), at
    the slower of the step and (when measured) the loader, plus start-up."""
    rates = [x for x in (step.samples_per_s, loader_samples_per_s) if x and x == x and x > 0]
    if not rates:
        return float("inf")
    epoch = math.ceil(epoch_samples / cfg.batch_size) if epoch_samples else None
    batches = max(warmup, in_flight_samples(cfg) // cfg.batch_size) + sum(epoch_aligned(steps, repeats, epoch))
    startup = startup_s if startup_s == startup_s else 0.0  # NaN: a record without it (an older --out)
    return FED_OVERHEAD_S + startup + batches * cfg.batch_size / min(rates)


def step_remeasure_s(batch_size: int, step: StepResult, sopts: StepOptions) -> float:
    """--confirm measures the step alone again at a candidate's batch size when it is not the model's: building
    the model and its warm-up and timed steps (sopts) at the measured step's per-sample rate."""
    if step.samples_per_s <= 0:
        return 0.0
    return FED_OVERHEAD_S + (sopts.warmup + sopts.steps * sopts.repeats) * batch_size / step.samples_per_s


def after_grid_s(step: StepResult, trials: list[Trial], k: int, rounds: int, steps: int, repeats: int,
                 warmup: int, sopts: StepOptions) -> float:
    """Seconds to keep, once the step is measured, for what follows the grid: the limits, and --confirm's K x
    rounds fed runs, each costed at the step's rate with the planned trials' largest batch queue, and the step
    (sopts) measured again for each of up to K other batch sizes (the loader's rates are not known yet;
    fit_confirm re-costs the runs once they are)."""
    if not k:
        return LIMITS_GUESS_S
    fed = max((fed_run_s(c, step, steps, repeats, warmup, epoch_samples=d.count) for d, c in trials), default=0.0)
    others = sorted({c.batch_size for _, c in trials} - {step.batch_size}, reverse=True)[:k]
    return LIMITS_GUESS_S + k * rounds * fed + sum(step_remeasure_s(b, step, sopts) for b in others)


@dataclass
class ConfirmFit:
    """What of `sweep --confirm K` fits the time left: the first k candidates, `rounds` rounds each."""

    k: int
    rounds: int
    expected_s: float
    cut: str | None = None  # what the budget dropped, to be said


def fit_confirm(runs_s: list[float], rounds: int, left_s: float, once_s: list[float] | None = None) -> ConfirmFit:
    """Fit the fed runs (seconds of one run of each candidate, in the order sweep.confirm feeds them, plus
    once_s: what a candidate costs once, a step measured at its batch size) into left_s: fewer candidates first,
    down to two, then fewer rounds of those two, then the first alone (still confirmed fed) with fewer rounds,
    then none. Two fed configs once each before one twice: the pick is checked against another fed config (the
    H200, 37 WebDataset shards, ResNet-50 bf16: 55 s left fed 16 workers twice, 40 s, and never the 12 that the
    grid of fed runs put first)."""
    k0 = len(runs_s)
    once = once_s or [0.0] * k0
    asked = f"{k0} config{'s' if k0 != 1 else ''} x {rounds} round{'s' if rounds != 1 else ''}"
    two = min(k0, 2)
    steps = ([(k, rounds) for k in range(k0, two - 1, -1)] + [(two, r) for r in range(rounds - 1, 0, -1)]
             + ([(1, r) for r in range(rounds, 0, -1)] if two == 2 else []))
    for k, r in steps:
        cost = r * sum(runs_s[:k]) + sum(once[:k])
        if cost <= left_s:
            cut = None if (k, r) == (k0, rounds) else (
                f"confirm: {asked} -> {k} x {r} (about {cost:.0f} s of the {max(left_s, 0):.0f} s left)")
            return ConfirmFit(k, r, cost, cut)
    return ConfirmFit(0, 0, 0.0, f"confirm: {asked} -> none: the shortest fed run (about "
                                 f"{min(runs_s, default=0):.0f} s) does not fit the {max(left_s, 0):.0f} s left")
