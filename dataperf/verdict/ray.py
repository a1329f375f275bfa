"""Judgements of the ray backend, each made once here: how many nodes feed a demand (sizing), which measured node
count is the smallest that feeds, and where Ray's own books disagree with dataperf's.

Definitions:
- demand (samples/s): the consumer's step rate (--step-rate, or the model's measured one) times the data-parallel
  ranks it feeds;
- per-node rate (samples/s): the steady rate of one node of C CPUs, its map tasks filling it
  (concurrency = C / num_cpus);
- predicted nodes: N = ceil(demand / per-node rate), as tf.data service estimates its workers; the predicted rate
  at n nodes is n x the per-node rate (linear in nodes);
- feeds: a consumer paced at the demand takes at least FED_SHARE of it (it waits for data at most FED_STALL of its
  time, the verdict's own input-bound line);
- a disagreement: Ray's figure and dataperf's differ by more than DISAGREE of the larger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dataperf.verdict.rates import FED_STALL, finite

FED_SHARE = 1 - FED_STALL
DISAGREE = 0.10


def nodes_for(demand: float, per_node: float) -> int:
    """N = ceil(demand / per-node rate): the nodes of this size that feed the demand, if rate adds up per node."""
    if not (finite(demand) and demand > 0 and finite(per_node) and per_node > 0):
        raise ValueError(f"demand and per-node rate must be positive, got {demand} and {per_node}")
    return max(1, math.ceil(demand / per_node - 1e-9))


@dataclass
class NodePoint:
    """One measured cluster size: n nodes, its map concurrency, the loader's steady rate, and the rate a consumer
    paced at the demand took from it."""

    nodes: int
    concurrency: int
    samples_per_s: float
    fed_samples_per_s: float
    status: str = "ok"
    error: str | None = None

    def feeds(self, demand: float) -> bool:
        return self.status == "ok" and finite(self.fed_samples_per_s) and self.fed_samples_per_s >= FED_SHARE * demand


@dataclass
class Sizing:
    """The prediction from one node and the clusters measured around it."""

    demand: float
    per_node: float
    predicted_nodes: int
    points: list[NodePoint] = field(default_factory=list)

    def predicted_rate(self, nodes: int) -> float:
        return nodes * self.per_node

    def smallest_feeding(self) -> int | None:
        """The fewest measured nodes that fed the consumer (None: none did)."""
        return min((p.nodes for p in self.points if p.feeds(self.demand)), default=None)

    def at(self, nodes: int) -> NodePoint | None:
        return next((p for p in self.points if p.nodes == nodes), None)

    def rate_error(self) -> float | None:
        """|predicted - measured| / measured at the predicted node count (None where it was not measured)."""
        p = self.at(self.predicted_nodes)
        if p is None or p.status != "ok" or not (finite(p.samples_per_s) and p.samples_per_s > 0):
            return None
        return abs(self.predicted_rate(p.nodes) - p.samples_per_s) / p.samples_per_s

    def node_error(self) -> int | None:
        """Predicted nodes minus the measured smallest that feeds (None: none of those measured fed)."""
        s = self.smallest_feeding()
        return None if s is None else self.predicted_nodes - s


def around(predicted: int, most: int | None = None) -> list[int]:
    """The node counts measured around a prediction: N-1 (if at least 1), N, N+1 (up to `most`)."""
    return [n for n in (predicted - 1, predicted, predicted + 1) if n >= 1 and (most is None or n <= most)]


def cross_check(backend_info: dict[str, Any], stage_ms: dict[str, float] | None) -> list[str]:
    """Ray's own books of a trial's last repeat (Dataset.stats(), in the record's backend info) beside dataperf's:
    the map tasks' wall time a sample against the read + decode + transform booked inside them (the trial's
    medians), and Ray's time to first batch (where it printed one) against the one this side saw in the same
    repeat; a line for each figure, flagged where they disagree by more than DISAGREE."""
    stats = (backend_info or {}).get("ray_stats")
    if not stats:
        return []
    if "error" in stats:
        return [f"Ray's stats: not read ({stats['error']})"]
    out = []
    maps = [op for name, op in stats.get("operators", {}).items() if "load_batch" in name]
    if maps and stage_ms:
        op = maps[-1]
        rows, wall = op.get("rows"), op.get("task_wall_s")
        ours = sum(stage_ms.get(s, 0.0) for s in ("read", "decode", "transform"))
        if rows and wall is not None and ours > 0:
            theirs = wall * 1000 / rows
            out.append(_line("map task wall time", theirs, ours, "ms a sample",
                             "Ray's map tasks' wall time (task start-up, block formatting included) vs dataperf's "
                             "read + decode + transform booked inside them"))
        cpu = op.get("task_cpu_s")
        if rows and cpu is not None and wall:
            out.append(f"Ray's map tasks: {cpu / wall:.0%} of their wall time on a CPU ({op.get('tasks')} tasks, "
                       f"{op.get('wall_s')} s of operator wall time)")
    seen = stats.get("first_batch_s_seen")
    if stats.get("first_batch_s") is not None and seen is not None:
        out.append(_line("time to first batch", stats["first_batch_s"], seen, "s",
                         "Ray's iterator vs dataperf, the last repeat"))
    for ln in stats.get("backpressure", []):
        out.append(f"Ray's backpressure: {ln}")
    return out


def _line(what: str, theirs: float, ours: float, unit: str, how: str) -> str:
    gap = abs(theirs - ours) / max(theirs, ours) if max(theirs, ours) > 0 else 0.0
    flag = f"DISAGREE by {gap:.0%} (over {DISAGREE:.0%})" if gap > DISAGREE else f"agree within {DISAGREE:.0%}"
    return f"{what}: Ray {theirs:.3g} {unit}, dataperf {ours:.3g} {unit}: {flag} ({how})"
