"""Timing one repeat: every batch's arrival as the consumer saw it, the steady rate over each worker's own window,
and the harness's own per-batch overhead (the same loop over batches that cost nothing)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import torch

from dataperf import stages, watchdog
from dataperf.backends.dataloader import ends_with_parent
from dataperf.measure import cache
from dataperf.results import MIB, LoaderConfig

NOOP_BATCHES = 200
STEADY_BATCHES = 3  # the budget never ends a repeat before every worker seen delivered this many batches
# nor before its first batch is this share of the budget behind it: a start-up longer than the budget (Ray Data's
# executor on 16 cores: 8 s to its first batch) left repeats of 3-s budgets 5 batches of ramp-up, whose steady rate
# read 413 samples/s where the same config fed ResNet-50 1,129-1,356 (the 2026-12-07 H100 lease)
STEADY_SHARE = 0.5


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
    t0: float = 0.0  # perf_counter at iter(): the arrivals' zero (the footprint's readings are on that clock)

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
    iter() and STEADY_SHARE x `seconds` after the first batch, once it holds min_batches batches and every worker
    seen delivered STEADY_BATCHES (each worker's steady window needs batches of its own). on_first(pid, t) is told
    when each DataLoader worker's first batch of the repeat arrives (the footprint's copy-on-read baseline).

    While batches come, a batch's books are appended to flat lists of numbers (and its stage books, a dict of
    floats): nothing the cyclic garbage collector tracks outlives the batch, so the books trigger no collection
    inside the timed window, as a plain loop triggers none (issue 30: one full collection is 77 ms, 2.3% of a
    3.4-s window). The Arrivals are built from them once the window has closed."""
    read0 = cache.tree_read_bytes()
    stages.take()  # this thread's books so far (a probe's decodes) are not the loader's: at 0 workers it books here
    t0 = time.perf_counter()
    it: Any = None
    cols: tuple[list[Any], ...] = ([], [], [], [], [], [], [])  # the batches' books, a flat list each (_take)
    watch_s = 0.0
    try:  # the trial's watchdog (if any) fails a wait for a batch that outlasts its stall time
        with watchdog.waiting(lambda: watchdog.loader_wait(batches, it)):
            with watchdog.forking():  # a Ctrl-C while workers start is raised once they have
                it = iter(batches)
            pids = [w.pid for w in getattr(it, "_workers", [])]
            if on_workers is not None:  # DataLoader workers exist from iter() on; short repeats can outrun sampling
                tw = time.perf_counter()
                on_workers(pids)
                watch_s = time.perf_counter() - tw  # kept in ttfb and epoch time (workers run on), recorded
            took = _take(it, pids, t0, cols, max_batches, seconds, min_batches, on_first)
            if not took.ended:
                _drain(it)
    except BaseException:
        _close(it)  # now: a failed iterator kept alive by the traceback must not reach the next trial's workers
        raise
    it = None  # shuts non-persistent workers down, so their I/O is folded into ours before the next read
    arrivals = [Arrival.at(t0, *row) for row in zip(*cols, strict=True)]
    return Repeat(took.samples, took.nbytes, took.n, took.t_first - t0, took.t_end - t0, [a.wait_s for a in arrivals],
                  cache.tree_read_bytes() - read0, arrivals, watch_s, corrupt=took.corrupt, ended=took.ended,
                  input_bytes_per_sample=took.input_b, tokens=took.tokens, t0=t0)


@dataclass
class _Took:
    """What time_repeat's timed loop counted, beside the books it appended."""

    n: int
    samples: int
    nbytes: int
    tokens: int
    corrupt: int
    t_first: float  # perf_counter when the first batch was held (t0 if none came)
    t_end: float  # perf_counter when the loop ended
    ended: bool  # the data ran out
    input_b: float | None  # the first batch's decoded tensor bytes a sample


def _take(it: Any, pids: list[int], t0: float, cols: tuple[list[Any], ...], max_batches: int | None,
          seconds: float | None, min_batches: int, on_first: Callable[[int, float], None] | None) -> _Took:
    """time_repeat's timed loop, on its own: next() until the data, max_batches or the budget ends it, each batch's
    books appended to cols: when the consumer asked for it and when it had it (perf_counter), its worker, samples,
    bytes, stage books and done time."""
    asked, held, workers, sizes, sizes_bytes, books, dones = cols
    samples = nbytes = n = corrupt = tokens = 0
    input_b: float | None = None
    per_worker: dict[Any, int] = {}
    t_first = t0
    ended = False
    clock, beat = time.perf_counter, watchdog.beat
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
        if seconds is not None and now - t0 >= seconds and now - t_first >= STEADY_SHARE * seconds \
                and n >= min_batches and min(per_worker.values()) >= STEADY_BATCHES:
            break
    t_end = clock()
    return _Took(n, samples, nbytes, tokens, corrupt, t_first, t_end, ended, input_b)


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
            kw = {"prefetch_factor": cfg.prefetch_factor, "persistent_workers": cfg.persistent_workers,
                  "worker_init_fn": ends_with_parent()}
        dl = torch.utils.data.DataLoader(_NoOp(), batch_size=1, num_workers=cfg.num_workers, collate_fn=collate,
                                         **kw)
        r = time_repeat(dl, None)
        rate = r.samples_per_s  # batches of 1: samples/s is batches/s
        _overhead[key] = 1000 / rate if rate == rate and rate > 0 else float("nan")
    return _overhead[key]
