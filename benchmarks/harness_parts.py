"""Where dataperf's own cost at 0 workers goes (issue 30): the plain DataLoader loop against dataperf's loader
in parts, in one process (pinned to one core with --cpu), interleaved.

    python benchmarks/harness_parts.py --out DIR [--count 4000] [--rounds 15] [--epochs 20] [--cpu 2]
                                       [--decode off] [--gc on]

The parts, each EPOCHS whole epochs of the same COUNT warm 64-px JPEG files (harness_vs_plain.make_data),
batch 64, 0 workers, microseconds a sample:
- plain: harness_vs_plain.py's plain loop (a Dataset that opens and reads each file), timed by hand;
- bare: dataperf's loader (files backend's `make`) in a bare `for` loop, timed by hand: the loader's cost;
- sampler: the plain loop with dataperf's sampler (`Order`) in place of torch's sequential one;
- dataset: dataperf's Dataset and collate (FilesDataset, `collate`) under torch's sequential sampler: with
  sampler, where bare's cost lies;
- repeat: the same loader under `trial.time_repeat`, samples over its repeat seconds: the per-batch books;
- trial: `run_trial` of the same config (what harness_vs_plain.py compares): anything more the runner adds
  inside its timed windows.
Each round runs the parts in a rotated order; the median over rounds of each part, and of each part's ratio to
plain in its round. One process, so the parts share its state (the process-to-process spread a fresh interpreter
shows, 5.9-9.1 us pinned on the H100, is harness_fresh.py's question). --gc off disables the cyclic garbage
collector for the timings (a diagnostic: how much of a gap is collections that one side's allocations trigger).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness_vs_plain import BATCH, SIZE, PlainFiles, make_data, raw_collate  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from dataperf import backends  # noqa: E402
from dataperf.backends.dataloader import collate  # noqa: E402
from dataperf.backends.order import Order  # noqa: E402
from dataperf.data import resolve  # noqa: E402
from dataperf.measure.trial import TrialOptions, run_trial, time_repeat  # noqa: E402
from dataperf.results import LoaderConfig  # noqa: E402

PARTS = ("plain", "sampler", "dataset", "bare", "repeat", "trial")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--cpu", type=int, default=None, help="the core to pin this process to [none]")
    ap.add_argument("--decode", choices=("on", "off"), default="off")
    ap.add_argument("--gc", choices=("on", "off"), default="on")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    decode = args.decode == "on"
    args.out.mkdir(parents=True, exist_ok=True)
    make_data(args.out / "data", args.count)
    data = resolve(str(args.out / "data"))
    paths = data.urls()
    for p in paths:
        Path(p).read_bytes()
    cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=0, image_size=SIZE, decode=decode,
                       shuffle=False)
    opts = TrialOptions(repeats=args.epochs, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
    plain = DataLoader(PlainFiles(paths, decode), batch_size=BATCH, num_workers=0,
                       collate_fn=None if decode else raw_collate)
    batches, _ = backends.get("files").make(data, cfg, opts)
    with_order = DataLoader(PlainFiles(paths, decode), batch_size=BATCH, num_workers=0,
                            sampler=Order(len(paths), False, opts.seed), collate_fn=None if decode else raw_collate)
    with_dataset = DataLoader(batches.dataset, batch_size=BATCH, num_workers=0, collate_fn=collate)
    n = len(paths) * args.epochs

    def by_hand(loader: DataLoader) -> float:
        t0 = time.perf_counter()
        for _ in range(args.epochs):
            for _b in loader:
                pass
        return (time.perf_counter() - t0) / n * 1e6

    def repeat() -> float:
        reps = [time_repeat(batches, None) for _ in range(args.epochs)]
        return sum(r.wall_s for r in reps) / sum(r.samples for r in reps) * 1e6

    def trial() -> float:
        r = run_trial(data, cfg, opts)
        if r.status != "ok":
            raise SystemExit(f"trial failed: {r.error}")
        return sum(r.repeat_s) / sum(r.repeat_samples) * 1e6

    run = {"plain": lambda: by_hand(plain), "sampler": lambda: by_hand(with_order),
           "dataset": lambda: by_hand(with_dataset), "bare": lambda: by_hand(batches), "repeat": repeat,
           "trial": trial}
    for part in PARTS:  # untimed: imports, first opens, code paths warm
        run[part]()
    if args.gc == "off":
        gc.disable()
    rows: dict[str, list[float]] = {p: [] for p in PARTS}
    with open(args.out / "rounds.jsonl", "w", encoding="utf-8") as log:
        for k in range(args.rounds):
            order = PARTS[k % len(PARTS):] + PARTS[:k % len(PARTS)]
            got = {p: run[p]() for p in order}
            for p in PARTS:
                rows[p].append(got[p])
            log.write(json.dumps({"round": k + 1, "order": order, "us_per_sample": got}) + "\n")
            print(f"round {k + 1}: " + "  ".join(f"{p} {got[p]:.3f}" for p in PARTS) + " us", flush=True)
    summary = {"decode": decode, "gc": args.gc, "count": args.count, "epochs": args.epochs, "rounds": args.rounds,
               "cpu": args.cpu,
               "median_us_per_sample": {p: statistics.median(v) for p, v in rows.items()},
               "ratio_to_plain_median": {p: statistics.median(a / b for a, b in zip(rows["plain"], v, strict=True))
                                         for p, v in rows.items() if p != "plain"}}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("median us a sample: " + ", ".join(f"{p} {v:.3f}" for p, v in summary["median_us_per_sample"].items()))
    print("ratio to plain: " + ", ".join(f"{p} {v:.3f}" for p, v in summary["ratio_to_plain_median"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
