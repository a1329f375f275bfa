"""Issue 51's pick checked by a second measurement: after `sweep --ranks G` chose its pick, the pick, the ladder's
best and today's practice (2 and 4 workers a rank, tf.data's cores / G) are measured again, R interleaved rounds
of the same window and the same consumer, so the pick is held against the best on measurements it was not chosen
from (the sweep's own "pick >= 0.95 of the best" holds by construction: the pick is the fewest workers within 5%
of the best of the same round).

It runs one more `sweep --ranks G` with its ladder given (`--num-workers` 8,2,2,8,8,2: each count its own loader
and window, every rank reading at once, in that order), so the re-measure is the sweep's own measurement:

    python benchmarks/ranks_remeasure.py --sweep g8.jsonl [--rounds 3] [--window 3] -- DATA --ranks 8 \
        --step-rate 2131 --batch-size 128 ...   (the sweep's own arguments, less --num-workers, --out,
        --repeat-seconds)

Its records go to g8-remeasure.jsonl (remeasure_path), its printed output beside them (.txt); ranks_goal.py
scores it (score). The score: the median over rounds of the pick's slowest-rank rate / the best's median, the
per-round ratios' min..max its spread; where the ladder's best is the pick itself, the fastest other count of
the ladder stands in (labelled "runner-up"), so the comparison is never of the pick with itself.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from dataperf import results, verdict  # noqa: E402
from dataperf.results import RanksResult  # noqa: E402
from dataperf.verdict.ranks import RanksAnswer  # noqa: E402

GOAL = 0.95
ROUNDS = 3
WINDOW_S = 3.0
OWN = ("--num-workers", "--out", "--repeat-seconds", "--overwrite", "--resume")  # set here, not by the caller


@dataclass
class Plan:
    """What one G's re-measure runs: each worker count once a round, and the names it stands for."""

    pick: int
    best: int | None  # the ladder's best, or its runner-up where the best is the pick; None: the pick alone
    best_label: str  # "best" or "runner-up"
    labels: dict[int, list[str]] = field(default_factory=dict)  # workers a rank -> its names, pick and best first

    @property
    def workers(self) -> list[int]:
        return list(self.labels)


def plan(a: RanksAnswer) -> Plan:
    """The counts to re-measure from a sweep's answer: the pick, the ladder's best (or, where that is the pick,
    the fastest other count), then each practice measured in the sweep (a practice the data could not give is
    left out, as the sweep left it)."""
    pick = verdict.ranks.workers(a.pick)
    best, label = verdict.ranks.workers(a.best), "best"
    if best == pick:
        others = [t for t in a.trials if verdict.ranks.workers(t) != pick]
        runner = verdict.ranks.best_of(others)
        best, label = (verdict.ranks.workers(runner), "runner-up") if runner else (None, "best")
    labels: dict[int, list[str]] = {pick: ["pick"]}
    if best is not None:
        labels.setdefault(best, []).append(label)
    for p in a.practices:
        if p.trial is not None:
            labels.setdefault(p.workers, []).append(practice_label(p.workers, p.name))
    return Plan(pick, best, label, labels)


def practice_label(w: int, name: str) -> str:
    return "tf.data cores / G" if name.startswith("tf.data") else "rule of thumb"


def interleave(workers: list[int], rounds: int) -> list[int]:
    """Every count once a round, the order reversed every other round (pick, best, ...; ..., best, pick; ...), so
    neither the pick nor the best always goes first, and the two stay neighbours in time."""
    out: list[int] = []
    for r in range(rounds):
        out += workers if r % 2 == 0 else workers[::-1]
    return out


def remeasure_path(sweep: Path) -> Path:
    """Where a sweep file's re-measure goes: g8.jsonl -> g8-remeasure.jsonl."""
    return sweep.with_name(f"{sweep.stem}-remeasure.jsonl")


