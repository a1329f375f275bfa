"""Issue 52's GPU goal, scored: the Ray sweep's pick fed to the model at least 0.95 of the best Ray config measured.

    python benchmarks/ray_gpu_goal.py args RAY.jsonl pick|other   # the e2e options of that config, one a line
    python benchmarks/ray_gpu_goal.py args DATALOADER.jsonl dataloader  # the DataLoader sweep's pick, the same way
    python benchmarks/ray_gpu_goal.py score RAY.jsonl PICK.jsonl OTHER.jsonl [DATALOADER.jsonl [DL_RUNS.jsonl]]
    python benchmarks/ray_gpu_goal.py side RAY.jsonl PICK.jsonl DATALOADER.jsonl DL_RUNS.jsonl  # no goal line

`pick` is the sweep's decision (`--model ... --confirm`); `other` the best rival: the fastest fed config the sweep
confirmed beside the pick, else the fastest by the loader alone. benchmarks/gpu/ray_gpu.sh feeds the model from
both in interleaved rounds (`dataperf e2e`, alternating, so drift on the machine lands on both alike); the score is
the pick's mean fed rate over the best mean of the two (1.0 when the pick is the faster). The side by side (no
goal): the DataLoader sweep's pick, fed in the same interleaved rounds (DL_RUNS), its mean beside the Ray pick's
and their ratio, both from the same rounds; without DL_RUNS, the DataLoader sweep's own fed figure, which ran
minutes apart and does not rank the two.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path
from typing import Any

from dataperf import results

GOAL = 0.95
# the record's config keys and the e2e options that set them
OPTIONS = {"batch_size": "--batch-size", "image_size": "--image-size", "transform": "--transform",
           "ray_concurrency": "--ray-concurrency", "ray_num_cpus": "--ray-cpus", "ray_map_batch": "--ray-map-batch",
           "ray_prefetch_batches": "--ray-prefetch", "ray_object_store_mib": "--ray-object-store"}


# the DataLoader's: a value, or a flag pair for a bool
DL_OPTIONS = {"batch_size": "--batch-size", "image_size": "--image-size", "transform": "--transform",
              "num_workers": "--num-workers", "prefetch_factor": "--prefetch-factor",
              "pin_memory": ("--pin-memory", "--no-pin-memory"),
              "persistent_workers": ("--persistent-workers", "--no-persistent-workers")}


def _key(cfg: dict[str, Any]) -> tuple:
    return tuple(cfg.get(k) for k in OPTIONS)


def configs(path: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The sweep's pick and its best rival (see the module's docstring)."""
    recs = results.load(path)
    decision = next((r for r in reversed(recs) if r.kind == "decision" and r.config), None)
    if decision is None:
        return None, None
    pick = decision.config
    fed: dict[tuple, list[float]] = {}
    for r in recs:
        if r.kind == "e2e" and r.status == "ok" and _key(r.config) != _key(pick):
            fed.setdefault(_key(r.config), []).append(r.samples_per_s)
    by_key = {_key(r.config): r.config for r in recs if r.kind in ("e2e", "loader")}
    if fed:
        best = max(fed, key=lambda k: statistics.fmean(fed[k]))
        return pick, by_key[best]
    loaders = [r for r in recs if r.kind == "loader" and r.status == "ok" and _key(r.config) != _key(pick)]
    best_loader = max(loaders, key=lambda r: r.samples_per_s_median, default=None)
    return pick, best_loader.config if best_loader else None


def args(cfg: dict[str, Any]) -> list[str]:
    return [f"{opt}={cfg[k]}" for k, opt in OPTIONS.items() if cfg.get(k) is not None]


def dataloader_args(cfg: dict[str, Any]) -> list[str]:
    """The DataLoader config's e2e options (prefetch only where it has workers: e2e refuses it otherwise)."""
    out = []
    for k, opt in DL_OPTIONS.items():
        v = cfg.get(k)
        if v is None or (k == "prefetch_factor" and not cfg.get("num_workers")):
            continue
        out.append((opt[0] if v else opt[1]) if isinstance(opt, tuple) else f"{opt}={v}")
    return out


