"""The storage ceiling's reading: the dataset's own files read by as many readers as the config has workers
(raw reads past the page cache, buffered reads of warmed files for a warm trial, or parallel GETs of remote
shards), and the stored bytes a sample takes."""

from __future__ import annotations

import io
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataperf.data import Data
from dataperf.data.tario import split_key
from dataperf.measure import cache
from dataperf.measure.limits.ceiling import MIB, NAN, LimitsOptions
from dataperf.measure.limits.reads import RawRead, Task, python_read, raw_read, read_plan, split_tasks
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig


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
    if data.is_user:
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
    if data.sharded:
        whole = [(p, n) for p, off, n in plan if off == 0 and n == p.stat().st_size]
        count = 0
        for p, _ in whole:
            with open(p, "rb") as f:
                count += tar_samples(f)
        return sum(n for _, n in whole) / count if count else None
    return None
