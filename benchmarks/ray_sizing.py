"""Sizing scored on simulated clusters of 1-4 nodes: for each demand, `workflows.ray_size` measures one node,
predicts N = ceil(demand / per-node rate), measures N-1, N, N+1 (a loader trial and a consumer paced at the demand
each); scored: the predicted N within +-1 of the smallest measured cluster that fed the consumer, and the predicted
rate (N x per-node) within 15% of the rate measured at N.

    flock /work/bench.lock python benchmarks/ray_sizing.py [--cost 0.01] [--map-batch 128] [--out DIR]

Samples cost a fixed paced time (sleeps on absolute deadlines: simulated CPUs are logical), so a node of C CPUs
gives about C / cost samples/s whatever else the 2-core box runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchlog import Say, run_logged

from dataperf.backends import ray as rb
from dataperf.data import resolve
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig
from dataperf.workflows.ray_size import SizeRequest, run


def body(a: argparse.Namespace, say: Say) -> int:
    root = Path(tempfile.mkdtemp(prefix="ray-size-")) / "img"
    write_dataset(root, "image", "files", a.count, seed=1, image=ImageSpec(16, 16, 85))
    data = resolve(str(root))
    say(f"data: {a.count} JPEGs of 16x16 (files); cost {a.cost * 1000:g} ms a sample, paced; nodes of {a.node_cpus} "
        f"CPU(s); map batch {a.map_batch}; batch {a.batch}; {a.repeats} repeats (0 s: an epoch) of {a.repeat_s:g} s; "
        f"paced consumer "
        f"{a.feed_s:g} s; at most {a.most} nodes")
    opts = TrialOptions(repeats=a.repeats, warmup_batches=16, min_batches=3, repeat_seconds=a.repeat_s or None,
                        collect=False,
                        footprint=False, sample_cost_s=a.cost)
    cfg = LoaderConfig(backend="ray", batch_size=a.batch, decode=True, image_size=16, ray_num_cpus=1,
                       ray_map_batch=a.map_batch, ray_prefetch_batches=2, ray_object_store_mib=100)
    met = True
    for demand in a.demands:
        t = time.monotonic()
        sizing, _ = run(SizeRequest(data, cfg, opts, demand, a.node_cpus, a.most, a.feed_s, a.out / "records.jsonl"))
        for p in sizing.points:
            say(f"  demand {demand:g}: {p.nodes} node(s) K={p.concurrency}: loader {p.samples_per_s:.1f} samples/s, "
                f"paced consumer took {p.fed_samples_per_s:.1f} ({'feeds' if p.feeds(demand) else 'short'})"
                + (f" FAILED {p.error}" if p.status != "ok" else ""))
        smallest, err = sizing.smallest_feeding(), sizing.rate_error()
        nodes_ok = smallest is not None and abs(sizing.node_error()) <= 1
        rate_ok = err is not None and err <= 0.15
        met &= nodes_ok and rate_ok
        say(f"demand {demand:g}: per node {sizing.per_node:.1f}, predicted {sizing.predicted_nodes} node(s) at "
            f"{sizing.predicted_rate(sizing.predicted_nodes):.1f}; smallest feeding {smallest}; nodes "
            f"{'within' if nodes_ok else 'NOT within'} +-1; rate error "
            f"{'-' if err is None else f'{err:.1%}'} ({'<=' if rate_ok else 'NOT <='} 15%) "
            f"({time.monotonic() - t:.0f} s)")
    rb.shutdown()
    say(f"sizing: {'met' if met else 'NOT met'}")
    return 0 if met else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--demands", type=lambda s: [float(x) for x in s.split(",")], default=[80.0, 170.0, 260.0],
                    help="samples/s, a comma list")
    ap.add_argument("--cost", type=float, default=0.01)
    ap.add_argument("--node-cpus", type=int, default=1)
    ap.add_argument("--map-batch", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--count", type=int, default=2400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--repeat-s", type=float, default=0.0, help="0: whole epochs (as ray_known_answer.py)")
    ap.add_argument("--feed-s", type=float, default=12.0)
    ap.add_argument("--most", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/ray_sizing"))
    a = ap.parse_args()
    return run_logged(a.out, lambda say: body(a, say))


if __name__ == "__main__":
    sys.exit(main())
