"""`sweep --ranks G`: how many workers to give each of G data-parallel ranks on one host. The G ranks (torchrun,
as --nproc starts them) each read their own split through their own DataLoader, and each is fed to a consumer
that takes its batches at the model's step rate; the worker ladder is per rank, all ranks trying the same count
at once, so the cores, page cache and storage are shared as in training (docs/distributed.md).

The consumer: `--step-rate N` (given), or `--model`'s step measured once on this machine's device by rank 0 and
then paced on every rank (MLPerf Storage's accelerator emulation), or, where the host has a GPU per rank, the
real model on each rank's own GPU. The records say which (RanksResult.consumer)."""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from dataperf import verdict
from dataperf.data import Data
from dataperf.errors import UserError
from dataperf.measure.distributed import DistContext
from dataperf.measure.fed import shape_for_model
from dataperf.measure.ranks import ModelConsumer, PacedConsumer, RankFeed, feed_rank
from dataperf.measure.step import StepOptions, measure_step
from dataperf.measure.trial import TrialOptions, cores, worker_ladder
from dataperf.measure.trial.plan import next_rung
from dataperf.results import (
    CONSUMER_GIVEN,
    CONSUMER_MEASURED,
    CONSUMER_MODEL,
    LoaderConfig,
    RanksResult,
    Record,
    StepResult,
    jsonl,
)
from dataperf.workflows.sweep.plan import prepare_out

BATCHES_A_WORKER = 2  # the data must give every worker of every rank this many batches (a worker's queue)
PAST_CORES = 4  # past the ladder's top a rank's workers go at most to this many times cores / G


@dataclass
class RanksRequest:
    """What `sweep --ranks G` was asked: the data, each rank's loader (its worker count set per trial), G, how the
    consumers take batches (step_rate given, or step: the model's), how long each window runs, and --out."""

    data: Data
    config: LoaderConfig
    ranks: int
    out: Path
    opts: TrialOptions  # repeat_seconds: each window; min_batches: its fewest steps; seed
    step_rate: float | None = None
    step: StepOptions | None = None
    workers: list[int] | None = None  # the user's --num-workers; None: the ladder per rank
    # the other prefetch / pin / persistence values given (--prefetch-factor 2,4: {"prefetch_factor": 4}), each
    # tried alone at the ladder's pick once the ladder is done; the ladder runs config's own
    variants: list[dict] = field(default_factory=list)
    overwrite: bool = False


@dataclass
class RanksOutcome:
    """What the run did (on rank 0; the others get an empty one): its records and the answer over them."""

    records: list[Record] = field(default_factory=list)
    step: StepResult | None = None
    answer: verdict.RanksAnswer | None = None


def worker_cap(data: Data, batch_size: int, ranks: int) -> int | None:
    """The most workers a rank whose split gives each worker BATCHES_A_WORKER batches; None: size unknown."""
    if not data.count:
        return None
    return data.count // max(ranks, 1) // (batch_size * BATCHES_A_WORKER)


def check(data: Data, batch_size: int, ranks: int, host_cores: int) -> None:
    """Bad input refused before any rank starts: G below 1, more ranks than the cores can give one worker each
    (naming the largest G), or data too small for G x 1 worker x BATCHES_A_WORKER batches (naming the batch size
    that works, or the largest G)."""
    if ranks < 1:
        raise UserError(f"--ranks must be at least 1, got {ranks}")
    if ranks > host_cores:
        raise UserError(f"--ranks {ranks} is more ranks than this host's {host_cores} cores can give one worker "
                        f"each; use --ranks {host_cores} or fewer")
    cap = worker_cap(data, batch_size, ranks)
    if cap is not None and cap < 1:
        need = ranks * BATCHES_A_WORKER
        bs = data.count // need
        most = data.count // (batch_size * BATCHES_A_WORKER)
        fix = f"--batch-size {bs} or smaller" if bs >= 1 else "more samples"
        if most >= 1:
            fix += f", or --ranks {most} or fewer"
        raise UserError(f"{data.spec} holds {data.count:,} samples: too few for {ranks} ranks x 1 worker x "
                        f"{BATCHES_A_WORKER} batches of {batch_size}; use {fix}")


