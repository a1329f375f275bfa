"""One loader trial: validate, prepare the cache, warm up, time 3+ repeats, keep medians and spread.

The runner only measures; it returns a LoaderResult and never prints. Split by job: options.py (TrialOptions),
timing.py (one repeat timed, the steady rate, the harness overhead), plan.py (the ladder, the worker cap, a
trial's expected time), fill.py (the record filled from the repeats, and its notes). Here: run_trial and its
steps, and the names callers import from dataperf.measure.trial.
"""

from __future__ import annotations

import contextlib
import gc
import time
import traceback
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psutil
import torch

from dataperf import backends, watchdog
from dataperf.data import Data, as_data
from dataperf.errors import RankLost, TrialError, UserError, describe_failure
from dataperf.measure import cache, footprint
from dataperf.measure.collectors import Running, default_collectors
from dataperf.measure.trial.fill import (
    BUFFER_SHARE_MAX,
    FEW_BATCH_NOTE_WORKERS,
    PEER_FAILED,
    SOLID_BATCHES,
    _combine_ranks,
    _fill,
    _fill_footprint,
    buffer_note,
    tail_s,
    worker_loads,
)
from dataperf.measure.trial.options import DEFAULT_REPEAT_S, TrialOptions
from dataperf.measure.trial.plan import LADDER, estimate_trial_s, next_rung, repeat_floor_s, worker_cap
from dataperf.measure.trial.timing import (
    NOOP_BATCHES,
    STEADY_BATCHES,
    Arrival,
    Repeat,
    batch_input_bytes,
    harness_overhead_ms,
    steady_rate,
    time_repeat,
)
from dataperf.results import MIB, LoaderConfig, LoaderResult
from dataperf.verdict.rates import machine_cores

__all__ = ["BUFFER_SHARE_MAX", "DEFAULT_REPEAT_S", "FEW_BATCH_NOTE_WORKERS", "LADDER", "NOOP_BATCHES", "SOLID_BATCHES",
           "STEADY_BATCHES", "Arrival", "Repeat", "TrialOptions", "batch_input_bytes", "buffer_note", "cores",
           "estimate_trial_s", "harness_overhead_ms", "make_batches", "next_rung", "repeat_floor_s", "run_trial",
           "steady_rate", "tail_s", "time_repeat", "worker_cap", "worker_ladder", "worker_loads"]


def make_batches(data: Data, cfg: LoaderConfig, opts: TrialOptions) -> Iterable[dict[str, Any]]:
    """The backend cfg.backend names (dataperf.backends), yielding batch dicts with "n", "nbytes" and
    "worker" (the DataLoader worker that made the batch; -1 for one stream: main process, DALI, a pipeline)."""
    return backends.get(cfg.backend).make(data, cfg, opts)[0]


# cores and worker_ladder stay here, not in plan.py: callers and tests set dataperf.measure.trial.cores (a machine
# of N cores), and the ladder must see what they set
def cores() -> int:
    """This process's cores: its affinity (as taskset and cgroup cpusets set it), counted as the verdict counts
    them (verdict.machine_cores, given no record)."""
    return machine_cores()


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
    told = False  # this rank's failure is known to every rank (it came from their agreement)
    try:
        with watchdog.Watchdog(opts.stall_s, opts.deadline):
            reps = _measure(data, cfg, opts, res)
    except PeerFailed as e:
        res.status, res.error, told = "failed", str(e), True
    except (TrialError, UserError) as e:  # raised in a worker, the message carries the worker's traceback
        res.status, res.error = "failed", describe_failure(e) if "Original Traceback" in str(e) else str(e)
        _release(e)
    except (KeyboardInterrupt, RankLost):
        raise
    except Exception as e:  # a worker crash or corrupt shard surfaces as whatever the worker raised
        res.status, res.error = "failed", describe_failure(e)
        _release(e)
    if opts.gather is not None:
        if res.status != "ok" and not told:
            _agree(opts, failed=True)  # the others are at their next agreement: they stop there, not hang
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


def _measure(data: Data, cfg: LoaderConfig, opts: TrialOptions, res: LoaderResult) -> list[Repeat]:
    """The trial's steps: its checks, the backend prepared, warm-up, the repeats under the collectors, the record
    filled from them."""
    if opts.repeats < 1:
        raise TrialError("repeats must be at least 1")
    if opts.repeats < 3:
        res.notes.append(f"only {opts.repeats} repeats: medians of fewer than 3 are not robust")
    if cfg.cache not in ("warm", "cold"):
        raise TrialError(f"cache must be warm or cold, got {cfg.cache!r}")
    be = backends.get(cfg.backend)
    if cfg.pin_memory and not torch.cuda.is_available() and not be.own_pipeline:
        res.notes.append("pin_memory asked for but no CUDA device: torch skips pinning")
    batches, paths = _prepare(be, data, cfg, opts, res)
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
            if _agree(opts):  # every rank starts each repeat together, or stops together
                raise PeerFailed(PEER_FAILED)
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
        _fill_footprint(res, costs, reps, ledger.result())
    if _agree(opts):  # the last point where a rank's failure can be heard before the gather
        raise PeerFailed(PEER_FAILED)
    return reps


class PeerFailed(TrialError):
    """Another rank's trial failed: this rank stops its own at the same agreement, so all reach the gather."""


def _agree(opts: TrialOptions, failed: bool = False) -> bool:
    """Under several ranks, every rank says whether its trial failed; True when any did. Each rank calls it before
    each repeat and once after the last, and a failing rank once more, instead of the call it did not reach: so
    the ranks never wait in different collectives (one rank's truncated shard or killed worker hung them all)."""
    return opts.gather is not None and any(opts.gather(failed))


def _prepare(be: backends.Backend, data: Data, cfg: LoaderConfig, opts: TrialOptions,
             res: LoaderResult) -> tuple[Iterable[dict[str, Any]], list[Path]]:
    """The backend's batches and the files it reads, what it said and could not express in the record, and the
    cache made warm for a warm trial of files dataperf manages."""
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
    return batches, paths


def _tag(cfg: LoaderConfig, opts: TrialOptions) -> str:
    import hashlib

    return hashlib.sha1(cfg.key().encode()).hexdigest()[:10] + (f"-r{opts.rank}" if opts.world_size > 1 else "")
