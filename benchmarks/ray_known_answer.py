"""Known answers of the ray backend on simulated nodes: samples of a fixed, paced cost (sleeps to absolute
deadlines, so a simulated node's CPUs are logical and 4 nodes fit on 2 real cores), read by map tasks at
concurrency K on N nodes of C CPUs each (one CPU a task), must read min(K, N x C) / cost; the score is each
trial's measured steady rate over that, goal within 10%.

    flock /work/bench.lock python benchmarks/ray_known_answer.py [--cost 0.01] [--map-batch 128] [--out DIR]

Repeats are whole epochs (a Ray execution starts in seconds on a 2-core box, and a map task of 128 samples takes
1.3 s: a 10-s repeat holds too few tasks to have a steady window); the warm-up reads 16 batches, so every worker
process the trial needs has started before the first repeat.

Prints one line per (N, C, K) and the worst ratio; log.txt and the records (records.jsonl) go to --out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchlog import Say, run_logged

from dataperf import results
from dataperf.backends import ray as rb
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig

# (nodes, CPUs a node, concurrency): K below, at and above the cluster's CPUs, on 1 to 4 nodes
POINTS = [(1, 2, 1), (1, 2, 4), (2, 1, 1), (2, 1, 4), (2, 2, 2), (2, 2, 8), (4, 1, 2), (4, 1, 8)]


def body(a: argparse.Namespace, say: Say) -> int:
    data = Path(tempfile.mkdtemp(prefix="ray-ka-")) / "img"
    write_dataset(data, "image", "files", a.count, seed=1, image=ImageSpec(16, 16, 85))
    say(f"data: {a.count} JPEGs of 16x16 (files) at {data}; cost {a.cost * 1000:g} ms a sample, paced; map batch "
        f"{a.map_batch}; batch {a.batch}; {a.repeats} repeats of {f'{a.repeat_s:g} s' if a.repeat_s else 'an epoch'} "
        f"after {a.warmup} warm-up batches")
    opts = TrialOptions(repeats=a.repeats, warmup_batches=a.warmup, min_batches=3, repeat_seconds=a.repeat_s or None,
                        collect=False, footprint=False, sample_cost_s=a.cost)
    worst = 0.0
    for nodes, cpus, k in POINTS:
        cfg = LoaderConfig(backend="ray", batch_size=a.batch, decode=True, image_size=16, ray_concurrency=k,
                           ray_num_cpus=1, ray_map_batch=a.map_batch, ray_prefetch_batches=2,
                           ray_object_store_mib=100, ray_cluster=f"simulated:{nodes}x{cpus}")
        t = time.monotonic()
        r = run_trial(data, cfg, opts)
        results.jsonl.append(a.out / "records.jsonl", r)
        known = min(k, nodes * cpus) / a.cost
        if r.status != "ok":
            say(f"N={nodes} C={cpus} K={k}: FAILED {r.error}")
            worst = float("inf")
            continue
        ratio = r.samples_per_s_median / known
        worst = max(worst, abs(ratio - 1))
        say(f"N={nodes} C={cpus} K={k}: known {known:6.1f} measured {r.samples_per_s_median:6.1f} samples/s "
            f"(repeats {[round(x, 1) for x in r.samples_per_s_repeats]}) ratio {ratio:.3f} "
            f"({time.monotonic() - t:.0f} s)")
    rb.shutdown()
    say(f"worst |measured/known - 1| = {worst:.3f}: {'met' if worst <= 0.10 else 'NOT met'} (goal <= 0.10)")
    return 0 if worst <= 0.10 else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cost", type=float, default=0.01, help="seconds a sample, paced")
    ap.add_argument("--map-batch", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--count", type=int, default=2400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--repeat-s", type=float, default=0.0, help="0: whole epochs")
    ap.add_argument("--warmup", type=int, default=16)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/ray_known_answer"))
    a = ap.parse_args()
    return run_logged(a.out, lambda say: body(a, say))


if __name__ == "__main__":
    sys.exit(main())
