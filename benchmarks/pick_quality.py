"""Every decision path checked against the measured best on the same scenario (issue 26, Build 1).

    PYTHONPATH=tests python benchmarks/pick_quality.py --scenario paced --out DIR          # 2 cores
    python benchmarks/pick_quality.py --scenario imagenet --out DIR --prefetch 2 ...       # the H200

Ground truth, measured: the fed loop (`run_e2e`, predict off: the real loader feeding the real train step) for
every config of a full grid (workers on trial.worker_ladder up to --max-workers capped by trial.worker_cap,
--prefetch, pin_memory off/on on CUDA, persistent workers off/on), in --rounds interleaved rounds (the order
reversed every other round). A config's fed rate is pooled over its rounds (total samples / total wall) and
its rounds' spread kept; its idle share is pooled the same way (idle seconds / wall).

Window rule (how long a fed run is): a probe per worker count (PROBE_STEPS steps, at least two a worker, at the
smallest prefetch, no pin, no persistence; in truth.jsonl with a "probe" note, never pooled) gives the rate r.
A run's timed window is one whole epoch of steps (ceil(epoch samples / batch)) when that takes at most --run-s
seconds at r, so it pays epoch restarts as often as training does; else --run-s seconds' worth of steps (at
least MIN_STEPS), which pays none: for a config that slow an epoch restart (about one batch a worker) is a
small share of its epoch. With --grid-cap-s, --run-s is lowered until the grid's estimate (each run's overhead,
measured by its probe, plus its window) fits the time left.

Then every decision path on the same scenario, each the real CLI in a subprocess with its own --out, timed to
exit and killed at --path-cap-s: `sweep --model` (defaults), `sweep --budget B`, `tune --model`, and the command
`dataperf watch` suggests (`next_step`) for a small training script written here (the scenario's data and
model in a plain DataLoader loop), run as printed with only the changes its notes ask for or that the
scenario needs (DATA for a dataset that keeps no path), each recorded. Each path's decision is the last
`decision` record of its --out (results.DecisionResult).

Score per path: the pick's fed rate / the best fed rate, the pick looked up in the grid by its DataLoader
arguments (KNOBS) set on the scenario's config (a pick measured with another transform, cache or size is
scored as the user would run it, on the scenario, and the difference noted); a pick not in the grid (another
batch size, prefetch, backend) is fed in extra interleaved rounds beside the grid's best, and its ratio comes
from those rounds. Verdict rule (input-bound = fed idle > 5%): "input-bound" is right when every config of
the grid idles more than 5% (none feeds the model; the least idle decides, not the fastest: configs that feed
the model tie on rate within noise and differ in idle); "feeds" is right when the pick idles at most 5% (the
user's model is fed); no verdict is not right. MAPE: the decision's predicted_samples_per_s against its pick's
measured fed rate, and each `predictions` entry whose config is in the grid against that config's.

Goals, each printed met/NOT met: ratio >= 0.95; verdict right; MAPE <= 10%; --budget B ends within B and
uses >= 80% of it; tune <= 30% of the full grid's time; the default sweep <= 5 minutes. A truth grid cut to
fit a lease (--min-workers, --pin on, --persistent off, fewer prefetch depths) is not the full grid: the full
grid's time (the ladder from 0 workers, prefetch 2 and 4, pin and persistence both ways) is then estimated pro
rata from the measured grid's time a config, says so, and tune's share of the measured grid is kept beside.
DIR gets log.txt (every command, its wall time and output tail), truth.jsonl, each path's jsonl and output,
summary.json, and at the end DIR.tar.gz of it all.

Issue 49: a second truth that is not dataperf. For a --dataset factory (paced and the known answers), each round's
configs also run, on the same windows, in benchmarks/plain_loop.py: a plain DataLoader loop feeding the model in
its own process, no dataperf imported (plain.jsonl; its steady wait and epoch start apart). Picks are scored
against both. --scenario S1a ... S6 are the known answers of tests/ka_scenarios.py, each with its analytic answer
(best rate, verdict, binding limit, cheapest config); their goals per path: answered within its bound (sweep 5
min, the budget B, tune 10 min), ratio >= 0.95 by the fed loop and by the plain loop, verdict and binding limit
right by the analytic answer and not contradicting each other, MAPE <= 10% against each truth. Their grid is
small (workers 0-8 on the ladder, prefetch 2, no pin, persistence off but in S6, 3 rounds), the paths sweep,
budget 2m and tune; --scenario ka runs all seven, each in DIR/NAME, and writes one scenarios x paths table.
    PYTHONPATH=.:tests:benchmarks python benchmarks/pick_quality.py --scenario ka --out DIR   # ~2 h, quiet box
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchlog import Say, run_logged

from dataperf import results
from dataperf.measure.trial import cores, worker_ladder
from dataperf.results import DecisionResult, E2EResult, LoaderConfig, provenance
from dataperf.workflows.budget import parse_duration

REPO = Path(__file__).resolve().parent.parent
GOAL_RATIO, GOAL_MAPE_PCT, GOAL_BUDGET_USE, GOAL_TUNE_SHARE, GOAL_DEFAULT_S = 0.95, 10.0, 0.80, 0.30, 300.0
INPUT_BOUND_IDLE = 0.05  # the issue's line: fed idle above 5% is input-bound
PATHS = ("sweep", "budget", "tune", "watch")
# the DataLoader arguments a user sets from a decision; the rest of a config (transform, size, cache, shuffle,
# decode) is the scenario's own
KNOBS = ("backend", "batch_size", "num_workers", "prefetch_factor", "pin_memory", "persistent_workers",
         "worker_type", "dali_num_threads", "dali_prefetch_queue_depth", "dali_decode_device")
PROBE_STEPS, MIN_STEPS = 3, 3  # few: a slow config's batch of 256 takes seconds (w=0 on the H200: 1.7 s)
PLACEHOLDER = "yourpkg."  # watch's stand-ins for the user's own functions (yourpkg.data:build, ...)
MIN_PATH_S = 60.0  # a path is not started with less time left than this before --deadline-s
PACED_T, PACED_MODEL_SPS = 0.06, 80.0  # 16.7 samples/s a worker; the model eats 80 samples/s at any batch
HEADROOM = 1.2
PERSISTENT = {"both": (False, True), "off": (False,)}
FULL_PREFETCH = [2, 4]  # the full grid's depths (--prefetch's default)
PINS = {"both": (False, True), "on": (True,)}
IMAGES_PER_S = 390.0  # `shards make --like imagenet` on 16 cores (200,000 in 8.5 min, 2026-12-03): estimates
# per fed run beyond its window (fork, warm-up of workers x prefetch batches, model build): estimates only
RUN_OVERHEAD_S = {"paced": 3.0, "imagenet": 6.0, "wds-uneven": 6.0, "tokens": 4.0, "cold": 6.0}
PLAIN = Path(__file__).resolve().parent / "plain_loop.py"  # the truth with no dataperf in its process
PLAIN_START_S, KA_RUN_OVERHEAD_S = 4.0, 1.5  # estimates: a plain-loop process's python + torch start; a KA run's
# each known-answer path's time bound (issue 49's goal: default sweep 5 min, the budget B, tune 10 min)
KA_BOUND_S = {"sweep": GOAL_DEFAULT_S, "tune": 600.0}
KA_PATHS = ("sweep", "budget", "tune")


def known_answers() -> dict[str, Any]:
    """tests/ka_scenarios.SCENARIOS (issue 49's known answers), tests/ put on the path to import it."""
    tests = str(REPO / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import ka_scenarios

    return ka_scenarios.SCENARIOS


KA_NAMES = ("S1a", "S1b", "S2", "S3", "S4", "S5", "S6")


# ---------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    """What every path and the truth grid share: data, model, batch shape, device, cache, environment."""

    name: str
    data: str | None  # DATA; None with a --dataset factory
    factory: str | None
    model: str
    input_kind: str | None
    device: str
    amp: str | None
    batch_size: int
    transform: str | None
    image_size: int
    seq_len: int
    cache: str
    count: int  # samples of one epoch
    script_workers: int  # the watched training script's num_workers, as a user left it
    drop_caches: bool = False
    env: dict[str, str] = field(default_factory=dict)
    made: dict[str, Any] = field(default_factory=dict)  # how the data was made (command, wall)
    known: Any = None  # a known-answer scenario's ka_scenarios.Known: its analytic answer

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def data_args(self) -> list[str]:
        return ["--dataset", self.factory] if self.factory else [str(self.data)]

    def model_args(self) -> list[str]:
        return ["--model", self.model, "--device", self.device, *(["--input", self.input_kind] if
                self.input_kind else []), *(["--amp", self.amp] if self.amp else [])]

    def loader_args(self) -> list[str]:
        """The batch shape every path gets: the batch size, and the transform, image size, sequence length and
        cache where the scenario sets them (tune's default cache is cold: the scenario's is always given)."""
        out = ["--batch-size", str(self.batch_size)]
        if self.transform:
            out += ["--transform", self.transform]
        if self.image_size != 224:
            out += ["--image-size", str(self.image_size)]
        if self.data and self.data.endswith(".bin"):
            out += ["--seq-len", str(self.seq_len)]
        return out

    def cache_args(self) -> list[str]:
        return ["--cache", self.cache, *(["--drop-caches"] if self.drop_caches else [])]


def make_scenario(a: argparse.Namespace) -> Scenario:
    """The scenario's settings from the flags (paced: the known answer on any machine; the rest: the H200)."""
    sc = scenario_defaults(a)
    return replace(sc, model=a.model or sc.model, device=a.device or sc.device)


def scenario_defaults(a: argparse.Namespace) -> Scenario:
    amp = None if a.amp == "none" else a.amp
    if a.scenario in KA_NAMES:
        k = known_answers()[a.scenario]
        return Scenario(k.name, None, k.factory, k.model, "image", "cpu", None, 8, None, 224, 512, "warm", k.count, 2,
                        env=dict(k.env), known=k)
    if a.scenario == "paced":
        bs = a.batch_size or 8
        env = {"PACED_T": str(PACED_T), "PACED_STEP_S": f"{bs / PACED_MODEL_SPS:g}", "PACED_N": str(a.count or 4000)}
        # fixed_step_model, not paced_model: a paced_model step whose chained deadline is already due returns at
        # once, so its waits for data read as idle without slowing it; a fixed step is busy STEP_S whatever it
        # waited, as a real model's compute is (tests/paced.py, FixedStep)
        return Scenario("paced", None, "paced:sleep_map", "paced:fixed_step_model", "image", "cpu", None, bs, None,
                        224, 512, "warm", a.count or 4000, 2, env=env)
    root = Path(a.data or "/tmp/pick_quality")
    common = {"model": "torchvision.models:resnet50", "input_kind": "image", "device": "cuda", "amp": amp,
              "batch_size": a.batch_size or 256, "transform": "imagenet-train", "image_size": 224, "seq_len": 512,
              "count": a.count or 16000, "script_workers": 4, "factory": None}
    if a.scenario in ("imagenet", "cold"):
        cold = a.scenario == "cold"
        return Scenario(a.scenario, str(root / "imagefolder"), cache="cold" if cold else "warm",
                        drop_caches=cold and can_drop_caches(), **common)
    if a.scenario == "wds-uneven":
        return Scenario(a.scenario, str(root / f"wds{a.shards}"), cache="warm", **common)
    return Scenario("tokens", str(root / "tokens.bin"), None, "gpt-medium", "tokens", "cuda", amp, a.batch_size or 16,
                    None, 224, 1024, "warm", a.count or 16000, 4)


def can_drop_caches() -> bool:
    """Root can write /proc/sys/vm/drop_caches; else cold runs rely on dataperf's own eviction (verified)."""
    return os.geteuid() == 0 and os.access("/proc/sys/vm/drop_caches", os.W_OK)


def apply_env(sc: Scenario) -> None:
    """The scenario's environment for this process, its DataLoader workers and every subprocess (paced: the
    known answers in tests/ and their settings)."""
    os.environ.update(sc.env)
    if sc.factory:
        tests = str(REPO / "tests")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)


def prepare_data(sc: Scenario, a: argparse.Namespace, out: Path, cap_s: float, say: Say) -> None:
    """Make the scenario's data unless DATA already exists (same seed: the same images every time)."""
    if sc.factory or Path(str(sc.data)).exists():
        return
    root = Path(str(sc.data)).parent
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    if sc.name == "tokens":
        import numpy as np

        rng = np.random.default_rng(0)
        rng.integers(0, 32000, size=sc.count * sc.seq_len + 1, dtype=np.uint16).tofile(str(sc.data))
        say(f"data: wrote {sc.count:,} windows of {sc.seq_len} uint16 tokens to {sc.data} "
            f"in {time.monotonic() - t0:.0f} s")
    elif sc.name == "wds-uneven":
        ran = run_cli(["shards", "make", "--like", "imagenet", "--format", "webdataset", "--count", str(sc.count),
                       "--shards", str(a.shards), "--out", str(sc.data)], out / "make.log", cap_s, say)
        if ran.rc != 0:
            raise SystemExit(f"shards make failed (exit {ran.rc}); see {out / 'make.log'}")
    else:
        made = root / "made"
        if not made.exists():
            ran = run_cli(["shards", "make", "--like", "imagenet", "--format", "files", "--count", str(sc.count),
                           "--out", str(made)], out / "make.log", cap_s, say)
            if ran.rc != 0:
                raise SystemExit(f"shards make failed (exit {ran.rc}); see {out / 'make.log'}")
        m = json.loads((made / "manifest.json").read_text())
        for f, y in zip(m["files"], m["labels"], strict=True):  # a user's ImageFolder: class folders, hard links
            d = Path(str(sc.data)) / f"n{y:08d}"
            d.mkdir(parents=True, exist_ok=True)
            if not (d / Path(f).name).exists():
                os.link(made / f, d / Path(f).name)
        say(f"data: {sc.count:,} images laid out as an ImageFolder in {sc.data}")
    sc.made = {"wall_s": time.monotonic() - t0}


# ---------------------------------------------------------------- the truth grid


@dataclass
class Fed:
    """One config's fed runs pooled: total samples / total wall, idle seconds / wall, each round kept."""

    key: str
    short: str
    samples: float = 0.0
    wall_s: float = 0.0
    idle_s: float = 0.0
    rounds: list[float] = field(default_factory=list)
    idle_rounds: list[float] = field(default_factory=list)
    steps: int = 0
    epoch_restarts: int = 0
    failed: list[str] = field(default_factory=list)

    def add(self, r: E2EResult) -> None:
        if r.status != "ok":
            self.failed.append(r.error or "failed")
            return
        counts = r.timed_steps()
        walls = [ms * n / 1000 for ms, n in zip(r.step_ms_repeats, counts, strict=True)]
        n = sum(s * w for s, w in zip(r.samples_per_s_repeats, walls, strict=True))
        idle = sum(f * w for f, w in zip(r.data_stall_fraction_repeats, walls, strict=True))
        self.samples, self.wall_s, self.idle_s = self.samples + n, self.wall_s + sum(walls), self.idle_s + idle
        self.rounds.append(n / sum(walls))
        self.idle_rounds.append(idle / sum(walls))
        self.steps, self.epoch_restarts = sum(counts), self.epoch_restarts + r.epoch_restarts

    @property
    def rate(self) -> float:
        return self.samples / self.wall_s if self.wall_s else float("nan")

    @property
    def idle(self) -> float:
        return self.idle_s / self.wall_s if self.wall_s else float("nan")

    @property
    def spread_pct(self) -> float:
        return (max(self.rounds) - min(self.rounds)) / self.rate * 100 if len(self.rounds) > 1 else float("nan")

    def row(self) -> dict[str, Any]:
        return {"config": self.short, "key": self.key, "fed_samples_per_s": self.rate, "rounds": self.rounds,
                "spread_pct": self.spread_pct, "idle": self.idle, "idle_rounds": self.idle_rounds,
                "steps": self.steps, "epoch_restarts": self.epoch_restarts, "failed": self.failed}


@dataclass
class PlainFed(Fed):
    """One config's plain-loop runs (benchmarks/plain_loop.py rows) pooled as Fed pools fed runs: samples / wall,
    data waits / wall (idle), and apart from them the steady wait (mid-epoch waits over the wall less epoch
    starts) and each run's epoch start."""

    steady_wait_s: float = 0.0
    steady_wall_s: float = 0.0
    epoch_starts: list[float] = field(default_factory=list)

    def add_row(self, row: dict[str, Any]) -> None:
        if "error" in row:
            self.failed.append(row["error"])
            return
        steady_wall = row["wall_s"] - row["epoch_start_wait_s"]
        self.samples, self.wall_s, self.idle_s = (self.samples + row["samples"], self.wall_s + row["wall_s"],
                                                  self.idle_s + row["wait_s"])
        self.steady_wait_s += row["steady_wait_share"] * steady_wall
        self.steady_wall_s += steady_wall
        self.rounds.append(row["samples_per_s"])
        self.idle_rounds.append(row["wait_share"])
        self.epoch_starts.append(row["epoch_start_s"])
        self.steps += row["steps"]
        self.epoch_restarts += row["epoch_starts_timed"]

    @property
    def steady_wait(self) -> float:
        return self.steady_wait_s / self.steady_wall_s if self.steady_wall_s else float("nan")

    def row(self) -> dict[str, Any]:
        starts = [x for x in self.epoch_starts if x is not None]
        return {**super().row(), "steady_wait": self.steady_wait,
                "epoch_start_s": sum(starts) / len(starts) if starts else None, "epoch_start_rounds": starts}


def best_of(fed: dict[str, Fed]) -> Fed | None:
    ok = [f for f in fed.values() if f.wall_s > 0 and not f.failed]
    return max(ok, key=lambda f: f.rate) if ok else None


def on_scenario(cfg: dict[str, Any], base: LoaderConfig, cuda: bool) -> tuple[LoaderConfig, list[str]]:
    """A decision's config as the user would run it: its DataLoader arguments (KNOBS) on the scenario's config,
    with the defaults written out (explicit) and what torch ignores collapsed (no workers: no prefetch or
    persistence; no CUDA: no pinning). Also the fields it was measured with that differ from the scenario."""
    known = {f.name for f in dataclasses.fields(LoaderConfig)}
    c = replace(base, **{k: cfg[k] for k in KNOBS if k in cfg})
    if not cuda:
        c = replace(c, pin_memory=False)
    if c.num_workers == 0:
        c = replace(c, prefetch_factor=None, persistent_workers=False)
    c = c.explicit()
    theirs = LoaderConfig(**{k: v for k, v in cfg.items() if k in known}).explicit()
    differ = [f"{k}={getattr(theirs, k)!r} (scenario: {getattr(c, k)!r})" for k in sorted(known - set(KNOBS))
              if k in cfg and k not in ("decode", "seq_len", "shuffle_buffer") and getattr(theirs, k) != getattr(c, k)]
    return c, differ


def grid_workers(a: argparse.Namespace, cap: int | None = None) -> list[int]:
    """The truth grid's worker counts: the ladder up to --max-workers and the data's cap, from --min-workers."""
    return [w for w in worker_ladder(a.max_workers, cap) if w >= a.min_workers]


def grid_configs(base: LoaderConfig, workers: list[int], prefetch: list[int], cuda: bool,
                 persistent: tuple[bool, ...] = (False, True), pins: tuple[bool, ...] = (False, True)
                 ) -> list[LoaderConfig]:
    """The full grid on the scenario's config; no workers collapses prefetch and persistence."""
    out: dict[str, LoaderConfig] = {}
    for w in workers:
        for pf in prefetch:
            for pin in (pins if cuda else (False,)):
                for persist in persistent:
                    c, _ = on_scenario({"num_workers": w, "prefetch_factor": pf, "pin_memory": pin,
                                        "persistent_workers": persist}, base, cuda)
                    out.setdefault(c.key(), c)
    return list(out.values())


def full_grid(grid: Grid, a: argparse.Namespace, cuda: bool) -> int:
    """Configs of the full grid on this scenario: the ladder from no workers to --max-workers (the data's cap),
    prefetch 2 and 4, pin (CUDA) and persistence both ways; what a cut grid stands in for."""
    return len(grid_configs(grid.base, worker_ladder(a.max_workers, grid.cap), FULL_PREFETCH, cuda))


def window_steps(rate: float, epoch_samples: int, batch: int, run_s: float) -> tuple[int, bool]:
    """Steps of one fed run by the window rule: (steps, whole epoch)."""
    epoch_steps = math.ceil(epoch_samples / batch)
    if rate > 0 and epoch_samples / rate <= run_s:
        return epoch_steps, True
    return max(MIN_STEPS, int(run_s * rate / batch) if rate > 0 else MIN_STEPS), False


def fit_run_s(runs: list[tuple[float, float, int]], epoch_samples: int, run_s: float, left_s: float | None) -> float:
    """The largest window cap <= run_s whose grid estimate fits left_s; runs: (rate, overhead s, batch) each."""
    def estimate(t: float) -> float:
        return sum(o + window_steps(r, epoch_samples, b, t)[0] * b / r for r, o, b in runs if r > 0)

    t = run_s
    while left_s is not None and estimate(t) > left_s and t > 1.0:
        t *= 0.85
    return t


class Grid:
    """The truth grid: probes, then interleaved rounds; every E2EResult appended to truth.jsonl."""

    def __init__(self, sc: Scenario, a: argparse.Namespace, out: Path, say: Say) -> None:
        from dataperf.data import resolve, user_dataset
        from dataperf.data.tokens import windowed
        from dataperf.measure.fed import shape_for_model
        from dataperf.measure.step import StepOptions
        from dataperf.measure.trial import TrialOptions, worker_cap
        from dataperf.workflows.e2e import run_e2e

        self.sc, self.a, self.out, self.say, self.run_e2e = sc, a, out, say, run_e2e
        self.data = user_dataset(sc.factory) if sc.factory else resolve(sc.data)
        self.sopts = StepOptions(model=sc.model, device=sc.device, amp=sc.amp, input=sc.input_kind,
                                 batch_size=sc.batch_size, seq_len=sc.seq_len, image_size=sc.image_size)
        # the DataLoader of the data's own storage format, decoded, at the scenario's batch (`bench`'s defaults)
        cfg = LoaderConfig(backend=self.data.format, batch_size=sc.batch_size, decode=True, image_size=sc.image_size,
                           cache=sc.cache, transform=sc.transform,
                           seq_len=sc.seq_len if windowed(self.data) else None)
        self.base, self.sopts = shape_for_model(self.data, cfg, self.sopts)
        self.topts = TrialOptions(drop_caches=sc.drop_caches, collect=False)
        self.cap = worker_cap(self.data, sc.batch_size)
        self.workers = grid_workers(a, self.cap)
        self.configs = grid_configs(self.base, self.workers, a.prefetch, sc.cuda, PERSISTENT[a.persistent],
                                    PINS[a.pin])
        self.probes: dict[tuple[str, int, int], tuple[float, float]] = {}

    def key(self, cfg: dict[str, Any]) -> tuple[str, LoaderConfig, list[str]]:
        c, differ = on_scenario(cfg, self.base, self.sc.cuda)
        return c.key(), c, differ

    def fed_run(self, cfg: LoaderConfig, steps: int, note: str, round_k: int | None, path: Path) -> E2EResult:
        """One fed run (failures kept as a failed record), appended to `path`."""
        try:
            r = self.run_e2e(self.data, cfg, self.sopts, steps=steps, repeats=1 if round_k is None else self.a.repeats,
                             predict=False, topts=self.topts)
        except Exception as e:  # an OOM or a crashed worker fails this config, not the grid
            r = E2EResult(data=self.data.spec, config=dataclasses.asdict(cfg), config_key=cfg.key(),
                          model=self.sc.model, status="failed", error=f"{type(e).__name__}: {e}")
        r.confirm_round = round_k
        r.notes.append(f"pick_quality: {note}")
        results.append(path, r)
        if self.sc.cuda:
            import torch

            torch.cuda.empty_cache()
        return r

    def probe(self, c: LoaderConfig, path: Path) -> tuple[float, float]:
        """(rate, overhead s) of c's backend, batch size and workers: PROBE_STEPS fed steps, at least two a worker
        (3 steps of 6 workers read 215 samples/s where the run then read 79), at the smallest prefetch, no pin,
        no persistence; once each."""
        pk = (c.backend, c.batch_size, c.num_workers)
        if pk in self.probes:
            return self.probes[pk]
        w = c.num_workers
        cfg, _ = on_scenario({"backend": c.backend, "batch_size": c.batch_size, "num_workers": w,
                              "prefetch_factor": min(self.a.prefetch)}, self.base, self.sc.cuda)
        t0 = time.monotonic()
        steps = max(PROBE_STEPS, 2 * w)
        r = self.fed_run(cfg, steps, "probe (sizes the window; not pooled)", None, path)
        wall = time.monotonic() - t0
        if r.status != "ok":
            self.say(f"  probe {cfg.short()}: FAILED {r.error}")
            self.probes[pk] = 0.0, wall
        else:
            timed = r.step_ms_median * steps / 1000
            self.say(f"  probe {cfg.short()}: {r.samples_per_s:,.1f} samples/s fed ({wall:.1f} s, {wall - timed:.1f} s "
                     "beyond its steps)")
            self.probes[pk] = r.samples_per_s, wall - timed
        return self.probes[pk]

    def plain_round(self, cfgs: list[LoaderConfig], plan: dict[str, tuple[int, bool]], run_s: float, path: Path,
                    note: str) -> list[dict[str, Any]]:
        """One benchmarks/plain_loop.py process over `cfgs` in order, each on the fed run's window (steps, or whole
        epochs for run_s); its rows (a failed row for a config it did not finish), each appended to `path`."""
        spec = [{"key": c.key(), "batch_size": c.batch_size, "num_workers": c.num_workers,
                 "prefetch_factor": c.prefetch_factor, "persistent_workers": c.persistent_workers,
                 "pin_memory": c.pin_memory, "steps": plan[c.key()][0], "whole": plan[c.key()][1]} for c in cfgs]
        cmd = [sys.executable, str(PLAIN), "--dataset", str(self.sc.factory), "--model", self.sc.model,
               "--configs", json.dumps(spec), "--seconds", f"{run_s:g}"]
        cap = PLAIN_START_S + len(cfgs) * (4 * run_s + 30)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=cap)
            out, err = p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            out, err = (e.stdout or b"").decode(), f"killed at {cap:.0f} s"
        rows = {r["key"]: r for r in (json.loads(x) for x in out.splitlines() if x.startswith("{"))}
        shorts = {c.key(): c.short() for c in cfgs}
        got = []
        with open(path, "a", encoding="utf-8") as f:
            for k, short in shorts.items():
                r = rows.get(k) or {"key": k, "error": f"no row: {err.strip().splitlines()[-1:] or '?'}"}
                r.update(short=short, note=note)
                f.write(json.dumps(r) + "\n")
                got.append(r)
        return got

    def run(self, cfgs: list[LoaderConfig], rounds: int, path: Path, left_s: float | None,
            what: str, plain_path: Path | None = None) -> tuple[dict[str, Fed], dict[str, PlainFed]]:
        """Probe each worker count, size each config's window, then `rounds` interleaved rounds of `cfgs`; with
        plain_path, each round's configs also run in the plain loop (the same order and windows) after it."""
        t0 = time.monotonic()
        probes = {c.key(): self.probe(c, path) for c in sorted(cfgs, key=lambda c: c.num_workers)}
        runs = [(*probes[c.key()], c.batch_size) for c in cfgs for _ in range(rounds)]
        left = None if left_s is None else left_s - (time.monotonic() - t0)
        run_s = fit_run_s(runs, self.sc.count, self.a.run_s, left)
        if run_s < self.a.run_s:
            self.say(f"  window cap lowered from {self.a.run_s:.1f} s to {run_s:.1f} s to fit the {left_s:.0f} s cap")
        plan = {c.key(): window_steps(probes[c.key()][0], self.sc.count, c.batch_size, run_s) for c in cfgs}
        fed = {c.key(): Fed(c.key(), c.short()) for c in cfgs}
        plain = {c.key(): PlainFed(c.key(), c.short()) for c in cfgs} if plain_path else {}
        n = len(cfgs) * rounds
        for k in range(rounds):
            order = cfgs if k % 2 == 0 else cfgs[::-1]
            for i, c in enumerate(order):
                steps, whole = plan[c.key()]
                t1 = time.monotonic()
                r = self.fed_run(c, steps, f"{what} round {k + 1}", k + 1, path)
                fed[c.key()].add(r)
                done = k * len(cfgs) + i + 1
                figure = (f"fed {r.samples_per_s:,.1f} samples/s, idle {r.data_stall_fraction:.1%}"
                          if r.status == "ok" else f"FAILED: {r.error}")
                self.say(f"  {what} round {k + 1} [{done}/{n}] {c.short():<48} {figure}; {steps} steps"
                         f"{' (an epoch)' if whole else ''}, {r.epoch_restarts} restarts, "
                         f"{time.monotonic() - t1:.1f} s")
            if plain_path:
                t1 = time.monotonic()
                for row in self.plain_round(order, plan, run_s, plain_path, f"{what} round {k + 1}"):
                    plain[row["key"]].add_row(row)
                    self.say(f"  {what} round {k + 1} plain {row['short']:<48} " + (
                        f"FAILED: {row['error']}" if "error" in row else
                        f"{row['samples_per_s']:,.1f} samples/s, waiting {row['wait_share']:.1%} (steady "
                        f"{row['steady_wait_share']:.1%}), epoch start {row['epoch_start_s']:.2f} s, {row['mode']}"))
                self.say(f"  {what} round {k + 1} plain loop: {time.monotonic() - t1:.1f} s")
        return fed, plain


