"""Issue 51's known answer: `sweep --ranks G` on samples that burn a fixed CPU time each (tests/ka_scenarios.py's
BurnMap: a busy loop on the thread's CPU clock), G ranks with consumers paced at a given step rate, scored against
the analytic truth.

- starved: each rank asks more than the cores can give. The cores' rate is cores / burn samples/s, less what the
  ranks' main processes take of the cores (measured: their CPU seconds per second), split over G: the truth a
  rank. One worker a rank already fills a core when G = cores, so the truth's pick is the fewest workers that
  reach that rate: 1 (a count that gets the same rate within 5% is as good, and scored so).
- fed: each rank asks less than one worker gives (1 / burn): every rank is fed at exactly its rate, the pick is
  1 worker a rank.

Goal: the pick right and the pick's per-rank rate (every rank) within 10% of the truth.

Each sweep is then re-measured (benchmarks/ranks_remeasure.py: the pick, the best or runner-up, and the practices,
--rounds interleaved rounds of the same window and consumer), where the truth is known too: every count of the
ladder reaches the same rate in both scenarios (the cores' share, or the consumers' rate), so the re-measured
pick/best is 1.0. Goal: within 5% of it (verdict.ranks.SETTLED), and the pick's median within 10% of the truth's
rate. Run under the box's benchmark lock:

    flock /work/bench.lock python benchmarks/ranks_known_answer.py --out benchmarks/results/DIR
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import ranks_remeasure as rm  # noqa: E402
from benchlog import run_logged  # noqa: E402

from dataperf import results, verdict  # noqa: E402

TOLERANCE = 0.10
PICK_TOLERANCE = 0.05  # verdict.ranks.SETTLED: a count as fast as the truth's pick within this is as good


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def env(args: argparse.Namespace) -> dict[str, str]:
    return dict(os.environ, KA_BURN_S=str(args.burn), KA_N=str(args.n), OMP_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]))


def sweep_args(args: argparse.Namespace, rate: float) -> list[str]:
    """The sweep's arguments, less its window and output (the re-measure gives its own)."""
    return ["--dataset", "ka_scenarios:BurnMap", "--ranks", str(args.ranks), "--step-rate", str(rate),
            "--batch-size", str(args.batch)]


