"""Many trials: build the grid (options or a TOML/YAML file), run each, append its record at once, resume."""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dataperf import backends, verdict
from dataperf.data import Data, as_data
from dataperf.errors import UserError, describe_failure
from dataperf.measure.distributed import DistContext
from dataperf.measure.fed import shape_step
from dataperf.measure.limits import LimitsOptions, measure_limits
from dataperf.measure.step import StepOptions, measure_step
from dataperf.measure.trial import (
    STEADY_BATCHES,
    TrialOptions,
    next_rung,
    run_trial,
    worker_cap,
    worker_ladder,
)
from dataperf.results import (
    BUFFER_BACKENDS,
    DecisionResult,
    E2EResult,
    LimitsResult,
    LoaderConfig,
    LoaderResult,
    Record,
    StepResult,
    jsonl,
    own_knobs,
)
from dataperf.workflows import budget

# a progress bar: bar(label, total) is a context yielding advance(n) (report.progress_bar); None: no bar
Bar = Callable[[str, int | None], AbstractContextManager[Callable[[int], None]]]


@dataclass
class Grid:
    """The axes of a sweep. Prefetch applies only with workers; a backend with knobs of its own (DALI) sweeps
    those instead of the DataLoader's; backends may say auto
    (the DataLoader backend of the data's storage format) or all (every installed backend that reads it)."""

    backends: list[str] = field(default_factory=lambda: ["auto"])
    num_workers: list[int] = field(default_factory=worker_ladder)
    worker_types: list[str | None] = field(default_factory=lambda: [None])  # None = each backend's own kind
    prefetch_factor: list[int] = field(default_factory=lambda: [2, 4, 8])
    batch_size: list[int] = field(default_factory=lambda: [32])
    pin_memory: list[bool] = field(default_factory=lambda: [False])
    persistent_workers: list[bool] = field(default_factory=lambda: [False])
    decode: list[bool] = field(default_factory=lambda: [False])
    cache: list[str] = field(default_factory=lambda: ["warm"])
    image_size: int = 224
    cap_tokens: int | None = None
    transform: str | None = None
    seq_len: int | None = None
    # the axes of the backends' own knobs (results.config.own_knob) by field name; a knob left out sweeps the
    # values its declaration gives (DALI: threads 1,2,4, queue 2, decode cpu)
    own: dict[str, list] = field(default_factory=dict)
    on_corrupt: str | None = None
    shuffle: list[bool] = field(default_factory=lambda: [True])  # True: a seeded random order, as training reads
    shuffle_buffer: int | None = None  # a buffered shuffle's size (BUFFER_BACKENDS); None = DEFAULT_SHUFFLE_BUFFER

    def configs(self, data_format: str) -> Iterator[LoaderConfig]:
        """Every config per backend; a knob the backend cannot express keeps only its off value, a worker
        type it does not offer and worker counts below its minimum are left out (not run as duplicates)."""
        for name in backends.expand(self.backends, data_format):
            if name not in backends.REGISTRY:
                raise UserError(f"unknown backend {name!r} in the sweep; choose from auto, all, "
                                f"{', '.join(backends.REGISTRY)}")
            be = backends.REGISTRY[name]
            bad = [w for w in self.worker_types if w not in (None, "process", "thread")]
            if bad:
                raise UserError(f"unknown worker type {bad[0]!r}; choose process or thread")
            wts = [w for w in self.worker_types if w is None or w in be.worker_types]
            can = set(be.knobs)
            pins = self.pin_memory if "pin_memory" in can else [False]
            pfs = self.prefetch_factor if "prefetch_factor" in can else [None]
            perss = self.persistent_workers if "persistent_workers" in can else [False]
            shufs = self.shuffle if "shuffle" in can else [False]
            for bs, dec, cache, shuf in itertools.product(self.batch_size, self.decode, self.cache, shufs):
                buffer = self.shuffle_buffer if shuf and name in BUFFER_BACKENDS else None
                common = dict(backend=name, batch_size=bs, decode=dec, cache=cache, image_size=self.image_size,
                              cap_tokens=self.cap_tokens, on_corrupt=self.on_corrupt, transform=self.transform,
                              seq_len=self.seq_len, shuffle=shuf, shuffle_buffer=buffer)
                if be.own:
                    names = [k.name for k in be.own]
                    axes = [self.own.get(k.name) or list(k.metadata["axis"]) for k in be.own]
                    for values in itertools.product(*axes):
                        yield LoaderConfig(**common, **dict(zip(names, values, strict=True)))
                    continue
                for w, pin in itertools.product(self.num_workers, pins):
                    if w < be.min_workers:
                        continue
                    if w == 0:
                        yield LoaderConfig(**common, num_workers=0, pin_memory=pin)
                        continue
                    for wt, pf, pers in itertools.product(wts, pfs, perss):
                        yield LoaderConfig(**common, num_workers=w, prefetch_factor=pf, pin_memory=pin,
                                           persistent_workers=pers, worker_type=wt)


