"""A sweep before it runs: what the user asked (SweepRequest, built by the command from its options), checked
against the data and the clock and turned into a SweepPlan (the trials, what --budget cut, the deadline, the
results --resume keeps), which `run` carries out. --out is read here, once, and only for --resume."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from dataperf.data import Data, as_data
from dataperf.errors import UserError
from dataperf.measure import preflight
from dataperf.measure.limits import LimitsOptions
from dataperf.measure.step import StepOptions
from dataperf.measure.trial import TrialOptions, worker_cap
from dataperf.results import LoaderConfig, LoaderResult, Record, jsonl
from dataperf.workflows import budget
from dataperf.workflows.sweep.grid import Grid

Trial = tuple[Data, LoaderConfig]


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


@dataclass
class SweepRequest:
    """What the user asked of a sweep, parsed: the data (resolved), the grid, how a trial measures, the model's
    step (None: no model), where the records go and how long it may take. Nothing here has looked at --out."""

    datas: list[Data]
    grid: Grid
    opts: TrialOptions
    out: Path
    step: StepOptions | None = None
    ladder: bool = False  # the worker axis is the default ladder: sized by the data, extended past its top
    resume: bool = False
    overwrite: bool = False
    headroom: float = 1.2
    confirm: ConfirmOptions | None = None
    budget_s: float | None = None
    started: float | None = None  # when the budget's clock started (workflows.clock.started); None: at plan()
    epoch_samples: int | None = None  # the user's epoch (--epoch-samples), which the epoch start's share is of


@dataclass
class SweepPlan:
    """A sweep ready to run: its trials (those --resume has not finished), the spare trials --budget cut (run if
    time is left), the trial options the budget fitted, the deadline, and the results file's records when
    resuming (None: not read yet; run() reads them once)."""

    trials: list[Trial]
    opts: TrialOptions
    out: Path
    step: StepOptions | None = None
    confirm: ConfirmOptions | None = None
    lopts: LimitsOptions | None = None
    headroom: float = 1.2
    resume: bool = False
    overwrite: bool = False
    extend: bool = False  # try worker counts past the ladder while the best is its top and is not settled
    deadline: float | None = None  # time.monotonic() by which the verdict is due (--budget)
    budget_s: float | None = None
    spare: list[Trial] = field(default_factory=list)
    finished: list[Record] | None = None
    epoch_samples: int | None = None
    estimate: budget.Plan | None = None  # what the plan expects and what the budget cut, for the command to print


def plan(request: SweepRequest) -> SweepPlan:
    """The request checked and planned: every config of the grid on every dataset (each checked before any trial
    runs), the model checked, and the trials --resume has not finished fitted to the budget."""
    r = request
    trials = grid_trials(r.datas, r.grid, ladder=r.ladder)
    for d, cfg in trials:
        preflight.check_loader(d, cfg)
    if r.step is not None:
        kinds = {d.kind for d in r.datas}
        one = next(iter(kinds)) if len(kinds) == 1 else None
        # the sequence length is checked against the model here only for a mix of kinds (as the command did)
        preflight.check_model(r.step.model, one, r.step.input,
                              seq_len=r.step.seq_len if one is None and "tokens" in kinds else None)
    resume = r.resume and not r.overwrite
    finished = jsonl.load(r.out) if resume and r.out.exists() else []
    done = ok_ids(finished)
    pending = [t for t in trials if trial_id(*t) not in done]
    fed_runs = r.confirm.k * r.confirm.rounds if r.confirm else 0
    est = budget.make_plan(pending, r.opts, r.budget_s, model=r.step is not None,
                           finished=[x for x in finished if isinstance(x, LoaderResult)], fed_runs=fed_runs)
    started = time.monotonic() if r.started is None else r.started
    return SweepPlan(est.trials, est.opts, r.out, r.step, r.confirm, headroom=r.headroom, resume=r.resume,
                     overwrite=r.overwrite, extend=r.ladder, budget_s=r.budget_s, spare=est.spare,
                     deadline=None if r.budget_s is None else started + r.budget_s,
                     finished=finished if r.resume else [], estimate=est, epoch_samples=r.epoch_samples)


def data_id(spec: str) -> str:
    """A URL as given; a local path made absolute, so a resumed sweep matches however the path was written (a
    path whose links cannot be followed, a symlink loop, as written: resolving DATA names its trouble)."""
    if "://" in spec or ":" in spec.split("/")[0]:
        return spec
    try:
        return str(Path(spec).resolve())
    except (RuntimeError, OSError):  # RuntimeError: a symlink loop (Python 3.11)
        return str(Path(spec).absolute())


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
        if d.sharded and d.shards < nproc:
            raise UserError(f"{d.spec} has {d.shards} shard(s) for {nproc} ranks; ranks split the shards, so "
                            f"use --nproc {d.shards} or fewer, or re-shard it (shards make/convert "
                            "--shard-mb smaller)")


def grid_trials(datas: list[Data | Path], grid: Grid, ladder: bool = False) -> list[Trial]:
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