def variants_of(configs: list[LoaderConfig]) -> list[dict]:
    """The loader settings `sweep --ranks` was given (configs with workers, the first one the ladder's): each other
    prefetch, pin or persistence value alone (verdict.ranks.KNOBS), as RanksRequest.variants. Any other setting
    given more than one value is refused: the answer is one loader a rank."""
    out: list[dict] = []
    for f in fields(configs[0]):
        values = list(dict.fromkeys(getattr(c, f.name) for c in configs))
        if f.name in verdict.ranks.KNOBS:
            out += [{f.name: v} for v in values[1:]]
        elif f.name != "num_workers" and len(values) > 1:
            flag = f.metadata.get("flag", "").split("/")[0] or f.name
            raise UserError(f"--ranks answers one loader a rank: give one value of {flag}, not "
                            f"{', '.join(map(str, values))}")
    return out


def ladder(ranks: int, host_cores: int, cap: int | None) -> list[int]:
    """The worker counts a rank tries: the sweep's ladder from 1 up to cores / G, with the rules of thumb beside
    it (verdict.ranks.RULE_OF_THUMB, and tf.data's cores / G), none above `cap` (the data)."""
    top = verdict.ranks.tf_data_default(ranks, host_cores)
    rungs = set(worker_ladder(top)) | set(verdict.ranks.RULE_OF_THUMB) | {top}
    return sorted(w for w in rungs if w >= 1 and (cap is None or w <= cap))


def run(req: RanksRequest, ctx: DistContext, on_result: Callable[[RanksResult], None] | None = None) -> RanksOutcome:
    """Every rank runs the same trials in the same order; rank 0 holds --out's lock, measures the step (with a
    model), writes every record and decides when the ladder goes on past its top."""
    out = RanksOutcome()
    host = cores()
    with jsonl.exclusive(req.out) if ctx.rank == 0 else contextlib.nullcontext():
        if ctx.rank == 0:
            prepare_out(req.out, False, req.overwrite)
        cfg, consumer, how, demand, step = _consumer(req, ctx)
        if step is not None:
            out.step = step
            out.records.append(step)
            if ctx.rank == 0:
                jsonl.append(req.out, step)
        cap = worker_cap(req.data, cfg.batch_size, req.ranks)
        todo = list(req.workers) if req.workers else ladder(req.ranks, host, cap)
        most = PAST_CORES * verdict.ranks.tf_data_default(req.ranks, host)
        done: list[RanksResult] = []
        trial = _trials(req, ctx, cfg, consumer, how, demand, host, step, out, on_result)
        while todo:
            rec = trial(replace(cfg, num_workers=todo.pop(0)))
            if rec.status == "ok":
                done.append(rec)
            if not todo and not req.workers:
                more = _next(done, cap, most)
                todo = [more] if more else []
                if ctx.gather:  # rank 0 decides; every rank follows
                    todo = ctx.gather(todo)[0]
        pick = verdict.ranks.pick_of(verdict.ranks.ok_trials(done))
        at = verdict.ranks.workers(pick) if pick is not None else None
        if ctx.gather:
            at = ctx.gather(at)[0]
        for v in req.variants if at is not None else []:
            trial(replace(cfg, num_workers=at, **v))
    ctx.close()
    if ctx.rank == 0:
        out.answer = verdict.ranks_answer(out.records)
    return out


def _trials(req: RanksRequest, ctx: DistContext, cfg: LoaderConfig, consumer, how: str, demand: float, host: int,
            step: StepResult | None, out: RanksOutcome, on_result: Callable[[RanksResult], None] | None
            ) -> Callable[[LoaderConfig], RanksResult]:
    """One trial, the same on every rank: all ranks start the config together, each feeds its window, and rank 0
    writes the record built from every rank's window (and reports it)."""
    n = 0

    def trial(c: LoaderConfig) -> RanksResult:
        nonlocal n
        n += 1
        c = c.explicit()
        if ctx.barrier:
            ctx.barrier()  # the ranks start each config together
        feed, error = _feed(req, c, consumer(), ctx, f"dataperf-ranks/{n}")
        feeds = ctx.gather((feed, error)) if ctx.gather else [(feed, error)]
        rec = record(req, c, feeds, how, demand, host, step)
        out.records.append(rec)
        if ctx.rank == 0:
            jsonl.append(req.out, rec)
            if on_result:
                on_result(rec)
        return rec

    return trial


def _next(done: list[RanksResult], cap: int | None, most: int) -> int | None:
    """Past the ladder's top: the next rung while the answer is not settled (verdict.ranks_settled), up to the
    data's cap and PAST_CORES x cores / G."""
    trials = verdict.ranks.ok_trials(done)
    if verdict.ranks_settled(trials):
        return None
    w = next_rung(verdict.ranks.workers(trials[-1]))
    return w if w <= most and (cap is None or w <= cap) else None


