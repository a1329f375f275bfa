"""dataperf's own cost at a worker count (issue 30), each timing in a fresh process: the plain DataLoader loop
against dataperf's trial, and against more than one dataperf tree (a branch beside main) if given.

    python benchmarks/harness_fresh.py --out DIR [--count 4000] [--rounds 6] [--epochs 20] [--workers 0]
                                       [--decode off] [--trees main=.,branch=PATH] [--cpus 3]

Why fresh processes: in harness_vs_plain.py both sides run in one process, and on the 2-core box the plain loop
ran 9.1-9.5 us a sample there but 9.8-10.4 us in another process running the same code on the same files
(2026-12-06), while dataperf read the same in both: the process's state moved the reference by as much as the
gap to the goal. Here every timing is a new interpreter (imports, one untimed epoch, then EPOCHS epochs timed as
harness_vs_plain.py times them: the plain loop by hand, dataperf by run_trial's repeats), the sides in an order
that rotates each round. A tree is a folder holding a `dataperf` package, put first on PYTHONPATH for its side
(before what PYTHONPATH held); the plain side runs under the first tree (for resolve() of the data only). Ratio
dataperf / plain per round; the median over rounds. --cpus pins every timing's process (and its workers) to
those cores: on the H100's 16 cores the same side read 7.2-11.8 us a sample between processes, unpinned
(2026-12-06), and pinned to one core still 5.9-9.1 us: each round's processes share one PYTHONHASHSEED (the
round's number), so that a side's string hashes, and the dict layouts that follow from them, do not differ
within a round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def side(who: str, data_dir: str, workers: int, decode: bool, epochs: int, cpus: set[int] | None) -> float:
    """One timing in this process: microseconds a sample."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    sys.path.insert(0, str(HERE))
    from harness_vs_plain import dataperf_rate, plain_rate

    from dataperf.data import resolve

    data = resolve(data_dir)
    paths = data.urls()
    for p in paths:  # warm
        Path(p).read_bytes()
    if who == "plain":
        plain_rate(paths, workers, decode, 1)
        return 1e6 / plain_rate(paths, workers, decode, epochs)
    dataperf_rate(data, workers, decode, 1)
    return 1e6 / dataperf_rate(data, workers, decode, epochs)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--decode", choices=("on", "off"), default="off")
    ap.add_argument("--trees", default="main=.", help="name=folder,... each holding a dataperf package")
    ap.add_argument("--cpus", default="", help="cores to pin each timing's process to, e.g. 3 or 2,3 [none]")
    ap.add_argument("--side", help=argparse.SUPPRESS)  # internal: one timing, printed
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    decode = args.decode == "on"
    if args.side:
        cpus = {int(c) for c in args.cpus.split(",")} if args.cpus else None
        print(side(args.side, args.data, args.workers, decode, args.epochs, cpus))
        return 0
    if args.out is None:
        ap.error("--out is required")
    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    first = next(iter(trees.values()))
    args.out.mkdir(parents=True, exist_ok=True)
    data_dir = args.out / "data"
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []  # e.g. wheels installed aside
    env0 = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath(first), str(HERE), *inherited])}
    # made under the first tree (this process imports no dataperf), by harness_vs_plain.py's own maker
    code = "import sys; from pathlib import Path; from harness_vs_plain import make_data; " \
           "make_data(Path(sys.argv[1]), int(sys.argv[2]))"
    subprocess.run([sys.executable, "-c", code, str(data_dir), str(args.count)], env=env0, check=True)
    sides = [("plain", first)] + [(name, path) for name, path in trees.items()]
    rows: dict[str, list[float]] = {name: [] for name, _ in sides}
    with open(args.out / "rounds.jsonl", "w", encoding="utf-8") as log:
        for k in range(args.rounds):
            order = sides[k % len(sides):] + sides[:k % len(sides)]
            got = {}
            for name, tree in order:
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.abspath(tree), *inherited]),
                       "PYTHONHASHSEED": str(k)}  # a round's sides share their dicts' layout; rounds vary it
                out = subprocess.run([sys.executable, __file__, "--side", "plain" if name == "plain" else "dataperf",
                                      "--data", str(data_dir), "--workers", str(args.workers), "--decode", args.decode,
                                      "--epochs", str(args.epochs), "--cpus", args.cpus], env=env, capture_output=True,
                                     text=True)
                if out.returncode != 0:
                    raise SystemExit(f"{name} failed: {out.stderr[-2000:]}")
                got[name] = float(out.stdout.split()[-1])
                rows[name].append(got[name])
            line = {"round": k + 1, "order": [n for n, _ in order], "us_per_sample": got,
                    "ratio": {n: got["plain"] / got[n] for n in trees}}
            log.write(json.dumps(line) + "\n")
            log.flush()
            print(f"round {k + 1}: " + "  ".join(f"{n} {v:.2f} us" for n, v in got.items()) + "  ratio "
                  + " ".join(f"{n} {r:.3f}" for n, r in line["ratio"].items()), flush=True)
    summary = {"workers": args.workers, "decode": decode, "count": args.count, "epochs": args.epochs, "cpus": args.cpus,
               "rounds": args.rounds, "median_us_per_sample": {n: statistics.median(v) for n, v in rows.items()},
               "ratio_median": {n: statistics.median(p / d for p, d in zip(rows["plain"], rows[n], strict=True))
                                for n in trees},
               "goal": ">= 0.95 of the plain loop"}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("ratio median: " + ", ".join(f"{n} {r:.3f}" for n, r in summary["ratio_median"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
