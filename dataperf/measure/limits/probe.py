"""The decode and workers ceilings: the config's own dataset, decode, transform and collate run in one real
DataLoader worker and timed from inside it (the worker probe), and the workers that get any work."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

from dataperf import backends
from dataperf.backends.dataloader import ends_with_parent
from dataperf.data import Data
from dataperf.errors import describe_failure
from dataperf.measure import cache
from dataperf.measure.limits.ceiling import MIB, NAN, Ceiling, LimitsOptions
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig, LoaderResult


def _identity(x: Any) -> Any:
    return x


class _Probe(IterableDataset):
    """Runs in one DataLoader worker: builds batches of the real dataset with the real collate, timing each
    batch's samples (read + decode + transform) and its collate as thread CPU time and wall time, and hands the
    real batch on with its timings under "probe" (the main process keeps one as the decoded batch's template)."""

    def __init__(self, ds: Any, collate: Callable[[list[Any]], Any], batch_size: int, batches: int, max_s: float):
        self.ds, self.collate, self.batch_size = ds, collate, batch_size
        self.batches, self.max_s = batches, max_s

    def _samples(self) -> Iterator[Any]:
        if isinstance(self.ds, IterableDataset):
            return iter(self.ds)
        return (self.ds[i] for i in range(len(self.ds)))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        it = self._samples()
        t0 = time.perf_counter()
        for k in range(self.batches):
            c0, w0 = time.thread_time(), time.perf_counter()
            chunk = list(itertools.islice(it, self.batch_size))
            c1, w1 = time.thread_time(), time.perf_counter()
            if not chunk:
                return
            batch = self.collate(chunk)
            c2, w2 = time.thread_time(), time.perf_counter()
            batch["probe"] = {"n": len(chunk), "fetch_cpu_s": c1 - c0, "fetch_wall_s": w1 - w0,
                              "collate_cpu_s": c2 - c1, "collate_wall_s": w2 - w1}
            yield batch
            if k >= 2 and time.perf_counter() - t0 > self.max_s:  # warm-up + at least 2 measured batches
                return


@dataclass
class WorkerProbe:
    """Per-sample costs inside one worker (the first batch, with imports and first decode, left out)."""

    samples: int = 0
    batches: int = 0
    fetch_cpu_s: float = 0.0
    fetch_wall_s: float = 0.0
    collate_cpu_s: float = 0.0
    collate_wall_s: float = 0.0
    payload_bytes: int = 0
    template: dict[str, Any] | None = None  # one real batch as the main process received it
    dataset_len: int | None = None  # map-style datasets: samples per epoch (per rank: all of them)
    iterable: bool = False
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    def per_sample(self, total_s: float) -> float:
        return total_s / self.samples if self.samples else NAN

    @property
    def worker_rate(self) -> float:
        """Samples/s one worker produces when nothing downstream holds it: 1 / (fetch + collate wall)."""
        s = self.per_sample(self.fetch_wall_s + self.collate_wall_s)
        return 1 / s if s > 0 else NAN


def probe_worker(data: Data, cfg: LoaderConfig, opts: TrialOptions, lopts: LimitsOptions) -> WorkerProbe:
    """The config's own dataset, decode, transform and collate in one real DataLoader worker, on a warm cache.

    The dataset is wrapped, not changed: the loaders build it as a trial would (opts.sample_cost_s included,
    the storage throttle left out: that is storage's ceiling)."""
    from dataperf.backends.dataloader import collate, make_dataset, validate
    from dataperf.backends.datasets import collate_for

    out = WorkerProbe()
    if cfg.backend not in backends.DATALOADER:
        out.error = f"backend {cfg.backend} runs its own pipeline; the probes wrap the DataLoader's dataset"
        return out
    try:
        validate(cfg)
        if data.cache_managed:
            _warm(data, lopts, out)
        ds = make_dataset(data, cfg, replace(opts, throttle_mib_s=None, seek_s=None))
        out.iterable = isinstance(ds, IterableDataset)
        out.dataset_len = None if out.iterable else len(ds)
        measured = max(lopts.probe_batches, math.ceil(lopts.probe_samples / cfg.batch_size))
        probe = _Probe(ds, collate_for(data, ds, collate), cfg.batch_size, 2 * measured + 1, 2 * lopts.probe_s)
        dl = DataLoader(probe, batch_size=None, collate_fn=_identity, num_workers=1, prefetch_factor=2,
                        worker_init_fn=ends_with_parent())
        seen, timed, block = 0, [], max(1, measured // 2)
        for b in dl:
            t = b.pop("probe")
            seen += 1
            out.template = b
            if seen == 1:
                first = (t, b["nbytes"])
                continue
            timed.append((t, b["nbytes"]))
            if len(timed) >= 2 * block and _stable(timed, block, out, lopts.probe_s):
                break
        else:
            if len(timed) >= 2 * block:
                _stable(timed[:len(timed) // block * block], block, out, 0.0)  # the data ran out: say so
        del dl
        for t, n in timed[-2 * block:] if len(timed) >= 2 * block else timed:
            _add(out, t, n)
        if seen == 1:  # one batch in all: measured anyway, and said to include the warm-up
            _add(out, *first)
            out.notes.append("decode probe: the dataset holds one batch, so its warm-up is in the figures")
    except KeyboardInterrupt:
        raise
    except Exception as e:
        out.error = describe_failure(e)
    if out.template is None and out.error is None:
        out.error = "the dataset yielded no batch"
    return out


STABLE_BLOCKS = 4  # the decode probe reads up to this many half-blocks (of probe_samples) until two agree
STABLE = 0.05  # two consecutive blocks' CPU time a sample within this of each other: the rate is stable


def _stable(timed: list[tuple[dict[str, Any], int]], block: int, out: WorkerProbe, probe_s: float) -> bool:
    """Whether the decode probe can stop: the last two whole blocks of `block` batches (half the probe's samples
    each) agree on CPU time a sample within STABLE (on the H200 one probe read 172 samples/s a core in one run and
    257 in another), or the probe has read STABLE_BLOCKS of them, or twice its time. The figures go in a note."""
    if len(timed) % block:
        return False
    per = [sum(t["fetch_cpu_s"] for t, _ in timed[i:i + block]) / max(1, sum(t["n"] for t, _ in timed[i:i + block]))
           for i in range(0, len(timed), block)]
    wall = sum(t["fetch_wall_s"] + t["collate_wall_s"] for t, _ in timed)
    settled = len(per) >= 2 and abs(per[-1] - per[-2]) <= STABLE * per[-1]
    if settled or len(per) >= STABLE_BLOCKS or wall >= 2 * probe_s:
        why = "the last two agreed within 5%" if settled else "no two agreed within 5%: the last two are used"
        out.notes.append(f"decode probe: {len(per)} block(s) of {block} batches read "
                         f"{', '.join(f'{1 / x:,.0f}' if x > 0 else '-' for x in per)} samples/s a core; {why}")
        return True
    return False


def _add(out: WorkerProbe, t: dict[str, Any], nbytes: int) -> None:
    out.batches += 1
    out.samples += t["n"]
    out.fetch_cpu_s += t["fetch_cpu_s"]
    out.fetch_wall_s += t["fetch_wall_s"]
    out.collate_cpu_s += t["collate_cpu_s"]
    out.collate_wall_s += t["collate_wall_s"]
    out.payload_bytes += nbytes


def _warm(data: Data, lopts: LimitsOptions, out: WorkerProbe) -> None:
    """Pre-read the files the probe starts on (the first ones, up to the storage budget), so it measures decode
    on a warm cache; a first file larger than the budget is left cold, and a note says so."""
    files, used = [], 0
    for p in data.local_paths():
        s = p.stat().st_size
        if used + s > lopts.storage_budget_mib * MIB:
            break
        files.append(p)
        used += s
    if not files and data.local_paths():
        out.notes.append("decode probe: the first file is larger than the storage budget and was not pre-read, "
                         "so its reads may come from storage")
    cache.preread(files)


def decode_ceiling(probe: WorkerProbe, cores: int) -> Ceiling:
    """CPU for decode: one worker's rate on a core of its own (1 / thread CPU time per sample of read + decode +
    transform) times the usable cores. Time a sample spends waiting (a sleep, I/O) costs no core, so it is not
    here but in the workers' ceiling."""
    if probe.error:
        return Ceiling("decode", how=f"not measured: {probe.error}")
    cpu = probe.per_sample(probe.fetch_cpu_s)
    wall = probe.per_sample(probe.fetch_wall_s)
    if not cpu > 0:
        return Ceiling("decode", how=f"not measured: no CPU time registered over {probe.samples} samples")
    return Ceiling("decode", cores / cpu,
                   f"in one DataLoader worker over {probe.samples} samples (warm cache): {cpu * 1000:.2f} ms CPU, "
                   f"{wall * 1000:.2f} ms wall per sample of read + decode + transform; {1 / cpu:.0f} samples/s a "
                   f"core x {cores} usable cores")


def active_workers(data: Data, cfg: LoaderConfig, opts: TrialOptions, probe: WorkerProbe,
                   best: LoaderResult | None) -> tuple[int, str]:
    """Workers that get any work: a trial's own count when the config was measured, else what the split gives
    (WebDataset: shards per rank, one shard to a worker; map-style: batches per rank, round-robin)."""
    w = cfg.num_workers
    if w == 0:
        return 1, "num_workers=0: the main process loads, one stream"
    if best is not None and best.config_key == cfg.key() and best.active_workers is not None:
        a = best.active_workers
        return a, f"{a} of {w} workers delivered samples in the measured trial" + _idle(w - a, cfg, opts)
    if data.dealt_by == "shard":
        shards = len(data.files[opts.rank::max(opts.world_size, 1)])
        a = min(w, shards)
        per = f"{shards} shard{'' if shards == 1 else 's'} per rank"
        return a, f"{a} of {w} workers active ({per}, one shard to a worker)" + _idle(w - a, cfg, opts)
    if probe.dataset_len is not None:
        per_rank = math.ceil(probe.dataset_len / max(opts.world_size, 1))
        batches = math.ceil(per_rank / cfg.batch_size)
        a = min(w, batches)
        return a, f"{a} of {w} workers active ({batches} batches per rank, round-robin)" + _idle(w - a, cfg, opts)
    return w, f"{w} workers, all assumed active (an IterableDataset splits its own work; a trial counts them)"


def _idle(n: int, cfg: LoaderConfig, opts: TrialOptions) -> str:
    if n <= 0:
        return ""
    return (f"; {n} idle: starved workers, reshard to at least {cfg.num_workers * max(opts.world_size, 1)} "
            "shards or use fewer workers")


def workers_ceiling(probe: WorkerProbe, active: tuple[int, str]) -> Ceiling:
    """Active workers x what one worker produces (read + decode + transform + collate, wall time): the config's
    own workers, however many cores there are."""
    if probe.error:
        return Ceiling("workers", how=f"not measured: {probe.error}")
    n, why = active
    rate = probe.worker_rate
    return Ceiling("workers", n * rate, f"{why}; {rate:.0f} samples/s per worker (wall time of read + decode + "
                                        "transform + collate, one worker)")
