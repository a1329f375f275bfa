"""dataperf's own cost (issue 30): a loader trial against a plain DataLoader loop doing the same reads.

    python benchmarks/harness_vs_plain.py --out DIR [--count 2000] [--rounds 5] [--epochs 5] [--min-s 1.0]
                                          [--workers 0,1,2] [--decode both] [--block-epochs 0] [--prep-both]
                                          [--no-watchdog] [--gc on]

The data: COUNT small JPEG files (64 px, quality 85) in one folder, read warm. Each mode (decode on: PIL decode
and resize to 32 px, uint8 CHW, stacked; decode off: the raw bytes, a list) at each worker count is timed both
ways, interleaved, ROUNDS times, order alternating:
- plain: `torch.utils.data.DataLoader` over a Dataset that opens and reads the file (decoded: and returns the
  image tensor with its label, as an ImageFolder does), torch's default collate (raw: the bytes as a list),
  batch 64, non-persistent workers; EPOCHS whole epochs (more where EPOCHS would take under MIN_S: the count is
  set per mode before the first round, from one plain epoch, and used by both sides in every round), each from
  iter() to its end, timed by hand: samples / wall. (Raw bytes at 100,000 samples/s made 5 epochs of 2,000 a
  0.1-s timing, whose rounds spread 0.62-1.03: too short to resolve a 5% cost.)
- dataperf: `run_trial` of the same config (files backend, no time budget, no `--max-batches`: whole
  epochs, collectors and footprint off, EPOCHS repeats): the repeats' samples over their `repeat_s` (iter() to
  the end of the data, start-up included): like with like.
- --block-epochs B: each round's epochs are taken in alternating blocks of B epochs a side (plain, dataperf,
  dataperf, plain, ...), each side's rate over all its blocks: where the machine's speed drifts within seconds,
  the drift falls on both sides alike instead of on whichever side ran then.
Ratio dataperf / plain per round; the goal is at least 0.95 in every mode (the median over rounds). The stage
clock's own cost is measured beside it: `dataperf.stages.book` timed over 200,000 calls, times the calls a
sample makes (2 decoded: decode, transform; none raw) and a batch (its reads, fetched whole, and collate), as a
share of the trial's time a sample.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from benchlog import Say, run_logged
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from dataperf import stages, watchdog
from dataperf.data import resolve
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure import cache
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig

BATCH, SIZE = 64, 32


class PlainFiles(Dataset):
    """What most training code does: open, read, decode, resize, a tensor."""

    def __init__(self, paths: list[str], decode: bool):
        self.paths, self.decode = paths, decode

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        with open(self.paths[i], "rb") as f:
            b = f.read()
        if not self.decode:
            return b
        img = Image.open(io.BytesIO(b)).convert("RGB").resize((SIZE, SIZE), Image.BILINEAR)
        return torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1), 0


def raw_collate(items: list[bytes]) -> list[bytes]:
    return items


def plain_timed(paths: list[str], workers: int, decode: bool, epochs: int, prep: bool = False) -> tuple[int, float]:
    """The plain loop over EPOCHS whole epochs, each from iter() to its end: (samples, seconds). prep: first,
    untimed, what run_trial does before its repeats on warm data (--prep-both)."""
    if prep:
        files = [Path(p) for p in paths]
        cache.prepare(files, "warm")
        cache.warm_resident(files)
    loader = DataLoader(PlainFiles(paths, decode), batch_size=BATCH, num_workers=workers,
                        collate_fn=None if decode else raw_collate)
    n = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for b in loader:
            n += len(b[1]) if decode else len(b)
    return n, time.perf_counter() - t0


def plain_rate(paths: list[str], workers: int, decode: bool, epochs: int, prep: bool = False) -> float:
    n, s = plain_timed(paths, workers, decode, epochs, prep)
    return n / s


def epochs_for(paths: list[str], decode: bool, workers: int, epochs: int, min_s: float) -> int:
    """Whole epochs a timing of this mode needs to last min_s: from one plain epoch (its start-up included), at
    least `epochs`."""
    t0 = time.perf_counter()
    plain_rate(paths, workers, decode, 1)
    return max(epochs, math.ceil(min_s / max(time.perf_counter() - t0, 1e-6)))


WATCHDOG = {"stall_s": watchdog.DEFAULT_STALL_S}  # --no-watchdog: None


def dataperf_timed(data, workers: int, decode: bool, epochs: int) -> tuple[int, float, dict[str, float]]:
    """dataperf's trial of EPOCHS whole-epoch repeats: (samples, their repeat seconds, stage ms a sample)."""
    cfg = LoaderConfig(backend="files", batch_size=BATCH, num_workers=workers, image_size=SIZE, decode=decode,
                       shuffle=False)
    r = run_trial(data, cfg, TrialOptions(repeats=epochs, warmup_batches=0, repeat_seconds=None, collect=False,
                                          footprint=False, stall_s=WATCHDOG["stall_s"]))
    if r.status != "ok":
        raise SystemExit(f"trial failed: {r.error}")
    return sum(r.repeat_samples), sum(r.repeat_s), r.stage_ms_per_sample


