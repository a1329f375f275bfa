"""The steady rate with few batches a worker, against a known answer.

    python benchmarks/steady_few_batches.py 32 [--per-worker 3,6,12]

Samples sleep --sample-ms each (no core is contended), so W workers deliver exactly W / sample time samples/s.
Each trial reads batches-per-worker x W batches of a WebDataset (decode off, storage order, every worker with
shards); the printed ratio is the steady rate over that truth. The data is generated under /tmp once.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workers", type=int)
    ap.add_argument("--per-worker", default="3,6,12", help="batches a worker delivers in a repeat")
    ap.add_argument("--sample-ms", type=float, default=20.0)
    ap.add_argument("--data", type=Path, default=Path("/tmp/est-data"))
    a = ap.parse_args()
    if not a.data.exists():
        write_dataset(a.data, "image", "webdataset", 6400, seed=1, image=ImageSpec(16, 16, 80), shard_mb=0.05)
    w, s = a.workers, a.sample_ms / 1000
    truth = w / s
    for per in (int(x) for x in a.per_worker.split(",")):
        cfg = LoaderConfig(backend="webdataset", batch_size=8, num_workers=w, decode=False, shuffle=False)
        opts = TrialOptions(repeats=3, max_batches=per * w, repeat_seconds=None, sample_cost_s=s, collect=False,
                            footprint=False)
        r = run_trial(a.data, cfg, opts)
        print(f"W={w} batches/worker={per}: steady {r.samples_per_s_median:.0f} (truth {truth:.0f}, "
              f"x{r.samples_per_s_median / truth:.2f}) repeats {[round(x) for x in r.samples_per_s_repeats]} "
              f"repeat {r.repeat_samples_per_s_median:.0f} active {r.active_workers} {r.status} {r.error or ''}",
              flush=True)


if __name__ == "__main__":
    main()
