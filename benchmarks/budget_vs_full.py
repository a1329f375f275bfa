"""A sweep fitted to `--budget` against the same sweep unbudgeted, judged by fed runs of their two picks.

    python benchmarks/budget_vs_full.py DATA --out DIR [--make N] [--budget 5m] [--model M] -- [sweep options]

Goal (issue 20): `dataperf sweep DATA --model M --budget 5m` gives its verdict within the budget, and its
recommendation's fed rate (end to end) is within 5% of the unbudgeted sweep's.

Both sweeps are the real command (`python -m dataperf sweep DATA --model M [sweep options]`, plus `--budget`
for the first), timed from start to exit. Their picks (verdict.recommend over each results file) are then fed
to the model in interleaved rounds (budgeted, full, full, budgeted, ...; `run_e2e`, the same loop as
`dataperf e2e`), and the ratio is the ratio of the median fed rates. With --make N and no DATA yet, DATA is
first written by `dataperf shards make --like imagenet --format files --count N` and its rate reported. Every
record goes to DIR (budgeted.jsonl, full.jsonl, fed.jsonl), each command's output to DIR/*.log, the printed
lines to DIR/log.txt and the figures to DIR/summary.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from benchlog import run_logged

from dataperf import results, verdict
from dataperf.measure.step import StepOptions
from dataperf.results import E2EResult, LoaderConfig
from dataperf.workflows.budget import parse_duration
from dataperf.workflows.e2e import run_e2e

GOAL_FED = 0.95


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--make", type=int, default=None, metavar="N", help="write N --like imagenet JPEGs if absent")
    ap.add_argument("--budget", default="5m")
    ap.add_argument("--model", default="torchvision.models:resnet50")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--amp", default=None)
    ap.add_argument("--input", default=None, help="input of a MODULE:FACTORY model (image for resnet50)")
    ap.add_argument("--transform", default="imagenet-train")
    ap.add_argument("--headroom", type=float, default=1.2)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved fed runs of each pick")
    ap.add_argument("--steps", type=int, default=30, help="fed steps per repeat")
    ap.add_argument("--fed-repeats", type=int, default=3)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    a.sweep_args = argv[cut + 1:]  # after --: more sweep options, for both sweeps
    if a.rounds < 2:
        ap.error("--rounds must be at least 2")
    return run_logged(a.out, lambda say: bench(a, say))


def dataperf(args: list[str], log: Path) -> tuple[float, str]:
    """Run `python -m dataperf ARGS`, its output to log; (wall seconds, stdout). A failure stops the bench."""
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "dataperf", *args], capture_output=True, text=True)
    wall = time.monotonic() - t0
    log.write_text(f"$ dataperf {' '.join(args)}\n{p.stdout}\n{p.stderr}", encoding="utf-8")
    if p.returncode != 0:
        raise SystemExit(f"dataperf {args[0]} exited {p.returncode}; see {log}")
    return wall, p.stdout


def bench(a: argparse.Namespace, say: Callable[[str], None]) -> int:
    summary: dict = {"budget_s": parse_duration(a.budget)}
    if a.make and not a.data.exists():
        wall, out = dataperf(["shards", "make", "--like", "imagenet", "--format", "files", "--count", str(a.make),
                              "--out", str(a.data)], a.out / "make.log")
        say(f"made {a.make} images in {wall:.0f} s: {out.strip().splitlines()[-1]}")
        summary["make"] = {"count": a.make, "wall_s": wall, "printed": out.strip().splitlines()[-1]}
    model = ["--model", a.model, "--device", a.device, "--transform", a.transform, "--headroom", str(a.headroom),
             *(["--input", a.input] if a.input else []), *(["--amp", a.amp] if a.amp else []), *a.sweep_args]
    picks = {}
    for name, extra in (("budgeted", ["--budget", a.budget]), ("full", [])):
        res = a.out / f"{name}.jsonl"
        wall, out = dataperf(["sweep", str(a.data), *model, *extra, "--out", str(res), "--overwrite"],
                             a.out / f"{name}.log")
        recs = results.current(results.load(res))
        rec = verdict.recommend(recs, verdict.latest_step(recs), a.headroom)
        chosen = rec.pick or rec.best
        if chosen is None:
            say(f"{name}: no pick ({rec.outcome})")
            return 2
        trials = sum(1 for r in recs if r.kind == "loader")
        plan = next((x for x in out.splitlines() if x.startswith("plan:")), "")
        say(f"{name}: {wall:.0f} s, {trials} trials; {plan}")
        for line in out.splitlines():
            if line.strip().startswith("budget:") or line.startswith("took"):
                say(f"  {line.strip()}")
        say(f"  pick {chosen.loader_config.short()} at {chosen.samples_per_s_median:,.0f} samples/s "
            f"({rec.outcome}, binding {rec.binding_limit})")
        picks[name] = chosen.loader_config
        summary[name] = {"wall_s": wall, "trials": trials, "plan": plan, "pick": chosen.loader_config.short(),
                         "pick_samples_per_s": chosen.samples_per_s_median, "outcome": rec.outcome}
    sopts = StepOptions(model=a.model, device=a.device, amp=a.amp, input=a.input,
                        batch_size=picks["full"].batch_size)
    fed: dict[str, list[float]] = {"budgeted": [], "full": []}
    for k in range(a.rounds):
        order = ("budgeted", "full") if k % 2 == 0 else ("full", "budgeted")
        for name in order:
            cfg: LoaderConfig = picks[name]
            r: E2EResult = run_e2e(a.data, cfg, replace(sopts, batch_size=cfg.batch_size), a.steps, a.fed_repeats,
                                   predict=False)
            r.confirm_round = k + 1
            results.append(a.out / "fed.jsonl", r)
            say(f"  round {k + 1} {name:<8} {cfg.short():<50} fed {r.samples_per_s:,.0f} samples/s, "
                f"stall {r.data_stall_fraction:.1%}" + ("" if r.status == "ok" else f" FAILED: {r.error}"))
            if r.status == "ok":
                fed[name].append(r.samples_per_s)
    if not fed["budgeted"] or not fed["full"]:
        say("a fed run failed; no ratio")
        return 2
    b, f = statistics.median(fed["budgeted"]), statistics.median(fed["full"])
    ratio = b / f
    in_time = summary["budgeted"]["wall_s"] <= summary["budget_s"]
    same = picks["budgeted"] == picks["full"]
    say(f"fed ({a.rounds} rounds, interleaved): budgeted pick {b:,.0f}, full sweep's pick {f:,.0f} samples/s: "
        f"ratio {ratio:.3f} (goal >= {GOAL_FED})" + (" (the same config)" if same else ""))
    say(f"budgeted sweep took {summary['budgeted']['wall_s']:.0f} s of a {summary['budget_s']:.0f} s budget "
        f"({'within' if in_time else 'OVER'}); the full sweep {summary['full']['wall_s']:.0f} s")
    summary.update(fed_budgeted=fed["budgeted"], fed_full=fed["full"], fed_ratio=ratio, same_pick=same,
                   goal_fed_met=ratio >= GOAL_FED, goal_time_met=in_time)
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