OWN_AXES = {f.name: f for f in own_knobs()}  # the backends' own knobs: a grid file names them as they are
AXES = {f.name for f in fields(Grid)} - {"own"} | set(OWN_AXES)


def load_grid_file(path: Path) -> tuple[Grid, dict[str, Any]]:
    """A TOML or YAML sweep file: grid axes as lists, plus optional trial options (repeats, max_batches,
    repeat_seconds, ...)."""
    if not path.is_file():
        raise UserError(f"sweep config not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".toml":
            import tomllib

            d = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            d = yaml.safe_load(text) or {}
        else:
            raise UserError(f"sweep config must be .toml, .yaml or .yml, got {path.name}")
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"cannot parse {path}: {e}") from None
    if not isinstance(d, dict):
        raise UserError(f"{path} must hold a table of sweep axes")
    # a file written before the backend had its own name says format/formats
    alias = {"backend": "backends", "format": "backends", "formats": "backends", "worker_type": "worker_types"}
    d = {alias.get(k, k): v for k, v in d.items()}
    trial_keys = {"repeats", "max_batches", "warmup_batches", "min_batches", "repeat_seconds"}
    unknown = set(d) - AXES - trial_keys
    if unknown:
        raise UserError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(AXES | trial_keys)}")
    grid_kw = {}
    for k, v in d.items():
        if k == "repeat_seconds":
            if not (_is(int, v) or _is(float, v)) or v < 0:
                raise UserError(f"{path}: repeat_seconds must be a number of seconds (0: whole epochs), got {v!r}")
            continue
        if k in trial_keys:
            if not _is(int, v):
                raise UserError(f"{path}: {k} must be an integer, got {v!r}")
            continue
        scalar = k in SCALAR_AXES
        if k == "on_corrupt":
            if v not in ("skip", "fail"):
                raise UserError(f"{path}: on_corrupt must be skip or fail, got {v!r}")
            grid_kw[k] = None if v == "fail" else v
            continue
        if k == "transform":
            if not (v is None or _is(str, v)):
                raise UserError(f"{path}: transform takes one preset name or MODULE:FACTORY (it is not a sweep "
                                f"axis), got {v!r}")
        elif scalar and not (_is(int, v) or (k in ("cap_tokens", "seq_len", "shuffle_buffer") and v is None)):
            raise UserError(f"{path}: {k} takes one integer (it is not a sweep axis), got {v!r}")
        grid_kw[k] = v if scalar or isinstance(v, list) else [v]
        want = str if k in OWN_AXES and OWN_AXES[k].metadata["choices"] else AXIS_TYPES.get(k, int)
        if not scalar:
            if not grid_kw[k]:
                raise UserError(f"{path}: {k} is an empty list; give at least one value")
            bad = [x for x in grid_kw[k] if not _is(want, x)]
            if bad:
                raise UserError(f"{path}: {k} must be a list of {want.__name__} values, got {bad[0]!r}")
    own = {k: grid_kw.pop(k) for k in list(grid_kw) if k in OWN_AXES}
    return Grid(**grid_kw, own=own), {k: d[k] for k in trial_keys if k in d}


SCALAR_AXES = ("image_size", "cap_tokens", "transform", "seq_len", "shuffle_buffer")
AXIS_TYPES: dict[str, type] = {"backends": str, "worker_types": str, "pin_memory": bool, "persistent_workers": bool,
                               "shuffle": bool, "decode": bool, "cache": str}  # the rest: int


def _is(t: type, v: Any) -> bool:
    """A TOML/YAML value of type t (a bool is not an int here, nor an int a bool)."""
    return isinstance(v, t) and (t is bool or not isinstance(v, bool))


def data_id(spec: str) -> str:
    """A URL as given; a local path made absolute, so a resumed sweep matches however the path was written."""
    return spec if "://" in spec or ":" in spec.split("/")[0] else str(Path(spec).resolve())


def trial_id(data: Data | Path, cfg: LoaderConfig) -> str:
    """A trial's identity, from its config as it will be recorded (LoaderConfig.explicit: the defaults a trial
    fills in, such as the shuffle buffer, written out), so a planned trial matches its record on --resume."""
    return f"{data_id(data.spec if isinstance(data, Data) else str(data))}|{cfg.explicit().key()}"


def finished_ids(out: Path) -> set[str]:
    """Trials already recorded as ok in a results file (failed ones are retried on resume)."""
    return ok_ids(jsonl.load(out)) if out.exists() else set()


def ok_ids(results: list[Record]) -> set[str]:
    """The trial ids (trial_id) of the loader results that finished ok."""
    return {f"{data_id(r.data)}|{r.config_key}" for r in results if isinstance(r, LoaderResult) and r.status == "ok"}