def dataperf_rate(data, workers: int, decode: bool, epochs: int) -> tuple[float, dict[str, float]]:
    n, s, stage_ms = dataperf_timed(data, workers, decode, epochs)
    return n / s, stage_ms


def paired_rates(paths: list[str], data, workers: int, decode: bool, epochs: int, block: int,
                 first: str, prep: bool = False) -> tuple[float, float, dict[str, float]]:
    """Both sides' rates over EPOCHS epochs taken in alternating blocks of BLOCK epochs (first, other, first,
    ...): on a machine whose speed drifts by a third within seconds (the H100 lease, 2026-12-06: the plain loop
    alone read 104,000-193,000 samples/s between rounds), each side's blocks sit next to the other's, so the
    drift falls on both."""
    got = {"plain": [0, 0.0], "dataperf": [0, 0.0]}
    stage_ms: dict[str, float] = {}
    order = (first, "dataperf" if first == "plain" else "plain")
    for k in range(max(1, math.ceil(epochs / block))):
        for who in order if k % 2 == 0 else order[::-1]:
            if who == "plain":
                n, s = plain_timed(paths, workers, decode, block, prep)
            else:
                n, s, stage_ms = dataperf_timed(data, workers, decode, block)
            got[who][0] += n
            got[who][1] += s
    return got["plain"][0] / got["plain"][1], got["dataperf"][0] / got["dataperf"][1], stage_ms


def clock_cost_us() -> float:
    """One stages.book call, in microseconds (the median of 5 timings of 200,000 calls)."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        t = t0
        for _ in range(200_000):
            t = stages.book("read", t)
        runs.append((time.perf_counter() - t0) / 200_000 * 1e6)
    stages.take()
    return statistics.median(runs)


def make_data(root: Path, count: int) -> None:
    """COUNT small JPEG files (64 px, quality 85) in one folder, unless already there: the data this benchmark
    of dataperf's own cost reads (also through harness_trees.sh)."""
    if not (root / "manifest.json").exists():
        write_dataset(root, "image", "files", count, seed=0, image=ImageSpec(64, 64, 85), overwrite=True)