def by_round(recs: list) -> dict[int, list[RanksResult]]:
    """A re-measure's records by worker count, in the order run: the k-th record of a count is its round k (a
    round cut short leaves its later counts one round fewer)."""
    out: dict[int, list[RanksResult]] = {}
    for r in recs:
        if isinstance(r, RanksResult):
            out.setdefault(verdict.ranks.workers(r), []).append(r)
    return out


def rate(r: RanksResult) -> float:
    """A round's figure: the slowest rank's fed rate (samples/s a rank); NaN for a failed round."""
    return r.fed_samples_per_s_slowest if r.status == "ok" else float("nan")


def median(xs: list[float]) -> float:
    ok = [x for x in xs if math.isfinite(x)]
    return statistics.median(ok) if ok else float("nan")


@dataclass
class Remeasured:
    """One count's re-measured rounds (samples/s a rank, the slowest rank's; NaN: that round failed)."""

    workers: int
    labels: list[str]
    rates: list[float]

    @property
    def median(self) -> float:
        return median(self.rates)


@dataclass
class Score:
    """One G's re-measure, scored: the pick against the best (or runner-up), round by round and by medians, and
    against the fastest count re-measured."""

    ranks: int
    rounds: int  # rounds in which both the pick and its comparison finished
    pick: Remeasured
    best: Remeasured | None
    best_label: str  # "best" (the ladder's), or "runner-up" where the ladder's best is the pick
    counts: list[Remeasured]
    ratio: float  # median(pick) / median(best): the goal's figure
    round_ratios: list[float]  # pick / best within each round (the spread)
    fastest: Remeasured  # the count of the highest median (the pick or best, or a practice)
    window_s: float  # each count's timed window in the re-measure
    problem: str = ""  # why the re-measure cannot be scored against the sweep ("" where it can)

    @property
    def to_fastest(self) -> float:
        return self.pick.median / self.fastest.median if self.fastest.median > 0 else float("nan")

    @property
    def met(self) -> bool:
        """The pick within GOAL of the best's median and of every count re-measured."""
        return not self.problem and self.ratio >= GOAL and self.to_fastest >= GOAL


def mismatch(a: RanksAnswer, recs: list) -> str:
    """Why the re-measure is not the sweep's measurement again ("" where it is): other ranks, another consumer or
    demand, or another loader config than the worker count."""
    def rest(r: RanksResult) -> dict:
        return {k: v for k, v in r.config.items() if k != "num_workers"}

    ref = a.pick
    for r in recs:
        if not isinstance(r, RanksResult):
            continue
        if r.ranks != ref.ranks:
            return f"the re-measure ran {r.ranks} ranks, the sweep {ref.ranks}"
        if r.consumer != ref.consumer or not math.isclose(r.demand_samples_per_s_per_rank,
                                                          ref.demand_samples_per_s_per_rank, rel_tol=1e-9):
            return (f"the re-measure's consumer ({r.consumer}, {r.demand_samples_per_s_per_rank:.1f} samples/s) is not "
                    f"the sweep's ({ref.consumer}, {ref.demand_samples_per_s_per_rank:.1f})")
        if rest(r) != rest(ref) or r.data != ref.data:
            return f"the re-measure's loader config or data differ from the sweep's: {r.config_key} vs {ref.config_key}"
    return ""


def score(a: RanksAnswer, recs: list) -> Score | None:
    """The re-measure (records in the order run) scored against the sweep's answer `a`; None where the pick was
    not re-measured at all."""
    p = plan(a)
    rounds = by_round(recs)
    counts = [Remeasured(w, names, [rate(r) for r in rounds.get(w, [])]) for w, names in p.labels.items()]
    counts = [c for c in counts if c.rates]
    pick = next((c for c in counts if c.workers == p.pick), None)
    if pick is None:
        return None
    best = next((c for c in counts if c.workers == p.best), None)
    # round k of each: a round cut short leaves the later count one round fewer (strict=False)
    ratios = [x / y for x, y in zip(pick.rates, best.rates, strict=False) if y > 0] if best else []
    ratios = [r for r in ratios if math.isfinite(r)]
    ratio = pick.median / best.median if best and best.median > 0 else float("nan")
    fastest = max((c for c in counts if math.isfinite(c.median)), key=lambda c: c.median, default=pick)
    problem = mismatch(a, recs)
    if best is None:
        problem = problem or ("the sweep measured no other count to hold the pick against" if p.best is None
                              else f"the {p.best_label} ({p.best} a rank) was not re-measured")
    elif not ratios:
        problem = problem or "no round in which both the pick and the best finished"
    window = next(r.window_s for r in recs if isinstance(r, RanksResult))
    return Score(a.ranks, len(ratios), pick, best, p.best_label, counts, ratio, ratios, fastest, window, problem)


