"""Raw sequential read bandwidth of a dataset's files vs the best cold-cache WebDataset loader config.

    python benchmarks/raw_read_vs_loader.py [DATA]

Without DATA, generates a JPEG WebDataset under shards/bench-raw-read. The reference is fio (O_DIRECT,
1 MiB sequential reads) when installed, else Python O_DIRECT reads (both from dataperf.measure.limits, the storage
ceiling's own readers); both skip the page cache, as a cold loader trial does. Prints the loader's MiB/s as a
fraction of the raw bandwidth.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.data.manifest import MANIFEST, read_manifest
from dataperf.measure.limits import fio_read, python_read, read_plan, split_tasks
from dataperf.measure.trial import TrialOptions, run_trial, worker_ladder
from dataperf.results import LoaderConfig

MIB = 1024 * 1024


def main() -> int:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("shards/bench-raw-read")
    if not (data / MANIFEST).exists():
        write_dataset(data, "image", "webdataset", 3000, seed=0, image=ImageSpec(256, 256, 90), shard_mb=16,
                      overwrite=True)
    m = read_manifest(data)
    paths = m.paths(data)
    tasks = split_tasks(read_plan(paths, float("inf")), 1)  # the whole dataset, one sequential reader
    fio, why = fio_read(tasks, 1)
    py = python_read(tasks, 1)
    raw = fio.mib_s if fio is not None else py.mib_s
    ref = fio.method if fio is not None else f"{py.method}; fio: {why}"
    best = None
    opts = TrialOptions(repeats=3, collect=False)
    for w in worker_ladder():
        for pf in ([None] if w == 0 else [2, 4]):
            cfg = LoaderConfig(backend=m.format, batch_size=64, num_workers=w, prefetch_factor=pf, cache="cold")
            r = run_trial(data, cfg, opts)
            # like by like: bytes the loader made storage deliver (/proc read_bytes, tar overhead included)
            # against bytes fio read; only verified cold trials are storage reads at all
            if r.status == "ok" and r.cache_verified and (
                    best is None or r.storage_read_mib_s_median > best.storage_read_mib_s_median):
                best = r
            print(f"  {cfg.short():<40} storage {r.storage_read_mib_s_median:8.1f} MiB/s  payload "
                  f"{r.payload_mib_s_median:8.1f} MiB/s  cache_verified={r.cache_verified}")
    print(f"dataset: {data} ({m.total_bytes / MIB:.0f} MiB in {len(paths)} files)")
    print(f"raw read ({ref}): {raw:.1f} MiB/s" + (f"; python O_DIRECT: {py.mib_s:.1f} MiB/s" if fio else ""))
    if best is None:
        print("no verified cold loader trial")
        return 1
    print(f"best cold loader: {LoaderConfig(**best.config).short()} at {best.storage_read_mib_s_median:.1f} MiB/s "
          "read from storage (whole epoch, start-up included)")
    print(f"ratio loader storage reads / raw = {best.storage_read_mib_s_median / raw:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
