"""One loader trial: validate, prepare the cache, warm up, time 3+ repeats, keep medians and spread.

The runner only measures; it returns a LoaderResult and never prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil
import torch

from dataperf import cache
from dataperf.collectors import Running, default_collectors
from dataperf.errors import TrialError, UserError
from dataperf.records import LoaderConfig, LoaderResult, percentile, summarize
from dataperf.sources import Data, as_data

MIB = 1024 * 1024
HIGH_SPREAD_PCT = 15.0
COLD_VERIFY_FRACTION = 0.5


@dataclass
class TrialOptions:
    """How a trial measures (not what it measures: that is the LoaderConfig)."""

    repeats: int = 3
    warmup_batches: int = 2
    max_batches: int | None = None  # per repeat; None = one whole epoch
    min_batches: int = 5
    drop_caches: bool = False
    collect: bool = True
    ebpf: bool = False
    raw_dir: Path | None = None
    throttle_mib_s: float | None = None  # simulated slow storage (diagnose's fetch what-if, tests)
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    barrier: Callable[[], None] | None = None  # distributed: all ranks start each repeat together
    gather: Callable[[Any], list[Any]] | None = None  # distributed: every rank's object, in rank order


def make_batches(data: Data, cfg: LoaderConfig, opts: TrialOptions) -> Iterable[dict[str, Any]]:
    """The backend for cfg.format: a torch DataLoader, or a DALI pipeline wrapped to look like one."""
    if cfg.format == "dali":
        from dataperf.formats.dali import DaliLoader

        if data.manifest is None or data.remote:
            raise TrialError(f"DALI reads local image files or shards; {data.spec} is {data.describe()}")
        return DaliLoader(data.root, data.manifest, cfg, rank=opts.rank, world_size=opts.world_size,
                          seed=opts.seed)
    from dataperf.formats.loaders import make_loader

    return make_loader(data, cfg, opts.throttle_mib_s, opts.rank, opts.world_size, opts.seed)


@dataclass
class Repeat:
    samples: int
    nbytes: int
    batches: int
    ttfb_s: float
    steady_s: float
    waits_s: list[float]
    storage_read_bytes: int

    @property
    def steady_samples(self) -> float:
        """Samples after the first batch (the first one's wait is startup, reported as ttfb_s)."""
        return self.samples - (self.samples / self.batches if self.batches else 0)

    @property
    def samples_per_s(self) -> float:
        return self.steady_samples / self.steady_s if self.steady_s > 0 else float("nan")

    @property
    def read_mib_s(self) -> float:
        first = self.nbytes / self.batches if self.batches else 0
        return (self.nbytes - first) / MIB / self.steady_s if self.steady_s > 0 else float("nan")


def time_epoch(batches: Iterable[dict[str, Any]], max_batches: int | None,
               on_workers: Callable[[list[int]], None] | None = None) -> Repeat:
    """Iterate once, timing every next(); the same loop measures the no-op baseline."""
    read0 = cache.tree_read_bytes()
    t0 = time.perf_counter()
    it = iter(batches)
    watch_s = 0.0
    if on_workers is not None:  # DataLoader workers exist from iter() on; short repeats can outrun sampling
        tw = time.perf_counter()
        on_workers([w.pid for w in getattr(it, "_workers", [])])
        watch_s = time.perf_counter() - tw  # collector time, not loader time: left out of ttfb_s
    waits: list[float] = []
    samples = nbytes = n = 0
    t_first = t0
    while max_batches is None or n < max_batches:
        tb = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            break
        now = time.perf_counter()
        waits.append(now - tb)
        if n == 0:
            t_first = now
        n += 1
        samples += b["n"]
        nbytes += b["nbytes"]
    t_end = time.perf_counter()
    del it  # shuts non-persistent workers down, so their I/O is folded into ours before the next read
    return Repeat(samples, nbytes, n, t_first - t0 - watch_s, t_end - t_first, waits,
                  cache.tree_read_bytes() - read0)


_overhead_ms: float | None = None


def harness_overhead_ms() -> float:
    """Per-batch cost of the timing loop itself, over ready-made batches: the floor of any measurement."""
    global _overhead_ms
    if _overhead_ms is None:
        ready = [{"n": 1, "nbytes": 1}] * 20000
        r = time_epoch(ready, None)
        _overhead_ms = (r.ttfb_s + r.steady_s) / r.batches * 1000
    return _overhead_ms


def run_trial(data: Data | Path, cfg: LoaderConfig, opts: TrialOptions | None = None) -> LoaderResult:
    """Measure one config. Trial failures (bad config, crashed worker, corrupt shard) come back as a failed
    record that says why; only problems with the dataset path itself raise UserError."""
    opts = opts or TrialOptions()
    cfg = cfg.explicit()
    data = as_data(data)
    res = LoaderResult(data=data.spec, config=asdict(cfg), config_key=cfg.key(), world_size=opts.world_size,
                       cache_mode=cfg.cache if data.cache_managed else data.cache_mode)
    if opts.throttle_mib_s:
        res.notes.append(f"storage throttled to {opts.throttle_mib_s} MiB/s per reader (simulated)")
    reps: list[Repeat] = []
    try:
        reps = _measure(data, cfg, opts, res)
    except (TrialError, UserError) as e:
        res.status, res.error = "failed", str(e)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a worker crash or corrupt shard surfaces as whatever the worker raised
        res.status, res.error = "failed", describe_failure(e)
    if opts.gather is not None:
        _combine_ranks(res, reps, opts.gather)
    return res


def _combine_ranks(res: LoaderResult, reps: list[Repeat], gather: Callable[[Any], list[Any]]) -> None:
    """Global samples/s per repeat = all ranks' samples over the slowest rank's time; stragglers named."""
    mine = {"status": res.status, "error": res.error, "rank_sps": res.samples_per_s_median,
            "rank_samples": res.samples_per_repeat,
            "samples": [r.steady_samples for r in reps], "steady_s": [r.steady_s for r in reps]}
    ranks = gather(mine)
    bad = [(i, r["error"]) for i, r in enumerate(ranks) if r["status"] != "ok"]
    if bad:
        res.status = "failed"
        res.error = "; ".join(f"rank {i}: {e}" for i, e in bad)
        return
    n = min(len(r["samples"]) for r in ranks)
    glob = [sum(r["samples"][k] for r in ranks) / max(r["steady_s"][k] for r in ranks) for k in range(n)]
    s = summarize(glob)
    res.samples_per_s_repeats = glob
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


def describe_failure(e: BaseException) -> str:
    """One line naming what went wrong inside the loader, without the traceback."""
    msg = str(e).strip().splitlines()
    tail = [ln for ln in msg if ln.strip()] or [type(e).__name__]
    last = tail[-1]
    text = f"{type(e).__name__}: {last}" if type(e).__name__ not in last else last
    if "DataLoader worker" in str(e) and "exited unexpectedly" in str(e):
        text = "a DataLoader worker died (killed, or out of memory); " + text
    if any(h in f"{type(e).__name__} {e}" for h in ("ReadError", "tarfile", "unexpected end")):
        return f"corrupt tar shard mid-epoch: {text}"
    return text


def _measure(data: Data, cfg: LoaderConfig, opts: TrialOptions, res: LoaderResult) -> list[Repeat]:
    if opts.repeats < 1:
        raise TrialError("repeats must be at least 1")
    if opts.repeats < 3:
        res.notes.append(f"only {opts.repeats} repeats: medians of fewer than 3 are not robust")
    if cfg.pin_memory and not torch.cuda.is_available() and cfg.format != "dali":
        res.notes.append("pin_memory asked for but no CUDA device: torch skips pinning")
    paths = data.local_paths()
    if not data.cache_managed:
        res.notes.append(data.cache_note())
    elif cfg.cache == "warm":
        cache.preread(paths)
    elif cfg.cache != "cold":
        raise TrialError(f"cache must be warm or cold, got {cfg.cache!r}")
    batches = make_batches(data, cfg, opts)
    # warm-up: worker start, imports, first decode; its numbers are discarded
    if opts.warmup_batches > 0:
        time_epoch(batches, opts.warmup_batches)
    reps: list[Repeat] = []
    collectors = default_collectors(data.disk_path(), opts.raw_dir, tag=_tag(cfg, opts), ebpf=opts.ebpf) \
        if opts.collect else []
    with Running(collectors) as running:
        for _ in range(opts.repeats):
            if cfg.cache == "cold" and data.cache_managed:
                res.notes.extend(n for n in cache.evict(paths, opts.drop_caches) if n not in res.notes)
            if opts.barrier:
                opts.barrier()
            net0 = psutil.net_io_counters().bytes_recv
            reps.append(time_epoch(batches, opts.max_batches, running.watch))
            if data.remote:
                res.network_recv_mib_per_repeat.append((psutil.net_io_counters().bytes_recv - net0) / MIB)
        collected = running.stop()
    res.collectors = collected
    _fill(res, reps, opts)
    return reps


def _tag(cfg: LoaderConfig, opts: TrialOptions) -> str:
    import hashlib

    return hashlib.sha1(cfg.key().encode()).hexdigest()[:10] + (f"-r{opts.rank}" if opts.world_size > 1 else "")


def _fill(res: LoaderResult, reps: list[Repeat], opts: TrialOptions) -> None:
    fewest = min(r.batches for r in reps)
    if fewest < opts.min_batches:
        raise TrialError(f"only {fewest} batches per repeat, fewer than the minimum {opts.min_batches}: "
                         "use more samples, a smaller batch_size, or a larger --max-batches")
    sps = [r.samples_per_s for r in reps]
    s = summarize(sps)
    res.repeats = len(reps)
    res.batches_per_repeat = fewest
    res.samples_per_repeat = min(r.samples for r in reps)
    res.samples_per_s_median, res.samples_per_s_min = s["median"], s["min"]
    res.samples_per_s_max, res.samples_per_s_spread_pct = s["max"], s["spread_pct"]
    res.samples_per_s_repeats = sps
    res.read_mib_s_repeats = [r.read_mib_s for r in reps]
    res.read_mib_s_median = summarize(res.read_mib_s_repeats)["median"]
    res.ttfb_s_median = summarize([r.ttfb_s for r in reps])["median"]
    waits = [w * 1000 for r in reps for w in r.waits_s[1:]]
    res.batch_wait_ms_p50, res.batch_wait_ms_p99 = percentile(waits, 50), percentile(waits, 99)
    res.harness_overhead_ms_per_batch = harness_overhead_ms()
    res.storage_read_mib_per_repeat = [r.storage_read_bytes / MIB for r in reps]
    res.dataset_mib_read_per_repeat = summarize([r.nbytes / MIB for r in reps])["median"]
    if s["spread_pct"] > HIGH_SPREAD_PCT:
        res.notes.append(f"high spread: repeats differ by {s['spread_pct']:.0f}% of the median; "
                         "treat this config's figure as noisy (more repeats, a quieter machine)")
    if res.cache_mode not in ("warm", "cold"):
        return  # remote or a user's Dataset: no page cache of ours to verify (the note says so)
    if res.cache_mode == "cold":
        ok = all(r.storage_read_bytes >= COLD_VERIFY_FRACTION * r.nbytes for r in reps)
        res.cache_verified = ok
        if not ok:
            res.notes.append(
                "cold cache NOT verified: storage read_bytes per repeat "
                f"{[round(x, 2) for x in res.storage_read_mib_per_repeat]} MiB for "
                f"{res.dataset_mib_read_per_repeat:.2f} MiB of samples; the page cache was not dropped "
                "(filesystem ignores fadvise?) so this is effectively a warm measurement")
    else:
        ok = all(r.storage_read_bytes <= (1 - COLD_VERIFY_FRACTION) * r.nbytes for r in reps)
        res.cache_verified = ok
        if not ok:
            res.notes.append("warm cache NOT verified: repeats still read "
                             f"{[round(x, 2) for x in res.storage_read_mib_per_repeat]} MiB from storage "
                             "(dataset larger than free page cache?)")
