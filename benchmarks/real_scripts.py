"""dataperf's answer against an unmodified public training script on a GPU (issue 50, Build 1).

    python benchmarks/real_scripts.py --data /tmp/rs --out DIR                     # a CUDA machine, ~9 min
    python benchmarks/real_scripts.py --data /tmp/rs --out DIR --sweep-from S.jsonl   # the scripts only
    python benchmarks/real_scripts.py --rescore DIR --decision sweep=DIR/sweep.jsonl --decision tune=T.jsonl \
        --out OUT          # each path's records re-judged by this code, scored against DIR's script runs

The referee is not dataperf: pytorch/examples' `imagenet/main.py` at a pinned commit (SCRIPTS), never edited,
run as its README says (`-a ARCH -b B -j W --epochs N --gpu 0`, N = `--epochs`, 3 by default; `-p 1` so it
prints every step's `Time` and `Data`) on an ImageFolder of `--like imagenet` JPEGs (DATA/train, and a small
DATA/val its validation reads).
Its DataLoader is fixed by the script: `num_workers=W`, prefetch 2, `pin_memory=True`, workers not persistent.

What is compared, each from the script's own per-step lines of every epoch after its 1st (the 1st pays cuDNN's
and the allocator's warm-up; two later epochs give two epoch starts a config, so a start's spread is seen, not
one reading), split as dataperf splits a fed run (measure/fed.py StartSplit), then averaged over those epochs:
- the epoch start: the epoch's first max(W, 1) steps (the workers are forked again and each builds its first
  batch while the model waits); its cost = their wall less their samples at the steady rate;
- steady: the rest, in whole waves as dataperf counts it (measure/fed.py whole_waves: from the first step whose
  `Data` stands out as a wave's wait to the last); samples/s = samples / the steps' `Time`; data wait = their
  `Data` / their `Time`.
The script's `Data` is the host's wait for the next batch; the GPU still runs the previous backward meanwhile
(the script syncs only at `loss.item()`, before its backward), so it reads far above the GPU's idle share (57%
at 8-16 workers on the H100, where the rate is flat and the model binds). The verdict is therefore held against
the script's steady rate short of the model alone (dataperf's step record, the same torchvision model; the
script's own step adds SGD, DataParallel and top-k accuracy): input-bound when over 5% short. Both are printed.

dataperf's side: the default `dataperf sweep DATA/train --model torchvision.models:ARCH` (fp32, as the script
trains), whose decision gives the pick, the verdict and the steady figure and epoch-start cost the user reads
(with `--paths sweep,budget,tune`, also `sweep --budget B` and `tune`, run after the scripts and each scored
against the same script runs);
then `dataperf e2e` fed at exactly the script's config at the pick's worker count (prefetch 2, pinned, not
persistent), whose epoch start is the one to set beside the script's when the pick itself is persistent.
The script runs at the pick's worker count and at each of --workers (the pick again last, for drift).

Goals (issue 50), each printed met/NOT met: the decision's steady figure within 5% of the script's later epochs'
steady rate at the pick; the verdict (INPUT-BOUND = steady wait over 5%) the same as the script's (above); the
epoch-start cost within 20% of the script's; the pick's script rate >= 0.95 of the best script rate over the
worker counts run, mid-epoch and over whole later epochs; MAPE <= 10% of dataperf's predicted fed rates (whole
runs) for the script's configs against the script's whole later epochs. DIR gets log.txt, the sweep's and e2e's
jsonl and output, each script run's output, summary.json, and DIR.tar.gz of it all.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchlog import Say, run_logged

from dataperf import results
from dataperf.measure.fed import SteadyStep, steady_totals
from dataperf.results import DecisionResult, E2EResult

REPO = Path(__file__).resolve().parent.parent
PUBLIC = REPO / ".public"  # git-ignored: public code is fetched, never committed


@dataclass(frozen=True)
class Public:
    """A public training script pinned by commit and content."""

    repo: str
    commit: str
    path: str
    sha256: str

    @property
    def local(self) -> Path:
        return PUBLIC / self.path.replace("/", "_")

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repo}/{self.commit}/{self.path}"


SCRIPTS = {"imagenet": Public("pytorch/examples", "42068585f7da9a2f8656f793d21c30ee6806c6b9", "imagenet/main.py",
                              "f67ca2cd730bf91afe0504694abf07b88cbd03ac8c8a0426023620d29175c158")}
GOAL_STEADY, GOAL_START, GOAL_RATIO, GOAL_MAPE_PCT, INPUT_BOUND_WAIT = 0.05, 0.20, 0.95, 10.0, 0.05
# `Epoch: [1][ 5/63]\tTime  0.160 ( 0.170)\tData  0.001 ( 0.010)\t...` (ProgressMeter.display, AverageMeter)
STEP_LINE = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/(\d+)\]\s+Time\s+([\d.]+) \(\s*[\d.]+\)\s+Data\s+([\d.]+)")


def checked_script(p: Public) -> Path:
    """The pinned file, its content checked: a script that differs from the commit is not the referee."""
    if not p.local.is_file():
        raise SystemExit(f"{p.local} missing: fetch it with `curl -fsSL {p.url} -o {p.local}` (or `git show "
                         f"{p.commit}:{p.path}` in a clone of {p.repo})")
    got = hashlib.sha256(p.local.read_bytes()).hexdigest()
    if got != p.sha256:
        raise SystemExit(f"{p.local}: sha256 {got} is not {p.repo}@{p.commit[:9]}:{p.path}'s {p.sha256}")
    return p.local


# ---------------------------------------------------------------- the script's own figures


@dataclass
class Step:
    epoch: int
    index: int  # 1-based, as the script prints it
    of: int
    time_s: float
    data_s: float


def parse_steps(text: str) -> list[Step]:
    return [Step(int(m[1]), int(m[2]), int(m[3]), float(m[4]), float(m[5])) for m in STEP_LINE.finditer(text)]


@dataclass
class EpochFigures:
    """One epoch of the script split as dataperf's StartSplit splits a fed run."""

    epoch: int
    steps: int
    samples: int
    samples_per_s: float  # the whole epoch: samples / the sum of its steps' Time
    data_wait_fraction: float  # the whole epoch's Data / Time
    steady_samples_per_s: float
    steady_data_wait_fraction: float
    start_steps: int
    start_cost_s: float  # the start window's wall less its samples at the steady rate


