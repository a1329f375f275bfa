"""`dataperf sweep`'s workflow: a request is planned (plan.py), then run as a list of stages (stages.py) over one
in-memory state (state.py) that appends each record to --out and never reads it back.

    request = SweepRequest(datas, grid, opts, out, ...)   # the command builds it from its options
    outcome = run(plan(request), on_result=..., bar=...)  # records, the verdict and the decision record
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace

from dataperf.measure.distributed import DistContext
from dataperf.measure.fed import shape_step
from dataperf.results import LoaderResult, jsonl
from dataperf.workflows.progress import Bar, no_bar
from dataperf.workflows.sweep import stages
from dataperf.workflows.sweep.confirm import confirm, decision_record
from dataperf.workflows.sweep.grid import Grid, load_grid_file
from dataperf.workflows.sweep.plan import (
    ConfirmOptions,
    SweepPlan,
    SweepRequest,
    check_ranks,
    finished_ids,
    grid_trials,
    ok_ids,
    plan,
    prepare_out,
    trial_id,
    unique_datasets,
)
from dataperf.workflows.sweep.stages import run_grid
from dataperf.workflows.sweep.state import SweepOutcome, SweepState

__all__ = ["ConfirmOptions", "Grid", "SweepOutcome", "SweepPlan", "SweepRequest", "SweepState", "check_ranks",
           "confirm", "decision_record", "finished_ids", "grid_trials", "load_grid_file", "plan", "run", "run_grid",
           "trial_id", "unique_datasets"]


def run(plan: SweepPlan, *, ctx: DistContext | None = None,
        on_result: Callable[[LoaderResult | None], None] | None = None, bar: Bar | None = None) -> SweepOutcome:
    """The whole sweep on this rank. Rank 0 holds --out's lock and clears or keeps it; every rank skips the
    trials --resume finds finished and runs its share of the grid; rank 0 then runs the stages that follow the
    grid and appends the decision record. Ctrl-C is answered with an outcome saying how many finished trials
    are kept, not an exception."""
    t0 = time.monotonic()
    ctx = ctx or DistContext()
    with jsonl.exclusive(plan.out) if ctx.rank == 0 else contextlib.nullcontext():
        if ctx.rank == 0:
            prepare_out(plan.out, plan.resume, plan.overwrite)
        if ctx.barrier:
            ctx.barrier()  # no rank reads --out before rank 0 has cleared it
        state = _start(plan, ctx, on_result, bar)
        try:
            if not _stages(state, plan, ctx):
                return state.outcome  # not rank 0: its trials only
        except KeyboardInterrupt:
            state.outcome.interrupted = True
            state.outcome.kept = len(ok_ids(state.written)) if ctx.rank == 0 else 0
            return state.outcome
        stages.decide(state, plan, t0)
    return state.outcome


def _start(plan: SweepPlan, ctx: DistContext, on_result: Callable[[LoaderResult | None], None] | None,
           bar: Bar | None) -> SweepState:
    """The state a run starts from: --out's records when resuming (read here once, unless plan() did), and the
    trial options of this rank and deadline."""
    finished = plan.finished
    if finished is None:
        finished = jsonl.load(plan.out) if plan.resume and plan.out.exists() else []
    opts = replace(plan.opts, rank=ctx.rank, world_size=ctx.world_size, gather=ctx.gather,
                   deadline=plan.deadline)
    conf = plan.confirm if plan.confirm is not None and plan.confirm.k > 0 else None
    return SweepState(plan.out, opts, datas={d.spec: d for d, _ in plan.trials}, confirm=conf,
                      headroom=plan.headroom, lopts=plan.lopts, written=list(finished),
                      skip=ok_ids(finished) if plan.resume else set(), rank=ctx.rank, on_result=on_result,
                      bar=bar or no_bar, epoch_samples=plan.epoch_samples)


def _stages(state: SweepState, plan: SweepPlan, ctx: DistContext) -> bool:
    """Every stage in order; False on a rank other than 0, which stops after the grid."""
    if plan.step is not None:
        state.step_opts = shape_step(plan.step, plan.trials)
    stages.step_first(state)
    run = stages.grid(state, plan)
    ctx.close()
    if ctx.rank != 0:
        return False
    stages.step_after_grid(state)
    stages.extend_and_spare(state, plan, run)
    stages.confirm_fed(state)
    stages.limits(state)
    stages.leftover_time(state, plan, run)
    return True
