"""One loader trial: validate, prepare the cache, warm up, time 3+ repeats, keep medians and spread.

The runner only measures; it returns a LoaderResult and never prints.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import psutil
import torch

from dataperf import backends, stages, watchdog
from dataperf.backends import ONE_STREAM
from dataperf.data import Data, as_data
from dataperf.errors import TrialError, UserError, describe_failure
from dataperf.measure import breakdown, cache, footprint
from dataperf.measure.collectors import Running, default_collectors
from dataperf.results import (
    BUFFER_HID_READS,
    HIGH_SPREAD_PCT,
    MIB,
    LoaderConfig,
    LoaderResult,
    percentile,
    summarize,
)

NOOP_BATCHES = 200
# A repeat's time budget. Training reads an epoch (minutes to hours); a repeat only needs a steady window long
# enough that each worker's own window spans several of its batches: 5 s holds >= 10 batches per worker
# while a worker makes a batch in under half a second, and keeps a 3-repeat trial near 20 s. Measured on the
# H200 host (benchmarks/results/2026-12-03-h200-repeat_budget*.log: 40k ImageNet-sized JPEGs, 16 workers):
# with shuffled reads, 5 s trials within 2% of whole-epoch trials on average, trial to trial about 5% apart
# (whole epochs: 2%). That holds for shuffled reads only: sequential 2, 5 and 10 s trials read 0.832-0.881 of
# a whole epoch's rate, their epoch estimates 1.142-1.168 of the measured epoch (one trial each): likely a bias.
DEFAULT_REPEAT_S = 5.0
STEADY_BATCHES = 3  # the budget never ends a repeat before every worker seen delivered this many batches
# below SOLID_BATCHES a worker, with FEW_BATCH_NOTE_WORKERS or more workers, the steady rate reads high: x1.07 at
# 32 workers x 3 batches, x1.01 at 16, x0.99 at 12 batches (benchmarks/steady_few_batches.py, 2026-12-03)
SOLID_BATCHES = 6
FEW_BATCH_NOTE_WORKERS = 16


@dataclass
class TrialOptions:
    """How a trial measures (not what it measures: that is the LoaderConfig)."""

    repeats: int = 5
    warmup_batches: int = 2
    max_batches: int | None = None  # per repeat; None = up to one epoch's worth of samples
    repeat_seconds: float | None = DEFAULT_REPEAT_S  # per repeat, from iter(); None = no time budget
    min_batches: int = 5
    drop_caches: bool = False
    collect: bool = True
    ebpf: bool = False
    raw_dir: Path | None = None
    throttle_mib_s: float | None = None  # simulated slow storage (diagnose's fetch what-if, tests)
    sample_cost_s: float | None = None  # a fixed wall time per sample, paced on deadlines (known answers, slowdowns)
    seek_s: float | None = None  # files: a simulated seek, slept by a read not next in storage order (tests)
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    barrier: Callable[[], None] | None = None  # distributed: all ranks start each repeat together
    gather: Callable[[Any], list[Any]] | None = None  # distributed: every rank's object, in rank order
    footprint: bool = True  # CPU cores busy and PSS of the process tree per repeat (dataperf.measure.footprint)
    stall_s: float | None = watchdog.DEFAULT_STALL_S  # no batch for this long fails the trial (watchdog)
    deadline: float | None = None  # time.monotonic() past which a wait for a batch fails the trial (sweep --budget)


def make_batches(data: Data, cfg: LoaderConfig, opts: TrialOptions) -> Iterable[dict[str, Any]]:
    """The backend cfg.backend names (dataperf.backends), yielding batch dicts with "n", "nbytes" and
    "worker" (the DataLoader worker that made the batch; -1 for one stream: main process, DALI, a pipeline)."""
    return backends.get(cfg.backend).make(data, cfg, opts)[0]


@dataclass
class Arrival:
    """One batch as the consumer saw it: when (seconds after iter() began), from which worker, how much."""

    t_s: float
    worker: int
    samples: int
    nbytes: int
    stage_s: dict[str, float] | None = None  # seconds its worker booked to each stage for it (dataperf.stages)
    handover_s: float | None = None  # from done in its worker (or asked for, if later) to in the consumer's hand
    wait_s: float = 0.0  # the consumer's time blocked in next() for it

    @classmethod
    def of(cls, b: dict[str, Any], t0: float, asked: float, now: float) -> Arrival:
        """A batch the consumer asked for at `asked` and held at `now` (perf_counter; t0: the repeat's start)."""
        return cls.at(t0, asked, now, b.get("worker", -1), b["n"], b.get("nbytes", 0), b.get("stage_s"),
                      b.get("done_s"))

    @classmethod
    def at(cls, t0: float, asked: float, now: float, worker: Any, samples: int, nbytes: int,
           stage_s: dict[str, float] | None, done: Any) -> Arrival:
        """The same from a batch's books kept as numbers (time_repeat's, built once its window has closed)."""
        return cls(now - t0, int(worker), samples, nbytes, stage_s,
                   now - max(done, asked) if isinstance(done, float) else None, now - asked)


def steady_rate(arrivals: list[Arrival], field: str = "samples") -> float:
    """Steady rate: the sum over workers of each worker's own rate between its first and its last batch.

    A worker's first batch carries its start-up (process spawn, imports, first file open) and its window
    ends at its last batch, so start-up and the end-of-epoch tail (workers that ran out of work) are
    excluded at both ends. For samples that each cost a fixed time s, a worker's batches arrive every B*s,
    so each worker's rate is exactly 1/s and W workers give W/s, however staggered their starts. The main
    process (num_workers=0) and DALI are one stream (worker -1). NaN when no worker delivered 2 batches.
    """
    by: dict[int, list[Arrival]] = {}
    for a in arrivals:
        by.setdefault(a.worker, []).append(a)
    total, any_ok = 0.0, False
    for seq in by.values():
        if len(seq) < 2 or seq[-1].t_s <= seq[0].t_s:
            continue
        total += sum(getattr(a, field) for a in seq[1:]) / (seq[-1].t_s - seq[0].t_s)
        any_ok = True
    return total if any_ok else float("nan")


@dataclass
class Repeat:
    samples: int
    nbytes: int
    batches: int
    ttfb_s: float
    wall_s: float  # iter() to the repeat's last batch (end of data, max_batches or budget), start-up included
    waits_s: list[float]
    storage_read_bytes: int
    arrivals: list[Arrival] = dataclass_field(default_factory=list)
    watch_s: float = 0.0
    resident_after_evict_bytes: int | None = None  # mincore: cold, after eviction; warm small data, before repeats
    corrupt: int = 0  # samples skipped as corrupt (on_corrupt=skip)
    ended: bool = False  # ran to the end of the data: a whole epoch (its tail included)
    input_bytes_per_sample: float | None = None  # the first batch's decoded tensors (x and y), per sample
    tokens: int = 0  # real tokens delivered (token data: padding left out), 0 where batches do not count them

    @property
    def samples_per_s(self) -> float:
        return steady_rate(self.arrivals)

    @property
    def steady_samples(self) -> float:
        """Samples of the steady window (every worker's first batch left out)."""
        firsts: dict[int, int] = {}
        for a in self.arrivals:
            firsts.setdefault(a.worker, a.samples)
        return self.samples - sum(firsts.values())

    @property
    def steady_s(self) -> float:
        """The steady window's length, as the time those steady samples take at the steady rate."""
        r = self.samples_per_s
        return self.steady_samples / r if r == r and r > 0 else float("nan")

    @property
    def flow_s(self) -> float:
        """The repeat's first batch to its last."""
        return self.arrivals[-1].t_s - self.arrivals[0].t_s if self.arrivals else 0.0

    @property
    def flow_samples_per_s(self) -> float:
        """Samples after every worker's first batch over the time from the repeat's first batch to its last: the
        in-order stream the main process gets once the first batches have come (what a fed model takes after an
        epoch start's wait), robust where a worker has too few batches for a steady window of its own."""
        return self.steady_samples / self.flow_s if self.flow_s > 0 else float("nan")

    @property
    def repeat_samples_per_s(self) -> float:
        """The repeat's samples over its wall time, start-up included (a repeat, an epoch only when whole)."""
        return self.samples / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def payload_mib_s(self) -> float:
        return steady_rate(self.arrivals, "nbytes") / MIB

    @property
    def storage_read_mib_s(self) -> float:
        return self.storage_read_bytes / MIB / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def active_workers(self) -> set[int]:
        return {a.worker for a in self.arrivals if a.worker >= 0 and a.samples > 0}

    @property
    def worker_batches(self) -> dict[int, int]:
        """Batches each active worker delivered (empty: one stream, no per-worker ids)."""
        counts: dict[int, int] = {}
        for a in self.arrivals:
            if a.samples > 0 and a.worker >= 0:
                counts[a.worker] = counts.get(a.worker, 0) + 1
        return counts

    @property
    def fewest_worker_batches(self) -> int | None:
        """The fewest batches any active worker delivered (None: one stream)."""
        return min(self.worker_batches.values(), default=None)

    @property
    def few_batch_workers(self) -> set[int]:
        """Active workers that delivered fewer than STEADY_BATCHES batches. With one batch a worker has no
        window of its own and the steady rate (a sum of per-worker windows) leaves its work out and reads low;
        with two, its window is one batch interval, which the order the main process takes batches in can
        shift by up to an interval against the other workers' windows, so the sum may read up to twice the
        truth (three batches halve that bound)."""
        return {w for w, n in self.worker_batches.items() if n < STEADY_BATCHES}


def time_repeat(batches: Iterable[dict[str, Any]], max_batches: int | None,
               on_workers: Callable[[list[int]], None] | None = None, seconds: float | None = None,
               min_batches: int = 0, on_first: Callable[[int, float], None] | None = None) -> Repeat:
    """Iterate once, timing every next(); the same loop measures the no-op baseline (harness overhead).

    The repeat ends at the end of the data, after max_batches, or at the first batch `seconds` or more after
    iter() once it holds min_batches batches and every worker seen delivered STEADY_BATCHES (each worker's
    steady window needs batches of its own). on_first(pid, t) is told when each DataLoader worker's first batch
    of the repeat arrives (the footprint's copy-on-read baseline).

    While batches come, a batch's books are appended to flat lists of numbers (and its stage books, a dict of
    floats): nothing the cyclic garbage collector tracks outlives the batch, so the books trigger no collection
    inside the timed window, as a plain loop triggers none (issue 30: one full collection is 77 ms, 2.3% of a
    3.4-s window). The Arrivals are built from them once the window has closed."""
    read0 = cache.tree_read_bytes()
    stages.take()  # this thread's books so far (a probe's decodes) are not the loader's: at 0 workers it books here
    t0 = time.perf_counter()
    it: Any = None
    asked: list[float] = []  # when the consumer asked for each batch (perf_counter)
    held: list[float] = []  # when it had it
    workers: list[Any] = []
    sizes: list[int] = []
    sizes_bytes: list[int] = []
    books: list[dict[str, float] | None] = []
    dones: list[Any] = []
    samples = nbytes = n = corrupt = tokens = 0
    input_b: float | None = None
    per_worker: dict[Any, int] = {}
    t_first = t0
    ended = False
    watch_s = 0.0
    clock, beat = time.perf_counter, watchdog.beat
    try:  # the trial's watchdog (if any) fails a wait for a batch that outlasts its stall time
        with watchdog.waiting(lambda: watchdog.loader_wait(batches, it)):
            with watchdog.forking():  # a Ctrl-C while workers start is raised once they have
                it = iter(batches)
            pids = [w.pid for w in getattr(it, "_workers", [])]
            if on_workers is not None:  # DataLoader workers exist from iter() on; short repeats can outrun sampling
                tw = clock()
                on_workers(pids)
                watch_s = clock() - tw  # kept in ttfb and epoch time (workers run on), recorded
            while max_batches is None or n < max_batches:
                tb = clock()
                try:
                    b = next(it)
                except StopIteration:
                    ended = True
                    break
                beat()
                now = clock()
                asked.append(tb)
                held.append(now)
                size, size_bytes, w = b["n"], b["nbytes"], b.get("worker", -1)
                samples += size
                sizes.append(size)
                nbytes += size_bytes
                sizes_bytes.append(size_bytes)
                workers.append(w)
                books.append(b.get("stage_s"))
                dones.append(b.get("done_s"))
                tokens += b.get("tokens", 0)
                corrupt += b.get("corrupt", 0)
                if n == 0:
                    t_first = now
                    input_b = batch_input_bytes(b)
                n += 1
                got = per_worker[w] = per_worker.get(w, 0) + 1
                if got == 1 and on_first is not None and 0 <= w < len(pids):
                    on_first(pids[w], now)
                if seconds is not None and now - t0 >= seconds and n >= min_batches \
                        and min(per_worker.values()) >= STEADY_BATCHES:
                    break
            t_end = clock()
            if not ended:
                _drain(it)
    except BaseException:
        _close(it)  # now: a failed iterator kept alive by the traceback must not reach the next trial's workers
        raise
    it = None  # shuts non-persistent workers down, so their I/O is folded into ours before the next read
    arrivals = [Arrival.at(t0, *row)
                for row in zip(asked, held, workers, sizes, sizes_bytes, books, dones, strict=True)]
    return Repeat(samples, nbytes, n, t_first - t0, t_end - t0, [a.wait_s for a in arrivals],
                  cache.tree_read_bytes() - read0, arrivals, watch_s, corrupt=corrupt, ended=ended,
                  input_bytes_per_sample=input_b, tokens=tokens)


def batch_input_bytes(b: dict[str, Any]) -> float | None:
    """Bytes a sample of a decoded batch takes in its tensors (x and y): what the fed loop copies to the device
    (float32 after a Normalize is 4x the uint8 of a plain resize). None without decoded tensors."""
    ts = [b[k] for k in ("x", "y") if isinstance(b.get(k), torch.Tensor)]
    return sum(t.nbytes for t in ts) / b["n"] if ts and b.get("n") else None


def _close(it: Any) -> None:
    """Stop a failed repeat's workers (DataLoader processes, a pipeline generator's threads) now."""
    if hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    elif hasattr(it, "close"):
        it.close()


def _drain(it: Any) -> None:
    """Finish, untimed, the batches a persistent-worker DataLoader still has in flight after a repeat cut
    short: its next iter() would wait for them inside the next repeat's start-up, which an epoch that runs
    to its end never pays. Nothing new is handed to the workers (their index source is emptied)."""
    if getattr(it, "_persistent_workers", False):
        it._sampler_iter = iter(())
        for _ in it:
            pass


class _NoOp(torch.utils.data.Dataset):
    """Samples that cost nothing: what is left of a batch's time is the DataLoader and the timing loop."""

    def __len__(self) -> int:
        return NOOP_BATCHES

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"nbytes": 0, "y": 0, "payload": b""}