def describe(s: Score) -> list[str]:
    """The score in words, one line a count then the verdict line (ranks_goal.py and the known answer print it)."""
    lines = [f"  re-measured: {len(s.pick.rates)} interleaved round(s) of {s.window_s:g} s windows, the same consumer:"]
    for c in s.counts:
        lines.append(f"    {c.workers:>3} a rank ({', '.join(c.labels)}): "
                     f"{', '.join(f'{x:,.1f}' for x in c.rates)} samples/s a rank (slowest rank), median "
                     f"{c.median:,.1f}" + (f"; pick x{s.pick.median / c.median:.2f}" if c is not s.pick and
                                            c.median > 0 else ""))
    if s.best is None or not s.round_ratios:
        lines.append(f"  re-measured pick/best: not scored ({s.problem})")
        return lines
    lines.append(f"  re-measured pick/{s.best_label} "
                 f"({s.pick.workers} / {s.best.workers} a rank): median {s.ratio:.3f} over {s.rounds} rounds "
                 f"(each round {min(s.round_ratios):.3f}..{max(s.round_ratios):.3f}); pick / the fastest "
                 f"re-measured ({s.fastest.workers} a rank) {s.to_fastest:.3f}: "
                 + ("meets" if s.met else "MISSES") + f" >= {GOAL}" + (f" ({s.problem})" if s.problem else ""))
    return lines


def run(sweep: Path, sweep_args: list[str], out: Path, rounds: int, window_s: float,
        env: dict[str, str] | None = None) -> int:
    """The re-measure of `sweep`'s answer: one `sweep --ranks` with the interleaved ladder; its output kept in
    out's .txt. A Ctrl-C (the device script's time cap) lets the sweep stop itself, keeping the rounds done."""
    bad = [a for a in sweep_args if a.split("=")[0] in OWN]
    if bad:
        raise SystemExit(f"error: {bad[0]} is set by the re-measure; leave it out of the sweep's arguments")
    a = verdict.ranks_answer(results.load(sweep))
    if a is None or a.pick is None:
        raise SystemExit(f"error: {sweep} holds no ranks answer to re-measure (its sweep failed or was cut)")
    order = interleave(plan(a).workers, rounds)
    cmd = [sys.executable, "-m", "dataperf", "sweep", *sweep_args, "--num-workers", ",".join(map(str, order)),
           "--repeat-seconds", str(window_s), "--out", str(out), "--overwrite"]
    with open(out.with_suffix(".txt"), "w", encoding="utf-8") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            return p.wait()
        except KeyboardInterrupt:
            return p.wait(timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", type=Path, required=True, help="the sweep --ranks G results file to re-measure")
    ap.add_argument("--out", type=Path, help="the re-measure's records [SWEEP's name -remeasure.jsonl]")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--window", type=float, default=WINDOW_S, help="each count's timed window, s")
    ap.add_argument("sweep_args", nargs=argparse.REMAINDER, help="-- then the sweep's own arguments")
    args = ap.parse_args()
    rest = args.sweep_args[1:] if args.sweep_args[:1] == ["--"] else args.sweep_args
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return run(args.sweep, rest, args.out or remeasure_path(args.sweep), args.rounds, args.window, env)


if __name__ == "__main__":
    sys.exit(main())