def epoch_figures(steps: list[Step], epoch: int, batch_size: int, epoch_samples: int, workers: int) -> EpochFigures:
    """The epoch's figures; the last step holds what is left of the epoch (the script does not drop it)."""
    mine = sorted((s for s in steps if s.epoch == epoch), key=lambda s: s.index)
    if not mine or len(mine) != mine[0].of or [s.index for s in mine] != list(range(1, len(mine) + 1)):
        raise ValueError(f"epoch {epoch}: {len(mine)} step lines, not one a step (run it with -p 1)")
    sizes = [batch_size] * (len(mine) - 1) + [epoch_samples - batch_size * (len(mine) - 1)]
    k = min(max(workers, 1), len(mine) - 1)
    wall = sum(s.time_s for s in mine)
    st_samples, st_wall, st_data = steady_totals([[SteadyStep(s.time_s, n, s.data_s, s.data_s, s.time_s - s.data_s)
                                                   for s, n in zip(mine[k:], sizes[k:], strict=True)]])
    st_rate = st_samples / st_wall if st_wall > 0 else math.nan
    win_wall = sum(s.time_s for s in mine[:k])
    return EpochFigures(
        epoch, len(mine), epoch_samples, epoch_samples / wall, sum(s.data_s for s in mine) / wall, st_rate,
        st_data / st_wall, k, max(win_wall - sum(sizes[:k]) / st_rate, 0.0))


# ---------------------------------------------------------------- running


