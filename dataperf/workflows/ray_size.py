"""Sizing a Ray cluster for a demand: one simulated node of C CPUs measured, the nodes that feed the demand
predicted from it (verdict.ray.nodes_for), then N-1, N and N+1 nodes measured: each a loader trial (its steady rate)
and a consumer paced at the demand (measure.paced_feed: does that cluster feed it), so the prediction is scored
against what was measured, not assumed.

The map tasks fill each cluster (concurrency = nodes x C / num_cpus): the question is how many nodes, and the
answer is in Ray's own terms (backends.ray.args).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from dataperf import backends
from dataperf.data import Data
from dataperf.measure.paced_feed import paced_feed
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig, LoaderResult, jsonl
from dataperf.verdict.ray import NodePoint, Sizing, around, nodes_for
from dataperf.watchdog import Watchdog, waiting

FEED_S = 8.0  # the paced consumer's window on each cluster, after its warm-up batches


@dataclass
class SizeRequest:
    data: Data
    cfg: LoaderConfig  # the ray backend's knobs; its cluster and concurrency are set per measured size
    opts: TrialOptions
    demand: float  # samples/s: step rate x ranks
    node_cpus: int
    most_nodes: int = 16
    feed_s: float = FEED_S
    out: Path | None = None


def sized(cfg: LoaderConfig, nodes: int, node_cpus: int) -> LoaderConfig:
    """cfg on `nodes` simulated nodes of `node_cpus` CPUs, its map tasks filling them."""
    per_task = cfg.ray_num_cpus or 1
    return replace(cfg, ray_cluster=f"simulated:{nodes}x{node_cpus}",
                   ray_concurrency=max(1, nodes * node_cpus // per_task))


def measure(req: SizeRequest, nodes: int) -> tuple[NodePoint, LoaderResult]:
    """One cluster size: a loader trial, then a consumer paced at the demand fed by the same pipeline."""
    cfg = sized(req.cfg, nodes, req.node_cpus)
    r = run_trial(req.data, cfg, req.opts)
    if req.out:
        jsonl.append(req.out, r)
    if r.status != "ok":
        return NodePoint(nodes, cfg.ray_concurrency, float("nan"), float("nan"), r.status, r.error), r
    try:
        with Watchdog(req.opts.stall_s, req.opts.deadline), waiting(lambda: "a Ray batch for the paced consumer"):
            batches, _ = backends.get(cfg.backend).make(req.data, cfg, req.opts)
            fed = paced_feed(batches, req.demand, req.feed_s)
    except Exception as e:  # a cluster that fails while feeding: this size failed, the others still measured
        return NodePoint(nodes, cfg.ray_concurrency, r.samples_per_s_median, float("nan"), "failed",
                         f"paced consumer: {type(e).__name__}: {e}"[:300]), r
    return NodePoint(nodes, cfg.ray_concurrency, r.samples_per_s_median, fed), r


def run(req: SizeRequest, on_point: Callable[[NodePoint], None] | None = None) -> tuple[Sizing, list[LoaderResult]]:
    """One node, the prediction, then the sizes around it."""
    one, r1 = measure(req, 1)
    records = [r1]
    if on_point:
        on_point(one)
    if one.status != "ok":
        return Sizing(req.demand, float("nan"), 0, [one]), records
    sizing = Sizing(req.demand, one.samples_per_s, nodes_for(req.demand, one.samples_per_s), [one])
    for n in around(sizing.predicted_nodes, req.most_nodes):
        if n == 1:
            continue
        p, r = measure(req, n)
        sizing.points.append(p)
        records.append(r)
        if on_point:
            on_point(p)
    sizing.points.sort(key=lambda p: p.nodes)
    return sizing, records
