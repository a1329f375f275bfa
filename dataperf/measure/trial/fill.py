"""Filling a trial's record from its repeats: the rates and their spread, the epoch (its work per worker, its
tail, the training rate), the workers, the footprint, the cache check, the ranks combined, and the notes that
qualify them."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dataperf.backends import ONE_STREAM
from dataperf.data import DEALT_BY, Data
from dataperf.errors import TrialError
from dataperf.measure import breakdown, cache, footprint
from dataperf.measure.trial.options import TrialOptions
from dataperf.measure.trial.timing import STEADY_BATCHES, STEADY_SHARE, Repeat
from dataperf.results import (
    BUFFER_HID_READS,
    HIGH_SPREAD_PCT,
    MIB,
    LoaderConfig,
    LoaderResult,
    percentile,
    summarize,
)

# below SOLID_BATCHES a worker, with FEW_BATCH_NOTE_WORKERS or more workers, the steady rate reads high: x1.07 at
# 32 workers x 3 batches, x1.01 at 16, x0.99 at 12 batches (benchmarks/steady_few_batches.py, 2026-12-03)
SOLID_BATCHES = 6
FEW_BATCH_NOTE_WORKERS = 16


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


def worker_loads(data: Data, cfg: LoaderConfig, epoch_samples: int | None, opts: TrialOptions) -> list[float]:
    """Samples each DataLoader worker reads in one epoch of this rank, where the split is known: WebDataset deals
    this rank's shards out in turn (equal shards assumed), a map-style dataset its batches; [] when the split is
    not known (one stream, a user's IterableDataset, other backends) or the epoch's size is unknown."""
    w = cfg.num_workers
    if not epoch_samples or w < 2 or cfg.backend in ONE_STREAM:
        return []
    # a format's DataLoader backend bears the format's name and deals its workers as DEALT_BY says; others: unknown
    dealt = DEALT_BY.get(cfg.backend)
    if dealt == "shard" and data.sharded and data.files:
        shards = len(data.files[opts.rank::max(opts.world_size, 1)])
        per = epoch_samples / max(shards, 1)
        return [len(range(i, shards, w)) * per for i in range(w)]
    if dealt == "batch":
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
    """The trial's record from its repeats, part by part, its notes in the order the parts are filled."""
    fewest, sps = _checked(reps, opts, cfg)
    few_batches = _note_few_batches(res, reps)
    s = summarize(sps)
    _fill_rates(res, reps, fewest, sps, s)
    _fill_epoch(res, reps, opts, data, cfg, few_batches)
    _fill_io(res, reps, fewest)
    _fill_workers(res, reps, cfg, opts, data)
    breakdown.fill(res, reps, cfg, data)
    res.corrupt_samples = max(r.corrupt for r in reps)
    if res.corrupt_samples:
        res.notes.append(f"{res.corrupt_samples} corrupt samples per repeat skipped (on_corrupt=skip); the rate "
                         "counts only the samples delivered")
    if s["spread_pct"] > HIGH_SPREAD_PCT:
        res.notes.append(f"high spread: repeats differ by {s['spread_pct']:.0f}% of the median; "
                         "treat this config's figure as noisy (more repeats, a quieter machine)")
    _verify_cache(res, reps, data, paths, opts)


def _checked(reps: list[Repeat], opts: TrialOptions, cfg: LoaderConfig) -> tuple[int, list[float]]:
    """The repeats' fewest batches and their steady rates; a TrialError naming the fix where the repeats hold too
    few batches, or a worker too few for a steady window of its own."""
    fewest = min(r.batches for r in reps)
    if fewest < opts.min_batches:
        raise TrialError(f"only {fewest} batches per repeat, fewer than the minimum {opts.min_batches}: "
                         "use more samples, a smaller batch_size, or a larger --max-batches")
    short = max(reps, key=lambda r: len(r.few_batch_workers))
    if short.few_batch_workers:
        n, w = len(short.few_batch_workers), len(short.active_workers)
        k = STEADY_BATCHES * max(w, 1)
        if opts.max_batches is not None and short.batches >= opts.max_batches:  # --max-batches ended the repeat
            fix = f"--max-batches {k} or more, a smaller batch_size, or fewer workers"
        else:  # the data ran out (the budget never ends a repeat early): more batches a repeat cannot help
            fix = (f"the data held {short.batches} batches of {cfg.batch_size} a repeat: --batch-size "
                   f"{short.batches * cfg.batch_size // k} or smaller, {k * cfg.batch_size} or more samples, or "
                   "fewer workers")
        raise TrialError(f"{n} of {w} active workers delivered fewer than {STEADY_BATCHES} batches in a repeat "
                         f"({short.batches} batches in all), too few for a steady window of each worker (it would "
                         f"read low or high): give every worker at least {STEADY_BATCHES} batches per repeat "
                         f"({fix})")
    sps = [r.samples_per_s for r in reps]
    if any(x != x for x in sps):
        raise TrialError("no worker delivered two batches in a repeat, so there is no steady window: use more "
                         "samples, a smaller batch_size, or fewer workers")
    return fewest, sps


def _fill_rates(res: LoaderResult, reps: list[Repeat], fewest: int, sps: list[float], s: dict[str, float]) -> None:
    """The steady rate's median, range and spread over the repeats, and the repeats' own rate (start-up in)."""
    res.repeats = len(reps)
    res.batches_per_repeat = fewest
    res.samples_per_repeat = min(r.samples for r in reps)
    res.samples_per_s_median, res.samples_per_s_min = s["median"], s["min"]
    res.samples_per_s_max, res.samples_per_s_spread_pct = s["max"], s["spread_pct"]
    res.samples_per_s_repeats = sps
    res.repeat_samples_per_s_repeats = [r.repeat_samples_per_s for r in reps]
    res.repeat_samples_per_s_median = summarize(res.repeat_samples_per_s_repeats)["median"]


def _fill_epoch(res: LoaderResult, reps: list[Repeat], opts: TrialOptions, data: Data, cfg: LoaderConfig,
                few_batches: bool) -> None:
    """This rank's epoch: its work per worker and tail, start-up, the epoch estimate, the flow, the training rate,
    and the notes on each (start-up, shuffle buffer, uneven work)."""
    per_rank = data.count // max(opts.world_size, 1) if data.count else None
    res.shards = data.shards
    loads = worker_loads(data, cfg, per_rank, opts)
    res.tail_s, res.epoch_worker_samples = tail_s(loads, res.samples_per_s_median), loads
    res.whole_epochs = all(r.ended for r in reps)
    res.startup_s_median = summarize([max(0.0, r.wall_s - r.samples / r.samples_per_s - (res.tail_s if r.ended else 0))
                                      for r in reps])["median"]
    res.repeat_s, res.repeat_samples = [r.wall_s for r in reps], [r.samples for r in reps]
    if per_rank:  # this rank's share of an epoch at the steady rate, its tail and one start-up
        res.epoch_estimate_s = per_rank / res.samples_per_s_median + res.tail_s + res.startup_s_median
    if opts.repeat_seconds and res.startup_s_median > opts.repeat_seconds * (1 - STEADY_SHARE):
        res.notes.append(f"start-up took {res.startup_s_median:.1f} s of each {opts.repeat_seconds:g} s repeat: each "
                         f"ran on to {STEADY_SHARE * opts.repeat_seconds:g} s past its first batch, longer than its "
                         "budget; for a longer steady window give repeats more time (--repeat-seconds)")
    buffered = buffer_note(res, cfg, reps, per_rank)
    # the flow counts what a shuffle buffer gave without reading as much as the steady window does: none then
    res.flow_samples_per_s_median = float("nan") if buffered else \
        summarize([r.flow_samples_per_s for r in reps])["median"]
    _training_rate(res, per_rank, BUFFER_HID_READS if buffered else
                   "too few batches a worker" if few_batches else None)
    _note_uneven(res, loads, cfg)


def _fill_io(res: LoaderResult, reps: list[Repeat], fewest: int) -> None:
    """Bytes and waits: payload and storage reads, time to first batch, the consumer's waits, the harness's share
    of a batch, the input a sample takes, tokens a sample."""
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


def _fill_workers(res: LoaderResult, reps: list[Repeat], cfg: LoaderConfig, opts: TrialOptions,
                  data: Data) -> None:
    """Workers that delivered samples; one 'idle' warning naming the fix for the data's own unit of work when
    some did not: tar shards are resharded, Parquet is rewritten with more, smaller row groups (a worker reads
    whole row groups; tar shards would not help it)."""
    if cfg.backend in ONE_STREAM:
        return
    res.active_workers = min(len(r.active_workers) for r in reps)
    w = cfg.num_workers
    if w > 0 and res.active_workers < w:
        need = w * opts.world_size
        have = f"{res.shards} shards for " if res.shards is not None else ""
        ranks = f" x {opts.world_size} ranks" if opts.world_size > 1 else ""
        if data.row_groups:
            groups = sum(len(g) for g in data.row_groups)
            res.notes.append(
                f"warning: idle workers: only {res.active_workers} of {w} DataLoader workers delivered samples "
                f"({groups} Parquet row groups for {w} workers{ranks}, a worker reads whole row groups); rewrite "
                f"the files with at least {need} row groups (pyarrow.parquet.write_table(..., row_group_size="
                f"{max(1, (data.count or groups) // need)}))")
            return
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


def _fill_footprint(res: LoaderResult, costs: list[footprint.Footprint], reps: list[Repeat],
                    copied: footprint.CopyOnRead | None = None) -> None:
    """Throughput per busy core and per GiB of PSS; workers' memory growth in a repeat, a leak flagged; what they
    copied from the parent since their first batch (copy-on-read), and at that pace over an epoch, flagged."""
    cores = summarize([c.cores_busy for c in costs])["median"]
    res.cpu_cores_busy_median = cores
    others = [c.other_cores_busy for c in costs if c.other_cores_busy == c.other_cores_busy]
    if others:
        res.other_cores_busy_median = summarize(others)["median"]
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
    _note_leak(res, costs, reps)
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


def _note_leak(res: LoaderResult, costs: list[footprint.Footprint], reps: list[Repeat]) -> None:
    """A warning where the workers' private memory still grew late in every repeat (more than GROWTH_FLAG_MIB
    between the middle and the last third of their life, not a copy: a warm-up is over by then) and, at that
    pace a sample, by more than LEAK_FLAG_MIB over the trial's samples: their Dataset keeps what it returns (the
    2026-12-06 review's leaking Dataset ran to 8 GB unflagged). The pace is the growth over the samples the
    consumer got between the two readings."""
    grown = counted = 0
    for c, r in zip(costs, reps, strict=True):
        if c.worker_late is None or c.worker_late[2] <= footprint.GROWTH_FLAG_MIB * MIB:
            return  # not read, or not growing in this repeat: no leak shown
        t_from, t_to, late = c.worker_late
        n = sum(a.samples for a in r.arrivals if t_from < r.t0 + a.t_s <= t_to)
        if not n:
            return
        grown, counted = grown + late, counted + n
    per_sample = grown / counted
    samples = [r.samples for r in reps]
    if per_sample * sum(samples) <= footprint.LEAK_FLAG_MIB * MIB:
        return
    repeat = summarize([float(n) for n in samples])["median"]
    epoch = f"; about {per_sample * res.epoch_samples / MIB:,.0f} MiB over an epoch of {res.epoch_samples:,} " \
            "samples" if res.epoch_samples and res.epoch_samples > repeat else ""
    res.notes.append(f"warning: worker memory grows: the DataLoader workers' private memory grew through each of "
                     f"the {len(reps)} repeats, {per_sample * 1000 / MIB:,.1f} MiB per 1,000 samples (about "
                     f"{per_sample * repeat / MIB:,.0f} MiB a repeat of {repeat:,.0f} samples{epoch}), none of it "
                     "given back while they ran: the Dataset (or its transform) keeps what it returns, in a cache "
                     "or a list that grows; bound the cache or free what __getitem__ keeps, or the workers run "
                     "out of memory")


PEER_FAILED = "another rank's trial failed"  # the error of a rank that stopped because another failed


def _combine_ranks(res: LoaderResult, reps: list[Repeat], gather: Callable[[Any], list[Any]]) -> None:
    """Global samples/s per repeat = all ranks' samples over the slowest rank's time; stragglers named. A
    repeat's samples are all ranks' together, its duration the slowest rank's."""
    mine = {"status": res.status, "error": res.error, "rank_sps": res.samples_per_s_median,
            "rank_samples": res.samples_per_repeat, "repeat_samples": res.repeat_samples, "repeat_s": res.repeat_s,
            "samples": [r.steady_samples for r in reps], "steady_s": [r.steady_s for r in reps],
            "flow_s": [r.flow_s for r in reps]}
    ranks = gather(mine)
    bad = [(i, r["error"]) for i, r in enumerate(ranks) if r["status"] != "ok" and r["error"] != PEER_FAILED]
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