def unique_datasets(datas: tuple[str, ...] | list[str]) -> list[str]:
    """Each dataset once, however it was spelled (./x, x, a symlink to x): measuring it twice adds nothing.
    URLs and patterns are compared as given (data_id)."""
    seen: dict[str, str] = {}
    for d in datas:
        seen.setdefault(data_id(str(d)), str(d))
    return list(seen.values())


def check_ranks(datas: list[Data], nproc: int) -> None:
    """--nproc before torchrun starts: at least 1, and no more ranks than a webdataset has shards (shards are
    split between ranks, so a rank without one reads nothing)."""
    if nproc < 1:
        raise UserError(f"--nproc must be at least 1, got {nproc}")
    for d in map(as_data, datas):
        if d.format == "webdataset" and len(d.files) < nproc:
            raise UserError(f"{d.spec} has {len(d.files)} shard(s) for {nproc} ranks; ranks split the shards, so "
                            f"use --nproc {len(d.files)} or fewer, or re-shard it (shards make/convert "
                            "--shard-mb smaller)")


def plan(datas: list[Data | Path], grid: Grid, ladder: bool = False) -> list[tuple[Data, LoaderConfig]]:
    """Every config of the grid on every dataset. With `ladder` (the worker axis is the default ladder, not the
    user's list), no more workers than the data can give STEADY_BATCHES batches each (worker_cap): such a trial
    could only fail."""
    out = []
    for d in map(as_data, datas):
        out += [(d, c) for c in grid.configs(d.format)
                if not ladder or c.num_workers <= (worker_cap(d, c.batch_size) or c.num_workers)]
    if not out:
        raise UserError("the sweep grid is empty; give at least one value for every axis")
    return out


def prepare_out(out: Path, resume: bool, overwrite: bool) -> None:
    """Called with the results file's lock held, so --overwrite never deletes another run's file."""
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; give a file path such as {out / 'sweep.jsonl'}")
    if resume and overwrite:
        raise UserError("--resume keeps --out's results and --overwrite discards them; pass one of the two")
    if out.exists() and out.stat().st_size > 0 and not (resume or overwrite):
        raise UserError(f"{out} already holds results; pass --resume to skip finished trials, "
                        "--overwrite to start over, or choose another --out")
    if overwrite and out.exists():
        out.unlink()


def make_plan(trials: list[tuple[Data, LoaderConfig]], opts: TrialOptions, out: Path, resume: bool,
              budget_s: float | None, model: bool, fed_runs: int = 0) -> budget.Plan:
    """The plan of a sweep: its trials not yet in --out (with --resume), timed from the finished ones there,
    with the step, the limits and fed_runs of --confirm counted, fitted to budget_s (budget.make_plan)."""
    finished = [r for r in jsonl.load(out) if isinstance(r, LoaderResult)] if resume and out.exists() else []
    done = ok_ids(finished)
    pending = [t for t in trials if trial_id(*t) not in done]
    return budget.make_plan(pending, opts, budget_s, model=model, finished=finished, fed_runs=fed_runs)


@dataclass
class GridRun:
    """The grid's trials as run: their results, the planned trials the budget left no time for (`left`, in the
    order they would have run), and spare trials (cut from the plan to fit the budget) run because time was
    left."""

    results: list[LoaderResult]
    not_started: int = 0
    added: int = 0
    left: list[tuple[Data, LoaderConfig]] = field(default_factory=list)


def run_grid(
    trials: list[tuple[Data, LoaderConfig]],
    opts: TrialOptions,
    out: Path | None,
    skip: set[str] | None = None,
    on_result: Callable[[LoaderResult | None], None] | None = None,
    grid_s: float | None = None,
    spare: list[tuple[Data, LoaderConfig]] | None = None,
) -> GridRun:
    """Run every trial not in skip; each record is appended to out the moment it is finished. With grid_s
    (seconds), no trial starts that is expected to end past it (the first always runs), and the spare trials
    follow while time is left; what did not start is kept in `left`. Ranks agree on stopping: rank 0's clock
    decides."""
    run = GridRun([])
    t0 = time.monotonic()
    todo = [(t, False) for t in trials] + [(t, True) for t in spare or []]
    for i, ((data, cfg), extra) in enumerate(todo):
        if skip and trial_id(data, cfg) in skip:
            if on_result and not extra:
                on_result(None)
            continue
        if grid_s is not None and run.results:
            late = time.monotonic() - t0 + budget.trial_seconds(opts, run.results, cfg) > grid_s
            if (opts.gather(late)[0] if opts.gather else late):
                run.left = [t for t, _ in todo[i:] if not (skip and trial_id(*t) in skip)]
                run.not_started = sum(1 for t, x in todo[i:] if not x and not (skip and trial_id(*t) in skip))
                return run
        trial_opts = opts
        if grid_s is not None:  # --budget bounds a trial that hangs too, but cuts none before 3x its expected length
            end = opts.deadline if opts.deadline is not None else t0 + grid_s
            floor = time.monotonic() + 3 * budget.trial_seconds(opts, run.results, cfg)
            trial_opts = replace(opts, deadline=max(end, floor))
        r = run_trial(data, cfg, trial_opts)
        if out is not None and opts.rank == 0:
            jsonl.append(out, r)
        run.results.append(r)
        run.added += extra
        if on_result:
            on_result(r)
    return run