@dataclass
class ScriptRun:
    workers: int
    order: int
    rc: int | None
    wall_s: float
    epochs: list[EpochFigures] = field(default_factory=list)
    error: str = ""

    @property
    def later(self) -> list[EpochFigures]:
        """Every epoch after the first (the script counts epochs from 0)."""
        return [e for e in self.epochs if e.epoch >= 1]

    def mean(self, name: str) -> float:
        """A figure averaged over the later epochs (NaN: none parsed)."""
        vals = [getattr(e, name) for e in self.later]
        return sum(vals) / len(vals) if vals else math.nan

    def describe(self) -> str:
        starts = ", ".join(f"{e.start_cost_s:.2f}" for e in self.later)
        return (f"w={self.workers}: epochs 2-{len(self.epochs)} {self.mean('samples_per_s'):,.0f} samples/s, steady "
                f"{self.mean('steady_samples_per_s'):,.0f}, data wait {self.mean('steady_data_wait_fraction'):.1%}, "
                f"start cost {starts} s")


def run(argv: list[str], log: Path, cap_s: float, cwd: Path, say: Say) -> tuple[int | None, float]:
    """argv in its own session, output to log, killed with its children past cap_s."""
    say(f"$ {' '.join(argv)}")
    t0 = time.monotonic()
    with open(log, "w", encoding="utf-8") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "140"})
        try:
            p.wait(timeout=cap_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            say(f"  killed at its {cap_s:.0f} s cap")
    wall = time.monotonic() - t0
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-6:]
    say(f"  exit {p.returncode} after {wall:.0f} s: " + " | ".join(x.strip()[:150] for x in tail))
    return p.returncode, wall


def make_data(root: Path, count: int, val: int, out: Path, say: Say) -> Path:
    """DATA/train as a user's ImageFolder (class folders of hard links to `shards make --like imagenet` files) and
    DATA/val (the first `val` of them: the script validates every epoch; its accuracy is not the point)."""
    made, public = root / "made", root / "public"
    if not (made / "manifest.json").is_file():
        rc, _ = run([sys.executable, "-m", "dataperf", "shards", "make", "--like", "imagenet", "--format", "files",
                     "--count", str(count), "--out", str(made)], out / "make.log", 900, REPO, say)
        if rc != 0:
            raise SystemExit(f"shards make failed ({rc}); see {out / 'make.log'}")
    m = json.loads((made / "manifest.json").read_text())
    for split, n in (("train", len(m["files"])), ("val", val)):
        for f, y in list(zip(m["files"], m["labels"], strict=True))[:n]:
            d = public / split / f"n{y:08d}"
            d.mkdir(parents=True, exist_ok=True)
            if not (d / Path(f).name).exists():
                os.link(made / f, d / Path(f).name)
    say(f"data: {len(m['files']):,} JPEGs in {public / 'train'}, {val} of them in {public / 'val'}")
    return public


def run_script(script: Path, data: Path, a: argparse.Namespace, w: int, order: int, out: Path, say: Say) -> ScriptRun:
    cwd = out / f"script-w{w}-{order}"
    cwd.mkdir(parents=True, exist_ok=True)
    log = out / f"script-w{w}-{order}.log"
    rc, wall = run([sys.executable, str(script), str(data), "-a", a.arch, "-b", str(a.batch_size), "-j", str(w),
                    "--epochs", str(a.epochs), "-p", "1", "--gpu", "0"], log, a.script_cap_s, cwd, say)
    shutil.rmtree(cwd, ignore_errors=True)  # its checkpoints: hundreds of MB each
    return read_run(ScriptRun(w, order, rc, wall), log, a.batch_size, a.count)


def read_run(r: ScriptRun, log: Path, batch_size: int, count: int) -> ScriptRun:
    """The run's epochs, from the step lines its log holds (as many epochs as it printed)."""
    steps = parse_steps(log.read_text(encoding="utf-8", errors="replace"))
    for e in range(max((s.epoch for s in steps), default=-1) + 1):
        try:
            r.epochs.append(epoch_figures(steps, e, batch_size, count, r.workers))
        except ValueError as err:
            r.error = str(err)
    return r


