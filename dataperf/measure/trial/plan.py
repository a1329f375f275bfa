"""Planning trials before they run: the worker counts a search tries, the most workers the data can feed, and
how long a trial will take."""

from __future__ import annotations

from collections.abc import Iterable

from dataperf.data import Data
from dataperf.errors import UserError
from dataperf.measure.trial.options import TrialOptions
from dataperf.measure.trial.timing import STEADY_BATCHES
from dataperf.results import LoaderConfig, LoaderResult, summarize

# worker counts a search tries, spread so that each rung is at most 1.5x the last from 2 on: the cheapest config
# that feeds a model often lies between powers of two (the H200, ResNet-50, 2026-12-03: 12 workers fed it as well
# as 16, while 8 gave 10% less)
LADDER = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def next_rung(w: int) -> int:
    """The ladder's count after w (past the ladder: 1.5x)."""
    return next((x for x in LADDER if x > w), max(w + 1, w * 3 // 2))


def worker_cap(data: Data, batch_size: int, world_size: int = 1, rank: int = 0) -> int | None:
    """The most workers that can each deliver STEADY_BATCHES batches of one epoch (fewer and a trial is refused:
    a worker needs batches of its own for a steady window). WebDataset hands each worker whole shards (of this
    rank's), so also no more workers than shards; a map-style dataset deals batches out in turn. None when the
    size is unknown (a user's IterableDataset, remote data without a count)."""
    world = max(world_size, 1)
    if not data.count:
        return None
    per_rank = data.count // world
    cap = max(1, per_rank // (batch_size * STEADY_BATCHES))
    if data.dealt_by == "shard" and data.files:
        cap = min(cap, max(1, len(data.files[rank::world])))
    if data.row_groups:  # image Parquet deals whole row groups, as WebDataset deals shards
        cap = min(cap, max(1, len([n for g in data.row_groups for n in g][rank::world])))
    return cap


def epoch_batches(data: Data, batch_size: int, world_size: int = 1) -> int | None:
    """Batches of batch_size an epoch of DATA holds on one rank (the last one partial), None where its size is
    not known before reading it (a user's IterableDataset, token files cut on the fly)."""
    if not data.count:
        return None
    return -(-(data.count // max(world_size, 1)) // batch_size)


def batch_size_cap(data: Data, min_batches: int, world_size: int = 1, workers: int = 0) -> int | None:
    """The largest batch size at which one rank's epoch holds the full batches a trial at `workers` needs
    (min_batches a repeat, STEADY_BATCHES of each worker's own); 0: not even at 1; None: the size is unknown."""
    if not data.count:
        return None
    return data.count // max(world_size, 1) // max(min_batches, STEADY_BATCHES * max(workers, 1))


def check_epoch(data: Data, batch_sizes: list[int], workers: int, min_batches: int, world_size: int = 1) -> None:
    """Refuse, before measuring, a batch size at which an epoch of DATA holds fewer batches than any trial needs
    (fewer and every trial fails after its warm-up, as 120 images at the default 32 did), naming the batch size
    that works. workers: the fewest a run tries."""
    streams = max(workers, 1)
    need = max(min_batches, STEADY_BATCHES * streams)
    bad = [b for b in batch_sizes if (n := epoch_batches(data, b, world_size)) is not None and n < need]
    if not bad:
        return
    b = max(bad)
    per = f" on each of {world_size} ranks" if world_size > 1 else ""
    why = f"{min_batches} a repeat" if need == min_batches else f"{STEADY_BATCHES} for each of {streams} workers"
    ok = batch_size_cap(data, min_batches, world_size, workers) or 0
    fewer = batch_size_cap(data, min_batches, world_size) or 0
    fix = f"--batch-size {ok} or smaller" if ok else \
        f"more samples or a smaller --min-batches (even --batch-size 1 gives {epoch_batches(data, 1, world_size)})"
    if fewer > ok:
        fix += f", or fewer workers (--batch-size {fewer} or smaller at 0 or 1)"
    left = f" (left out: {', '.join(data.left_out)})" if data.left_out else ""  # often the cause: strays, a split
    raise UserError(f"{data.spec} holds {data.count // max(world_size, 1):,} samples{per}{left}: "
                    f"{epoch_batches(data, b, world_size)} batches of {b} an epoch, fewer than the {need} a trial "
                    f"measures ({why}), so every trial would fail; use {fix}")


def estimate_trial_s(opts: TrialOptions, finished: Iterable[LoaderResult] = (),
                     cfg: LoaderConfig | None = None) -> float | None:
    """How long a trial with these options will take, for planning a sweep: its repeats, plus what a trial
    spends outside them (preparing, warm-up, the harness baseline) as the median over finished trials of
    trial_s - sum(repeat_s), 0 before any finished. Without cfg a repeat lasts its budget, or the finished
    trials' median repeat where that is longer; without a budget a repeat is up to an epoch, known only from
    finished trials (None before any finished). With cfg, a repeat is costed for that config (repeat_floor_s):
    a repeat runs on until every worker delivered STEADY_BATCHES, so 16 workers of batch 256 outlast a 2-s
    budget by 3x (the H200, 2026-12-04: 11 s planned a trial, 27-43 s measured)."""
    done = [r for r in finished if r.status == "ok" and r.repeat_s and r.trial_s == r.trial_s]
    extra = summarize([r.trial_s - sum(r.repeat_s) for r in done])["median"] if done else 0.0
    seen = summarize([x for r in done for x in r.repeat_s])["median"] if done else None
    if not opts.repeat_seconds and seen is None:
        return None
    repeat = max(opts.repeat_seconds or 0.0, seen or 0.0)
    own = repeat_floor_s(cfg, opts, done) if cfg is not None else None
    if own is not None:
        repeat = max(opts.repeat_seconds, own) if opts.repeat_seconds else own
    return opts.repeats * repeat + extra


def repeat_floor_s(cfg: LoaderConfig, opts: TrialOptions, done: list[LoaderResult]) -> float | None:
    """The seconds one repeat of cfg lasts at least, from the finished trials: its start-up (their median), then
    the samples it must deliver (STEADY_BATCHES a worker and min_batches, or the epoch without a repeat budget)
    at min(streams x their median rate a stream, their best rate). None without a finished trial's rate."""
    rated = [r for r in done if r.samples_per_s_median > 0]
    if not rated:
        return None
    per_stream = summarize([r.samples_per_s_median / max(r.active_workers or r.config.get("num_workers", 0), 1)
                            for r in rated])["median"]
    streams = max(cfg.num_workers, 1)
    rate = min(streams * per_stream, max(r.samples_per_s_median for r in rated))
    startup = summarize([r.startup_s_median for r in rated if r.startup_s_median == r.startup_s_median] or [0.0])
    if opts.repeat_seconds:
        samples = max(opts.min_batches, STEADY_BATCHES * streams) * cfg.batch_size
        if opts.max_batches:
            samples = min(samples, opts.max_batches * cfg.batch_size)
    else:
        samples = summarize([float(n) for r in rated for n in r.repeat_samples] or [0.0])["median"]
    return startup["median"] + samples / rate