MIN_GAIN = 0.05  # a worker count past the top of the ladder is tried while the top beat the rung below by this


def edge_trial(recs: list[Record], trials: list[tuple[Data, LoaderConfig]], step: StepResult | None,
               headroom: float, best: LoaderResult | None = None) -> tuple[tuple[Data, LoaderConfig] | None, str]:
    """The next worker count to try when the best config is the largest count tried with its other settings and
    the answer is not settled there: it still beat the count below by MIN_GAIN (a plateau is settled: on the H200
    20 workers' training rate was 16's, 1,904 against 1,903, and 20 fed 9% less), and with a model it does not
    feed it. The next rung of the ladder, if the data can give it STEADY_BATCHES batches a worker and
    it is within the workers a command accepts, and the best's workers left cores idle (verdict.cores_full: more
    workers would only share the same cores). (None, why not) when there is nothing to try;
    (None, "") when it is settled. `best`: the config fed best, once the fed loop measured it (else the best
    predicted)."""
    from dataperf.measure import preflight

    ok = [r for r in verdict.judged(recs).trials if step is None or r.config.get("decode")]
    if not ok:
        return None, ""
    best = best or (verdict.by_prediction(recs, step)[0] if step is not None else ok[0])
    cfg = best.loader_config
    if cfg.backend in backends.ONE_STREAM:
        return None, ""
    same = [r for r in ok if replace(r.loader_config, num_workers=0, prefetch_factor=None,
                                      persistent_workers=False).key()
            == replace(cfg, num_workers=0, prefetch_factor=None, persistent_workers=False).key()]
    top = max(r.config["num_workers"] for r in same)
    if cfg.num_workers != top:
        return None, ""
    if step is not None and verdict.feeds(best, step, headroom):
        return None, ""
    below = [r for r in same if r.config["num_workers"] < top]
    if (step is None and not below) or \
            (below and verdict.rank_rate(best) < (1 + MIN_GAIN) * max(map(verdict.rank_rate, below))):
        return None, ""
    if verdict.cores_full(best) or verdict.cores_taken(best, verdict.latest_limits(recs, best)):
        return None, ""
    data = next((d for d, _ in trials if data_id(d.spec) == data_id(best.data)), None)
    if data is None:
        return None, ""
    nxt = next_rung(top)
    if step is not None and top > 0 and verdict.rank_rate(best) > 0:
        # workers scale the rate until something else binds: jump to the rung that would give the model's rate
        # with headroom at the top's rate a worker, but no further than 4x the top in one step
        need = math.ceil(headroom * step.samples_per_s * top / verdict.rank_rate(best))
        while nxt < min(need, 4 * top):
            nxt = next_rung(nxt)
    cap = worker_cap(data, cfg.batch_size)
    if cap is not None and top >= cap:
        return None, (f"{nxt} workers cannot each get {STEADY_BATCHES} batches of this data at batch "
                      f"{cfg.batch_size} (at most {cap})")
    if top >= preflight.max_workers():
        return None, f"{top} workers is the most dataperf runs on this machine"
    # no further than the data can run (the H200's 16,000 images at batch 256: 20, where the ladder said 24) nor
    # than a command accepts
    nxt = min(nxt, cap or nxt, preflight.max_workers())
    return (data, replace(cfg, num_workers=nxt, prefetch_factor=cfg.prefetch_factor or None)), ""


@dataclass
class SweepOutcome:
    """What a sweep did: its new trials, the model's step, and every current record of --out (reloaded from
    disk, so a resumed sweep reports old and new trials alike), with the verdict over them. Non-zero ranks get
    only their trials."""

    results: list[LoaderResult] = field(default_factory=list)
    step: StepResult | None = None
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False  # Ctrl-C: the finished trials stay in --out for --resume
    kept: int = 0  # finished trials in --out when interrupted
    confirmations: list[E2EResult] = field(default_factory=list)  # --confirm's fed runs, in the order run
    limits: LimitsResult | None = None  # the ceilings of the verdict's config (with a model)
    recommendation: verdict.Recommendation | None = None
    not_started: int = 0  # trials the --budget left no time for
    added: int = 0  # trials the --budget had cut, run because the grid finished early
    grid_s: float | None = None  # the seconds --budget left the grid, after the step and what follows the grid
    cuts: list[str] = field(default_factory=list)  # what the --budget cut while running (fed runs of --confirm)
    wall_s: float = 0.0  # the whole sweep, step to verdict
    extended: list[int] = field(default_factory=list)  # worker counts tried past the ladder (edge_trial)
    filled: int = 0  # trials the budget had left out, run with the time left after the verdict's work
    decision: DecisionResult | None = None

    @property
    def all_failed(self) -> bool:
        return bool(self.results) and all(r.status != "ok" for r in self.results)