_overhead: dict[tuple, float] = {}


def harness_overhead_ms(cfg: LoaderConfig) -> float:
    """Per-batch time of the same timing loop over a no-op DataLoader with cfg's workers and prefetch (called
    while the trial's collectors still run, so their cost is in it): the floor under any batch time this
    harness can report. Measured once per (workers, prefetch, persistent) per process."""
    from dataperf.backends.dataloader import collate

    cfg = cfg.explicit()
    key = (cfg.num_workers, cfg.prefetch_factor, cfg.persistent_workers)
    if key not in _overhead:
        kw: dict[str, Any] = {}
        if cfg.num_workers > 0:
            kw = {"prefetch_factor": cfg.prefetch_factor, "persistent_workers": cfg.persistent_workers}
        dl = torch.utils.data.DataLoader(_NoOp(), batch_size=1, num_workers=cfg.num_workers, collate_fn=collate,
                                         **kw)
        r = time_repeat(dl, None)
        rate = r.samples_per_s  # batches of 1: samples/s is batches/s
        _overhead[key] = 1000 / rate if rate == rate and rate > 0 else float("nan")
    return _overhead[key]


# worker counts a search tries, spread so that each rung is at most 1.5x the last from 2 on: the cheapest config
# that feeds a model often lies between powers of two (the H200, ResNet-50, 2026-12-03: 12 workers fed it as well
# as 16, while 8 gave 10% less)
LADDER = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def cores() -> int:
    """This process's cores: its affinity (as taskset and cgroup cpusets set it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_ladder(top: int | None = None, cap: int | None = None, dense: bool = True) -> list[int]:
    """The worker counts a search tries: LADDER up to `top` (default: the cores; past them CPU-bound workers
    contend, and a sweep climbs on past the top only while the top is the best and still gains), with `top`
    itself added, and none above `cap` (the most workers the data can give STEADY_BATCHES batches each:
    worker_cap). One ladder for sweep's default axis, tune's search and watch's advice; tune steps along its
    powers of two only (`dense=False`: 0, 1, 2, 4, 8, ...), where a step is worth a trial."""
    top = cores() if top is None else top
    if cap is not None:
        top = min(top, cap)
    rungs = LADDER if dense else [w for w in LADDER if w & (w - 1) == 0]
    return sorted({w for w in rungs if w <= top} | {max(top, 0)})


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
    if data.format == "webdataset" and data.files:
        cap = min(cap, max(1, len(data.files[rank::world])))
    if data.row_groups:  # image Parquet deals whole row groups, as WebDataset deals shards
        cap = min(cap, max(1, len([n for g in data.row_groups for n in g][rank::world])))
    return cap


def run_trial(data: Data | Path, cfg: LoaderConfig, opts: TrialOptions | None = None) -> LoaderResult:
    """Measure one config. Trial failures (bad config, crashed worker, corrupt shard) come back as a failed
    record that says why; only problems with the dataset path itself raise UserError."""
    t0 = time.perf_counter()
    opts = opts or TrialOptions()
    cfg = cfg.explicit()
    data = as_data(data)
    res = LoaderResult(data=data.spec, config=asdict(cfg), config_key=cfg.key(), world_size=opts.world_size,
                       cache_mode=cfg.cache if data.cache_managed else data.cache_mode,
                       epoch_samples=-(-data.count // max(opts.world_size, 1)) if data.count else None)
    if opts.throttle_mib_s:
        res.notes.append(f"storage throttled to {opts.throttle_mib_s} MiB/s per reader (simulated)")
    reps: list[Repeat] = []
    try:
        with watchdog.Watchdog(opts.stall_s, opts.deadline):
            reps = _measure(data, cfg, opts, res)
    except (TrialError, UserError) as e:  # raised in a worker, the message carries the worker's traceback
        res.status, res.error = "failed", describe_failure(e) if "Original Traceback" in str(e) else str(e)
        _release(e)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a worker crash or corrupt shard surfaces as whatever the worker raised
        res.status, res.error = "failed", describe_failure(e)
        _release(e)
    if opts.gather is not None:
        _combine_ranks(res, reps, opts.gather)
    res.trial_s = time.perf_counter() - t0
    return res


def _release(e: BaseException) -> None:
    """Free what a failed trial's traceback holds (its DataLoader and iterator, in a cycle through a worker's
    re-raised exception) here and now: left to the garbage collector, it could be finalized in a forked worker of
    the next trial ("can only test a child process")."""
    cur: BaseException | None = e
    while cur is not None:
        traceback.clear_frames(cur.__traceback__)
        cur.__traceback__ = None
        cur = cur.__cause__ or cur.__context__
    gc.collect()


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


def _combine_ranks(res: LoaderResult, reps: list[Repeat], gather: Callable[[Any], list[Any]]) -> None:
    """Global samples/s per repeat = all ranks' samples over the slowest rank's time; stragglers named. A
    repeat's samples are all ranks' together, its duration the slowest rank's."""
    mine = {"status": res.status, "error": res.error, "rank_sps": res.samples_per_s_median,
            "rank_samples": res.samples_per_repeat, "repeat_samples": res.repeat_samples, "repeat_s": res.repeat_s,
            "samples": [r.steady_samples for r in reps], "steady_s": [r.steady_s for r in reps],
            "flow_s": [r.flow_s for r in reps]}
    ranks = gather(mine)
    bad = [(i, r["error"]) for i, r in enumerate(ranks) if r["status"] != "ok"]
    if bad:
        res.status = "failed"
        res.error = "; ".join(f"rank {i}: {e}" for i, e in bad)
        return
    n = min(len(r["samples"]) for r in ranks)
    glob = [sum(r["samples"][k] for r in ranks) / max(r["steady_s"][k] for r in ranks) for k in range(n)]
    res.repeat_samples = [sum(r["repeat_samples"][k] for r in ranks) for k in range(n)]
    res.repeat_s = [max(r["repeat_s"][k] for r in ranks) for k in range(n)]
    s = summarize(glob)
    res.samples_per_s_repeats = glob
    if not math.isnan(res.flow_samples_per_s_median):  # all ranks' flow, as the steady rate
        res.flow_samples_per_s_median = summarize([sum(r["samples"][k] for r in ranks) /
                                                   max(max(r["flow_s"][k] for r in ranks), 1e-9)
                                                   for k in range(n)])["median"]
    res.samples_per_s_median, res.samples_per_s_min = s["median"], s["min"]
    res.samples_per_s_max, res.samples_per_s_spread_pct = s["max"], s["spread_pct"]
    res.per_rank_samples_per_s = [r["rank_sps"] for r in ranks]
    res.per_rank_samples_per_repeat = [r["rank_samples"] for r in ranks]
    res.samples_per_repeat = sum(res.per_rank_samples_per_repeat)
    res.slowest_rank = min(range(len(ranks)), key=lambda i: ranks[i]["rank_sps"])
    fastest = max(res.per_rank_samples_per_s)
    slowest = res.per_rank_samples_per_s[res.slowest_rank]
    if slowest < 0.8 * fastest:
        res.notes.append(f"straggler: rank {res.slowest_rank} at {slowest:.0f} samples/s vs the fastest "
                         f"{fastest:.0f}; the global rate is held to the slowest rank")


