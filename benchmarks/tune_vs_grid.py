"""`dataperf tune` vs the full grid on the same data, in one run, judged on re-measured figures.

    python benchmarks/tune_vs_grid.py [DATA] --out benchmarks/results/DATE-HOST-tune_vs_grid

Goal: tune's pick within 5% of the grid's best samples/s, in at most 30% of the grid's wall time.

The grid spans the one worker ladder (0, 1, 2, 4, ... up to twice the cores), batch sizes 32-256 and
prefetch 2-8. A single grid trial's best is the luckiest of many draws, so after the grid and tune have run,
the grid's best and tune's pick are measured again, interleaved (best, pick, best, pick, ...; --rounds of
each, the same trial options), and the ratio is the ratio of those re-measured medians. The grid's run-to-run
spread (its best config over the grid run and every re-measure) is reported beside it: a ratio inside that
spread is not a difference. Every record goes to OUT as JSON lines (grid.jsonl, tune.jsonl, remeasure.jsonl),
the printed lines to OUT/log.txt, and the figures to OUT/summary.json.
Without DATA, generates a JPEG WebDataset (decoded in the trials) under shards/bench-tune.

--grid-from DIR takes the grid (its records and wall time) from an earlier run's OUT instead of running it
again, for a lease too short for both: the data must be the same (regenerated from the same seed: same count
and shards) and so must the machine's cores; the log and summary say the grid was reused, and from where. The
re-measure still runs both configs here, interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchlog import run_logged

from dataperf import results, verdict
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.data.manifest import MANIFEST, read_manifest
from dataperf.measure.trial import TrialOptions, run_trial, worker_ladder
from dataperf.results import LoaderConfig, LoaderResult
from dataperf.workflows.sweep import Grid, grid_trials, run_grid
from dataperf.workflows.tune import Tuner, TuneRequest

GOAL_QUALITY, GOAL_COST = 0.95, 0.30


def spread_pct(values: list[float]) -> float:
    """(max - min) / median of repeated measurements of one config, in percent."""
    return (max(values) - min(values)) / statistics.median(values) * 100


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="?", type=Path, default=Path("shards/bench-tune"))
    ap.add_argument("--out", type=Path, required=True, help="folder for grid/tune/remeasure JSONL, log, summary")
    ap.add_argument("--samples", type=int, default=2400, help="images to generate when DATA does not exist")
    ap.add_argument("--batch-sizes", default="32,64,128,256")
    ap.add_argument("--prefetch", default="2,4,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-batches", type=int, default=None, help="per repeat (default: one epoch)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved re-measures of the best and the pick")
    ap.add_argument("--grid-from", type=Path, default=None,
                    help="an earlier run's OUT: reuse its grid (same data and cores) instead of running it")
    a = ap.parse_args()
    if a.rounds < 2:
        ap.error("--rounds must be at least 2")
    if a.grid_from is not None and not (a.grid_from / "grid.jsonl").exists():
        ap.error(f"--grid-from {a.grid_from}: no grid.jsonl there; give an earlier run's --out folder")
    a.out.mkdir(parents=True, exist_ok=True)
    for name in ("grid.jsonl", "tune.jsonl", "remeasure.jsonl"):
        (a.out / name).unlink(missing_ok=True)
    return run_logged(a.out, lambda say: bench(a, say))


def bench(a: argparse.Namespace, say: Callable[[str], None]) -> int:
    if not (a.data / MANIFEST).exists():
        write_dataset(a.data, "image", "webdataset", a.samples, seed=0, image=ImageSpec(160, 160, 90), shard_mb=4,
                      overwrite=True)
    m = read_manifest(a.data)
    say(f"data: {a.data} ({m.count} {m.kind} samples, {m.format}, {len(m.shards) or len(m.files)} files)")
    opts = TrialOptions(repeats=a.repeats, max_batches=a.max_batches, collect=False)
    grid = Grid(num_workers=worker_ladder(), prefetch_factor=[int(x) for x in a.prefetch.split(",")],
                batch_size=[int(x) for x in a.batch_sizes.split(",")], decode=[True], image_size=128)
    trials = grid_trials([a.data], grid)
    say(f"grid: workers {grid.num_workers}, prefetch {grid.prefetch_factor}, batch sizes {grid.batch_size}: "
        f"{len(trials)} trials, {a.repeats} repeats each")

    def show(tag: str, r: LoaderResult | None) -> None:
        if r is not None:
            say(f"  {tag} {LoaderConfig(**r.config).short():<44} {r.samples_per_s_median:10.0f} samples/s"
                + ("" if r.status == "ok" else f"  FAILED: {r.error}"))

    if a.grid_from is not None:
        grid_ok, grid_s = reused_grid(a.grid_from, m.count, len(m.shards) or len(m.files), say)
        for r in grid_ok:
            show("grid", r)
    else:
        t0 = time.perf_counter()
        grid_ok = [r for r in run_grid(trials, opts, a.out / "grid.jsonl",
                                        on_result=lambda r: show("grid", r)).results if r.status == "ok"]
        grid_s = time.perf_counter() - t0
    if not grid_ok:
        say("every grid trial failed")
        return 2
    best = verdict.recommend(grid_ok).best

    def on_prediction(p, probe) -> None:
        say(f"  tune limits: binding {probe.binding_limit}; per worker {probe.per_worker_samples_per_s:.0f}, "
            f"decode {probe.decode_samples_per_s:.0f}, main process {probe.main_process_samples_per_s:.0f}, "
            f"storage {probe.storage_samples_per_s:.0f} samples/s")
        say(f"  tune prediction: {p.why}")

    # as `dataperf tune DATA --batch-size 32 --image-size 128 --out OUT/tune.jsonl` runs it (its defaults)
    t0 = time.perf_counter()
    req = TuneRequest(a.data, LoaderConfig(backend=m.format, batch_size=32, decode=True, image_size=128), opts,
                      out=a.out / "tune.jsonl")
    out = Tuner(req, on_trial=lambda step: show(f"tune {step.phase:<10}", step.result),
                on_prediction=on_prediction).run()
    tune_s = time.perf_counter() - t0
    if out.pick is None:
        say(f"tune picked nothing ({out.stop_reason})")
        return 2
    best_cfg, pick_cfg = LoaderConfig(**best.config), LoaderConfig(**out.pick.config)
    say(f"grid: {len(grid_ok)} ok trials in {grid_s:.0f} s; best {best_cfg.short()} at "
        f"{best.samples_per_s_median:.0f} samples/s")
    say(f"tune: {len(out.steps)} trials in {tune_s:.0f} s; pick {pick_cfg.short()} at "
        f"{out.pick_samples_per_s:.0f} samples/s ({out.stop_reason})")

    again: dict[str, list[float]] = {"best": [], "pick": []}
    for k in range(a.rounds):
        for who, cfg in (("best", best_cfg), ("pick", pick_cfg)):
            r = run_trial(a.data, cfg, opts)
            results.append(a.out / "remeasure.jsonl", r)
            show(f"round {k + 1} {who}", r)
            if r.status == "ok":
                again[who].append(r.samples_per_s_median)
    if not again["best"] or not again["pick"]:
        say("a re-measure failed; no ratio")
        return 2
    best_again, pick_again = statistics.median(again["best"]), statistics.median(again["pick"])
    runs = [best.samples_per_s_median, *again["best"]]
    quality, cost = pick_again / best_again, tune_s / grid_s
    say(f"re-measured ({a.rounds} rounds, interleaved): grid's best {best_again:.0f} samples/s "
        f"{[round(x) for x in again['best']]}, tune's pick {pick_again:.0f} samples/s "
        f"{[round(x) for x in again['pick']]}" + (" (the same config)" if best_cfg == pick_cfg else ""))
    say(f"grid's run-to-run spread: its best config ranged {spread_pct(runs):.1f}% over the grid run and the "
        f"re-measures {[round(x) for x in runs]} (grid run first); the grid's first figure was "
        f"{(best.samples_per_s_median / best_again - 1) * 100:+.1f}% against its re-measured median")
    met_q, met_c = quality >= GOAL_QUALITY, cost <= GOAL_COST
    say(f"ratio tune/grid: samples/s {quality:.2f} (goal >= {GOAL_QUALITY}: {'met' if met_q else 'NOT met'}), "
        f"wall time {cost:.2f} (goal <= {GOAL_COST}: {'met' if met_c else 'NOT met'})")
    summary = {"grid_trials": len(grid_ok), "grid_s": grid_s, "tune_trials": len(out.steps), "tune_s": tune_s,
               "grid_best": best_cfg.short(), "grid_best_samples_per_s": best.samples_per_s_median,
               "tune_pick": pick_cfg.short(), "tune_pick_samples_per_s": out.pick_samples_per_s,
               "tune_stop_reason": out.stop_reason, "rounds": a.rounds,
               "best_remeasured_samples_per_s": again["best"], "pick_remeasured_samples_per_s": again["pick"],
               "grid_best_run_to_run_spread_pct": spread_pct(runs), "quality_ratio": quality, "cost_ratio": cost,
               "quality_goal_met": met_q, "cost_goal_met": met_c,
               "grid_from": str(a.grid_from) if a.grid_from else None}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if met_q and met_c else 1


def reused_grid(src: Path, count: int | None, files: int, say: Callable[[str], None]) -> tuple[list, float]:
    """An earlier run's ok grid trials and grid wall time, refused unless its data (samples, shards) and cores
    match this run's."""
    recs = [r for r in results.load(src / "grid.jsonl") if isinstance(r, LoaderResult) and r.status == "ok"]
    summary = json.loads((src / "summary.json").read_text())
    cores = os.cpu_count()
    for r in recs:
        if (r.epoch_samples, r.shards, r.env.get("cpu_count")) != (count, files, cores):
            raise SystemExit(f"error: --grid-from {src}: its trials read {r.epoch_samples} samples in {r.shards} "
                             f"files on {r.env.get('cpu_count')} cores; this run has {count} in {files} on {cores}")
    first = min(r.created_unix_s for r in recs)
    say(f"grid: REUSED from {src} (run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(first))}, commit "
        f"{recs[0].env.get('dataperf_commit')}): {len(recs)} ok trials, {summary['grid_s']:.0f} s")
    return recs, float(summary["grid_s"])


if __name__ == "__main__":
    sys.exit(main())