def analytic_paced(cfg: LoaderConfig) -> float:
    """The paced known answer: no workers is serial (a batch's samples, then the step); W workers give
    W / PACED_T samples/s, and the model eats at most PACED_MODEL_SPS."""
    if cfg.num_workers == 0:
        return cfg.batch_size / (cfg.batch_size * PACED_T + cfg.batch_size / PACED_MODEL_SPS)
    return min(PACED_MODEL_SPS, cfg.num_workers / PACED_T)


def fingerprint(sc: Scenario, grid: Grid) -> dict[str, Any]:
    """What a reused truth grid must share with this run: the data, the machine's cores, the model's setup."""
    d = grid.data
    return {"scenario": sc.name, "data": d.spec, "format": d.format, "count": d.count or sc.count,
            "bytes": d.total_bytes, "files": len(d.files), "env": sc.env, "cores": cores(), "device": sc.device,
            "model": sc.model, "amp": sc.amp, "batch_size": sc.batch_size, "transform": sc.transform,
            "cache": sc.cache}


def load_plain(path: Path) -> dict[str, PlainFed]:
    """A plain.jsonl's rows (benchmarks/plain_loop.py, one a config a round) pooled by config key."""
    plain: dict[str, PlainFed] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            plain.setdefault(row["key"], PlainFed(row["key"], row["short"])).add_row(row)
    return plain


