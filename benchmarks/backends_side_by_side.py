"""Every installed loader backend on one dataset, same samples, decode on, same timer.

    python benchmarks/backends_side_by_side.py [DATA] [--workers N] [--out results.jsonl]

Without DATA, generates a JPEG WebDataset (1200 samples, 160x160) under shards/bench-backends. Each backend
runs with N workers (default: half the cores) in each worker type it offers; the store conversion of
litdata/streaming is done once before timing and reported. Prints one line per trial; the records go to --out.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from dataperf import records
from dataperf.formats import backends
from dataperf.formats.dataset_dir import MANIFEST, read_manifest
from dataperf.formats.generate import ImageSpec, write_dataset
from dataperf.records import LoaderConfig
from dataperf.runner import TrialOptions, run_trial


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", default="shards/bench-backends")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", default="benchmarks/results/backends_side_by_side.jsonl")
    a = ap.parse_args()
    data = Path(a.data)
    if not (data / MANIFEST).exists():
        write_dataset(data, "image", "webdataset", 1200, seed=0, image=ImageSpec(160, 160, 90), shard_mb=4,
                      overwrite=True)
    fmt = read_manifest(data).format
    opts = TrialOptions(repeats=3, collect=False)
    print(f"data {data} ({fmt}), {a.workers} workers, batch {a.batch_size}, decode on, cores {os.cpu_count()}")
    for name in backends.expand(["all"], fmt):
        be = backends.REGISTRY[name]
        for wt in be.worker_types:
            cfg = LoaderConfig(format=name, batch_size=a.batch_size, num_workers=0 if name == "dali" else a.workers,
                               decode=True, image_size=128, worker_type=wt if len(be.worker_types) > 1 else None,
                               dali_num_threads=a.workers if name == "dali" else None)
            r = run_trial(data, cfg, opts)
            records.append(a.out, r)
            b = r.backend
            conv = f" store {b['store_mib']:.1f} MiB conv {b['conversion_s']:.2f}s" if "conversion_s" in b else ""
            print(f"{name:11s} {wt:8s} {r.status:6s} {r.samples_per_s_median:8.0f} samples/s "
                  f"[{r.samples_per_s_min:.0f}-{r.samples_per_s_max:.0f}] cores {r.cpu_cores_busy_median:.2f} "
                  f"per-core {r.samples_per_s_per_core:.0f} pss {r.pss_mib_peak:.0f} MiB "
                  f"per-GiB {r.samples_per_s_per_gib_pss:.0f} growth {r.worker_pss_growth_pct:.1f}%{conv}"
                  + (f" ({r.error})" if r.error else ""))
    print(f"records: {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