@dataclass
class ConfirmOptions:
    """`sweep --confirm K`: feed the model from K configs, `rounds` interleaved fed runs of each (e2e's loop:
    `steps` timed steps x `repeats` after `warmup` steps)."""

    k: int
    rounds: int = 2
    steps: int = 20
    repeats: int = 3
    warmup: int = 3
    # each candidate fed once in its fullest variant (verdict.fullest), not beside each variant: tune, whose search
    # chose the loader's knobs (on the H200 the variants made its fed check 8 runs, 200 s of its 302)
    fullest_only: bool = False


def no_bar(label: str, total: int | None) -> AbstractContextManager[Callable[[int], None]]:
    """No progress bar: advance(n) does nothing."""
    return contextlib.nullcontext(lambda n=1: None)


def confirm(recs: list[Record], step: StepResult, sopts: StepOptions, headroom: float, copts: ConfirmOptions,
            datas: dict[str, Data], opts: TrialOptions, out: Path, bar: Bar | None = None,
            left_s: float | None = None) -> tuple[list[E2EResult], str | None]:
    """The fed loop (e2e) on the K configs verdict.confirm_candidates names and on the variants of the first
    (verdict.variants: pin_memory on CUDA, persistent workers where start-up is over 5% of an epoch): the
    first's fullest variant, each other candidate's fullest, then the first's other variants and own config, in
    interleaved rounds (A B, then B A, ...), each run recorded with its round and compared with its loader trial
    and the step alone at its batch size (e2e.compare: the prediction and the effects, a starved training process
    among them); run_e2e's warm-up covers the batches the workers queue ahead. The verdict then picks by the fed
    rate (verdict.recommend). With left_s (--budget), only the runs that fit it (budget.fit_confirm); the second
    value says what was cut."""
    from dataperf.workflows.e2e import compare, run_e2e

    cands = verdict.confirm_candidates(recs, step, headroom, copts.k)
    fed: list[tuple[LoaderResult, LoaderConfig]] = [(t, t.loader_config) for t in cands]
    if copts.fullest_only:
        fed = [(t, verdict.fullest(t, sopts.device)) for t in cands]
    elif cands:
        more = [(cands[0], v) for v in verdict.variants(cands[0], sopts.device)]
        # the fullest variant first: where the budget leaves one or two fed configs, feed what a GPU script runs,
        # pinned and persistent (the H200, ResNet-50: pinning gained 17-36% fed at 16 workers, persistent workers
        # 2-4% on top; a budget that fed the pinned one alone answered persistent_workers=False beside a note
        # saying "use --persistent-workers", at 0.945 of the best)
        kept = [x for x in more if x[1].persistent_workers and not cands[0].config.get("persistent_workers")]
        pinned = [x for x in more if x[1].pin_memory and not cands[0].config.get("pin_memory") and x not in kept]
        # then every other candidate, fullest too, before the leader's other variants: a cut budget compares
        # worker counts like with like, not one count's knobs (the H100, WebDataset, ResNet-50 bf16: a budget
        # that fed 16 workers pinned and pinned persistent answered 16, at 0.931 of the 12 it never fed)
        lead = (kept + pinned + fed)[:1]
        others = [(t, verdict.fullest(t, sopts.device)) for t in cands[1:]]
        by_key: dict[str, tuple[LoaderResult, LoaderConfig]] = {}
        for x in lead + others + kept + pinned + fed[:1] + more:
            by_key.setdefault(x[1].key(), x)  # each config once, where it first comes
        fed = list(by_key.values())
    rounds, cut = copts.rounds, None
    if left_s is not None and fed:
        once, seen = [], {step.batch_size}
        for _, cfg in fed:  # a step measured alone at each other batch size, once
            once.append(0.0 if cfg.batch_size in seen else budget.step_remeasure_s(cfg.batch_size, step, sopts))
            seen.add(cfg.batch_size)
        fit = budget.fit_confirm([budget.fed_run_s(cfg, step, copts.steps, copts.repeats, copts.warmup,
                                                   t.samples_per_s_median, t.startup_s_median, t.epoch_samples)
                                  for t, cfg in fed], copts.rounds, left_s, once)
        fed, rounds, cut = fed[:fit.k], fit.rounds, fit.cut
    alone = {step.batch_size: step}
    runs: list[E2EResult] = []
    if not fed:
        return runs, cut
    with (bar or no_bar)(f"confirm ({len(fed)} configs x {rounds} rounds, fed)", len(fed) * rounds) as advance:
        for rnd in range(1, rounds + 1):
            for t, cfg in fed if rnd % 2 else fed[::-1]:
                if cfg.batch_size not in alone:
                    alone[cfg.batch_size] = measure_step(replace(sopts, batch_size=cfg.batch_size))
                try:
                    r = run_e2e(datas.get(t.data) or as_data(t.data), cfg, sopts, copts.steps, copts.repeats,
                                copts.warmup, predict=False, topts=replace(opts, collect=False))
                    compare(r, t, alone[cfg.batch_size])
                except (KeyboardInterrupt, UserError):
                    raise
                except Exception as e:  # a worker crash mid-run: that config is not confirmed, the rest go on
                    r = E2EResult(data=t.data, config=asdict(cfg), config_key=cfg.key(), model=sopts.model,
                                  status="failed", error=describe_failure(e))
                r.confirm_round = rnd
                r.variant_of = t.config_key if cfg.key() != t.config_key else None
                jsonl.append(out, r)
                runs.append(r)
                advance(1)
    return runs, cut