def run_path(name: str, a: argparse.Namespace, data: Path, out: Path, say: Say) -> DecisionResult | None:
    """`sweep --budget B` or `tune` on the same data, as a user types it; its last decision record."""
    extra = {"budget": ["sweep", "--budget", a.budget, "--overwrite"],
             "tune": ["tune", "--max-batch-size", str(a.batch_size), "--cache", "warm"]}[name]
    path = out / f"{name}.jsonl"
    cmd = [extra[0], *dataperf_args(a, data), *extra[1:], "--epoch-samples", str(a.count), "--out", str(path)]
    run([sys.executable, "-m", "dataperf", *cmd], out / f"{name}.log", a.sweep_cap_s, REPO, say)
    return last(path, DecisionResult)


def dataperf_args(a: argparse.Namespace, data: Path) -> list[str]:
    return [str(data / "train"), "--model", f"torchvision.models:{a.arch}", "--input", "image", "--device", "cuda",
            "--batch-size", str(a.batch_size), "--transform", "imagenet-train"]


# ---------------------------------------------------------------- scoring


def within(got: float | None, want: float | None, tol: float) -> bool | None:
    if got is None or want is None or not (math.isfinite(got) and math.isfinite(want)) or want <= 0:
        return None
    return abs(got / want - 1) <= tol


def score(d: DecisionResult | None, fed: E2EResult | None, runs: list[ScriptRun]) -> dict[str, Any]:
    """The goals, each with the figures it rests on (None: not measurable from what ran)."""
    best: dict[int, float] = {}
    whole: dict[int, float] = {}
    for r in runs:
        if r.later:
            best[r.workers] = max(best.get(r.workers, 0.0), r.mean("steady_samples_per_s"))
            whole[r.workers] = max(whole.get(r.workers, 0.0), r.mean("samples_per_s"))
    out: dict[str, Any] = {"script_steady_by_workers": best}
    if d is None:
        return out
    w = int(d.config.get("num_workers", 0))
    at_pick = [e for r in runs if r.workers == w for e in r.later]
    if not at_pick:
        return out
    rate = sum(e.steady_samples_per_s for e in at_pick) / len(at_pick)
    rate_whole = sum(e.samples_per_s for e in at_pick) / len(at_pick)
    # the script's own Data share is the host's wait, which overlaps the GPU's backward (it syncs before it):
    # the verdict is held against the rate it loses to the model alone (dataperf's step, the same model)
    short = 1 - rate / d.step_samples_per_s
    wait = sum(e.steady_data_wait_fraction for e in at_pick) / len(at_pick)
    cost = sum(e.start_cost_s for e in at_pick) / len(at_pick)
    persistent = bool(d.config.get("persistent_workers"))
    start = fed.epoch_start_s if (persistent and fed) else d.epoch_start_s
    out.update(
        pick={k: d.config.get(k) for k in ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers")},
        script_steady_at_pick=rate, script_wait_at_pick=wait, script_start_cost_s=cost,
        script_start_costs_s=[round(e.start_cost_s, 3) for e in at_pick],
        steady_figure=d.steady_samples_per_s, steady_ratio=d.steady_samples_per_s / rate,
        steady_met=within(d.steady_samples_per_s, rate, GOAL_STEADY),
        verdict_input_bound=d.input_bound, script_short_of_model=short, script_input_bound=short > INPUT_BOUND_WAIT,
        verdict_met=None if d.input_bound is None else d.input_bound == (short > INPUT_BOUND_WAIT),
        epoch_start_s=start, epoch_start_from="e2e at the script's config" if (persistent and fed) else "the decision",
        start_met=within(start, cost, GOAL_START),
        pick_ratio=rate / max(best.values()), pick_met=rate / max(best.values()) >= GOAL_RATIO,
        pick_ratio_whole_epoch=rate_whole / max(whole.values()),
        pick_whole_met=rate_whole / max(whole.values()) >= GOAL_RATIO)
    if fed:
        out.update(e2e_steady=fed.steady_samples_per_s, e2e_steady_ratio=fed.steady_samples_per_s / rate,
                   e2e_wait=fed.steady_stall_fraction, e2e_epoch_start_s=fed.epoch_start_s)
    errs = []
    for p in d.predictions:
        c = p.get("config", {})
        c = json.loads(c) if isinstance(c, str) else c
        if p.get("kind") == "fed" and c.get("prefetch_factor") in (2, None) and not c.get("persistent_workers") \
                and c.get("num_workers") in whole:
            errs.append(abs(p["predicted"] / whole[c["num_workers"]] - 1) * 100)
    out.update(mape_pct=sum(errs) / len(errs) if errs else None, mape_n=len(errs),
               mape_met=(sum(errs) / len(errs) <= GOAL_MAPE_PCT) if errs else None)
    return out


def rejudged(path: Path, epoch_samples: int) -> DecisionResult | None:
    """The decision the current code takes on a saved run's records (the same verdict `dataperf report` gives)."""
    from dataperf import verdict
    from dataperf.workflows.sweep.confirm import decision_record

    recs = results.load(path)
    old = last(path, DecisionResult)
    rec = verdict.recommend(recs, verdict.latest_step(recs), epoch_samples=epoch_samples)
    return decision_record(old.command if old else "sweep", rec, recs, old.wall_s if old else math.nan,
                           old.budget_s if old else None)


def saved_runs(out: Path, batch_size: int, count: int) -> list[ScriptRun]:
    """The script runs of an earlier run's folder, from their logs (script-w{W}-{order}.log)."""
    runs = []
    for log in out.glob("script-w*-*.log"):
        w, order = (int(x) for x in re.fullmatch(r"script-w(\d+)-(\d+)\.log", log.name).groups())
        runs.append(read_run(ScriptRun(w, order, 0, math.nan), log, batch_size, count))
    return sorted(runs, key=lambda r: r.order)


def rescore(a: argparse.Namespace, say: Say) -> int:
    """Each decision file given (--decision NAME=FILE), re-judged by the current code, scored against the script
    runs of --rescore's folder (a decision is only scored against scripts run on the same machine and data)."""
    runs = saved_runs(Path(a.rescore), a.batch_size, a.count)
    fed = last(Path(a.rescore) / "e2e.jsonl", E2EResult)
    say("script runs: " + "; ".join(r.describe() for r in runs if r.later))
    out = {}
    for item in a.decision:
        name, path = item.split("=", 1)
        for how, d in (("as run", last(Path(path), DecisionResult)), ("re-judged", rejudged(Path(path), a.count))):
            same = d is not None and fed is not None and d.config.get("num_workers") == fed.config.get("num_workers")
            s = score(d, fed if same else None, runs)
            s["answer"] = d.answer if d else None
            out[f"{name} ({how})"] = s
            say(f"== {name} ({how}): " + "; ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                                   for k, v in s.items() if k not in ("answer",
                                                                                      "script_steady_by_workers")))
            say(f"   {s['answer']}")
    (Path(a.out) / "rescore.json").write_text(json.dumps(out, indent=1, default=str))
    return 0