def _measure(data: Data, cfg: LoaderConfig, opts: TrialOptions, res: LoaderResult) -> list[Repeat]:
    if opts.repeats < 1:
        raise TrialError("repeats must be at least 1")
    if opts.repeats < 3:
        res.notes.append(f"only {opts.repeats} repeats: medians of fewer than 3 are not robust")
    if cfg.cache not in ("warm", "cold"):
        raise TrialError(f"cache must be warm or cold, got {cfg.cache!r}")
    be = backends.get(cfg.backend)
    if cfg.pin_memory and not torch.cuda.is_available() and not be.own_pipeline:
        res.notes.append("pin_memory asked for but no CUDA device: torch skips pinning")
    batches, prep = be.make(data, cfg, opts)  # a converting backend converts (once, cached) here
    ignored = be.knobs_ignored(cfg)
    res.backend, res.knobs_ignored = prep.info, ignored + prep.ignored
    if ignored:
        res.notes.append(f"{be.name} cannot express {', '.join(ignored)}: set but not applied")
    res.notes.extend(prep.notes)
    paths = prep.paths  # what this backend reads: the converted store, if it has one (none: remote, user's)
    if not data.cache_managed:
        res.notes.append(data.cache_note())
    elif cfg.cache == "warm":
        cache.prepare(paths, "warm")
    # warm-up: imports, first decode, and (persistent workers only) worker start; its numbers are discarded.
    # Non-persistent workers start again in every repeat: that cost is in repeat_samples_per_s, not hidden.
    if opts.warmup_batches > 0:
        time_repeat(batches, opts.warmup_batches)
    reps: list[Repeat] = []
    costs: list[footprint.Footprint] = []
    ledger = footprint.CopyLedger()
    collectors = default_collectors(data.disk_path(), opts.raw_dir, tag=_tag(cfg, opts), ebpf=opts.ebpf) \
        if opts.collect else []
    # warm, small data: residency once before the repeats (asking between them would pause persistent workers)
    held = cache.warm_resident(paths) if cfg.cache == "warm" and data.cache_managed else None
    with Running(collectors) as running:
        for _ in range(opts.repeats):
            resident = None
            if cfg.cache == "cold" and data.cache_managed:
                prepared = cache.prepare(paths, "cold", opts.drop_caches)
                res.notes.extend(n for n in prepared.notes if n not in res.notes)
                resident = prepared.resident_bytes
            elif held is not None:
                resident = held
            if opts.barrier:
                opts.barrier()
            net0 = psutil.net_io_counters().bytes_recv if data.remote else 0  # /proc/net/dev: 26 us, between windows
            with footprint.Meter() if opts.footprint else contextlib.nullcontext() as meter:
                rep = time_repeat(batches, opts.max_batches, running.watch, opts.repeat_seconds, opts.min_batches,
                                  meter.first_batch if meter is not None else None)
            if data.remote:
                res.network_recv_mib_per_repeat.append((psutil.net_io_counters().bytes_recv - net0) / MIB)
            if meter is not None:
                costs.append(meter.result)
                ledger.add(meter.result, rep.samples)
            rep.resident_after_evict_bytes = resident
            reps.append(rep)
        if not be.own_pipeline:
            res.harness_overhead_ms_per_batch = harness_overhead_ms(cfg)
        collected = running.stop()
    res.collectors = collected
    _fill(res, reps, opts, data, paths, cfg)
    if costs:
        _fill_footprint(res, costs, ledger.result())
    return reps