def verdict_limits(recs: list[Record], step: StepResult | None, headroom: float, datas: dict[str, Data],
                   opts: TrialOptions, out: Path, lopts: LimitsOptions | None = None,
                   bar: Bar | None = None) -> LimitsResult | None:
    """The ceilings of the config the verdict judges (its pick, else its best), measured on that trial's data
    and config with the model's step, and appended to --out (the verdict reads them back: binding_limit)."""
    rec = verdict.recommend(recs, step, headroom)
    chosen = rec.pick or rec.best
    if chosen is None:
        return None
    with (bar or no_bar)(f"limits of {chosen.loader_config.short()}", 5) as advance:
        res = measure_limits(datas.get(chosen.data) or as_data(chosen.data), chosen.loader_config,
                             replace(opts, barrier=None, gather=None), step=step, best=chosen, lopts=lopts,
                             advance=advance)
    jsonl.append(out, res)
    return res


def after_grid(measured: StepResult | None, step: StepOptions | None, trials: list[tuple[Data, LoaderConfig]],
               conf: ConfirmOptions | None, deadline: float, k: int | None = None) -> float:
    """Seconds --budget keeps for what follows the grid: costed from the measured step (budget.after_grid_s),
    for k of --confirm's configs (default: all K); under torchrun, where the step is measured after the grid,
    the plan's share of what is left."""
    if step is None:
        return 0.0
    if measured is None:
        return budget.MODEL_SHARE * max(deadline - time.monotonic(), 0.0)
    if conf is None:
        return budget.LIMITS_GUESS_S
    return budget.after_grid_s(measured, trials, conf.k if k is None else k, conf.rounds, conf.steps, conf.repeats,
                               conf.warmup, step)