def last(path: Path, kind: type) -> Any:
    recs = [r for r in results.load(path) if isinstance(r, kind)] if path.is_file() else []
    return recs[-1] if recs else None


def body(a: argparse.Namespace, say: Say) -> int:
    out = Path(a.out)
    script = checked_script(SCRIPTS["imagenet"])
    say(f"referee: {SCRIPTS['imagenet'].repo}@{SCRIPTS['imagenet'].commit[:9]}:{SCRIPTS['imagenet'].path} "
        f"(sha256 checked), -a {a.arch} -b {a.batch_size}, {a.epochs} epochs")
    t0 = time.monotonic()
    data = make_data(Path(a.data), a.count, a.val, out, say)
    sweep = Path(a.sweep_from) if a.sweep_from else out / "sweep.jsonl"
    if not a.sweep_from:
        run([sys.executable, "-m", "dataperf", "sweep", *dataperf_args(a, data), "--epoch-samples", str(a.count),
             "--out", str(sweep), "--overwrite"], out / "sweep.log", a.sweep_cap_s, REPO, say)
    d: DecisionResult | None = last(sweep, DecisionResult)
    pick = int(d.config.get("num_workers", 0)) if d else a.default_workers
    say(f"decision: {d.answer}" if d else f"no decision: the script runs at {pick} workers")
    fed = None
    if d and not a.no_e2e:
        e2e = out / "e2e.jsonl"
        run([sys.executable, "-m", "dataperf", "e2e", *dataperf_args(a, data), "--num-workers", str(pick),
             "--prefetch-factor", "2", "--pin-memory", "--no-persistent-workers", "--steps", str(a.e2e_steps),
             "--repeats", "2", "--warmup", "3", "--no-predict", "--out", str(e2e)], out / "e2e.log", a.script_cap_s,
            REPO, say)
        fed = last(e2e, E2EResult)
    order = [pick, *(w for w in a.workers if w != pick), pick]
    runs = []
    for i, w in enumerate(order):
        if time.monotonic() - t0 > a.deadline_s:
            say(f"deadline: {len(order) - i} script runs left out")
            break
        runs.append(run_script(script, data, a, w, i, out, say))
        say(f"  {runs[-1].describe()}" if runs[-1].later else f"  w={w}: {runs[-1].error}")
    decisions = {"sweep": d}
    for name in a.paths:  # the other paths, after the scripts, each scored against the same script runs
        if name != "sweep":
            decisions[name] = run_path(name, a, data, out, say)
    scores = {}
    for name, dec in decisions.items():
        same = dec is not None and fed is not None and dec.config.get("num_workers") == fed.config.get("num_workers")
        scores[name] = score(dec, fed if same else None, runs)
        say(f"== {name}: " + "; ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                         for k, v in scores[name].items() if k != "script_steady_by_workers"))
    summary = {"script": asdict(SCRIPTS["imagenet"]), "arch": a.arch, "batch_size": a.batch_size, "count": a.count,
               "decisions": {k: asdict(v) if v else None for k, v in decisions.items()},
               "e2e": asdict(fed) if fed else None, "runs": [asdict(r) for r in runs], "scores": scores}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/tmp/real_scripts", help="where the JPEGs are made [/tmp/real_scripts]")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=16000)
    ap.add_argument("--val", type=int, default=512)
    ap.add_argument("--arch", default="resnet50")
    ap.add_argument("--epochs", type=int, default=3, help="the script's epochs; every one after the 1st is scored [3]")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=lambda s: [int(x) for x in s.split(",")], default=[4, 6, 8, 12, 16],
                    help="the script's worker counts beside the pick's [4,6,8,12,16]")
    ap.add_argument("--default-workers", type=int, default=4, help="the script's own default, without a decision")
    ap.add_argument("--sweep-from", help="a sweep's jsonl to take the decision from (no sweep run)")
    ap.add_argument("--no-e2e", action="store_true")
    ap.add_argument("--e2e-steps", type=int, default=63, help="e2e steps a repeat [63: an epoch of 16,000 at 256]")
    ap.add_argument("--sweep-cap-s", type=float, default=330)
    ap.add_argument("--script-cap-s", type=float, default=120)
    ap.add_argument("--deadline-s", type=float, default=1500, help="no script run starts past this")
    ap.add_argument("--paths", type=lambda x: x.split(","), default=["sweep"],
                    help="decision paths scored against the script runs: sweep, budget, tune [sweep]")
    ap.add_argument("--budget", default="2m", help="the budget path's --budget [2m]")
    ap.add_argument("--rescore", metavar="DIR", help="score --decision files against DIR's script runs (no run)")
    ap.add_argument("--decision", action="append", default=[], metavar="NAME=FILE",
                    help="with --rescore: a path's results file, re-judged by this code")
    a = ap.parse_args()
    unknown = sorted(set(a.paths) - {"sweep", "budget", "tune"})
    if unknown:
        ap.error(f"--paths: {','.join(unknown)} is not sweep, budget or tune")
    try:
        return run_logged(Path(a.out), lambda say: rescore(a, say) if a.rescore else body(a, say))
    finally:  # what ran is kept whatever failed after it (the device returns few files: one archive)
        if not a.rescore and Path(a.out).is_dir():
            with tarfile.open(f"{a.out}.tar.gz", "w:gz") as t:
                t.add(a.out, arcname=Path(a.out).name)


if __name__ == "__main__":
    sys.exit(main())
