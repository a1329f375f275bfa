"""Each loader trial against the model, as a row of the loader table says it: the fed rate predicted for the
config mid-epoch, the share of the time it leaves the model idle there, and whether it feeds the model. The
figures are the verdict's own (predicted_steady, model_rate, feeds, FED_STALL), computed once here so that a
renderer only formats them (`sweep` and `report` print the same table from the same Recommendation)."""

from __future__ import annotations

from dataclasses import dataclass

from dataperf.results import LoaderResult, Record, StepResult
from dataperf.verdict.rates import FED_STALL, feeds, model_rate, ok_loaders, predicted_steady


@dataclass(frozen=True)
class TrialFit:
    """One decoded trial against the model's step: the fed rate predicted mid-epoch (predicted_steady; NaN: none
    can be, the cell says "-"), the model's idle share fed at that rate (against the model's rate fed this
    config's batches), whether the config feeds the model (verdict.feeds: idle at most FED_STALL and, with
    workers, `headroom` x its rate), and whether it leaves the model idle over FED_STALL (input-bound by this
    config, where it does not feed). The epoch start is not in these: the answer states it apart."""

    trial: LoaderResult
    fed_samples_per_s: float
    idle_fraction: float
    feeds: bool
    stalls: bool
    headroom: float

    @property
    def predicted(self) -> bool:
        return self.fed_samples_per_s == self.fed_samples_per_s


def trial_fit(trial: LoaderResult, step: StepResult, headroom: float) -> TrialFit:
    """The row's figures of one trial (the loader table's "vs model" cell)."""
    fed = predicted_steady(trial, step)
    if fed != fed:
        nan = float("nan")
        return TrialFit(trial, nan, nan, False, False, headroom)
    idle = max(0.0, 1 - fed / model_rate(step, trial.config, trial.input_mib_per_sample))
    return TrialFit(trial, fed, idle, feeds(trial, step, headroom), idle > FED_STALL, headroom)


def trial_fits(results: list[Record], step: StepResult | None, headroom: float) -> list[TrialFit]:
    """Every successful decoded trial against the model (none without a step: the table then has no model
    column; undecoded trials get no verdict, a model eats decoded samples), in the records' order."""
    if step is None:
        return []
    return [trial_fit(r, step, headroom) for r in ok_loaders(results) if r.loader_config.decode]
