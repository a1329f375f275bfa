"""The stages of a sweep, in the order `run` calls them, each over the sweep's in-memory state: the model's step,
the grid, worker counts past the ladder and the spare trials, the fed runs of --confirm, the limits of the
verdict's config, the leftover trials, a second confirmation when a later trial outshone the fed ones, and the
decision. Each stage reads the state and adds its records to it; none reads --out."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dataperf import verdict
from dataperf.data import Data, as_data
from dataperf.measure.limits import measure_limits
from dataperf.measure.step import StepOptions, measure_step
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LimitsResult, LoaderConfig, LoaderResult, Record, StepResult, jsonl
from dataperf.workflows import budget
from dataperf.workflows.sweep.confirm import confirm, decision_record
from dataperf.workflows.sweep.edge import edge_trial, fed_best, lower_bound
from dataperf.workflows.sweep.plan import ConfirmOptions, SweepPlan, Trial, trial_id
from dataperf.workflows.sweep.state import SweepState


def step_first(state: SweepState) -> None:
    """In one process the model's step is measured before the grid: a model that cannot run fails first, and the
    grid's share of a budget is known."""
    if state.step_opts is not None and state.opts.world_size == 1:
        _measure_step(state)


def step_after_grid(state: SweepState) -> None:
    """Under torchrun rank 0 measures the step after the grid (the other ranks would load its cores and wait for
    it at a barrier)."""
    if state.step_opts is not None and state.step is None:
        _measure_step(state)


def _measure_step(state: SweepState) -> None:
    state.step = state.outcome.step = measure_step(state.step_opts)
    state.add(state.step)


def after_grid(measured: StepResult | None, step: StepOptions | None, trials: list[Trial],
               conf: ConfirmOptions | None, deadline: float, k: int | None = None) -> float:
    """Seconds --budget keeps for what follows the grid: costed from the measured step (budget.after_grid_s),
    for k of --confirm's configs (default: all K); under torchrun, where the step is measured after the grid,
    the plan's share of what is left."""
    if step is None:
        return 0.0
    if measured is None:
        return budget.MODEL_SHARE * max(deadline - time.monotonic(), 0.0)
    if conf is None:
        return budget.LIMITS_GUESS_S
    return budget.after_grid_s(measured, trials, conf.k if k is None else k, conf.rounds, conf.steps, conf.repeats,
                               conf.warmup, step)


@dataclass
class GridRun:
    """The grid's trials as run: their results, the planned trials the budget left no time for (`left`, in the
    order they would have run), and spare trials (cut from the plan to fit the budget) run because time was
    left."""

    results: list[LoaderResult]
    not_started: int = 0
    added: int = 0
    left: list[tuple[Data, LoaderConfig]] = field(default_factory=list)


def run_grid(
    trials: list[tuple[Data, LoaderConfig]],
    opts: TrialOptions,
    out: Path | None,
    skip: set[str] | None = None,
    on_result: Callable[[LoaderResult | None], None] | None = None,
    grid_s: float | None = None,
    spare: list[tuple[Data, LoaderConfig]] | None = None,
) -> GridRun:
    """Run every trial not in skip; each record is appended to out the moment it is finished. With grid_s
    (seconds), no trial starts that is expected to end past it (the first always runs), and the spare trials
    follow while time is left; what did not start is kept in `left`. Ranks agree on stopping: rank 0's clock
    decides."""
    run = GridRun([])
    t0 = time.monotonic()
    todo = [(t, False) for t in trials] + [(t, True) for t in spare or []]
    for i, ((data, cfg), extra) in enumerate(todo):
        if skip and trial_id(data, cfg) in skip:
            if on_result and not extra:
                on_result(None)
            continue
        if grid_s is not None and run.results:
            late = time.monotonic() - t0 + budget.trial_seconds(opts, run.results, cfg) > grid_s
            if (opts.gather(late)[0] if opts.gather else late):
                run.left = [t for t, _ in todo[i:] if not (skip and trial_id(*t) in skip)]
                run.not_started = sum(1 for t, x in todo[i:] if not x and not (skip and trial_id(*t) in skip))
                return run
        trial_opts = opts
        if grid_s is not None:  # --budget bounds a trial that hangs too, but cuts none before 3x its expected length
            end = opts.deadline if opts.deadline is not None else t0 + grid_s
            floor = time.monotonic() + 3 * budget.trial_seconds(opts, run.results, cfg)
            trial_opts = replace(opts, deadline=max(end, floor))
        r = run_trial(data, cfg, trial_opts)
        if out is not None and opts.rank == 0:
            jsonl.append(out, r)
        run.results.append(r)
        run.added += extra
        if on_result:
            on_result(r)
    return run