def load_truth(src: Path, grid: Grid, fp: dict[str, Any]) -> tuple[dict[str, Fed], float]:
    """An earlier run's truth grid (its round records and wall time), refused unless data, cores and the
    machine's CPU and GPU models match (its records say which machine fed them: an H200's truth scores nothing on
    an H100, as a lease of 2026-12-05 would have had it)."""
    old = json.loads((src / "summary.json").read_text())
    diff = {k: (old["fingerprint"].get(k), v) for k, v in fp.items() if old["fingerprint"].get(k) != v}
    recs = results.load(src / "truth.jsonl")
    here = provenance.machine_and_software()
    for r in recs[:1]:
        diff |= {k: (r.env.get(k), here[k]) for k in ("cpu_model", "gpu_model") if r.env.get(k) != here[k]}
    if diff:
        raise SystemExit(f"--truth-from {src}: not the same data or machine: {diff}")
    fed: dict[str, Fed] = {}
    for r in recs:
        if isinstance(r, E2EResult) and r.confirm_round is not None:
            key, c, _ = grid.key(r.config)
            fed.setdefault(key, Fed(key, c.short())).add(r)
    return fed, float(old["truth"]["wall_s"])


# ---------------------------------------------------------------- the paths


@dataclass
class Ran:
    rc: int | None
    wall_s: float
    tail: str
    timed_out: bool
    skipped: bool = False  # not started: the run's deadline left too little


