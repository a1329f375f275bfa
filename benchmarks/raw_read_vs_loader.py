"""Raw sequential read bandwidth of a dataset's files vs the best cold-cache WebDataset loader config.

    python benchmarks/raw_read_vs_loader.py [DATA]

Without DATA, generates a JPEG WebDataset under shards/bench-raw-read. The reference is fio (O_DIRECT,
1 MiB sequential reads) when installed, else Python O_DIRECT reads; both skip the page cache, as a cold
loader trial does. Prints the loader's MiB/s as a fraction of the raw bandwidth.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from dataperf import cache
from dataperf.formats.dataset_dir import MANIFEST, read_manifest
from dataperf.formats.generate import ImageSpec, write_dataset
from dataperf.records import MIB, LoaderConfig
from dataperf.runner import TrialOptions, run_trial, worker_ladder

BLOCK = 1 << 20


def odirect_read_mib_s(paths: list[Path]) -> tuple[float, str]:
    """Read every file once with O_DIRECT (aligned buffer); falls back to evict-then-read if refused."""
    buf = mmap.mmap(-1, BLOCK)
    total, t0 = 0, time.perf_counter()
    method = "O_DIRECT reads"
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
        except OSError:
            cache.evict([p])
            fd = os.open(p, os.O_RDONLY)
            method = "reads after POSIX_FADV_DONTNEED (O_DIRECT refused)"
        try:
            with os.fdopen(fd, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    total += n
        except OSError:
            cache.evict([p])
            total += len(p.read_bytes())
            method = "reads after POSIX_FADV_DONTNEED (O_DIRECT refused)"
    return total / MIB / (time.perf_counter() - t0), method


def fio_read_mib_s(paths: list[Path]) -> float | None:
    """fio over each file in turn, --readonly (fio otherwise lays files out to --size, i.e. writes them)."""
    if shutil.which("fio") is None:
        return None
    nbytes, seconds = 0, 0.0
    for path in paths:
        size = path.stat().st_size
        cmd = ["fio", "--name=seqread", f"--filename={path}", "--readonly", "--rw=read", "--bs=1M", "--direct=1",
               "--ioengine=psync", f"--size={size}", "--output-format=json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return None
        job = json.loads(p.stdout)["jobs"][0]["read"]
        nbytes += job["io_bytes"]
        seconds += job["runtime"] / 1000
    return nbytes / MIB / seconds if seconds else None


def main() -> int:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("shards/bench-raw-read")
    if not (data / MANIFEST).exists():
        write_dataset(data, "image", "webdataset", 3000, seed=0, image=ImageSpec(256, 256, 90), shard_mb=16,
                      overwrite=True)
    m = read_manifest(data)
    paths = m.paths(data)
    cache.evict(paths)
    fio = fio_read_mib_s(paths)
    cache.evict(paths)
    py, method = odirect_read_mib_s(paths)
    raw = fio if fio is not None else py
    ref = "fio O_DIRECT 1 MiB sequential" if fio is not None else method
    best = None
    opts = TrialOptions(repeats=3, collect=False)
    for w in worker_ladder():
        for pf in ([None] if w == 0 else [2, 4]):
            cfg = LoaderConfig(format=m.format, batch_size=64, num_workers=w, prefetch_factor=pf, cache="cold")
            r = run_trial(data, cfg, opts)
            # like by like: bytes the loader made storage deliver (/proc read_bytes, tar overhead included)
            # against bytes fio read; only verified cold trials are storage reads at all
            if r.status == "ok" and r.cache_verified and (
                    best is None or r.storage_read_mib_s_median > best.storage_read_mib_s_median):
                best = r
            print(f"  {cfg.short():<40} storage {r.storage_read_mib_s_median:8.1f} MiB/s  payload "
                  f"{r.payload_mib_s_median:8.1f} MiB/s  cache_verified={r.cache_verified}")
    print(f"dataset: {data} ({m.total_bytes / MIB:.0f} MiB in {len(paths)} files)")
    print(f"raw read ({ref}): {raw:.1f} MiB/s" + (f"; python O_DIRECT: {py:.1f} MiB/s" if fio else ""))
    if best is None:
        print("no verified cold loader trial")
        return 1
    print(f"best cold loader: {best.loader_config.short()} at {best.storage_read_mib_s_median:.1f} MiB/s "
          "read from storage (whole epoch, start-up included)")
    print(f"ratio loader storage reads / raw = {best.storage_read_mib_s_median / raw:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
