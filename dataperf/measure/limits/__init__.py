"""The ceilings that bound a loader config, each in samples/s, each measured on the trial's own data and config,
and the one that binds: storage, decode, main_process, workers, h2d, model.

Each ceiling is what one part of the path from storage to the model could deliver if every other part were
free, so the lowest one is the rate no tuning of the others can pass, and a measured config's rate as a share
of it says how much is left to gain (docs/measurement/limits.md). The measurement only measures: it returns
a LimitsResult, and `rows`/`describe` turn one into what a report prints.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import mmap
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from dataperf import backends
from dataperf.data import Data, as_data
from dataperf.data.tario import split_key
from dataperf.errors import describe_failure
from dataperf.measure import cache
from dataperf.measure.trial import TrialOptions, time_repeat
from dataperf.results import LimitsResult, LoaderConfig, LoaderResult, StepResult

LIMITS = ("storage", "decode", "main_process", "workers", "h2d", "model")
MIB = 1024 * 1024
BLOCK = 1 << 20  # one read: 1 MiB at 1 MiB-aligned offsets, as fio --bs=1M; O_DIRECT needs the alignment
NAN = float("nan")
MIN_READ_S = 0.5  # a raw read lasts at least this long (whole passes over the planned files)
MIN_FIO_BYTES = 512 * MIB  # fio: as many passes as read at least this much (its runtime is in whole ms)
MAX_PASSES = 100


@dataclass
class LimitsOptions:
    """How much the probes read and for how long (not what they measure: that is the data and the config)."""

    storage_budget_mib: float = 256.0  # raw read: whole files spread over the dataset, up to this many MiB
    probe_batches: int = 8  # decode probe: measured batches after one warm-up batch
    # ... and at least this many samples: on the H200 (2026-12-03) 8 batches of 32 read 1.50 ms CPU a sample
    # where 8 of 128 read 1.01 and the grid's 32 workers decoded at 0.97 (cause not isolated)
    probe_samples: int = 1024
    probe_s: float = 5.0  # ... or fewer, once this long has passed (at least 2 measured batches)
    main_probe_s: float = 2.0  # main-process probe: how long the replay workers feed the main process
    main_probe_inflight_mib: float = 1024.0  # replay batches in flight at most (shared memory they hold)
    device: str | None = None  # where the model trains (h2d on cuda); None: the step's device, else cuda if present


@dataclass
class Ceiling:
    """One limit: what it allows in samples/s (NaN: not measured) and how it was measured, or why not."""

    limit: str
    samples_per_s: float = NAN
    how: str = ""

    @property
    def measured(self) -> bool:
        return math.isfinite(self.samples_per_s) and self.samples_per_s > 0


def usable_cores() -> int:
    """Cores the workers may decode on: this process's affinity (as taskset/cgroups cpusets set it), every one
    of them, as the loader trial a ceiling is judged against had: with one taken off for a model the ceiling sat
    below rates measured under the same conditions (the 2026-12-03 audit, F2: configs at 133-139% of their
    "ceiling" on 2 cores). What a training step takes from them when fed is the fed prediction's to count
    (verdict.cpu_cap, from the step's own busy cores). At least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, n)


# --- storage: raw reads of the dataset's own files ----------------------------------------------------------


@dataclass
class RawRead:
    """Bytes read by several readers at once, over the wall time of the whole read."""

    nbytes: int
    seconds: float
    method: str

    @property
    def mib_s(self) -> float:
        return self.nbytes / MIB / self.seconds if self.seconds > 0 else NAN


Task = tuple[Path, int, int]  # (file, offset, length): one reader's unit of work


def read_plan(paths: list[Path], budget_bytes: float, sizes: list[int] | None = None) -> list[Task]:
    """Whole files spread evenly over the dataset up to the budget (at least one file); a first file larger
    than the budget is read over its first budget bytes (a whole number of blocks), so a dataset of any size
    costs at most the budget. sizes: the files' sizes when already known (a million-file dataset is not
    stat'ed again)."""
    sizes = sizes if sizes is not None else [p.stat().st_size for p in paths]
    total = sum(sizes)
    if total <= budget_bytes:
        return [(p, 0, s) for p, s in zip(paths, sizes, strict=True) if s > 0]
    stride = max(1, math.ceil(total / budget_bytes))
    plan: list[Task] = []
    used = 0
    for p, s in zip(paths[::stride], sizes[::stride], strict=True):
        if used + s > budget_bytes:
            if not plan:
                plan.append((p, 0, min(s, max(BLOCK, int(budget_bytes) // BLOCK * BLOCK))))
            break
        if s > 0:
            plan.append((p, 0, s))
            used += s
    return plan


def split_tasks(plan: list[Task], readers: int) -> list[Task]:
    """Cut ranges larger than one reader's share into block-aligned pieces, so one big file keeps every reader
    busy; small files stay whole (a reader reads a file start to end, as a loader worker does)."""
    share = max(BLOCK, math.ceil(sum(n for _, _, n in plan) / max(readers, 1) / BLOCK) * BLOCK)
    out: list[Task] = []
    for p, off, n in plan:
        for k in range(off, off + n, share):
            out.append((p, k, min(share, off + n - k)))
    return out


_buffers = threading.local()


def _buffer() -> mmap.mmap:
    """A page-aligned 1 MiB buffer per reader thread (O_DIRECT needs aligned memory; mmap gives it)."""
    if not hasattr(_buffers, "buf"):
        _buffers.buf = mmap.mmap(-1, BLOCK)
    return _buffers.buf


def _read_task(task: Task, direct: bool, throttle_mib_s: float | None) -> int:
    """Read one range in 1 MiB preads; a simulated throttle sleeps as long as the bytes take at its rate."""
    path, off, length = task
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    got = 0
    try:
        buf = _buffer()
        pos, end = off, off + length
        while pos < end:
            n = os.preadv(fd, [buf], pos)
            if n <= 0:
                break
            n = min(n, end - pos)
            got += n
            pos += n
            if throttle_mib_s:
                time.sleep(n / (throttle_mib_s * MIB))
    finally:
        os.close(fd)
    return got


def _direct_refused(path: Path) -> str | None:
    """Why O_DIRECT cannot read this file (tmpfs, some network filesystems), or None if it can."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:
        return e.strerror or str(e)
    try:
        os.preadv(fd, [_buffer()], 0)
    except OSError as e:
        return e.strerror or str(e)
    finally:
        os.close(fd)
    return None


def python_read(tasks: list[Task], readers: int, direct: bool = True, throttle_mib_s: float | None = None,
                min_s: float = MIN_READ_S) -> RawRead:
    """`readers` threads reading the tasks (os.preadv releases the GIL, so the reads really overlap), in as many
    whole passes as fill min_s (a tiny dataset read once would time the thread start-up).

    direct: O_DIRECT, past the page cache; where the filesystem refuses it, the files are evicted
    (POSIX_FADV_DONTNEED) and read buffered, once, and the method says so. Not direct: buffered reads, i.e. from
    the page cache when the files are resident (a warm trial)."""
    method = f"{readers} parallel buffered readers, 1 MiB preads"
    if direct:
        method = f"{readers} parallel O_DIRECT readers, 1 MiB preads"
        why = _direct_refused(tasks[0][0]) if tasks else None
        if why is not None:
            cache.evict(sorted({p for p, _, _ in tasks}))
            direct, min_s = False, 0.0
            method = (f"{readers} parallel buffered readers after POSIX_FADV_DONTNEED (O_DIRECT refused: {why}; "
                      "on tmpfs this reads memory)")
    if throttle_mib_s:
        method += f", throttled to {throttle_mib_s:g} MiB/s per reader (simulated)"
    nbytes, passes = 0, 0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, readers)) as ex:
        while passes == 0 or (time.perf_counter() - t0 < min_s and passes < MAX_PASSES):
            nbytes += sum(ex.map(lambda t: _read_task(t, direct, throttle_mib_s), tasks))
            passes += 1
    if passes > 1:
        method += f", {passes} passes"
    return RawRead(nbytes, time.perf_counter() - t0, method)


def fio_read(tasks: list[Task], readers: int) -> tuple[RawRead | None, str]:
    """fio (`--readonly`, `direct=1`, 1 MiB sequential psync reads), one job per reader, all at once.

    fio reads whole blocks only (it skips a file smaller than a block and the tail past the last whole
    block), so it is used when every file holds at least one block, and its figure only if it read at least
    90% of the bytes it was given. Returns (reading or None, why not)."""
    if shutil.which("fio") is None:
        return None, "fio not installed"
    if any(n < BLOCK for _, _, n in tasks):
        return None, "files under 1 MiB (fio reads whole 1 MiB blocks only)"
    jobs = min(readers, len(tasks))
    expected = sum(n // BLOCK * BLOCK for _, _, n in tasks)
    loops = max(1, min(MAX_PASSES, math.ceil(MIN_FIO_BYTES / expected)))  # a tiny dataset: read it again
    lines = ["[global]", "direct=1", "rw=read", "bs=1M", "ioengine=psync", f"loops={loops}"]
    for j in range(jobs):
        mine = tasks[j::jobs]
        whole = all(off == 0 and n == p.stat().st_size for p, off, n in mine)
        if whole:
            names = ":".join(str(p).replace(":", "\\:") for p, _, _ in mine)
            lines += [f"[r{j}]", f"filename={names}"]
        else:  # pieces of one big file: a job section each (fio jobs run at once)
            for k, (p, off, n) in enumerate(mine):
                lines += [f"[r{j}-{k}]", f"filename={str(p).replace(':', chr(92) + ':')}", f"offset={off}",
                          f"size={n}"]
    with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        p = subprocess.run(["fio", "--readonly", "--output-format=json", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    try:
        out = json.loads(p.stdout[p.stdout.index("{"):]) if p.returncode == 0 else None
    except ValueError:
        out = None
    if out is None:
        return None, f"fio failed: {(p.stderr.strip().splitlines() or ['exit ' + str(p.returncode)])[-1]}"
    reads = [j["read"] for j in out["jobs"]]
    nbytes = sum(r["io_bytes"] for r in reads)
    seconds = max(r["runtime"] for r in reads) / 1000
    if nbytes < 0.9 * expected * loops or seconds <= 0:
        return None, f"fio read {nbytes} of {expected * loops} bytes"
    passes = f", {loops} passes" if loops > 1 else ""
    return RawRead(nbytes, seconds, f"fio --readonly direct=1 bs=1M psync, {jobs} jobs at once{passes}"), ""


def raw_read(plan: list[Task], readers: int, throttle_mib_s: float | None = None) -> RawRead:
    """A read plan read past the page cache by `readers` readers: fio where installed (and able), else O_DIRECT
    reads in Python. A simulated throttle is dataperf's own, so it is always read in Python."""
    tasks = split_tasks(plan, readers)
    why = "throttle simulated"
    if not throttle_mib_s:
        got, why = fio_read(tasks, readers)
        if got is not None:
            return got
    got = python_read(tasks, readers, True, throttle_mib_s)
    got.method += f" ({why})" if why else ""
    return got


def remote_get(urls: list[str], readers: int, budget_mib: float = 256.0) -> tuple[RawRead, dict[str, bytes]]:
    """Whole shards fetched by parallel GETs (data.remote opens http(s) and s3), up to the budget (at least
    one shard per reader); returns the reading and the bytes fetched (kept for the probes and the sample count)."""
    from dataperf.data.remote import open_url

    def get(url: str) -> bytes:
        with open_url(url) as r:
            return r.read()

    picked = urls[: max(readers, 1)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, readers)) as ex:
        bodies = dict(zip(picked, ex.map(get, picked), strict=True))
        more = urls[len(picked):]
        while more and sum(map(len, bodies.values())) < budget_mib * MIB:
            batch, more = more[:readers], more[readers:]
            bodies.update(zip(batch, ex.map(get, batch), strict=True))
    seconds = time.perf_counter() - t0
    return RawRead(sum(map(len, bodies.values())), seconds, f"{readers} parallel GETs of whole shards"), bodies


def tar_samples(f: Any) -> int:
    """Samples (distinct keys, WebDataset's grouping) in a tar shard, from its headers."""
    keys = set()
    with tarfile.open(fileobj=f, mode="r:") as tf:
        for m in tf:
            if m.isfile():
                keys.add(split_key(m.name)[0])
    return len(keys)


@dataclass
class StorageReading:
    """What the storage probe learnt: the rate for this config's cache mode, the raw device rate, how many
    stored bytes a sample takes (None: learnt later from the decode probe), and the data the other probes read
    (a local copy of the fetched shards for remote data)."""

    ceiling_how: str
    mib_s: float = NAN
    direct_mib_s: float = NAN
    file_bytes_per_sample: float | None = None
    probe_data: Data | None = None
    readers: int = 0


def measure_storage(data: Data, cfg: LoaderConfig, opts: TrialOptions, lopts: LimitsOptions,
                    scratch: Path) -> StorageReading:
    """Raw read of the dataset's own files by as many readers as the config has workers.

    Cold (and remote) trials read storage: fio/O_DIRECT, or GETs. A warm trial is served from page cache, so
    its ceiling is buffered reads of the warmed files; the device's direct rate is still measured and kept."""
    readers = max(1, cfg.num_workers)
    if data.format == "user-dataset":
        return StorageReading("not measurable: a user's Dataset reads files dataperf does not know", probe_data=data)
    if data.remote:
        reading, bodies = remote_get(data.urls(), min(readers, len(data.files)), lopts.storage_budget_mib)
        copy = scratch / "shards"
        copy.mkdir()
        for i, (url, body) in enumerate(bodies.items()):
            (copy / f"{i:06d}-{url.rsplit('/', 1)[-1]}").write_bytes(body)
        from dataperf.data import resolve

        n = sum(tar_samples(io.BytesIO(b)) for b in bodies.values())
        return StorageReading(f"{reading.method} ({len(bodies)} of {len(data.files)} shards, "
                              f"{reading.nbytes / MIB:.1f} MiB)", reading.mib_s, reading.mib_s,
                              reading.nbytes / n if n else None, resolve(str(copy)), min(readers, len(data.files)))
    paths = data.local_paths()
    known = [f.size_bytes for f in data.files]
    plan = read_plan(paths, lopts.storage_budget_mib * MIB, None if None in known else known)
    if not plan:
        return StorageReading("not measured: the dataset's files are empty", probe_data=data)
    readers = min(readers, len(split_tasks(plan, readers)))  # no more readers than pieces to read
    direct = raw_read(plan, readers, opts.throttle_mib_s)
    planned = f"{len(plan)} of {len(paths)} files, {sum(n for _, _, n in plan) / MIB:.1f} MiB"
    st = StorageReading(f"{direct.method} ({planned})", direct.mib_s, direct.mib_s,
                        _file_bytes_per_sample(data, plan), data, readers)
    if cfg.cache == "warm":
        files = sorted({p for p, _, _ in plan})
        cache.preread(files)
        warm = python_read(split_tasks(plan, readers), readers, False, opts.throttle_mib_s)
        st.mib_s = warm.mib_s
        st.ceiling_how = (f"warm trial: {warm.method} from page cache ({planned}); the device itself, "
                          f"{direct.method}: {direct.mib_s:.0f} MiB/s")
    return st


def _file_bytes_per_sample(data: Data, plan: list[Task]) -> float | None:
    """Stored bytes per sample: the dataset's bytes over its samples when both are known, else the shards read
    over the samples in them (tar headers included); None for token data (the decode probe's payload stands in)."""
    if data.count and data.total_bytes:
        return data.total_bytes / data.count
    if data.format == "webdataset":
        whole = [(p, n) for p, off, n in plan if off == 0 and n == p.stat().st_size]
        count = 0
        for p, _ in whole:
            with open(p, "rb") as f:
                count += tar_samples(f)
        return sum(n for _, n in whole) / count if count else None
    return None


# --- decode and workers: one DataLoader worker, timed from inside ---------------------------------------------


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
        dl = DataLoader(probe, batch_size=None, collate_fn=_identity, num_workers=1, prefetch_factor=2)
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
    if data.format == "webdataset":
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


# --- main process: real batches from workers whose samples cost nothing ------------------------------------


def _fresh(v: Any, memo: dict[int, Any]) -> Any:
    """A copy of a batch whose tensors are new shared-memory tensors (as torch's own collate makes them in a
    worker), so the main process receives fresh storage each time; other values are passed on as they are."""
    if isinstance(v, torch.Tensor):
        if id(v) not in memo:
            storage = v._typed_storage()._new_shared(v.numel(), device=v.device)
            memo[id(v)] = v.new(storage).resize_(v.shape).copy_(v)
        return memo[id(v)]
    if isinstance(v, dict):
        return {k: _fresh(x, memo) for k, x in v.items()}
    if isinstance(v, list | tuple) and not hasattr(v, "_fields"):
        return type(v)(_fresh(x, memo) for x in v)
    return v


class _Replay(IterableDataset):
    """Each worker hands the main process copies of one real decoded batch for max_s seconds: samples that cost
    nothing but a copy, so what limits the rate is the main process (receive, unpickle, pin)."""

    def __init__(self, template: dict[str, Any], max_s: float):
        self.template, self.max_s = template, max_s

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        t0 = time.perf_counter()
        while True:
            w0 = time.perf_counter()
            b = _fresh(self.template, {})
            b["worker"] = info.id if info is not None else -1
            b["replay_s"] = time.perf_counter() - w0
            yield b
            if time.perf_counter() - t0 > self.max_s:
                return


def batch_tensor_bytes(v: Any) -> int:
    """Bytes of every tensor in a batch (a tensor seen twice counted once): what crosses to the main process
    in shared memory and, on CUDA, to the device."""
    seen: dict[int, int] = {}

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            seen[id(x)] = x.numel() * x.element_size()
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
        elif isinstance(x, list | tuple):
            for y in x:
                walk(y)

    walk(v)
    return sum(seen.values())


def main_process_ceiling(template: dict[str, Any] | None, cfg: LoaderConfig, cores: int, lopts: LimitsOptions,
                         why_not: str | None = None) -> Ceiling:
    """The rate at which the main process takes in batches of the real decoded shape and dtype (receive,
    unpickle, pin when the config pins on CUDA) from enough workers whose batches cost only a copy: what no
    number of workers can exceed. The replay workers' own time is checked, so a figure they held is named."""
    if template is None:
        return Ceiling("main_process", how=f"not measured: {why_not or 'no decoded batch'}")
    n = template["n"]
    nbytes = batch_tensor_bytes(template)
    inflight = max(1, int(lopts.main_probe_inflight_mib * MIB // max(2 * nbytes, 1)))
    workers = max(1, min(max(2, cores), inflight))
    pin = cfg.pin_memory and torch.cuda.is_available()
    dl = DataLoader(_Replay(template, lopts.main_probe_s), batch_size=None, collate_fn=_identity,
                    num_workers=workers, prefetch_factor=2, pin_memory=pin)
    replay: list[float] = []

    def tap() -> Iterator[dict[str, Any]]:
        for b in dl:
            replay.append(b.pop("replay_s"))
            yield b

    try:
        rep = time_repeat(tap(), None)
    except KeyboardInterrupt:
        raise
    except Exception as e:
        return Ceiling("main_process", how=f"not measured: {describe_failure(e)}")
    rate = rep.samples_per_s
    how = (f"{workers} workers replaying one decoded batch ({n} samples, {nbytes / MIB:.2f} MiB of tensors"
           f"{', pinned' if pin else ''}) for {lopts.main_probe_s:g} s: {rep.batches} batches received")
    capacity = workers * n / (sum(replay) / len(replay)) if replay and sum(replay) > 0 else math.inf
    if rate >= 0.8 * capacity:
        how += (f"; the replay workers were near their own limit ({capacity:.0f} samples/s), so the main process "
                "may take more than this")
    return Ceiling("main_process", rate, how)


# --- h2d and model -----------------------------------------------------------------------------------------


def h2d_samples_per_s(bytes_per_s: float, batch_bytes: int, batch_size: int) -> float:
    """Samples/s a copy bandwidth carries when each batch of batch_size samples moves batch_bytes."""
    if batch_bytes <= 0 or batch_size <= 0:
        return NAN
    return bytes_per_s / (batch_bytes / batch_size)


def pinned_copy_bytes_per_s(nbytes: int, device: str, copies: int = 10) -> float:
    """Host-to-device bandwidth of a pinned buffer of nbytes (non_blocking copies, timed to a sync)."""
    dev = torch.device(device)
    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    for _ in range(2):  # first copies pay for mapping and the context
        dst.copy_(host, non_blocking=True)
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(copies):
        dst.copy_(host, non_blocking=True)
    torch.cuda.synchronize(dev)
    return nbytes * copies / (time.perf_counter() - t0)


def h2d_ceiling(template: dict[str, Any] | None, device: str, cfg: LoaderConfig) -> Ceiling:
    """Pinned host-to-device copy bandwidth, in samples/s of the decoded batch's tensor bytes; CUDA only."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return Ceiling("h2d", how="n/a (no CUDA)")
    if template is None:
        return Ceiling("h2d", how="not measured: no decoded batch to size the copy")
    if not isinstance(template.get("x"), torch.Tensor):
        return Ceiling("h2d", how="n/a: the batch holds no input tensor (decode off: stored bytes stay on the host)")
    nbytes = batch_tensor_bytes(template)
    bps = pinned_copy_bytes_per_s(nbytes, device)
    how = f"pinned copies of {nbytes / MIB:.2f} MiB per batch to {device}: {bps / 2**30:.1f} GiB/s"
    if not cfg.pin_memory:
        how += "; this config does not pin, so its copies are pageable and slower"
    return Ceiling("h2d", h2d_samples_per_s(bps, nbytes, template["n"]), how)


def model_ceiling(step: StepResult | None) -> Ceiling:
    if step is None:
        return Ceiling("model", how="not measured: no model given")
    if step.status != "ok":
        return Ceiling("model", how=f"not measured: the step failed ({step.error})")
    return Ceiling("model", step.samples_per_s, f"{step.model} train step {step.step_ms_mean:.1f} ms at batch "
                                                f"{step.batch_size} on {step.device}")


# --- all of them ---------------------------------------------------------------------------------------------


def measure_limits(data: Data | Path | str, cfg: LoaderConfig, opts: TrialOptions | None = None,
                   step: StepResult | None = None, best: LoaderResult | None = None,
                   lopts: LimitsOptions | None = None,
                   advance: Callable[[int], None] | None = None) -> LimitsResult:
    """Every ceiling for one config, the binding one, and (given the best loader trial) its share of it.

    advance(1) is called as each of the five measurements finishes (storage, worker probe, main process, h2d,
    model), for a progress bar."""
    data, cfg = as_data(data), cfg.explicit()
    opts, lopts = opts or TrialOptions(), lopts or LimitsOptions()
    tick = advance or (lambda n=1: None)
    cores = usable_cores()
    device = lopts.device or (step.device if step is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    res = LimitsResult(data=data.spec, config=asdict(cfg), config_key=cfg.key(), device=device, usable_cores=cores)
    with tempfile.TemporaryDirectory(prefix="dataperf-limits-") as scratch:
        try:
            st = measure_storage(data, cfg, opts, lopts, Path(scratch))
        except KeyboardInterrupt:
            raise
        except Exception as e:
            st = StorageReading(f"not measured: {describe_failure(e)}", probe_data=None)
        tick(1)
        probe = probe_worker(st.probe_data or data, cfg, opts, lopts)
        res.notes += probe.notes
        tick(1)
        main = main_process_ceiling(probe.template, cfg, cores, lopts, probe.error)
        tick(1)
    if st.file_bytes_per_sample is None and probe.samples:
        st.file_bytes_per_sample = probe.payload_bytes / probe.samples
        st.ceiling_how += "; bytes per sample from the samples' payload"
    bps = st.file_bytes_per_sample
    storage = Ceiling("storage", st.mib_s * MIB / bps if bps and math.isfinite(st.mib_s) else NAN, st.ceiling_how)
    res.storage_mib_s, res.storage_direct_mib_s, res.readers = st.mib_s, st.direct_mib_s, st.readers
    res.file_bytes_per_sample = bps if bps else NAN
    res.decode_cpu_ms_per_sample = probe.per_sample(probe.fetch_cpu_s) * 1000
    res.decode_wall_ms_per_sample = probe.per_sample(probe.fetch_wall_s) * 1000
    res.collate_ms_per_sample = probe.per_sample(probe.collate_wall_s) * 1000
    res.per_worker_samples_per_s = probe.worker_rate
    res.probe_samples = probe.samples
    active = active_workers(data, cfg, opts, probe, best)
    res.active_workers = active[0]
    if probe.template is not None:
        res.decoded_bytes_per_sample = batch_tensor_bytes(probe.template) / probe.template["n"]
    h2d = h2d_ceiling(probe.template, device, cfg)
    tick(1)
    for c in (storage, decode_ceiling(probe, cores), main, workers_ceiling(probe, active), h2d, model_ceiling(step)):
        put(res, c)
    tick(1)
    bind(res, best)
    return res


def put(res: LimitsResult, c: Ceiling) -> None:
    setattr(res, f"{c.limit}_samples_per_s", c.samples_per_s)
    setattr(res, f"{c.limit}_how", c.how)


def ceilings(res: LimitsResult) -> list[Ceiling]:
    """The six ceilings of a record (one read back from a results file too), in LIMITS order."""
    return [Ceiling(k, getattr(res, f"{k}_samples_per_s"), getattr(res, f"{k}_how")) for k in LIMITS]


def binding(cs: list[Ceiling]) -> Ceiling | None:
    """The lowest measured ceiling (ties: the first in LIMITS order); None when none was measured."""
    measured = [c for c in cs if c.measured]
    return min(measured, key=lambda c: c.samples_per_s) if measured else None


def bind(res: LimitsResult, best: LoaderResult | None = None) -> None:
    """Name the binding limit and, given the best loader trial, the share of it that trial reaches."""
    b = binding(ceilings(res))
    res.binding_limit = b.limit if b else ""
    res.binding_samples_per_s = b.samples_per_s if b else NAN
    if best is not None and best.status == "ok":
        res.best_config_key = best.config_key
        res.best_samples_per_s = best.samples_per_s_median
        if b is not None:
            res.best_of_binding_pct = best.samples_per_s_median / b.samples_per_s * 100