def grid(state: SweepState, plan: SweepPlan) -> GridRun:
    """The planned trials, each kept the moment it ends. Under --budget the grid gets what is left after the step
    and what follows the grid, and (under torchrun) the spare trials fill what it leaves; in one process the
    worker counts past the ladder come before the spare trials."""
    grid_s = None
    if plan.deadline is not None:  # every rank has one (run_grid gathers the stop); rank 0's decides
        grid_s = state.outcome.grid_s = plan.deadline - time.monotonic() - after_grid(
            state.step, state.step_opts, plan.trials, state.confirm, plan.deadline)
    alone = state.opts.world_size == 1
    run = run_grid(plan.trials, state.opts, None, state.skip, state.trial_done, grid_s,
                   None if alone and plan.extend else plan.spare)
    o = state.outcome
    o.results, o.not_started, o.added = run.results, run.not_started, run.added
    return run


def extend_and_spare(state: SweepState, plan: SweepPlan, run: GridRun) -> None:
    """In one process with the default ladder: the worker counts past its top (worker counts before fed runs: a
    fed run confirms only what was measured), then the spare trials with the time the rest of the sweep leaves."""
    if not (plan.extend and state.opts.world_size == 1):
        return
    reserve = least = 0.0
    if plan.deadline is not None:
        reserve = after_grid(state.step, state.step_opts, plan.trials, state.confirm, plan.deadline)
        least = after_grid(state.step, state.step_opts, plan.trials, state.confirm, plan.deadline, k=1)
    extend(state, plan, least)
    if run.left:
        run.left += plan.spare
    elif plan.spare:
        more = run_grid(plan.spare, state.opts, None, state.skip, state.keep, state.left_s(reserve), None)
        state.outcome.results += more.results
        state.outcome.added += len(more.results)
        run.left = more.left


def extend(state: SweepState, plan: SweepPlan, reserve_s: float) -> None:
    """Run edge_trial's next worker count while there is one (and, under a budget, time for it beside what
    follows the grid)."""
    o = state.outcome
    while True:
        recs = state.records
        fed = fed_best(state.recommendation()) if state.step is not None else None
        nxt, _ = edge_trial(recs, plan.trials, state.step, state.headroom, fed)
        if nxt is None:
            return
        if plan.deadline is not None and not _time_for_a_trial(state.opts, recs, plan.deadline, reserve_s, nxt[1]):
            return
        r = run_trial(*nxt, state.opts)
        state.add(r)
        o.results.append(r)
        o.extended.append(nxt[1].num_workers)
        if state.on_result:
            state.on_result(r)
        if r.status != "ok":
            return


def confirm_fed(state: SweepState) -> None:
    """--confirm: the model fed from the leading configs, with what the budget leaves beside the limits."""
    if state.step is None or state.confirm is None:
        return
    state.outcome.confirmations, cut = confirm(state, state.confirm, state.left_s(budget.LIMITS_GUESS_S))
    state.outcome.cuts += [cut] if cut else []


def limits(state: SweepState) -> None:
    """With a model: the ceilings of the verdict's config, while the budget leaves time for them."""
    if state.step is None:
        return
    left = state.left_s()
    if left is None or left > budget.LIMITS_GUESS_S / 2:
        state.outcome.limits = verdict_limits(state)
    else:
        state.outcome.cuts.append("limits: not measured, no time left in the budget")