def sweep(out: Path, name: str, args: argparse.Namespace, rate: float) -> tuple[list, str]:
    """One `sweep --ranks` run; its records and its printed answer (both kept under out)."""
    jsonl = out / f"{name}.jsonl"
    cmd = [sys.executable, "-m", "dataperf", "sweep", *sweep_args(args, rate), "--repeat-seconds", str(args.window),
           "--out", str(jsonl), "--overwrite"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env(args), timeout=900)
    (out / f"{name}.txt").write_text(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    if p.returncode != 0:
        raise SystemExit(f"{name}: exit {p.returncode}: {p.stderr[-2000:]}")
    return results.load(jsonl), p.stdout


def others(t) -> float:
    """Cores the machine's other processes kept busy in a count's window: the host's busy cores less the ranks'
    own (main processes and workers)."""
    return max(t.host_cpu_cores_busy - sum(t.main_cpu_cores_busy_per_rank) - sum(t.workers_cpu_cores_busy_per_rank),
               0.0)


def score(say, name: str, recs: list, truth_rate: float, truth_pick: int) -> bool:
    a = verdict.ranks_answer(recs)
    by = {verdict.ranks.workers(t): t for t in a.trials}
    pick = verdict.ranks.workers(a.pick)
    as_good = truth_pick in by and a.pick.fed_samples_per_s_slowest >= (1 - PICK_TOLERANCE) * \
        by[truth_pick].fed_samples_per_s_slowest
    pick_ok = pick == truth_pick or as_good
    per_rank = a.pick.fed_samples_per_s_per_rank
    errs = [x / truth_rate - 1 for x in per_rank]
    rate_ok = all(abs(e) <= TOLERANCE for e in errs)
    for t in a.trials:
        say(f"  {name}: {verdict.ranks.workers(t)} workers a rank: per rank "
            f"{', '.join(f'{x:.1f}' for x in t.fed_samples_per_s_per_rank)} samples/s, main CPU "
            f"{', '.join(f'{x:.3f}' for x in t.main_cpu_cores_busy_per_rank)} cores, host busy "
            f"{t.host_cpu_cores_busy:.2f}/{t.host_cores} (other processes {others(t):.2f}), "
            f"{t.cpu_ms_per_sample:.2f} CPU ms a sample")
    same = "; at least as fast as it" if as_good and pick != truth_pick else ""
    say(f"{name}: pick {pick} workers a rank (truth {truth_pick}{same}): {'right' if pick_ok else 'WRONG'}; "
        f"per-rank rate {', '.join(f'{x:.1f}' for x in per_rank)} against the truth {truth_rate:.1f}: errors "
        f"{', '.join(f'{100 * e:+.1f}%' for e in errs)} ({'within' if rate_ok else 'NOT within'} {TOLERANCE:.0%}); "
        f"binding {a.binding}; the CPUs feed {a.ranks_fed:.2f} ranks")
    return pick_ok and rate_ok


def remeasure(say, out: Path, name: str, args: argparse.Namespace, rate: float, truth_rate: float) -> bool:
    """`name`'s sweep re-measured (ranks_remeasure) and scored against the truth: pick/best 1.0 within
    PICK_TOLERANCE, the pick's median within TOLERANCE of `truth_rate`."""
    sweep_file = out / f"{name}.jsonl"
    again = rm.remeasure_path(sweep_file)
    code = rm.run(sweep_file, sweep_args(args, rate), again, args.rounds, args.window, env(args))
    if code != 0:
        raise SystemExit(f"{name} re-measure: exit {code}: see {again.with_suffix('.txt')}")
    recs = results.load(again)
    s = rm.score(verdict.ranks_answer(results.load(sweep_file)), recs)
    for line in rm.describe(s):
        say(f"{name}: {line.strip()}")
    busy = [others(r) for r in recs if getattr(r, "status", "") == "ok"]
    if busy:
        say(f"{name}: other processes kept {min(busy):.2f}-{max(busy):.2f} cores busy in the re-measure's windows")
    if s.best is None or not s.round_ratios:
        say(f"{name}: re-measure not scored ({s.problem}): NOT MET")
        return False
    ratio_ok = abs(s.ratio - 1) <= PICK_TOLERANCE and not s.problem
    err = s.pick.median / truth_rate - 1
    rate_ok = abs(err) <= TOLERANCE
    say(f"{name}: re-measured pick/{s.best_label} {s.ratio:.3f} against the truth 1.000 (every count reaches the "
        f"same rate): {'within' if ratio_ok else 'NOT within'} {PICK_TOLERANCE:.0%}; the pick's median "
        f"{s.pick.median:.1f} against the truth {truth_rate:.1f}: {100 * err:+.1f}% "
        f"({'within' if rate_ok else 'NOT within'} {TOLERANCE:.0%})")
    return ratio_ok and rate_ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--burn", type=float, default=0.01, help="CPU seconds a sample")
    ap.add_argument("--n", type=int, default=4000, help="samples")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--window", type=float, default=3.0, help="--repeat-seconds: each count's timed window")
    ap.add_argument("--rounds", type=int, default=rm.ROUNDS, help="the re-measure's interleaved rounds")
    args = ap.parse_args()

    def body(say) -> int:
        cores = len(os.sched_getaffinity(0))
        say(f"uptime before: {uptime()}")
        ok = again = True
        recs, _ = sweep(args.out, "starved", args, rate=10 * cores / args.burn)
        a = verdict.ranks_answer(recs)
        main_share = sum(a.pick.main_cpu_cores_busy_per_rank)
        truth = (cores - main_share) / args.burn / args.ranks
        say(f"starved: truth a rank = ({cores} cores - {main_share:.3f} of the ranks' main processes) / "
            f"{args.burn * 1000:.0f} ms / {args.ranks} ranks = {truth:.1f} samples/s")
        ok &= score(say, "starved", recs, truth, truth_pick=1)
        busy = others(a.pick)
        if busy > 0.1:  # the box is shared: what the cores left to the ranks would give, said beside it
            left = (cores - busy - main_share) / args.burn / args.ranks
            off = ", ".join(f"{x / left - 1:+.1%}" for x in a.pick.fed_samples_per_s_per_rank)
            say(f"starved: other processes kept {busy:.2f} cores busy in the pick's window; the cores left would "
                f"give {left:.1f} samples/s a rank, the pick's rates {off} off that (said beside the goal's truth, "
                "not scored: the box was loaded)")
        say(f"uptime: {uptime()}")
        again &= remeasure(say, args.out, "starved", args, 10 * cores / args.burn, truth)
        demand = 0.5 / args.burn  # half of what one worker gives
        recs, _ = sweep(args.out, "fed", args, rate=demand)
        ok &= score(say, "fed", recs, demand, truth_pick=1)
        again &= remeasure(say, args.out, "fed", args, demand, demand)
        say(f"uptime after: {uptime()}")
        say(f"goal (pick right, every rank's rate within {TOLERANCE:.0%} of the truth): {'MET' if ok else 'NOT MET'}")
        say(f"re-measure goal (pick/best within {PICK_TOLERANCE:.0%} of 1.0, the pick's median within "
            f"{TOLERANCE:.0%} of the truth): {'MET' if again else 'NOT MET'}")
        return 0 if ok and again else 1

    return run_logged(args.out, body)


if __name__ == "__main__":
    sys.exit(main())
