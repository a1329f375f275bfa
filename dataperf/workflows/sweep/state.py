"""What a running sweep knows, in memory: its records as --out holds them (each appended to --out the moment it
is made, never read back), the model's step, the clock, and the verdict over the records, computed once per
change. The stages read and extend this state; none of them reads --out."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dataperf import verdict
from dataperf.data import Data
from dataperf.measure.limits import LimitsOptions
from dataperf.measure.step import StepOptions
from dataperf.measure.trial import TrialOptions
from dataperf.results import DecisionResult, E2EResult, LimitsResult, LoaderResult, Record, StepResult, jsonl
from dataperf.workflows.progress import Bar, no_bar
from dataperf.workflows.sweep.plan import ConfirmOptions

OnResult = Callable[[LoaderResult | None], None]


@dataclass
class SweepOutcome:
    """What a sweep did: its new trials, the model's step, and every current record of --out (a resumed sweep
    reports old and new trials alike), with the verdict over them. Non-zero ranks get only their trials."""

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
        """This run's trials all failed and --out holds no ok trial either: a --resume that only retried failed
        trials still answers from the ok ones it kept."""
        kept = [r for r in self.records if isinstance(r, LoaderResult)]
        return bool(self.results) and all(r.status != "ok" for r in self.results + kept)


@dataclass
class SweepState:
    """A sweep's working memory. `written` holds every record of --out in file order, each as the file holds it
    (a record is read back through the file's own JSON: a NaN becomes None, as `report` will see it), so a
    judgement made here is the one `report` makes from the file. Rank 0 alone writes --out."""

    out: Path | None
    opts: TrialOptions
    datas: dict[str, Data] = field(default_factory=dict)  # the sweep's data by spec, resolved once
    step_opts: StepOptions | None = None
    confirm: ConfirmOptions | None = None
    headroom: float = 1.2
    lopts: LimitsOptions | None = None
    written: list[Record] = field(default_factory=list)
    skip: set[str] = field(default_factory=set)  # trial ids --resume finds finished (plan.trial_id)
    step: StepResult | None = None
    rank: int = 0
    on_result: OnResult | None = None
    bar: Bar = no_bar
    outcome: SweepOutcome = field(default_factory=SweepOutcome)
    epoch_samples: int | None = None  # the user's epoch (--epoch-samples; None: the data's)
    _version: int = field(default=0, init=False, repr=False)
    _current: tuple[int, list[Record]] | None = field(default=None, init=False, repr=False)
    _verdicts: dict[tuple[int, int, float], verdict.Recommendation] = field(default_factory=dict, init=False,
                                                                           repr=False)

    def add(self, rec: Record) -> None:
        """Append a record to --out (rank 0) and keep it as the file holds it."""
        if self.rank != 0:
            return
        if self.out is not None:
            jsonl.append(self.out, rec)
        self.written.append(jsonl.from_dict(json.loads(jsonl.to_json(rec))))
        self._version += 1

    def keep(self, r: LoaderResult | None) -> None:
        """run_grid's callback where no progress is shown: keep a finished trial."""
        if r is not None:
            self.add(r)

    def trial_done(self, r: LoaderResult | None) -> None:
        """run_grid's callback: keep a finished trial (None: skipped as finished), then tell the caller."""
        self.keep(r)
        if self.on_result:
            self.on_result(r)

    @property
    def records(self) -> list[Record]:
        """The current records (jsonl.current: the latest of each trial), as `report` reads them from --out."""
        if self._current is None or self._current[0] != self._version:
            self._current = (self._version, jsonl.current(self.written))
        return self._current[1]

    def recommendation(self, step: StepResult | None = None) -> verdict.Recommendation:
        """The verdict over the current records with `step` (default: the measured step), computed once per change
        of the records. Treat it as read-only: it is shared."""
        step = self.step if step is None else step
        key = (self._version, id(step), self.headroom)
        if key not in self._verdicts:
            self._verdicts = {key: verdict.recommend(self.records, step, self.headroom, self.epoch_samples)}
        return self._verdicts[key]

    def left_s(self, reserve_s: float = 0.0) -> float | None:
        """Seconds to the deadline (the trial options': --budget's) less reserve_s (None: no budget)."""
        deadline = self.opts.deadline
        return None if deadline is None else deadline - time.monotonic() - reserve_s