def _fill_footprint(res: LoaderResult, costs: list[footprint.Footprint],
                    copied: footprint.CopyOnRead | None = None) -> None:
    """Throughput per busy core and per GiB of PSS; workers' memory growth in a repeat; what they copied from
    the parent since their first batch (copy-on-read), and at that pace over an epoch, flagged."""
    cores = summarize([c.cores_busy for c in costs])["median"]
    res.cpu_cores_busy_median = cores
    res.samples_per_s_per_core = res.samples_per_s_median / cores if cores > 0 else float("nan")
    peak = max(c.pss_peak_bytes for c in costs)
    if peak:
        res.pss_mib_peak = peak / MIB
        res.samples_per_s_per_gib_pss = res.samples_per_s_median / (peak / 1024**3)
    grown = [c for c in costs if c.workers_seen]
    if grown:
        worst = max(grown, key=lambda c: c.worker_private_growth_bytes)
        res.worker_pss_growth_pct = worst.worker_growth_pct
        res.worker_private_growth_mib = worst.worker_private_growth_bytes / MIB
    if copied is None:
        return
    res.worker_copied_mib = copied.copied_bytes / MIB
    res.worker_copied_samples = copied.samples
    res.worker_copied_mib_epoch = copied.per_epoch_bytes(res.epoch_samples) / MIB
    if copied.flagged:
        epoch = "" if res.worker_copied_mib_epoch != res.worker_copied_mib_epoch else (
            f" (an epoch, {res.epoch_samples:,} samples: " + (
                "all of it" if copied.samples >= (res.epoch_samples or 0) else
                f"about {res.worker_copied_mib_epoch:,.0f} MiB at that pace, at most the "
                f"{copied.shared_first_bytes / MIB:,.0f} MiB they share") + ")")
        res.notes.append(f"copy-on-read: {copied.workers} workers turned {res.worker_copied_mib:,.0f} MiB of pages "
                         f"they shared with the parent into private copies over the {copied.samples:,} samples since "
                         f"their first batch{epoch}; forked workers are touching the parent's Python objects (keep "
                         "per-sample metadata in numpy arrays, or use thread workers)")