def run(trials: list[tuple[Data, LoaderConfig]], opts: TrialOptions, out: Path, ctx: DistContext | None = None,
        resume: bool = False, overwrite: bool = False, step: StepOptions | None = None,
        on_result: Callable[[LoaderResult | None], None] | None = None, headroom: float = 1.2,
        confirm_opts: ConfirmOptions | None = None, lopts: LimitsOptions | None = None,
        bar: Bar | None = None, deadline: float | None = None,
        spare: list[tuple[Data, LoaderConfig]] | None = None, extend: bool = False,
        budget_s: float | None = None) -> SweepOutcome:
    """The whole sweep on this rank: rank 0 holds --out's lock and clears or keeps it; a single process measures
    the model's step first (a model that cannot run fails before the grid, and its time is known before the
    grid's share is), under torchrun rank 0 measures it after the grid (the other ranks would load its cores
    and wait for it at a barrier); every rank skips the finished trials, rank 0 appends each record as it
    finishes. In one process, with `extend` (the worker axis is the default ladder), the next worker count is
    tried while the best is the largest tried and the answer is not settled there (edge_trial). Then rank 0
    confirms end to end (confirm_opts), measures the limits of the verdict's config, and appends the decision
    record; the verdict is over every current record. With a deadline (time.monotonic() by which the verdict is
    due: --budget), every trial is bounded by it, the grid gets what is left after the step and after_grid,
    spare trials fill what it leaves (run_grid), --confirm runs what still fits, and trials left out run with
    whatever time is left at the end (a budget is spent, not returned). Ctrl-C is answered with an outcome saying
    how many finished trials are kept, not an exception."""
    t0 = time.monotonic()
    ctx = ctx or DistContext()
    with jsonl.exclusive(out) if ctx.rank == 0 else contextlib.nullcontext():
        if ctx.rank == 0:
            prepare_out(out, resume, overwrite)
        if ctx.barrier:
            ctx.barrier()  # no rank reads --out before rank 0 has cleared it
        skip = finished_ids(out) if resume else set()
        opts = replace(opts, rank=ctx.rank, world_size=ctx.world_size, barrier=ctx.barrier, gather=ctx.gather,
                       deadline=deadline)
        outcome = SweepOutcome()
        conf = confirm_opts if confirm_opts is not None and confirm_opts.k > 0 else None
        try:
            step = shape_step(step, trials) if step is not None else None  # a Ctrl-C here keeps the outcome path
            if step is not None and ctx.world_size == 1:
                outcome.step = measure_step(step)
                jsonl.append(out, outcome.step)
            grid_s = None
            if deadline is not None:  # every rank has one (run_grid gathers the stop); rank 0's decides
                grid_s = outcome.grid_s = deadline - time.monotonic() - after_grid(outcome.step, step, trials, conf,
                                                                                    deadline)
            alone = ctx.world_size == 1
            # in one process the worker counts past the ladder come before the spare trials the budget cut
            grid = run_grid(trials, opts, out, skip, on_result, grid_s, None if alone and extend else spare)
            outcome.results, outcome.not_started, outcome.added = grid.results, grid.not_started, grid.added
            ctx.close()
            if ctx.rank != 0:
                return outcome
            if step is not None and outcome.step is None:  # torchrun: measured now that the other ranks are done
                outcome.step = measure_step(step)
                jsonl.append(out, outcome.step)
            reserve = after_grid(outcome.step, step, trials, conf, deadline) if deadline is not None else 0.0
            if extend and alone:  # worker counts before fed runs: a fed run confirms only what was measured
                least = after_grid(outcome.step, step, trials, conf, deadline, k=1) if deadline is not None else 0.0
                _extend(outcome, trials, opts, out, headroom, on_result, deadline, least)
                if grid.left:
                    grid.left += spare or []
                elif spare:
                    left_s = None if deadline is None else deadline - time.monotonic() - reserve
                    more = run_grid(spare, opts, out, skip, None, left_s, None)
                    outcome.results += more.results
                    outcome.added += len(more.results)
                    grid.left = more.left
            datas = {d.spec: d for d, _ in trials}
            if outcome.step is not None:
                if conf is not None:
                    left = None if deadline is None else deadline - time.monotonic() - budget.LIMITS_GUESS_S
                    outcome.confirmations, cut = confirm(jsonl.current(jsonl.load(out)), outcome.step, step,
                                                         headroom, conf, datas, opts, out, bar, left)
                    outcome.cuts += [cut] if cut else []
                if deadline is None or deadline - time.monotonic() > budget.LIMITS_GUESS_S / 2:
                    outcome.limits = verdict_limits(jsonl.current(jsonl.load(out)), outcome.step, headroom,
                                                    datas, opts, out, lopts, bar)
                else:
                    outcome.cuts.append("limits: not measured, no time left in the budget")
            if deadline is not None and alone:
                if extend:
                    _extend(outcome, trials, opts, out, headroom, on_result, deadline, 0.0)
                _fill(outcome, grid.left, opts, out, on_result, deadline)
                if outcome.step is not None and conf is not None:  # a trial run since may beat what was fed
                    recs = jsonl.current(jsonl.load(out))
                    rec = verdict.recommend(recs, outcome.step, headroom)
                    ranked = verdict.by_prediction(recs, outcome.step)
                    if rec.fed and verdict.outshone(rec.fed, ranked, outcome.step):
                        more, cut = confirm(recs, outcome.step, step, headroom, conf, datas, opts, out, bar,
                                            deadline - time.monotonic())
                        outcome.confirmations += more
                        outcome.cuts += [cut] if cut else []
        except KeyboardInterrupt:
            outcome.interrupted = True
            outcome.kept = len(finished_ids(out)) if ctx.rank == 0 else 0
            return outcome
        outcome.records = jsonl.current(jsonl.load(out))
        outcome.recommendation = rec = verdict.recommend(outcome.records, outcome.step or verdict.latest_step(
            outcome.records), headroom)
        if rec.outcome in ("input_bound", "best_without_model") and ctx.world_size == 1:
            step_of = outcome.step if rec.step_samples_per_s is not None else None
            why = lower_bound(outcome.records, trials, step_of, headroom, extend, rec)
            rec.lower_bound, rec.lower_bound_why = bool(why), why
        outcome.wall_s = time.monotonic() - t0
        outcome.decision = decision_record("sweep", rec, outcome.records, outcome.wall_s, budget_s)
        outcome.decision.trials_not_run = outcome.not_started
        jsonl.append(out, outcome.decision)
    return outcome


def _extend(outcome: SweepOutcome, trials: list[tuple[Data, LoaderConfig]], opts: TrialOptions, out: Path,
            headroom: float, on_result: Callable[[LoaderResult | None], None] | None, deadline: float | None,
            reserve_s: float) -> None:
    """Run edge_trial's next worker count while there is one (and, under a budget, time for it beside what
    follows the grid)."""
    while True:
        recs = jsonl.current(jsonl.load(out))
        nxt, _ = edge_trial(recs, trials, outcome.step, headroom)
        if nxt is None:
            return
        if deadline is not None and not _time_for_a_trial(opts, recs, deadline, reserve_s, nxt[1]):
            return
        r = run_trial(*nxt, opts)
        jsonl.append(out, r)
        outcome.results.append(r)
        outcome.extended.append(nxt[1].num_workers)
        if on_result:
            on_result(r)
        if r.status != "ok":
            return


