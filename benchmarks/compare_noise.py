"""How often does `dataperf compare` cry wolf, and what is the smallest slowdown it catches?

A loader whose samples cost a fixed, injectable sleep (TrialOptions.sample_cost_s) is measured as base and
head. Same-code pairs (same cost) give the false-alarm rate; pairs with a planted per-sample slowdown give the
detection rate per size. The verdict is compare's own (compare.judge, --threshold 5% by default), on
samples_per_s, each side one run of --repeats repeats, interleaved base/head so drift hits both.

    python benchmarks/compare_noise.py [--pairs 10] [--repeats 5] [--threshold 5] [--out LOG]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import tempfile
from pathlib import Path

from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig
from dataperf.workflows.compare import judge

BASE_COST_S = 0.005
SLOWDOWNS_PCT = (2, 5, 10, 20)


def rates(data: Path, cost: float, repeats: int) -> list[float]:
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=2, persistent_workers=True)
    r = run_trial(data, cfg, TrialOptions(repeats=repeats, warmup_batches=2, min_batches=3, collect=False,
                                          sample_cost_s=cost))
    if r.status != "ok":
        raise SystemExit(f"trial failed: {r.error}")
    return r.samples_per_s_repeats


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=5.0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"compare_noise {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({platform.processor() or platform.machine()}); pairs={a.pairs} repeats={a.repeats} "
        f"threshold={a.threshold}% base cost {BASE_COST_S * 1000:.1f} ms/sample, files bs=4 w=2 persistent")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "img"
        write_dataset(data, "image", "files", 96, seed=0, image=ImageSpec(16, 16, 80))
        for slow in (0, *SLOWDOWNS_PCT):
            verdicts = []
            for _ in range(a.pairs):
                base = rates(data, BASE_COST_S, a.repeats)
                head = rates(data, BASE_COST_S * (1 + slow / 100), a.repeats)
                _, _, pct, ci, v = judge(base, head, True, a.threshold)
                verdicts.append(v)
                say(f"  planted {slow:>2}% slower: change {pct:+6.1f}%  CI {ci[0]:+6.1f}..{ci[1]:+6.1f}%  {v}")
            n = sum(v == "regression" for v in verdicts)
            label = "false alarms (same code)" if slow == 0 else f"detected {slow}% slowdown"
            say(f"{label}: {n}/{a.pairs} flagged as regression "
                f"(other verdicts: {sorted({v for v in verdicts if v != 'regression'})})")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
