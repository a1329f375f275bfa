"""Every installed loader backend on one dataset, same samples, decode on, same timer.

    python benchmarks/backends_side_by_side.py [DATA] [--workers 4,8,16] [--backends all]
        [--dali-decode cpu,mixed] [--out results.jsonl]

Without DATA's manifest, generates a JPEG WebDataset there (--count samples of --source-size pixels in
--shards shards: at least the most workers, so every worker gets a shard). Each backend runs with each
worker count (DALI: as threads) in each worker type it offers, or the one named (`torchdata:process`); DALI
once per --dali-decode (`mixed`, GPU decode, only where CUDA is). A backend that is not installed is
skipped with a line saying so. The store conversion of litdata/streaming is done once, before timing, and
reported. Prints one line per trial; the records go to --out.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from dataperf import backends, results
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.data.manifest import MANIFEST, read_manifest
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig, LoaderResult


def ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",")]


def plan(entries: list[str], data_format: str, dali_decode: list[str], cuda: bool) -> list[tuple[str, str]]:
    """(backend, variant) pairs to run: a worker type, or for DALI a decode device; skipped ones printed."""
    out = []
    names = backends.expand(["all"], data_format) if entries == ["all"] else entries
    for entry in names:
        name, _, only = entry.partition(":")
        be = backends.REGISTRY[name if name != "auto" else data_format]
        if not be.installed():
            print(f"skip {be.name}: not installed ({be.install})")
            continue
        if be.name == "dali":
            for dev in dali_decode:
                if dev == "mixed" and not cuda:
                    print("skip dali mixed: GPU decode needs CUDA")
                else:
                    out.append((be.name, dev))
        else:
            out += [(be.name, wt) for wt in be.worker_types if not only or wt == only]
    return out


def line(name: str, variant: str, workers: int, r: LoaderResult, wall_s: float) -> str:
    b = r.backend
    conv = f" store {b['store_mib']:.1f} MiB conv {b['conversion_s']:.2f}s" if "conversion_s" in b else ""
    return (f"{name:10s} {variant:7s} w={workers:<2d} {r.status:6s} {r.samples_per_s_median:7.0f} samples/s "
            f"[{r.samples_per_s_min:.0f}-{r.samples_per_s_max:.0f}] repeat {r.repeat_samples_per_s_median:.0f} "
            f"active {r.active_workers or '-'} cores {r.cpu_cores_busy_median:.2f} "
            f"per-core {r.samples_per_s_per_core:.0f} pss {r.pss_mib_peak:.0f} MiB "
            f"per-GiB {r.samples_per_s_per_gib_pss:.0f} growth {r.worker_pss_growth_pct:.1f}% "
            f"private {r.worker_private_growth_mib:+.1f} MiB copied {r.worker_copied_mib:.1f} MiB{conv} "
            f"({wall_s:.0f}s)" + (f" ({r.error})" if r.error else ""))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", default="shards/bench-backends")
    ap.add_argument("--workers", type=ints, default=[max(1, (os.cpu_count() or 2) // 2)])
    ap.add_argument("--backends", default="all", help="all, or NAME[:WORKER_TYPE],... (auto = the data's own)")
    ap.add_argument("--dali-decode", default="cpu,mixed")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=128, help="decoded and resized to this")
    ap.add_argument("--count", type=int, default=1200)
    ap.add_argument("--source-size", type=int, default=160, help="stored JPEG side, when generating")
    ap.add_argument("--shards", type=int, default=None, help="when generating (default: the most workers)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/backends_side_by_side.jsonl")
    a = ap.parse_args()
    import torch

    data = Path(a.data)
    if not (data / MANIFEST).exists():
        t = time.perf_counter()
        write_dataset(data, "image", "webdataset", a.count, seed=0, overwrite=True,
                      image=ImageSpec(a.source_size, a.source_size, 90), shards=a.shards or max(a.workers))
        print(f"generated {data} in {time.perf_counter() - t:.0f}s")
    m = read_manifest(data)
    cuda = torch.cuda.is_available()
    todo = plan(a.backends.split(","), m.format, a.dali_decode.split(","), cuda)
    opts = TrialOptions(repeats=a.repeats, collect=False)
    print(f"data {data} ({m.format}, {m.count} samples, {len(m.shards)} shards), "
          f"batch {a.batch_size}, decode on, resize {a.image_size}, workers {a.workers}, cores {os.cpu_count()}, "
          f"torch {torch.__version__}, cuda {torch.cuda.get_device_name() if cuda else 'no'}")
    for name, variant in todo:
        for w in a.workers:
            dali = name == "dali"
            several = len(backends.REGISTRY[name].worker_types) > 1  # else its one kind, left implicit
            cfg = LoaderConfig(backend=name, batch_size=a.batch_size, num_workers=0 if dali else w, decode=True,
                               image_size=a.image_size,
                               worker_type=variant if several else None,
                               dali_num_threads=w if dali else None,
                               dali_decode_device=variant if dali else None)
            t = time.perf_counter()
            r = run_trial(data, cfg, opts)
            results.append(a.out, r)
            print(line(name, variant, w, r, time.perf_counter() - t), flush=True)
    print(f"records: {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
