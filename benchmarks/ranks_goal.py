"""Issue 51's multi-GPU-host goal, scored from `sweep --ranks G` results files (one a G, as benchmarks/gpu/ranks.sh
writes them) and each one's re-measure beside it (gG-remeasure.jsonl, benchmarks/ranks_remeasure.py): for each G,
the pick's fed rate (its slowest rank's: every rank) against the best, re-measured in interleaved rounds (goal:
the median's ratio >= 0.95, and >= 0.95 of every count re-measured), the sweep's one-round figures beside it (1.000
by construction: the pick is chosen within 5% of the best of that round), the "2-4 workers per GPU" rule and
tf.data's default (cores / G) on the same host, and how many ranks this host's CPUs can feed at all. A G without
its re-measure is scored "not re-measured": the goal is then not met.

    python benchmarks/ranks_goal.py --out DIR G1.jsonl G2.jsonl ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from benchlog import run_logged  # noqa: E402
from ranks_remeasure import GOAL, describe, remeasure_path, score  # noqa: E402

from dataperf import results, verdict  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("files", type=Path, nargs="+")
    args = ap.parse_args()

    def body(say) -> int:
        ok, feeds = True, []
        for f in args.files:
            if not f.exists():
                say(f"{f}: not written (its run failed or was cut before its first count)")
                ok = False
                continue
            a = verdict.ranks_answer(results.load(f))
            if a is None or a.pick is None:
                say(f"{f}: no ranks answer (every count failed, or no ranks records)")
                ok = False
                continue
            w = verdict.ranks.workers
            ratio = a.pick.fed_samples_per_s_slowest / a.best.fed_samples_per_s_slowest
            say(f"G={a.ranks} ({a.consumer}, {a.demand_samples_per_s_per_rank:,.0f} samples/s a rank asked, "
                f"{a.host_cores} cores):")
            for t in a.trials:
                say(f"  {w(t):>3} workers a rank: slowest rank {t.fed_samples_per_s_slowest:8,.1f}, total "
                    f"{t.fed_samples_per_s_total:9,.1f} samples/s; data wait (slowest) "
                    f"{100 * t.data_wait_fraction_per_rank[t.slowest_rank or 0]:4.0f}%; main CPU (busiest) "
                    f"{max(t.main_cpu_cores_busy_per_rank):.2f}; host busy {t.host_cpu_cores_busy:5.1f}/{t.host_cores}"
                    f"; {t.cpu_ms_per_sample:.2f} CPU ms a sample")
            say(f"  pick {w(a.pick)} workers a rank: {a.pick.fed_samples_per_s_slowest:,.1f} samples/s a rank "
                f"({a.pick.fed_samples_per_s_total:,.0f} in total), best {w(a.best)}: "
                f"{a.best.fed_samples_per_s_slowest:,.1f}: pick/best {ratio:.3f} (one round: by construction); "
                f"binding {a.binding}; "
                f"{'fed' if a.fed else 'input-bound'}{'' if a.settled else ' (not settled: a lower bound)'}")
            for p in a.practices:
                rate = f"{p.trial.fed_samples_per_s_slowest:,.1f} samples/s a rank, pick x{p.gain:.2f}" if p.trial \
                    else "not measured"
                say(f"  {p.name}: {p.workers} a rank: {rate}")
            say(f"  this host's CPUs feed {a.ranks_fed:.2f} ranks at this rate ({a.host_samples_per_s:,.0f} "
                f"samples/s at {a.best.cpu_ms_per_sample:.2f} CPU ms a sample)")
            feeds.append(a.ranks_fed)
            again = remeasure_path(f)
            s = score(a, results.load(again)) if again.exists() else None
            if s is None:
                why = "holds no round of the pick" if again.exists() else "not written"
                say(f"  re-measured: not re-measured ({again.name} {why}): the goal is not met for G={a.ranks}")
                ok = False
                continue
            for line in describe(s):
                say(line)
            ok &= s.met
        if feeds:
            say(f"ranks this host's CPUs can feed at all: {min(feeds):.2f}-{max(feeds):.2f} (over the G's measured)")
        say(f"goal (every G's pick >= {GOAL} of the best, re-measured in interleaved rounds): "
            f"{'MET' if ok else 'NOT MET'}")
        return 0 if ok else 1

    return run_logged(args.out, body)


if __name__ == "__main__":
    sys.exit(main())