def verdict_limits(state: SweepState) -> LimitsResult | None:
    """The ceilings of the config the verdict judges (its pick, else its best), measured on that trial's data
    and config with the model's step, and kept (the verdict reads them back: binding_limit)."""
    rec = state.recommendation()
    chosen = rec.pick or rec.best
    if chosen is None:
        return None
    with state.bar(f"limits of {chosen.loader_config.short()}", 5) as advance:
        res = measure_limits(state.datas.get(chosen.data) or as_data(chosen.data), chosen.loader_config,
                             replace(state.opts, gather=None), step=state.step, best=chosen,
                             lopts=state.lopts, advance=advance)
    state.add(res)
    return res


def leftover_time(state: SweepState, plan: SweepPlan, run: GridRun) -> None:
    """A budget is spent, not returned: in one process, the time left after the verdict's work runs the worker
    counts past the ladder, then the trials the budget left out, then a second confirmation if one of them
    outshone what was fed."""
    if plan.deadline is None or state.opts.world_size != 1:
        return
    if plan.extend:
        extend(state, plan, 0.0)
    fill(state, plan.deadline, run.left)
    reconfirm(state, plan.deadline)


FILL_MARGIN = 1.5  # a trial run with the budget's leftover time must fit this multiple of its expected length


def _time_for_a_trial(opts: TrialOptions, recs: list[Record], deadline: float, reserve_s: float = 0.0,
                      cfg: LoaderConfig | None = None) -> bool:
    """Whether FILL_MARGIN x cfg's expected length (from the finished trials) still fits before the deadline,
    reserve_s kept: a trial the deadline cuts is a failed record (seen on the H200), not a figure."""
    need = budget.trial_seconds(opts, [r for r in recs if isinstance(r, LoaderResult)], cfg)
    return time.monotonic() + FILL_MARGIN * need + reserve_s <= deadline


def fill(state: SweepState, deadline: float, left: list[Trial]) -> None:
    """Trials the budget left out, run with the time left once the verdict's work is done: those nearest the
    verdict's config in workers first (a prefetch or pin variant of the pick tells more than one of a config far
    from it), in plan order among equals."""
    rec = state.recommendation()
    near = (rec.pick or rec.best).config.get("num_workers", 0) if (rec.pick or rec.best) else 0
    o = state.outcome
    for data, cfg in sorted(left, key=lambda t: abs(t[1].num_workers - near)):
        if not _time_for_a_trial(state.opts, state.written, deadline, cfg=cfg):
            return
        r = run_trial(data, cfg, state.opts)
        state.add(r)
        o.results.append(r)
        o.filled += 1
        o.not_started = max(0, o.not_started - 1)
        if state.on_result:
            state.on_result(r)


def reconfirm(state: SweepState, deadline: float) -> None:
    """A trial run since the fed runs may beat what was fed (verdict.outshone), or feed the model at less cost
    (verdict.cheaper_feeding): feed again, with the time left."""
    if state.step is None or state.confirm is None:
        return
    rec = state.recommendation()
    ranked = verdict.by_prediction(state.records, state.step)
    if rec.fed and (verdict.outshone(rec.fed, ranked, state.step) or
                    verdict.cheaper_feeding(rec, ranked, state.step, state.headroom)):
        more, cut = confirm(state, state.confirm, deadline - time.monotonic())
        state.outcome.confirmations += more
        state.outcome.cuts += [cut] if cut else []


def decide(state: SweepState, plan: SweepPlan, t0: float) -> None:
    """The verdict over every current record, whether it is a lower bound (the next worker count was not
    tried), and the decision record that writes it down."""
    o = state.outcome
    o.records = records = state.records
    rec = state.recommendation(o.step or verdict.latest_step(records))
    if rec.outcome in ("input_bound", "best_without_model") and state.opts.world_size == 1:
        step_of = o.step if rec.step_samples_per_s is not None else None
        why = lower_bound(records, plan.trials, step_of, state.headroom, plan.extend, rec)
        rec = replace(rec, lower_bound=bool(why), lower_bound_why=why)
    o.recommendation = rec
    o.wall_s = time.monotonic() - t0
    o.decision = decision_record("sweep", rec, records, o.wall_s, plan.budget_s)
    o.decision.trials_not_run = o.not_started
    state.add(o.decision)