def _tag(cfg: LoaderConfig, opts: TrialOptions) -> str:
    import hashlib

    return hashlib.sha1(cfg.key().encode()).hexdigest()[:10] + (f"-r{opts.rank}" if opts.world_size > 1 else "")


BUFFER_SHARE_MAX = 0.25  # a note when more of a stream's delivered samples than this came with no read


def buffer_note(res: LoaderResult, cfg: LoaderConfig, reps: list[Repeat], epoch_samples: int | None) -> bool:
    """A shuffle buffer is filled before the first sample (start-up, outside the steady window) and drains
    without reading once a stream's share of the data is read: a stream with E samples an epoch that delivers D
    in a repeat through a buffer of B has read everything after E - B deliveries, so D - (E - B) of its D
    samples come out of the buffer with no read. When that is over a quarter of D the steady rate leaves most
    reads out. A repeat cut by its time budget well inside the data has none. Measured on the 2-core box at
    0 workers and batch 128 (benchmarks/results/2026-12-03-2core-tune_vs_grid-{run1,run2,24k}/grid.jsonl):
    2,400 small JPEGs in 8 shards, buffer 1000, read 2,094 and 1,845 samples/s steady in two runs where
    24,000 of the same read 1,708 in 5 s repeats (x1.23 and x1.08)."""
    buffer = cfg.explicit().shuffle_buffer
    if not buffer or not epoch_samples:
        return False
    streams = max(1, max(len(r.active_workers) for r in reps))
    per_epoch, delivered = epoch_samples / streams, min(r.samples for r in reps) / streams
    unread = delivered - max(0.0, per_epoch - buffer)
    if not (delivered and unread > BUFFER_SHARE_MAX * delivered):
        return False
    res.notes.append(f"shuffle buffer: {buffer} samples against {per_epoch:.0f} a stream has in the data: "
                     f"{min(unread / delivered, 1):.0%} of the {delivered:.0f} samples a stream delivered in a "
                     "repeat came out of the buffer with no read (its fill is start-up), so the steady rate "
                     f"leaves those reads out; the ranking uses the repeats' rate "
                     f"({res.repeat_samples_per_s_median:,.0f} samples/s), which includes them; give repeats a larger "
                     "dataset or a smaller --shuffle-buffer")
    return True