def body(say: Say, args: argparse.Namespace) -> int:
    root = args.out / "data"
    make_data(root, args.count)
    data = resolve(str(root))
    paths = data.urls()
    for p in paths:  # warm: every file in page cache before the first timing
        Path(p).read_bytes()
    say(f"data: {len(paths)} JPEG files of 64 px, {data.total_bytes / len(paths) / 1024:.1f} KiB mean, warm; "
        f"batch {BATCH}, decode to {SIZE} px; at least {args.epochs} epochs and {args.min_s:g} s a timing; rounds "
        f"{args.rounds}, interleaved, "
        "order alternating" + (f", each round in alternating blocks of {args.block_epochs} epochs a side"
                               if args.block_epochs else "")
        + (", each plain timing preceded (untimed) by a trial's warm-cache preparation" if args.prep_both else "")
        + (", the trial's stall watchdog off" if args.no_watchdog else "")
        + (", the garbage collector off" if args.gc == "off" else ""))
    workers = [int(w) for w in args.workers.split(",")]
    decodes = {"both": (True, False), "on": (True,), "off": (False,)}[args.decode]
    modes = [(d, w) for d in decodes for w in workers]
    epochs = {m: epochs_for(paths, *m, args.epochs, args.min_s) for m in modes}
    say("epochs a timing: " + ", ".join(f"decode={'on' if d else 'off'} w={w}: {epochs[(d, w)]}" for d, w in modes))
    rows: dict[tuple[bool, int], dict[str, list]] = {m: {"plain": [], "dataperf": [], "ratio": []} for m in modes}
    stage_ms: dict[tuple[bool, int], dict[str, float]] = {}
    with open(args.out / "rounds.jsonl", "w", encoding="utf-8") as log:
        for k in range(args.rounds):
            for decode, w in modes:
                order = ("plain", "dataperf") if k % 2 == 0 else ("dataperf", "plain")
                got = {}
                if args.block_epochs:
                    got["plain"], got["dataperf"], stage_ms[(decode, w)] = paired_rates(
                        paths, data, w, decode, epochs[(decode, w)], args.block_epochs, order[0], args.prep_both)
                else:
                    for who in order:
                        if who == "plain":
                            got[who] = plain_rate(paths, w, decode, epochs[(decode, w)], args.prep_both)
                        else:
                            got[who], stage_ms[(decode, w)] = dataperf_rate(data, w, decode, epochs[(decode, w)])
                ratio = got["dataperf"] / got["plain"]
                for who in ("plain", "dataperf"):
                    rows[(decode, w)][who].append(got[who])
                rows[(decode, w)]["ratio"].append(ratio)
                line = {"round": k + 1, "decode": decode, "workers": w, **got, "ratio": ratio}
                log.write(json.dumps(line) + "\n")
                say(f"round {k + 1} decode={'on ' if decode else 'off'} workers={w}: plain {got['plain']:8.0f}  "
                    f"dataperf {got['dataperf']:8.0f} samples/s  ratio {ratio:.3f}")
    cost = clock_cost_us()
    say(f"stage clock: {cost:.3f} us a book() call")
    summary = []
    met_all = True
    for decode, w in modes:
        r = rows[(decode, w)]
        med = statistics.median(r["ratio"])
        met = med >= 0.95
        met_all &= met
        per_sample_ms = 1000 / statistics.median(r["dataperf"])
        books = 2 if decode else 0  # a sample: decode, transform; a batch: its reads (fetched whole), collate
        clock_share = (books * cost + 2 * cost / BATCH) / 1000 / per_sample_ms
        summary.append({"decode": decode, "workers": w, "plain_median": statistics.median(r["plain"]),
                        "dataperf_median": statistics.median(r["dataperf"]), "ratio_median": med,
                        "ratios": r["ratio"], "clock_share_of_sample_time": clock_share,
                        "stage_ms_per_sample": stage_ms[(decode, w)], "goal_met": met})
        say(f"decode={'on ' if decode else 'off'} workers={w}: ratio median {med:.3f} (rounds "
            f"{', '.join(f'{x:.3f}' for x in r['ratio'])}) -> {'met' if met else 'NOT met'}; stage clock "
            f"{clock_share * 100:.2f}% of a sample's time")
    (args.out / "summary.json").write_text(json.dumps({"rows": summary, "clock_us_per_book": cost,
                                                       "block_epochs": args.block_epochs,
                                                       "prep_both": args.prep_both,
                                                       "watchdog": not args.no_watchdog, "gc": args.gc,
                                                       "goal": ">= 0.95 of the plain loop in every mode",
                                                       "all_met": met_all}, indent=1))
    say("goal (>= 0.95 in every mode): " + ("met" if met_all else "NOT met"))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--min-s", type=float, default=1.0, help="a timing's least seconds: more epochs where needed")
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--decode", choices=("both", "on", "off"), default="both",
                    help="the modes timed: decode on, off (raw bytes) or both [both]")
    ap.add_argument("--block-epochs", type=int, default=0,
                    help="take each round's epochs in alternating blocks of this many, the sides side by side [0: "
                         "each side's epochs in one timing]")
    ap.add_argument("--prep-both", action="store_true",
                    help="a control: precede each plain timing, untimed, with what a trial does before its repeats "
                         "(read every file warm, the residency check)")
    ap.add_argument("--no-watchdog", action="store_true", help="a control: the trial's stall watchdog off")
    ap.add_argument("--gc", choices=("on", "off"), default="on",
                    help="a diagnostic: off disables the cyclic garbage collector for the whole run [on]")
    args = ap.parse_args()
    if args.no_watchdog:
        WATCHDOG["stall_s"] = None
    if args.gc == "off":
        gc.disable()
    return run_logged(args.out, lambda say: body(say, args))


if __name__ == "__main__":
    sys.exit(main())