def lower_bound(recs: list[Record], trials: list[tuple[Data, LoaderConfig]], step: StepResult | None,
                headroom: float, extend: bool, rec: verdict.Recommendation) -> str:
    """Why the answer is a lower bound ("" when it is settled): the best config (fed, where the fed loop measured
    it) is the largest worker count tried, it does not feed the model (without one: it still gained on the count
    below), and the next count was not tried: the budget ended first, the worker counts were the user's, or the
    data or the machine cannot run it. A fed best below the largest count tried is settled: more workers fed
    less (CI's 2 cores: 0 workers fed 517 samples/s, 1 fed 231)."""
    nxt, why = edge_trial(recs, trials, step, headroom, verdict.fastest(rec.fed).trial if rec.confirmed else None)
    if nxt is not None:
        n = nxt[1].num_workers
        return (f"{n} workers were not tried (the budget ended first)" if extend else
                f"the best is the largest of the --num-workers given; try {n} and more")
    return why


FILL_MARGIN = 1.5  # a trial run with the budget's leftover time must fit this multiple of its expected length


def _time_for_a_trial(opts: TrialOptions, recs: list[Record], deadline: float, reserve_s: float = 0.0,
                      cfg: LoaderConfig | None = None) -> bool:
    """Whether FILL_MARGIN x cfg's expected length (from the finished trials) still fits before the deadline,
    reserve_s kept: a trial the deadline cuts is a failed record (seen on the H200), not a figure."""
    need = budget.trial_seconds(opts, [r for r in recs if isinstance(r, LoaderResult)], cfg)
    return time.monotonic() + FILL_MARGIN * need + reserve_s <= deadline


def _fill(outcome: SweepOutcome, left: list[tuple[Data, LoaderConfig]], opts: TrialOptions, out: Path,
          on_result: Callable[[LoaderResult | None], None] | None, deadline: float) -> None:
    """Trials the budget left out, run with the time left once the verdict's work is done: those nearest the
    verdict's config in workers first (a prefetch or pin variant of the pick tells more than one of a config far
    from it), in plan order among equals."""
    rec = verdict.recommend(jsonl.current(jsonl.load(out)), outcome.step)
    near = (rec.pick or rec.best).config.get("num_workers", 0) if (rec.pick or rec.best) else 0
    for data, cfg in sorted(left, key=lambda t: abs(t[1].num_workers - near)):
        if not _time_for_a_trial(opts, jsonl.load(out), deadline, cfg=cfg):
            return
        r = run_trial(data, cfg, opts)
        jsonl.append(out, r)
        outcome.results.append(r)
        outcome.filled += 1
        outcome.not_started = max(0, outcome.not_started - 1)
        if on_result:
            on_result(r)


def decision_record(command: str, rec: verdict.Recommendation, recs: list[Record], wall_s: float,
                    budget_s: float | None) -> DecisionResult:
    """The recommendation as a record (DecisionResult): the pick, the verdict, the rates it expects, and each
    fed config's predicted rate beside its measured one."""
    pick, cfg = rec.pick, rec.pick_config
    step = verdict.latest_step(recs)
    d = DecisionResult(command=command, data=pick.data if pick else "", config=asdict(cfg) if cfg else {},
                       config_key=cfg.key() if cfg else "", outcome=rec.outcome, input_bound=rec.input_bound,
                       binding_limit=rec.binding_limit or "", model=step.model if step else "",
                       device=step.device if step else "", confirmed=rec.confirmed,
                       lower_bound=rec.lower_bound, lower_bound_why=rec.lower_bound_why,
                       trials=len(verdict.ok_loaders(recs)), wall_s=wall_s, budget_s=budget_s,
                       answer="\n".join(verdict.answer(rec)))
    if step is not None:
        d.step_samples_per_s = step.samples_per_s
    if rec.predicted_samples_per_s is not None:
        d.predicted_samples_per_s = rec.predicted_samples_per_s
        d.predicted_stall_fraction = rec.predicted_stall_fraction
    win = next((f for f in rec.fed if f.trial is pick and cfg is not None and f.config.key() == cfg.key()), None)
    if win is not None:
        d.fed_samples_per_s, d.fed_stall_fraction = win.samples_per_s, win.stall_fraction
        d.fed_samples_per_s_rounds = win.rounds_samples_per_s
    if rec.outcome == "no_trials":
        d.status, d.error = "failed", "no trial succeeded: nothing to decide on"
    if rec.lower_bound and rec.input_bound:
        d.input_bound = None  # not settled: the configs that could feed the model were not all measured
    if step is not None:
        d.predictions = [{"config": f.config.key(), "predicted": verdict.predicted_fed(f.trial, step, f.config),
                          "measured": f.samples_per_s, "kind": "fed"} for f in rec.fed]
    return d