def _consumer(req: RanksRequest, ctx: DistContext):
    """Each rank's loader config (shaped for the model) and its consumer's maker, how it takes batches, the step
    rate a rank demands, and the step record (rank 0, with --model)."""
    cfg = req.config.explicit()
    if req.step is None:
        rate = float(req.step_rate)
        return cfg, lambda: PacedConsumer(rate), CONSUMER_GIVEN, rate, None
    cfg, sopts = shape_for_model(req.data, cfg, req.step)
    per_rank = sopts.device.startswith("cuda") and _gpus() >= req.ranks
    step = measure_step(sopts) if ctx.rank == 0 else None
    rate = step.samples_per_s if step is not None else float("nan")
    if ctx.gather:
        rate = ctx.gather(rate)[0]
    if not rate > 0:
        raise UserError(f"the model's step could not be measured ({step.error if step else 'rank 0 failed'})")
    if per_rank:
        local = int(os.environ.get("LOCAL_RANK", ctx.rank))
        mine = replace(sopts, device=f"cuda:{local}")
        return cfg, lambda: ModelConsumer(mine), CONSUMER_MODEL, rate, step
    return cfg, lambda: PacedConsumer(rate), CONSUMER_MEASURED, rate, step


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _feed(req: RanksRequest, cfg: LoaderConfig, consumer, ctx: DistContext, key: str
          ) -> tuple[RankFeed | None, str | None]:
    """This rank's window, or the error that ended it (every rank still meets at the gather that follows)."""
    window = req.opts.repeat_seconds or 5.0
    try:
        return feed_rank(req.data, cfg, req.opts, consumer, window, req.opts.min_batches, ctx, key), None
    except UserError:
        raise
    except Exception as e:  # a worker's crash, a corrupt sample: the trial fails, named
        ctx.arrive(key)
        return None, f"{type(e).__name__}: {e}"


def record(req: RanksRequest, cfg: LoaderConfig, feeds: list[tuple[RankFeed | None, str | None]], how: str,
           demand: float, host: int, step: StepResult | None) -> RanksResult:
    """One count's record from every rank's window (failed where any rank's failed, naming it)."""
    r = RanksResult(data=req.data.spec, config=asdict(cfg), config_key=f"ranks={req.ranks}|{cfg.key()}",
                    ranks=req.ranks, consumer=how, model=req.step.model if req.step else "",
                    device=step.device if step is not None else (req.step.device if req.step else ""),
                    demand_samples_per_s_per_rank=demand, host_cores=host,
                    window_s=req.opts.repeat_seconds or 5.0)
    bad = [(i, e) for i, (f, e) in enumerate(feeds) if f is None]
    if bad:
        r.status, r.error = "failed", f"rank {bad[0][0]}: {bad[0][1]}"
        return r
    fs = [f for f, _ in feeds]
    r.warmup_steps_per_rank = [f.warmup_steps for f in fs]
    r.steps_per_rank = [f.steps for f in fs]
    r.samples_per_rank = [f.samples for f in fs]
    r.wall_s_per_rank = [f.wall_s for f in fs]
    r.counted_samples_per_rank = [f.counted_samples for f in fs]
    r.counted_wall_s_per_rank = [f.counted_wall_s for f in fs]
    r.waves_per_rank = [f.waves for f in fs]
    r.fed_samples_per_s_per_rank = [f.samples_per_s for f in fs]
    r.fed_samples_per_s_slowest = min(r.fed_samples_per_s_per_rank)
    r.slowest_rank = r.fed_samples_per_s_per_rank.index(r.fed_samples_per_s_slowest)
    r.fed_samples_per_s_total = sum(r.fed_samples_per_s_per_rank)
    r.data_wait_fraction_per_rank = [f.wait_s / f.wall_s for f in fs]
    r.main_cpu_cores_busy_per_rank = [f.main_cpu_s / f.wall_s for f in fs]
    r.workers_cpu_cores_busy_per_rank = [f.workers_cpu_s / f.wall_s for f in fs]
    r.host_cpu_cores_busy = statistics.median(f.host_busy_cpu_s / f.wall_s for f in fs)
    samples = sum(r.samples_per_rank)
    if samples:
        r.cpu_ms_per_sample = sum(f.main_cpu_s + f.workers_cpu_s for f in fs) / samples * 1000
    return r