def _note_few_batches(res: LoaderResult, reps: list[Repeat]) -> bool:
    """Many workers with 3-5 batches each: measured, but the sum of per-worker windows reads high there."""
    few = [r.fewest_worker_batches for r in reps if r.fewest_worker_batches is not None]
    w = max(len(r.active_workers) for r in reps)
    fired = bool(few) and min(few) < SOLID_BATCHES and w >= FEW_BATCH_NOTE_WORKERS
    if fired:
        res.notes.append(f"few batches a worker: {w} workers, the fewest delivered {min(few)} in a repeat; with "
                         f"under {SOLID_BATCHES} the steady rate (a sum of per-worker windows) reads high, by 7% "
                         "at 32 workers x 3 batches against a known answer (1% at 16), so the ranking uses the "
                         "repeats' rate; give every worker "
                         f"{SOLID_BATCHES} or more (--max-batches {SOLID_BATCHES * w} or more)")
    return fired


# backends whose DataLoader deals whole shards to workers (shard i to worker i mod W) or batches in turn
SHARD_DEALT = ("webdataset",)
BATCH_DEALT = ("files", "tokens-bin", "npy")


def worker_loads(data: Data, cfg: LoaderConfig, epoch_samples: int | None, opts: TrialOptions) -> list[float]:
    """Samples each DataLoader worker reads in one epoch of this rank, where the split is known: WebDataset deals
    this rank's shards out in turn (equal shards assumed), a map-style dataset its batches; [] when the split is
    not known (one stream, a user's IterableDataset, other backends) or the epoch's size is unknown."""
    w = cfg.num_workers
    if not epoch_samples or w < 2 or cfg.backend in ONE_STREAM:
        return []
    if cfg.backend in SHARD_DEALT and data.format == "webdataset" and data.files:
        shards = len(data.files[opts.rank::max(opts.world_size, 1)])
        per = epoch_samples / max(shards, 1)
        return [len(range(i, shards, w)) * per for i in range(w)]
    if cfg.backend in BATCH_DEALT:
        batches = -(-epoch_samples // cfg.batch_size)
        return [len(range(i, batches, w)) * epoch_samples / batches for i in range(w)]
    return []


def tail_s(loads: list[float], steady: float) -> float:
    """The epoch's tail: with a workers that have work each reading at steady / a, the epoch lasts as long as
    the busiest worker's share takes, max(load) x a / steady; beyond the epoch's samples at the all-workers rate
    (sum(load) / steady) the others have run out and fewer workers read. 5 shards on 4 workers of 100 samples/s,
    2,000 samples: 800 x 4 / 400 = 8 s against 5 s, a 3 s tail (the audit's known answer: 8.3-9.3 s measured)."""
    active = [x for x in loads if x > 0]
    if not active or not steady > 0:
        return 0.0
    return max(0.0, (max(active) * len(active) - sum(active)) / steady)


def _note_uneven(res: LoaderResult, loads: list[float], cfg: LoaderConfig) -> None:
    """Say when the tail costs over 5% of an epoch, with the fix: shards a multiple of the workers."""
    if not loads or not res.epoch_estimate_s or res.tail_s <= 0.05 * res.epoch_estimate_s:
        return
    w = cfg.num_workers
    busy = sum(1 for x in loads if x >= max(loads) - 1e-9)
    what = (f"{res.shards} shards for {w} workers" if res.shards is not None else f"batches for {w} workers")
    fix = (f"reshard to a multiple of {w} (dataperf shards convert SRC OUT --shards {w * -(-res.shards // w)}) or "
           f"use a worker count that divides {res.shards}" if res.shards is not None else "a smaller batch size")
    res.notes.append(f"uneven work: {what}: {busy} worker(s) read {max(loads):,.0f} samples an epoch, others fewer, so "
                     f"the last {res.tail_s:.1f} s of each {res.epoch_estimate_s:.1f} s epoch run on fewer workers "
                     "than the steady rate counts; the ranking uses the epoch with its tail "
                     f"({res.training_samples_per_s:,.0f} samples/s, steady {res.samples_per_s_median:,.0f}); {fix}")


def _training_rate(res: LoaderResult, epoch_samples: int | None, steady_invalid: str | None) -> None:
    """What a training epoch gets from this config (LoaderResult.training_samples_per_s), and on what basis."""
    res.steady_valid = steady_invalid is None
    if res.whole_epochs:
        res.training_samples_per_s = res.repeat_samples_per_s_median
        res.training_basis = "whole epochs, measured"
    elif steady_invalid:
        # repeats cut inside the data never reach the tail of uneven work: it is added at their rate
        rate = res.repeat_samples_per_s_median
        tail = tail_s(res.epoch_worker_samples, rate) if epoch_samples else 0.0
        res.training_samples_per_s = epoch_samples / (epoch_samples / rate + tail) if tail > 0 else rate
        res.training_basis = ("the repeats' rate, start-up included" + (", and the epoch's tail at it" if tail > 0
                              else "") + f": the steady rate is not valid ({steady_invalid})")
    elif epoch_samples and res.epoch_estimate_s:
        res.training_samples_per_s = epoch_samples / res.epoch_estimate_s
        res.training_basis = "an epoch at the steady rate, with its start-up and tail"
    else:
        res.training_samples_per_s = res.samples_per_s_median
        res.training_basis = "the steady rate (the epoch's size is unknown)"


def _fill(res: LoaderResult, reps: list[Repeat], opts: TrialOptions, data: Data, paths: list[Path],
          cfg: LoaderConfig) -> None:
    fewest = min(r.batches for r in reps)
    if fewest < opts.min_batches:
        raise TrialError(f"only {fewest} batches per repeat, fewer than the minimum {opts.min_batches}: "
                         "use more samples, a smaller batch_size, or a larger --max-batches")
    short = max(reps, key=lambda r: len(r.few_batch_workers))
    if short.few_batch_workers:
        n, w = len(short.few_batch_workers), len(short.active_workers)
        k = STEADY_BATCHES * max(w, 1)
        # enough batches in all, yet a worker short: its part of the data ran out, so more batches cannot help
        fix = (f"--max-batches {k} or more, {k * cfg.batch_size} or more samples a repeat, a smaller batch_size, "
               "or fewer workers" if short.batches < k else
               f"each worker's part of the data held fewer: {k * cfg.batch_size} or more samples, a smaller "
               "batch_size, or fewer workers")
        raise TrialError(f"{n} of {w} active workers delivered fewer than {STEADY_BATCHES} batches in a repeat "
                         f"({short.batches} batches in all), too few for a steady window of each worker (it would "
                         f"read low or high): give every worker at least {STEADY_BATCHES} batches per repeat "
                         f"({fix})")
    sps = [r.samples_per_s for r in reps]
    if any(x != x for x in sps):
        raise TrialError("no worker delivered two batches in a repeat, so there is no steady window: use more "
                         "samples, a smaller batch_size, or fewer workers")
    few_batches = _note_few_batches(res, reps)
    s = summarize(sps)
    res.repeats = len(reps)
    res.batches_per_repeat = fewest
    res.samples_per_repeat = min(r.samples for r in reps)
    res.samples_per_s_median, res.samples_per_s_min = s["median"], s["min"]
    res.samples_per_s_max, res.samples_per_s_spread_pct = s["max"], s["spread_pct"]
    res.samples_per_s_repeats = sps
    res.repeat_samples_per_s_repeats = [r.repeat_samples_per_s for r in reps]
    res.repeat_samples_per_s_median = summarize(res.repeat_samples_per_s_repeats)["median"]
    per_rank = data.count // max(opts.world_size, 1) if data.count else None
    res.shards = len(data.files) if data.format == "webdataset" else None
    loads = worker_loads(data, cfg, per_rank, opts)
    res.tail_s, res.epoch_worker_samples = tail_s(loads, res.samples_per_s_median), loads
    res.whole_epochs = all(r.ended for r in reps)
    res.startup_s_median = summarize([max(0.0, r.wall_s - r.samples / r.samples_per_s - (res.tail_s if r.ended else 0))
                                      for r in reps])["median"]
    res.repeat_s, res.repeat_samples = [r.wall_s for r in reps], [r.samples for r in reps]
    if per_rank:  # this rank's share of an epoch at the steady rate, its tail and one start-up
        res.epoch_estimate_s = per_rank / res.samples_per_s_median + res.tail_s + res.startup_s_median
    if opts.repeat_seconds and res.startup_s_median > opts.repeat_seconds / 2:
        res.notes.append(f"start-up took {res.startup_s_median:.1f} s of each {opts.repeat_seconds:g} s repeat: "
                         "the steady window is short; give repeats more time (--repeat-seconds)")
    buffered = buffer_note(res, cfg, reps, per_rank)
    # the flow counts what a shuffle buffer gave without reading as much as the steady window does: none then
    res.flow_samples_per_s_median = float("nan") if buffered else \
        summarize([r.flow_samples_per_s for r in reps])["median"]
    _training_rate(res, per_rank, BUFFER_HID_READS if buffered else
                   "too few batches a worker" if few_batches else None)
    _note_uneven(res, loads, cfg)
    res.payload_mib_s_repeats = [r.payload_mib_s for r in reps]
    res.payload_mib_s_median = summarize(res.payload_mib_s_repeats)["median"]
    res.storage_read_mib_s_repeats = [r.storage_read_mib_s for r in reps]
    res.storage_read_mib_s_median = summarize(res.storage_read_mib_s_repeats)["median"]
    res.ttfb_s_median = summarize([r.ttfb_s for r in reps])["median"]
    res.collector_watch_ms_median = summarize([r.watch_s * 1000 for r in reps])["median"]
    waits = [w * 1000 for r in reps for w in r.waits_s[1:]]
    res.batch_wait_ms_p50, res.batch_wait_ms_p99 = percentile(waits, 50), percentile(waits, 99)
    batch_ms = 1000 * res.samples_per_repeat / max(fewest, 1) / res.samples_per_s_median
    res.harness_overhead_pct = res.harness_overhead_ms_per_batch / batch_ms * 100 if batch_ms > 0 else float("nan")
    res.storage_read_mib_per_repeat = [r.storage_read_bytes / MIB for r in reps]
    res.dataset_mib_read_per_repeat = summarize([r.nbytes / MIB for r in reps])["median"]
    res.input_mib_per_sample = next((r.input_bytes_per_sample / MIB for r in reps if r.input_bytes_per_sample), None)
    counted = sum(r.samples for r in reps if r.tokens)
    res.tokens_per_sample = sum(r.tokens for r in reps) / counted if counted else None
    _fill_workers(res, reps, cfg, opts)
    breakdown.fill(res, reps, cfg, data)
    res.corrupt_samples = max(r.corrupt for r in reps)
    if res.corrupt_samples:
        res.notes.append(f"{res.corrupt_samples} corrupt samples per repeat skipped (on_corrupt=skip); the rate "
                         "counts only the samples delivered")
    if s["spread_pct"] > HIGH_SPREAD_PCT:
        res.notes.append(f"high spread: repeats differ by {s['spread_pct']:.0f}% of the median; "
                         "treat this config's figure as noisy (more repeats, a quieter machine)")
    _verify_cache(res, reps, data, paths, opts)


def _fill_workers(res: LoaderResult, reps: list[Repeat], cfg: LoaderConfig, opts: TrialOptions) -> None:
    """Workers that delivered samples; one 'idle' warning naming the fix when some did not."""
    if cfg.backend in ONE_STREAM:
        return
    res.active_workers = min(len(r.active_workers) for r in reps)
    w = cfg.num_workers
    if w > 0 and res.active_workers < w:
        need = w * opts.world_size
        have = f"{res.shards} shards for " if res.shards is not None else ""
        ranks = f" x {opts.world_size} ranks" if opts.world_size > 1 else ""
        res.notes.append(
            f"warning: idle workers: only {res.active_workers} of {w} DataLoader workers delivered samples "
            f"({have}{w} workers{ranks}); reshard to at least {need} shards "
            f"(dataperf shards convert SRC OUT --shards {need}, or dataperf shards make --shards {need})")


def _verify_cache(res: LoaderResult, reps: list[Repeat], data: Data, paths: list[Path], opts: TrialOptions) -> None:
    """Cold: every repeat read >= 90% of the files' own bytes from storage and mincore found <= 10% of them
    resident after eviction; warm: <= 10% read (cache.verify)."""
    if res.cache_mode not in ("warm", "cold"):
        return  # remote or a user's Dataset: no page cache of ours to verify (the note says so)
    expected = cache.expected_read_bytes(paths, data.count, [r.samples for r in reps], opts.world_size)
    res.file_mib_per_repeat = summarize([e / MIB for e in expected])["median"]
    v = cache.verify(res.cache_mode, [r.storage_read_bytes for r in reps], expected,
                     [r.resident_after_evict_bytes for r in reps], cache.file_bytes(paths))
    res.cache_verified = v.verified
    if res.cache_mode == "cold":
        res.resident_after_evict_pct = v.resident_after_evict_pct
    if v.note:
        res.notes.append(v.note)