def decision(path: str) -> Any:
    return next((r for r in reversed(results.load(path)) if r.kind == "decision" and r.config), None)


def fed_rates(path: str) -> list[float]:
    """The fed rates of a file's e2e runs; none when no run wrote it (the rival missing, every run failed)."""
    if not Path(path).exists():
        return []
    return [r.samples_per_s for r in results.load(path) if r.kind == "e2e" and r.status == "ok"]


def fed_line(label: str, opts: list[str], rates: list[float]) -> str:
    """One config's e2e options and its fed rates, as every line of the score prints them."""
    return f"{label} {' '.join(opts)}: fed {', '.join(f'{x:,.1f}' for x in rates)} samples/s"


def side(p: list[float], dataloader: str, dl_runs: str | None) -> None:
    """The DataLoader sweep's pick beside the Ray pick's fed rates `p`, from the same interleaved rounds where
    DL_RUNS holds them."""
    d = decision(dataloader)
    dl = fed_rates(dl_runs) if dl_runs else []
    if d is not None and dl and p:
        print(f"{fed_line('dataloader pick:', dataloader_args(d.config), dl)} in the same interleaved rounds; "
              f"mean {statistics.fmean(dl):,.1f} against Ray's pick "
              f"{statistics.fmean(p):,.1f}: DataLoader / Ray {statistics.fmean(dl) / statistics.fmean(p):.3f}")
    elif d is not None:
        print(f"dataloader pick: {d.answer or d.config}; fed {d.fed_samples_per_s or float('nan'):,.1f} "
              f"samples/s (the sweep's pooled rounds, minutes apart from Ray's: not a ranking)")


def score(ray: str, pick_runs: str, other_runs: str, dataloader: str | None = None, dl_runs: str | None = None) -> int:
    pick, other = configs(ray)
    p, o = fed_rates(pick_runs), fed_rates(other_runs)
    print(fed_line("ray pick: ", args(pick or {}), p))
    print(fed_line("ray other:", args(other or {}), o))
    if dataloader:
        side(p, dataloader, dl_runs)
    if not p:
        print(f"goal (ray pick fed >= {GOAL} of the best ray config): NOT MET: no fed run of the pick")
        return 1
    mp = statistics.fmean(p)
    mo = statistics.fmean(o) if o else float("nan")
    best = max(mp, mo) if not math.isnan(mo) else mp
    ratio = mp / best
    print(f"pick mean {mp:,.1f}, other mean {mo:,.1f} samples/s over {len(p)} and {len(o)} interleaved rounds: "
          f"pick/best {ratio:.3f}" + ("" if o else " (no rival measured: 1.0 by construction)"))
    ok = ratio >= GOAL and bool(o)
    print(f"goal (ray pick fed >= {GOAL} of the best ray config): {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


def main() -> int:
    if len(sys.argv) >= 4 and sys.argv[1] == "args" and sys.argv[3] == "dataloader":
        d = decision(sys.argv[2])
        if d is None:
            return 1
        print("\n".join(dataloader_args(d.config)))
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "args":
        pick, other = configs(sys.argv[2])
        cfg = pick if sys.argv[3] == "pick" else other
        if cfg is None:
            return 1
        print("\n".join(args(cfg)))
        return 0
    if len(sys.argv) == 6 and sys.argv[1] == "side":  # side RAY.jsonl RAY_PICK_RUNS DATALOADER.jsonl DL_RUNS
        pick, _ = configs(sys.argv[2])
        p = fed_rates(sys.argv[3])
        print(fed_line("ray pick:", args(pick or {}), p))
        side(p, sys.argv[4], sys.argv[5])
        return 0
    if len(sys.argv) >= 5 and sys.argv[1] == "score":
        return score(*sys.argv[2:5], *(sys.argv[5:7]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