def run_cli(args: list[str], log: Path, cap_s: float, say: Say, python: bool = False) -> Ran:
    """`dataperf ARGS` (or `python ARGS`) in its own session, output to `log`, killed with its workers at cap_s."""
    argv = [sys.executable, *(args if python else ["-m", "dataperf", *args])]
    shown = shlex.join(["python" if python else "dataperf", *(args if python else args)])
    say(f"$ {shown}")
    env = {**os.environ, "COLUMNS": "140", "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    timed_out = False
    with open(log, "w", encoding="utf-8") as f:
        f.write(f"$ {shown}\n")
        f.flush()
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
        try:
            p.wait(timeout=max(1.0, cap_s))
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    wall = time.monotonic() - t0
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    tail = "\n".join("    " + x for x in lines[-25:])
    say(f"  exit {p.returncode} after {wall:.0f} s{f' (killed at its {cap_s:.0f} s cap)' if timed_out else ''}; "
        f"output tail ({log.name}):\n{tail}")
    return Ran(p.returncode, wall, tail, timed_out)


def parse_next_step(step: str, notes: list[str]) -> tuple[list[str], list[str]]:
    """watch's suggestion (WatchResult.next_step and next_notes) as (the dataperf arguments, the notes): the
    command in next_step, else the one a "no next command" note spells out after "run:"; `note:` lines and a
    trailing ` # ...` comment of next_step count as notes too."""
    argv: list[str] = []
    notes = list(notes)
    for line in step.splitlines():
        s = line.strip()
        if s.lower().startswith("note:"):
            notes.append(s[5:].strip())
            continue
        head, _, comment = s.partition(" # ")
        words = shlex.split(head)
        if not argv and "dataperf" in words:
            argv = words[words.index("dataperf") + 1:]
            notes += [comment.strip()] if comment.strip() else []
    if not argv:
        spelled = next((n.split("run: ", 1)[1] for n in notes if "run: dataperf " in n), "")
        words = shlex.split(spelled)
        argv = words[words.index("dataperf") + 1:] if "dataperf" in words else []
    return argv, notes


def adapt_next_step(argv: list[str], notes: list[str], sc: Scenario, out: Path) -> tuple[list[str], list[str]]:
    """The suggested command made runnable here, and each change said: the scenario's dataset for a placeholder
    (the function a note asks the user to write exists here), the model flags a note advises (its placeholder
    model replaced by the scenario's), and this path's --out. Nothing else is added."""
    changes = []
    for i, word in enumerate(argv):
        if word == "DATA":  # the data argument itself
            lo = i
        elif i and argv[i - 1] == "--dataset" and word.startswith(PLACEHOLDER):  # the option and its value
            lo = i - 1
        else:
            continue
        argv = [*argv[:lo], *sc.data_args(), *argv[i + 1:]]
        changes.append(f"the placeholder {word} replaced by {shlex.join(sc.data_args())}")
        break
    advice = next((m.group(1) for n in notes if (m := re.search(r"add (--model .*?--confirm \d+)", n))), None)
    if "--model" not in argv and advice:
        add = shlex.split(advice)
        i = add.index("--model") + 1
        if add[i].startswith(PLACEHOLDER):
            changes.append(f"the placeholder model {add[i]} replaced by {sc.model}")
            add[i] = sc.model
        argv = [*argv, *add]
        changes.append(f"added {shlex.join(add)}, as a note advises"
                       + (f" (not --amp {sc.amp}: no note asks for it)" if sc.amp and "--amp" not in add else ""))
    if "--out" in argv:
        i = argv.index("--out")
        argv = [*argv[:i], *argv[i + 2:]]
    argv = [*argv, "--out", str(out), *(["--overwrite"] if argv and argv[0] == "sweep" else [])]
    return argv, changes


TRAIN = '''"""A plain training loop as a user writes it (pick_quality scenario {name}): a torch DataLoader over the
scenario's data feeding its model for {steps} optimizer steps. Written by benchmarks/pick_quality.py for
`dataperf watch`."""
import torch
from torch.utils.data import DataLoader

from dataperf.measure.models import load_model, loss_of


{dataset}


def main() -> None:
    device = torch.device({device!r})
    loader = DataLoader(dataset(), batch_size={bs}, num_workers={workers}, shuffle={shuffle}, pin_memory={pin})
    model = load_model({model!r}).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    steps = 0
    while steps < {steps}:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device.type, torch.bfloat16, enabled={amp}):
                loss = loss_of(model(x), x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
            if steps == {steps}:
                break


if __name__ == "__main__":
    main()
'''

IMAGENET_TRAIN = ("transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), "
                  "transforms.ToTensor(),\n        "
                  "transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])")
DATASETS = {  # each import inside dataset(), so the written script's imports stay sorted (ruff clean)
    "paced": "def dataset():\n    from paced import sleep_map\n\n    return sleep_map()",
    "files": ("def dataset():\n    from torchvision import datasets, transforms\n\n"
              f"    t = {IMAGENET_TRAIN}\n    return datasets.ImageFolder({{data!r}}, t)"),
    "webdataset": ("def dataset():\n    import glob\n\n    import webdataset as wds\n"
                   "    from torchvision import transforms\n\n"
                   "    urls = sorted(glob.glob({data!r} + '/*.tar'))\n"
                   f"    t = {IMAGENET_TRAIN}\n"
                   "    return (wds.WebDataset(urls, shardshuffle=100).shuffle(1000).decode('pil')\n"
                   "            .to_tuple('jpg', 'cls').map_tuple(t, int))"),
    "tokens": ("class Windows(torch.utils.data.Dataset):\n"
               "    def __init__(self, path: str, n: int) -> None:\n        self.path, self.n = path, n\n\n"
               "    def __len__(self) -> int:\n        import numpy as np\n\n"
               "        return len(np.memmap(self.path, np.uint16, 'r')) // self.n\n\n"
               "    def __getitem__(self, i: int):\n        import numpy as np\n\n"
               "        t = np.memmap(self.path, np.uint16, 'r')\n"
               "        return torch.from_numpy(t[i * self.n:(i + 1) * self.n].astype(np.int64)), 0\n\n\n"
               "def dataset():\n    return Windows({data!r}, {seq_len})"),
}


def train_script(sc: Scenario, steps: int) -> str:
    kind = ("paced" if sc.factory else "tokens" if sc.name == "tokens" else
            "webdataset" if sc.name == "wds-uneven" else "files")
    ds = DATASETS[kind].replace("{data!r}", repr(sc.data)).replace("{seq_len}", str(sc.seq_len))
    return TRAIN.format(name=sc.name, steps=steps, dataset=ds, device=sc.device, bs=sc.batch_size,
                        workers=sc.script_workers, shuffle=kind != "webdataset", pin=sc.cuda, model=sc.model,
                        amp=sc.amp == "bf16")


def path_command(name: str, sc: Scenario, a: argparse.Namespace, out: Path) -> list[str]:
    """The command a user types for a path, on the scenario (sweep and budget get --confirm only if given). The
    batch size is the training recipe's in every path: tune gets it as its largest too (else it climbs it, which
    changes the model's step, not only the loader: a paced step costs the same at any batch)."""
    common = [*sc.data_args(), *sc.model_args(), *sc.loader_args()]
    confirm = ["--confirm", str(a.confirm)] if a.confirm is not None else []
    cache = sc.cache_args() if (sc.cache != "warm" or name == "tune") else []
    if name == "tune":
        return ["tune", *common, "--max-batch-size", str(sc.batch_size), *cache, "--out", str(out)]
    budget = ["--budget", a.budget] if name == "budget" else []
    return ["sweep", *common, *cache, *confirm, *budget, "--out", str(out), "--overwrite"]


def read_decision(path: Path) -> DecisionResult | None:
    """The last decision record of a path's --out (None: the command wrote none)."""
    if not path.is_file():
        return None
    recs = [r for r in results.load(path) if isinstance(r, DecisionResult)]
    return recs[-1] if recs else None


# ---------------------------------------------------------------- scoring


def least_idle(fed: dict[str, Fed]) -> Fed | None:
    ok = [f for f in fed.values() if f.wall_s > 0 and not f.failed]
    return min(ok, key=lambda f: f.idle) if ok else None


def verdict_right(input_bound: bool | None, pick_idle: float | None, least_idle: float) -> bool:
    """The module docstring's rule: input-bound is right when even the grid's least idle config idles > 5%,
    feeds when the pick idles at most 5%; no verdict (or an unmeasured pick) is not right."""
    if input_bound is None:
        return False
    if input_bound:
        return least_idle > INPUT_BOUND_IDLE
    return pick_idle is not None and pick_idle <= INPUT_BOUND_IDLE


def prediction_errors(d: DecisionResult, pick_key: str | None, pick_fed: float | None,
                      key_of: Callable[[dict[str, Any]], str], truth: dict[str, Fed]) -> list[dict[str, Any]]:
    """Each predicted fed rate against the measured one: the pick's, and each `predictions` entry whose config
    is in the truth grid (the same config and rate once)."""
    out, seen = [], set()

    def add(key: str, predicted: Any, measured: float | None, what: str) -> None:
        if predicted is None or not isinstance(predicted, int | float) or predicted != predicted:
            return
        if measured is None or not measured > 0 or (key, round(predicted, 6)) in seen:
            return
        seen.add((key, round(predicted, 6)))
        out.append({"what": what, "key": key, "predicted": predicted, "measured": measured,
                    "error_pct": abs(predicted - measured) / measured * 100})

    if pick_key is not None:
        add(pick_key, d.predicted_samples_per_s, pick_fed, "pick")
    for p in d.predictions:
        if p.get("kind") == "loader":
            continue  # a loader rate measured alone: not a fed rate to hold against the truth grid
        cfg = p.get("config")
        cfg = json.loads(cfg) if isinstance(cfg, str) else cfg
        if not isinstance(cfg, dict):
            continue
        k = key_of(cfg)
        if k in truth and truth[k].wall_s > 0:
            add(k, p.get("predicted"), truth[k].rate, "prediction")
    return out


def score(name: str, d: DecisionResult | None, ran: Ran, truth: dict[str, Fed], key_of: Callable[[dict], str],
          extra: dict[str, Fed], grid_s: tuple[float, float], budget_s: float | None) -> dict[str, Any]:
    """One path's figures and goals: pick / best fed (grid, or the extra rounds for a pick off the grid), the
    verdict by verdict_right, wall time (and the budget's use), tune's share of the full grid's time (grid_s:
    the measured grid's, the full grid's), MAPE."""
    grid_wall_s, full_s = grid_s
    best, calm = best_of(truth), least_idle(truth)
    s: dict[str, Any] = {"path": name, "wall_s": ran.wall_s, "exit": ran.rc, "killed_at_cap": ran.timed_out,
                         "decision": d is not None, "goals": {}}
    goals = s["goals"]
    if ran.skipped:
        s["note"] = "not run: no time left"
        return s
    if name == "budget" and budget_s:
        s["budget_s"], s["budget_used"] = budget_s, ran.wall_s / budget_s
        goals["within budget"] = ran.wall_s <= budget_s and not ran.timed_out
        # the budget must be spent while trials remain: a sweep that ran everything may end early
        left = d.trials_not_run if d is not None else 1
        s["trials_not_run"] = left
        goals[f"used >= {GOAL_BUDGET_USE:.0%} of budget"] = ran.wall_s >= GOAL_BUDGET_USE * budget_s or left == 0
    if name == "tune" and grid_wall_s:
        s["share_of_measured_grid_time"] = ran.wall_s / grid_wall_s
        s["share_of_grid_time"] = ran.wall_s / full_s
        s["full_grid_estimated"] = full_s != grid_wall_s
        what = "the full grid's time" + (" (estimated)" if s["full_grid_estimated"] else "")
        goals[f"<= {GOAL_TUNE_SHARE:.0%} of {what}"] = s["share_of_grid_time"] <= GOAL_TUNE_SHARE and not ran.timed_out
    if name == "sweep":
        goals["verdict within 5 min"] = d is not None and ran.wall_s <= GOAL_DEFAULT_S
    if d is None or not d.config or best is None or calm is None:
        s["note"] = "no decision record" if d is None else "no pick" if not d.config else "no truth"
        goals[f"ratio >= {GOAL_RATIO}"] = goals["verdict right"] = False
        return s
    key = key_of(d.config)
    pick = truth.get(key) if key in truth else extra.get(key)
    in_grid = key in truth
    ref = best if in_grid else extra.get("best")
    s.update(pick=LoaderConfig(**{k: v for k, v in d.config.items() if k in LoaderConfig.__dataclass_fields__})
             .short(), pick_key=key, in_grid=in_grid, best=best.short, best_fed=best.rate, best_idle=best.idle,
             least_idle=calm.idle,
             input_bound_said=d.input_bound, outcome=d.outcome, decision_wall_s=d.wall_s,
             predicted_samples_per_s=d.predicted_samples_per_s, confirmed=d.confirmed, trials=d.trials,
             lower_bound=d.lower_bound, lower_bound_why=d.lower_bound_why, answer=d.answer)
    if pick is None or not pick.wall_s or ref is None or not ref.wall_s:
        s["note"] = "the pick was not fed (off the grid, no extra rounds)"
        goals[f"ratio >= {GOAL_RATIO}"] = False
        goals["verdict right"] = verdict_right(d.input_bound, None, calm.idle)
        return s
    s.update(pick_fed=pick.rate, pick_idle=pick.idle, pick_spread_pct=pick.spread_pct, ratio=pick.rate / ref.rate,
             ratio_basis="the truth grid" if in_grid else f"{len(pick.rounds)} extra rounds beside the best")
    goals[f"ratio >= {GOAL_RATIO}"] = s["ratio"] >= GOAL_RATIO
    goals["verdict right"] = verdict_right(d.input_bound, pick.idle, calm.idle)
    errs = prediction_errors(d, key, pick.rate, key_of, truth)
    s["prediction_errors"] = errs
    if errs:
        s["mape_pct"] = sum(e["error_pct"] for e in errs) / len(errs)
        goals[f"MAPE <= {GOAL_MAPE_PCT:.0f}%"] = s["mape_pct"] <= GOAL_MAPE_PCT
    else:
        goals[f"MAPE <= {GOAL_MAPE_PCT:.0f}%"] = False
        s["note"] = "no predicted fed rate to check"
    return s


def contradictions(d: DecisionResult) -> list[str]:
    """Where a decision's own lines disagree (issue 49's goal: one answer that never contradicts itself): an
    input-bound verdict with the model binding, "feeds" with another limit binding, "feeds" beside a fed (steady)
    wait over 5%, no verdict at all."""
    out = []
    if d.input_bound is None:
        out.append("no verdict")
    elif d.input_bound and d.binding_limit == "model":
        out.append("INPUT-BOUND with the model binding")
    elif not d.input_bound and d.binding_limit not in ("", "model"):
        out.append(f"feeds with {d.binding_limit} binding")
    wait = d.steady_stall_fraction if d.confirmed and d.steady_stall_fraction == d.steady_stall_fraction \
        else d.fed_stall_fraction  # mid-epoch where the record has it (a record from before: the whole run)
    if d.input_bound is False and wait is not None and wait > INPUT_BOUND_IDLE:
        out.append(f"feeds beside a fed wait of {wait:.1%} mid-epoch")
    return out


def answer_contradictions(text: str) -> list[str]:
    """What the path's printed answer contradicts in itself, read as tests/answers.py reads every answer the
    suite prints (the same rules as `contradictions`, on the text the user sees)."""
    from tests.answers import contradictions as printed

    return printed(text)


def score_known(s: dict[str, Any], d: DecisionResult | None, ran: Ran, known: Any, plain: dict[str, Fed],
                plain_extra: dict[str, Fed], key_of: Callable[[dict], str], budget_s: float | None) -> None:
    """A known-answer scenario's goals (issue 49), replacing s["goals"]: the path answered within its bound
    (KA_BOUND_S; the budget B), the pick >= 0.95 of the best fed rate by the fed loop and by the plain loop, the
    verdict type and the binding limit right by the analytic answer and not contradicting each other, MAPE <= 10%
    of the predicted fed rates against the fed loop and against the plain loop."""
    bound = budget_s if s["path"] == "budget" else KA_BOUND_S[s["path"]]
    goals: dict[str, bool] = {f"answered within {bound:.0f} s": d is not None and bool(d.config)
                              and ran.wall_s <= bound and not ran.timed_out}
    s["known"] = {"best": known.best, "input_bound": known.input_bound, "binding": list(known.binding),
                  "cheapest": known.cheapest, "why": known.why}
    pick = s.get("pick_key")
    ref = plain if pick in plain else plain_extra
    best = best_of(plain) if pick in plain else plain_extra.get("best")
    p = ref.get(pick) if pick else None
    if p is not None and p.wall_s and best is not None and best.wall_s:
        s.update(plain_pick=p.rate, plain_best=best.rate, plain_best_config=best.short, plain_ratio=p.rate / best.rate,
                 plain_pick_steady_wait=getattr(p, "steady_wait", None))
    goals[f"ratio >= {GOAL_RATIO} (fed loop)"] = s.get("ratio", 0.0) >= GOAL_RATIO
    goals[f"ratio >= {GOAL_RATIO} (plain loop)"] = s.get("plain_ratio", 0.0) >= GOAL_RATIO
    said = contradictions(d) if d is not None else ["no decision"]
    s["contradictions"] = said
    s["binding_said"] = d.binding_limit if d is not None else None
    goals["verdict right"] = d is not None and d.input_bound is known.input_bound and not said
    goals["binding limit right"] = d is not None and d.binding_limit in known.binding and not said
    plain_errs = prediction_errors(d, pick, s.get("plain_pick"), key_of, plain) if d is not None and pick else []
    s["prediction_errors_plain"] = plain_errs
    for what, errs, k in (("fed loop", s.get("prediction_errors", []), "mape_pct"),
                          ("plain loop", plain_errs, "mape_plain_pct")):
        s[k] = sum(e["error_pct"] for e in errs) / len(errs) if errs else None
        goals[f"MAPE <= {GOAL_MAPE_PCT:.0f}% ({what})"] = s[k] is not None and s[k] <= GOAL_MAPE_PCT
    s["goals"] = goals


# ---------------------------------------------------------------- the run


def estimate(sc: Scenario, a: argparse.Namespace, n_workers: int, n_configs: int) -> list[tuple[str, float]]:
    """Each phase's time, before anything ran (upper-bound style: every window at --run-s)."""
    o = RUN_OVERHEAD_S.get(sc.name, KA_RUN_OVERHEAD_S)
    grid = n_workers * (o + PROBE_STEPS * 0.5) + n_configs * a.rounds * (o + a.run_s)
    if sc.factory:  # each round again in one plain-loop process
        grid += a.rounds * (PLAIN_START_S + n_configs * (KA_RUN_OVERHEAD_S + a.run_s))
    if a.grid_cap_s:
        grid = min(grid, a.grid_cap_s)
    phases = []
    if not sc.factory and not Path(str(sc.data)).exists():
        phases.append(("make data", sc.count / IMAGES_PER_S if sc.name != "tokens" else 10.0))
    phases.append(("truth grid", 0.0 if a.truth_from else grid))
    cap = a.path_cap_s
    for p in a.paths:
        t = {"sweep": GOAL_DEFAULT_S, "budget": parse_duration(a.budget) + 10, "tune": GOAL_TUNE_SHARE * grid,
             "watch": 60 + GOAL_DEFAULT_S}[p]
        if sc.known is not None and p in KA_BOUND_S:
            t = KA_BOUND_S[p] + 30  # the cap: the bound (tune's 10 min) is the most a path may take
        phases.append((p, min(t, cap * (2 if p == "watch" else 1))))
    phases.append(("extra rounds for picks off the grid (2 at most)", 2 * a.rounds * (o + a.run_s) + 2 * o))
    return phases


class Clock:
    """The run's deadline (--deadline-s): each phase gets its cap or what is left, whichever is less."""

    def __init__(self, deadline_s: float | None) -> None:
        self.t0, self.deadline_s = time.monotonic(), deadline_s

    def left(self) -> float:
        return math.inf if self.deadline_s is None else self.deadline_s - (time.monotonic() - self.t0)

    def cap(self, want: float) -> float:
        return min(want, self.left())


def bench(a: argparse.Namespace, say: Say) -> int:
    out: Path = a.out
    sc = make_scenario(a)
    apply_env(sc)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    say(f"commit: {commit.stdout.strip() or '?'}; scenario {sc.name}: data {shlex.join(sc.data_args())}, model "
        f"{shlex.join(sc.model_args())}, {shlex.join(sc.loader_args())}, cache {sc.cache}"
        + (f", env {' '.join(f'{k}={v}' for k, v in sc.env.items())}" if sc.env else ""))
    if sc.name == "cold":
        say("cold: " + ("root: /proc/sys/vm/drop_caches is written before every repeat (--drop-caches)"
                        if sc.drop_caches else "not root: drop_caches unavailable; dataperf's own eviction "
                        "(posix_fadvise), checked per run by cache_verified"))
    clock = Clock(a.deadline_s)
    summary: dict[str, Any] = {"scenario": sc.name, "commit": commit.stdout.strip(), "env": sc.env, "paths": {}}

    def save() -> None:
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")

    if not a.dry_run:
        prepare_data(sc, a, out, clock.cap(a.make_cap_s), say)
        summary["made"] = sc.made
    elif not sc.factory and not Path(str(sc.data)).exists():
        say(f"dry run: {sc.data} does not exist yet; it would be made first (the worker cap is then read from it)")
        ladder = grid_workers(a)
        return print_plan(sc, a, say, ladder, len(grid_configs(LoaderConfig(), ladder, a.prefetch, sc.cuda,
                                                                PERSISTENT[a.persistent], PINS[a.pin])))
    grid = Grid(sc, a, out, say)
    print_plan(sc, a, say, grid.workers, len(grid.configs))
    if a.dry_run:
        return 0
    fp = fingerprint(sc, grid)
    summary["fingerprint"] = fp
    truth_path, plain_path = out / "truth.jsonl", out / "plain.jsonl" if sc.factory else None
    if a.truth_from:
        fed, grid_wall = load_truth(a.truth_from, grid, fp)
        plain = load_plain(a.truth_from / "plain.jsonl")
        if a.truth_from.resolve() != out.resolve():
            truth_path.write_bytes((a.truth_from / "truth.jsonl").read_bytes())
            if plain:
                (out / "plain.jsonl").write_bytes((a.truth_from / "plain.jsonl").read_bytes())
        say(f"truth grid reused from {a.truth_from} (same data, cores, model, CPU and GPU; its wall time "
            f"{grid_wall:.0f} s)")
    else:
        truth_path.unlink(missing_ok=True)
        if plain_path:
            plain_path.unlink(missing_ok=True)
        pins = "/".join("on" if p else "off" for p in PINS[a.pin]) if sc.cuda else "off (CPU)"
        say(f"truth grid: {len(grid.configs)} configs x {a.rounds} rounds (workers {grid.workers}, cap "
            f"{grid.cap}; prefetch {a.prefetch}; pin {pins}; "
            f"persistent {a.persistent})" + ("; each round also in the plain loop (benchmarks/plain_loop.py)"
                                             if plain_path else ""))
        t0 = time.monotonic()
        fed, plain = grid.run(grid.configs, a.rounds, truth_path, clock.cap(a.grid_cap_s) if a.grid_cap_s else None,
                              "grid", plain_path)
        grid_wall = time.monotonic() - t0
    best = best_of(fed)
    full = full_grid(grid, a, sc.cuda)
    full_s = grid_wall * full / len(grid.configs)
    if full != len(grid.configs):
        say(f"the full grid: {full} configs x {a.rounds} rounds, about {full_s:.0f} s (estimated pro rata from this "
            f"grid's {len(grid.configs)} configs in {grid_wall:.0f} s)")
    summary["truth"] = {"wall_s": grid_wall, "configs": len(grid.configs), "full_grid_configs": full,
                        "full_grid_s": full_s, "full_grid_estimated": full != len(grid.configs),
                        "rounds": a.rounds, "workers": grid.workers, "worker_cap": grid.cap,
                        "prefetch": a.prefetch, "pin": a.pin,
                        "min_workers": a.min_workers, "from": str(a.truth_from) if a.truth_from else None,
                        "best": best.row() if best else None,
                        "table": [f.row() for f in sorted(fed.values(), key=lambda f: -f.rate if f.wall_s else 0)],
                        "plain_best": best_of(plain).row() if best_of(plain) else None,
                        "plain_table": [f.row() for f in sorted(plain.values(),
                                                                key=lambda f: -f.rate if f.wall_s else 0)]}
    print_truth(fed, best, sc, grid, say, summary)
    if plain:
        print_plain(plain, fed, sc, say, summary)
    save()
    if best is None:
        say("no config of the grid ran: nothing to score against")
        return 2
    decisions: dict[str, tuple[DecisionResult | None, Ran]] = {}
    for p in a.paths:
        decisions[p] = run_path(p, sc, a, out, clock, say, summary)
        save()
    off = {}
    for p, (d, _) in decisions.items():
        if d is not None and d.config:
            key, c, differ = grid.key(d.config)
            if differ:
                summary["paths"][p]["measured_with"] = differ
                say(f"{p}: its pick was measured with {', '.join(differ)}; scored on the scenario's config")
            if key not in fed:
                off[key] = c
    extra: dict[str, Fed] = {}
    plain_extra: dict[str, Fed] = {}
    if off and clock.left() < MIN_PATH_S:
        say(f"picks off the grid not fed: {clock.left():.0f} s left of the --deadline-s")
    elif off:
        keys = [c.key() for c in grid.configs]
        bests = dict.fromkeys([best.key, *([best_of(plain).key] if plain else [])])
        cfgs = [*(grid.configs[keys.index(k)] for k in bests), *off.values()]
        say(f"picks off the grid: {', '.join(c.short() for c in off.values())}; fed in {a.rounds} extra rounds "
            f"beside the grid's best")
        extra, plain_extra = grid.run(cfgs, a.rounds, out / "extra.jsonl", clock.cap(a.path_cap_s), "extra",
                                      out / "extra_plain.jsonl" if plain_path else None)
        extra["best"] = extra[best.key]
        if plain:
            plain_extra["best"] = plain_extra[best_of(plain).key]
    scores = {}
    budget_s = parse_duration(a.budget)
    for p, (d, ran) in decisions.items():
        s = score(p, d, ran, fed, lambda cfg: grid.key(cfg)[0], extra, (grid_wall, full_s), budget_s)
        if sc.known is not None:
            score_known(s, d, ran, sc.known, plain, plain_extra, lambda cfg: grid.key(cfg)[0], budget_s)
            log = out / f"{p}.log"
            printed = answer_contradictions(log.read_text(errors="replace")) if log.exists() else []
            s["printed_contradictions"] = printed
            s["goals"]["printed answer coherent"] = not printed
        s.update({k: v for k, v in summary["paths"].get(p, {}).items() if k not in s})
        scores[p] = s
    summary["paths"] = scores
    print_scores(scores, say)
    summary["table"] = cell_rows(sc.name, scores)
    print_table(summary["table"], say)
    save()
    return 0


def run_path(p: str, sc: Scenario, a: argparse.Namespace, out: Path, clock: Clock, say: Say,
             summary: dict[str, Any]) -> tuple[DecisionResult | None, Ran]:
    """Run one decision path; its decision record (or None) and how the command ran."""
    if clock.left() < MIN_PATH_S:
        say(f"{p}: skipped, {clock.left():.0f} s left of the --deadline-s")
        return None, Ran(None, 0.0, "", False, skipped=True)
    res = out / f"{p}.jsonl"
    res.unlink(missing_ok=True)
    info: dict[str, Any] = {}
    summary["paths"][p] = info
    if p != "watch":
        cmd = path_command(p, sc, a, res)
        info["command"] = shlex.join(["dataperf", *cmd])
        want = a.path_cap_s if p != "budget" else max(a.path_cap_s, parse_duration(a.budget) + 60)
        if sc.known is not None and p in KA_BOUND_S:
            want = min(want, KA_BOUND_S[p] + 30)  # 30 s past its bound the path has missed its goal: stop it
        cap = clock.cap(want)
        ran = run_cli(cmd, out / f"{p}.log", cap, say)
    else:
        script = out / f"train_{sc.name}.py"
        script.write_text(train_script(sc, a.script_steps), encoding="utf-8")
        w = out / "watch_job.jsonl"  # the watch record; the command it suggests writes watch.jsonl
        w.unlink(missing_ok=True)
        watched = run_cli(["watch", "--out", str(w), "--", sys.executable, str(script)], out / "watch_job.log",
                          clock.cap(a.path_cap_s), say)
        recs = [r for r in results.load(w) if r.kind == "watch"] if w.is_file() else []
        nxt, nxt_notes = (recs[0].next_step, list(getattr(recs[0], "next_notes", []))) if recs else ("", [])
        info.update(script=script.name, watch_exit=watched.rc, watch_wall_s=watched.wall_s, next_step=nxt,
                    next_notes=nxt_notes)
        argv, notes = parse_next_step(nxt, nxt_notes)
        if not argv:
            say(f"watch: no command to run in next_step {nxt!r} nor in its notes {nxt_notes}")
            return None, Ran(None, watched.wall_s, "", watched.timed_out)
        argv, changes = adapt_next_step(argv, notes, sc, res)
        info.update(changes=changes, command=shlex.join(["dataperf", *argv]))
        for c in changes:
            say(f"watch's next step: {c}")
        ran = run_cli(argv, out / "watch.log", clock.cap(a.path_cap_s), say)
    d = read_decision(res)
    say(f"{p}: " + (f"decision {d.outcome}, pick {LoaderConfig(**d.config).short() if d.config else 'none'}"
                    if d else "no decision record in its --out"))
    return d, ran


def print_plan(sc: Scenario, a: argparse.Namespace, say: Say, workers: list[int], n_configs: int) -> int:
    phases = estimate(sc, a, len(workers), n_configs)
    say(f"plan: {n_configs} configs (workers {workers}) x {a.rounds} rounds, window at most {a.run_s:g} s a run; "
        f"paths {', '.join(a.paths)}; a path killed at "
        + ("its bound + 30 s (the budget's at B + 60 s)" if sc.known is not None else f"{a.path_cap_s:.0f} s")
        + (f"; everything within {a.deadline_s:.0f} s" if a.deadline_s else ""))
    for name, s in phases:
        say(f"  {name:<50} ~{s / 60:5.1f} min")
    say(f"  {'total (estimate)':<50} ~{sum(s for _, s in phases) / 60:5.1f} min")
    return 0


def print_truth(fed: dict[str, Fed], best: Fed | None, sc: Scenario, grid: Grid, say: Say,
                summary: dict[str, Any]) -> None:
    """The measured grid, fastest first (the analytic answer beside it: paced and the known answers)."""
    paced = sc.name == "paced" or sc.known is not None
    say(f"truth ({len(fed)} configs), fed samples/s pooled over rounds:" + ("   analytic  measured/analytic"
                                                                           if paced else ""))
    rows = []
    for f in sorted(fed.values(), key=lambda f: -f.rate if f.wall_s else 0):
        line = (f"  {f.short:<50} {f.rate:8.1f} (rounds {', '.join(f'{x:.1f}' for x in f.rounds)}; spread "
                f"{f.spread_pct:4.1f}%) idle {f.idle:6.1%}")
        want = analytic_of(sc, f.key)
        if want:
            line += f"   {want:6.1f}   {f.rate / want:.3f}"
            rows.append({"key": f.key, "analytic": want, "measured": f.rate, "ratio": f.rate / want})
        say(line + (f" FAILED x{len(f.failed)}: {f.failed[0]}" if f.failed else ""))
    calm = least_idle(fed)
    if best and calm:
        say(f"best: {best.short} at {best.rate:,.1f} samples/s fed, idle {best.idle:.1%}; least idle: {calm.short} "
            f"at {calm.idle:.1%} -> truth: "
            + ("INPUT-BOUND" if calm.idle > INPUT_BOUND_IDLE else "the model can be fed"))
        summary["truth"]["least_idle"] = calm.row()
        summary["truth"]["input_bound"] = calm.idle > INPUT_BOUND_IDLE
    if sc.known is not None:
        k = sc.known
        say(f"analytic ({k.name}: {k.what}): best fed {k.best:.1f} samples/s, "
            f"{'INPUT-BOUND' if k.input_bound else 'feeds'}, binding {'/'.join(k.binding)}, cheapest "
            f"{', '.join(f'{a}={v}' for a, v in k.cheapest.items())}; {k.why}")
        summary["truth"]["analytic"] = rows
    elif paced:
        feed = math.ceil(PACED_MODEL_SPS * PACED_T - 1e-9)
        say(f"analytic: best fed {PACED_MODEL_SPS:.0f} samples/s; {feed} or more workers feed it "
            f"({math.ceil(HEADROOM * PACED_MODEL_SPS * PACED_T - 1e-9)} with the {HEADROOM}x headroom)")
        summary["truth"]["analytic"] = rows


def analytic_of(sc: Scenario, key: str) -> float | None:
    """A grid config's analytic fed rate (paced; a known answer's where its definition gives one)."""
    c = LoaderConfig(**json.loads(key))
    if sc.known is not None:
        return sc.known.analytic(c.num_workers, bool(c.persistent_workers))
    return analytic_paced(c) if sc.name == "paced" else None


def print_plain(plain: dict[str, PlainFed], fed: dict[str, Fed], sc: Scenario, say: Say,
                summary: dict[str, Any]) -> None:
    """The plain loop's grid, fastest first, with the fed loop's rate and the analytic one beside it; its
    verdict by the steady wait (mid-epoch) of its least waiting config, the epoch start apart."""
    say(f"plain truth ({len(plain)} configs, benchmarks/plain_loop.py, no dataperf), samples/s pooled over rounds; "
        "the fed loop's and the analytic rate beside:")
    for f in sorted(plain.values(), key=lambda f: -f.rate if f.wall_s else 0):
        fl = fed.get(f.key)
        want = analytic_of(sc, f.key)
        row = f.row()
        say(f"  {f.short:<50} {f.rate:8.1f} (spread {f.spread_pct:4.1f}%) waiting {f.idle:6.1%}, steady "
            f"{f.steady_wait:6.1%}, epoch start {row['epoch_start_s'] or float('nan'):.2f} s   fed loop "
            f"{fl.rate if fl else float('nan'):8.1f}   analytic {want or float('nan'):7.1f}"
            + (f" FAILED x{len(f.failed)}: {f.failed[0]}" if f.failed else ""))
    ok = [f for f in plain.values() if f.wall_s and not f.failed]
    if ok:
        calm = min(ok, key=lambda f: f.steady_wait)
        bound = calm.steady_wait > INPUT_BOUND_IDLE
        summary["truth"]["plain_input_bound"] = bound
        say(f"plain best: {best_of(plain).short} at {best_of(plain).rate:,.1f}; least steady wait {calm.short} at "
            f"{calm.steady_wait:.1%} -> {'INPUT-BOUND' if bound else 'the model can be fed'}"
            + (f" (the analytic answer says {'INPUT-BOUND' if sc.known.input_bound else 'feeds'}: CHECK the "
               "scenario or the machine)" if sc.known is not None and bound != sc.known.input_bound else ""))


def cell_rows(scenario: str, scores: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row a path for the summary table: the figures, met when every goal is, and the goals not met."""
    return [{"scenario": scenario, "path": p, "wall_s": s["wall_s"], "pick": s.get("pick"),
             "ratio_fed": s.get("ratio"), "ratio_plain": s.get("plain_ratio"),
             "said": {True: "INPUT-BOUND", False: "feeds", None: "none"}.get(s.get("input_bound_said"), "none"),
             "binding_said": s.get("binding_said"), "mape_fed": s.get("mape_pct"),
             "mape_plain": s.get("mape_plain_pct"), "met": bool(s["goals"]) and all(s["goals"].values()),
             "not_met": [g for g, ok in s["goals"].items() if not ok]} for p, s in scores.items()]


def print_table(rows: list[dict[str, Any]], say: Say) -> None:
    """The scenarios x paths table, met / NOT met a cell (every goal of the path met), the goals missed after."""
    def f(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    say(f"{'scenario':<9}{'path':<8}{'wall s':>7}  {'pick':<34}{'fed':>6}{'plain':>7}  {'said':<12}{'binding':<14}"
        f"{'MAPE fed':>9}{'plain':>7}  cell")
    for r in rows:
        say(f"{r['scenario']:<9}{r['path']:<8}{r['wall_s']:7.0f}  {str(r['pick'] or '-')[:33]:<34}"
            f"{f(r['ratio_fed'], '.3f'):>6}{f(r['ratio_plain'], '.3f'):>7}  {r['said']:<12}"
            f"{str(r['binding_said'] or '-'):<14}{f(r['mape_fed'], '.1f'):>9}{f(r['mape_plain'], '.1f'):>7}  "
            + ("met" if r["met"] else "NOT met: " + "; ".join(r["not_met"])))


def print_scores(scores: dict[str, dict[str, Any]], say: Say) -> None:
    say("scores (goals: ratio >= 0.95, verdict right, MAPE <= 10%, budget within B and >= 80% used, tune <= 30% "
        "of the full grid's time, default sweep <= 5 min):")
    for p, s in scores.items():
        ratio = f"{s['ratio']:.3f} ({s.get('ratio_basis')})" if "ratio" in s else "-"
        said = {True: "INPUT-BOUND", False: "feeds", None: "no verdict"}.get(s.get("input_bound_said"), "-")
        mape = f"{s['mape_pct']:.1f}%" if "mape_pct" in s else "-"
        say(f"  {p}: pick {s.get('pick', '-')}, fed {s.get('pick_fed', float('nan')):,.1f} vs best "
            f"{s.get('best_fed', float('nan')):,.1f}: ratio {ratio}; said {said}; wall {s['wall_s']:.0f} s; "
            f"MAPE {mape}" + (f"; {s['note']}" if s.get("note") else ""))
        for g, met in s["goals"].items():
            say(f"      {g}: {'met' if met else 'NOT met'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", choices=("paced", "imagenet", "wds-uneven", "tokens", "cold", *KA_NAMES, "ka"),
                    default="paced", help="S1a ... S6: issue 49's known answers (tests/ka_scenarios.py); ka: all "
                    "of them, each in OUT/NAME, one table over them in OUT/summary.json")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data", default=None, help="the folder the H200 scenarios' data is made in and read from "
                    "(made/, imagefolder/, wdsN/, tokens.bin) [/tmp/pick_quality]")
    ap.add_argument("--count", type=int, default=None, help="samples (paced: PACED_N 4000; images 16000; token "
                    "windows 16000)")
    ap.add_argument("--shards", type=int, default=37, help="wds-uneven: shards, not a multiple of the workers")
    ap.add_argument("--batch-size", type=int, default=None, help="[paced 8, images 256, tokens 16]")
    ap.add_argument("--amp", choices=("bf16", "none"), default="bf16", help="CUDA scenarios")
    ap.add_argument("--device", default=None, help="another device [paced: cpu; the rest: cuda] (a smoke test "
                    "of an H200 scenario's code on CPU)")
    ap.add_argument("--model", default=None, help="another model for the scenario [paced: paced:fixed_step_model; "
                    "images: torchvision.models:resnet50; tokens: gpt-medium]")
    ap.add_argument("--prefetch", type=lambda s: [int(x) for x in s.split(",")], default=None,
                    help="the truth grid's depths [2,4; known answers: 2]")
    ap.add_argument("--persistent", choices=list(PERSISTENT), default=None,
                    help="persistent workers in the truth grid [both; known answers: off, S6 both]; off halves a "
                         "short lease's grid (a pick with them is then fed in extra rounds beside the best)")
    ap.add_argument("--max-workers", type=int, default=None, help="the ladder's top [the cores; paced: 4x the "
                    "cores, preflight's limit, since paced samples sleep; known answers: 8]")
    ap.add_argument("--min-workers", type=int, default=0,
                    help="the grid's lowest worker count [0]; a short lease leaves out counts far from the best "
                         "(they only idle more, so the verdict rule, decided by the least idle, is unchanged; "
                         "a pick below it is fed in extra rounds beside the best)")
    ap.add_argument("--pin", choices=list(PINS), default="both",
                    help="pin_memory in the truth grid on CUDA [both]; on: pinned only (an unpinned pick is then "
                         "fed in extra rounds beside the best)")
    ap.add_argument("--rounds", type=int, default=None, help="[2; known answers 3]")
    ap.add_argument("--repeats", type=int, default=1, help="fed repeats in each round of a config")
    ap.add_argument("--run-s", type=float, default=None, help="a fed run's window cap [paced 6, known answers 3 "
                    "(S3 5), else 8]")
    ap.add_argument("--grid-cap-s", type=float, default=None, help="lower the window cap until the grid fits")
    ap.add_argument("--paths", type=lambda s: [p for p in s.split(",") if p], default=None,
                    help=f"a subset of {','.join(PATHS)} [all; known answers: {','.join(KA_PATHS)}]")
    ap.add_argument("--budget", default=None, help="the budgeted sweep's --budget [5m; known answers 2m]")
    ap.add_argument("--confirm", type=int, default=None, help="--confirm K for both sweeps [not given]")
    ap.add_argument("--path-cap-s", type=float, default=900.0, help="a path's command is killed past this")
    ap.add_argument("--make-cap-s", type=float, default=600.0)
    ap.add_argument("--deadline-s", type=float, default=None, help="the whole run: phases shrink to what is left")
    ap.add_argument("--script-steps", type=int, default=None, help="the watched script's steps [paced 60, else 80]")
    ap.add_argument("--truth-from", type=Path, default=None, help="reuse an earlier run's truth grid")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its time estimate")
    a = ap.parse_args()
    if a.scenario == "ka":
        return run_known(a, ap)
    defaults(a, ap)
    if a.dry_run:
        return bench(a, print)
    try:
        return run_logged(a.out, lambda say: bench(a, say))
    finally:
        tar = a.out.parent / f"{a.out.name}.tar.gz"
        with tarfile.open(tar, "w:gz") as t:
            t.add(a.out, arcname=a.out.name)
        print(f"archive: {tar}", flush=True)


def defaults(a: argparse.Namespace, ap: argparse.ArgumentParser) -> None:
    """Each flag left out, by scenario (a known answer: the small grid of issue 49, 3 rounds, its three paths)."""
    k = known_answers()[a.scenario] if a.scenario in KA_NAMES else None
    a.prefetch = sorted(set(a.prefetch or ([2] if k else FULL_PREFETCH)))
    a.persistent = a.persistent or (k.persistent if k else "both")
    a.rounds = a.rounds or (3 if k else 2)
    a.paths = a.paths or list(KA_PATHS if k else PATHS)
    a.budget = a.budget or ("2m" if k else "5m")
    a.max_workers = a.max_workers or (8 if k else 4 * cores() if a.scenario == "paced" else cores())
    a.run_s = a.run_s or (k.run_s if k else 6.0 if a.scenario == "paced" else 8.0)
    a.script_steps = a.script_steps or (60 if a.scenario == "paced" else 80)
    allowed = KA_PATHS if k else PATHS
    bad = [p for p in a.paths if p not in allowed]
    if bad or a.rounds < 2:
        ap.error(f"--paths takes {','.join(allowed)}; --rounds at least 2" + (f" (got {bad})" if bad else ""))


def run_known(a: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    """--scenario ka: every known answer in turn, each in OUT/NAME (--truth-from DIR: DIR/NAME), then one table
    of scenarios x paths, printed and in OUT/summary.json."""
    rows: list[dict[str, Any]] = []
    for name in KA_NAMES:
        b = argparse.Namespace(**{**vars(a), "scenario": name, "out": a.out / name,
                                  "truth_from": a.truth_from / name if a.truth_from else None})
        defaults(b, ap)
        if a.dry_run:
            bench(b, print)
            continue
        run_logged(b.out, lambda say, b=b: bench(b, say))
        done = b.out / "summary.json"
        table = json.loads(done.read_text()).get("table") if done.is_file() else None
        rows += table or [{"scenario": name, "path": p, "wall_s": 0.0, "pick": None, "ratio_fed": None,
                           "ratio_plain": None, "said": "none", "binding_said": None, "mape_fed": None,
                           "mape_plain": None, "met": False, "not_met": ["no score (see its log.txt)"]}
                          for p in b.paths]
    if not a.dry_run:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "summary.json").write_text(json.dumps({"scenarios": list(KA_NAMES), "table": rows}, indent=2,
                                                       default=str), encoding="utf-8")
        print_table(rows, print)
        print(f"cells met: {sum(r['met'] for r in rows)} of {len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
