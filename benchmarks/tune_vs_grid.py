"""`dataperf tune` vs the full grid on the same data, in one run.

    python benchmarks/tune_vs_grid.py [DATA]

Goal: tune's pick within 5% of the grid's best samples/s, in at most 30% of the grid's wall time.
Without DATA, generates a JPEG WebDataset (decoded in the trials) under shards/bench-tune.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from dataperf import verdict
from dataperf.formats.dataset_dir import MANIFEST, read_manifest
from dataperf.formats.generate import ImageSpec, write_dataset
from dataperf.records import LoaderConfig
from dataperf.runner import TrialOptions
from dataperf.sweep import Grid, plan, run_sweep
from dataperf.tune import Tuner


def main() -> int:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("shards/bench-tune")
    if not (data / MANIFEST).exists():
        write_dataset(data, "image", "webdataset", 1200, seed=0, image=ImageSpec(160, 160, 90), shard_mb=4,
                      overwrite=True)
    fmt = read_manifest(data).format
    opts = TrialOptions(repeats=3, collect=False)
    grid = Grid(prefetch_factor=[2, 4, 8], batch_size=[32, 64, 128], decode=[True], image_size=128)
    t0 = time.perf_counter()
    results = verdict.ok_loaders(run_sweep(plan([data], grid), opts, None))
    grid_s = time.perf_counter() - t0
    best = verdict.recommend(results).best
    t0 = time.perf_counter()
    out = Tuner(data, LoaderConfig(format=fmt, batch_size=32, decode=True, image_size=128), opts).run()
    tune_s = time.perf_counter() - t0
    pick = out.pick
    print(f"grid: {len(results)} trials in {grid_s:.0f} s; best {LoaderConfig(**best.config).short()} "
          f"at {best.samples_per_s_median:.0f} samples/s")
    print(f"tune: {len(out.steps)} trials in {tune_s:.0f} s; pick {LoaderConfig(**pick.config).short()} "
          f"at {pick.samples_per_s_median:.0f} samples/s ({out.stop_reason})")
    quality = pick.samples_per_s_median / best.samples_per_s_median
    cost = tune_s / grid_s
    print(f"ratio tune/grid: samples/s {quality:.2f} (goal >= 0.95), wall time {cost:.2f} (goal <= 0.30)")
    return 0 if quality >= 0.95 and cost <= 0.30 else 1


if __name__ == "__main__":
    sys.exit(main())
