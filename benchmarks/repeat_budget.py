"""Time-budgeted repeats vs whole epochs, shuffled vs sequential, on one dataset.

    python benchmarks/repeat_budget.py DATA [--workers 16] [--batch-size 128] [--budgets 2,5,10] [--repeats 3]
        [--transform imagenet-train] [--cold] [--out FILE.jsonl]
    python benchmarks/repeat_budget.py --make DIR --count N    # an ImageFolder of N ImageNet-sized JPEGs

For each access pattern: one trial of whole-epoch repeats (the reference) and one per time budget. Prints
each budgeted steady rate as a fraction of the whole-epoch one, the repeats' spread, the trial's wall time,
and the budgeted trial's epoch estimate as a fraction of the whole-epoch trial's measured epoch time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace
from multiprocessing import Pool
from pathlib import Path

import numpy as np

from dataperf.data import resolve
from dataperf.data.make.generate import ImageSpec, jpeg_bytes
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig, LoaderResult, append

CLASSES = 100
IMAGENET = ImageSpec(500, 375, 92)  # ImageNet's typical size, about 100 KiB a JPEG (its train set: 110 KB)


def _write_one(args: tuple[Path, int]) -> int:
    root, i = args
    data = jpeg_bytes(np.random.default_rng(i), IMAGENET)
    (root / f"c{i % CLASSES:03d}" / f"{i:08d}.jpg").write_bytes(data)
    return len(data)


def make(root: Path, count: int) -> None:
    """Distinct JPEGs, one process per core (generation is CPU-bound: PIL encode)."""
    for c in range(CLASSES):
        (root / f"c{c:03d}").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with Pool(os.cpu_count()) as pool:
        sizes = pool.map(_write_one, [(root, i) for i in range(count)], chunksize=256)
    secs = time.perf_counter() - t0
    print(f"generated {count} JPEGs, {sum(sizes) / count / 1024:.0f} KiB mean, in {secs:.1f} s "
          f"({count / secs:.0f} samples/s on {os.cpu_count()} processes)")


def trial(data, cfg: LoaderConfig, opts: TrialOptions, out: Path | None) -> LoaderResult:
    r = run_trial(data, cfg, opts)
    if r.status != "ok":
        raise SystemExit(f"{cfg.short()} failed: {r.error}")
    if out:
        append(out, r)
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?")
    ap.add_argument("--make", type=Path)
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--budgets", default="2,5,10")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--transform", default="imagenet-train")
    ap.add_argument("--cold", action="store_true", help="also shuffled vs sequential with the page cache dropped")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.make:
        make(a.make, a.count)
        if not a.data:
            return
    data = resolve(a.data)
    base = LoaderConfig(backend=data.format, batch_size=a.batch_size, num_workers=a.workers, decode=True,
                        transform=a.transform)
    opts = TrialOptions(repeats=a.repeats, collect=False)
    budgets = [float(b) for b in a.budgets.split(",")]
    print(f"{data.describe()}; {base.short()}")
    print(f"{'access':<11} {'budget s':>8} {'samples/s':>10} {'vs epoch':>8} {'spread %':>8} {'repeat s':>17} "
          f"{'trial s':>7} {'epoch est / epoch':>17}")
    for shuffle in (True, False):
        cfg = replace(base, shuffle=shuffle)
        ref = trial(data, cfg, replace(opts, repeat_seconds=None), a.out)
        epoch_s = statistics.median(ref.repeat_s)
        for budget in [None, *budgets]:
            r = ref if budget is None else trial(data, cfg, replace(opts, repeat_seconds=budget), a.out)
            est = r.epoch_estimate_s / epoch_s if r.epoch_estimate_s else float("nan")
            print(f"{cfg.access():<11} {budget or 'epoch':>8} {r.samples_per_s_median:>10.0f} "
                  f"{r.samples_per_s_median / ref.samples_per_s_median:>8.3f} {r.samples_per_s_spread_pct:>8.1f} "
                  f"{min(r.repeat_s):>8.2f}-{max(r.repeat_s):<8.2f} {r.trial_s:>7.1f} {est:>17.3f}")
    if a.cold:
        for shuffle in (False, True):
            cfg = replace(base, shuffle=shuffle, cache="cold")
            r = trial(data, cfg, replace(opts, repeat_seconds=budgets[len(budgets) // 2]), a.out)
            print(f"cold {cfg.access():<11} {r.samples_per_s_median:>10.0f} samples/s, storage "
                  f"{r.storage_read_mib_s_median:.0f} MiB/s, verified {r.cache_verified}")


if __name__ == "__main__":
    main()
