"""dataperf: measurement-first tuning of training input pipelines.

The public API is `__all__`: each name is loaded on first use (`import dataperf` stays light: no torch), so a
script can `from dataperf import LoaderConfig, run_trial` without reaching into the layers below. The version is
written here once; pyproject.toml reads it."""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# name -> the module that defines it (the name there, when it differs)
_PUBLIC: dict[str, tuple[str, str]] = {
    "DecisionResult": ("dataperf.results", "DecisionResult"),
    "Grid": ("dataperf.workflows.sweep", "Grid"),
    "LoaderConfig": ("dataperf.results", "LoaderConfig"),
    "LoaderResult": ("dataperf.results", "LoaderResult"),
    "NanGuard": ("dataperf.measure.guards", "NanGuard"),
    "Recommendation": ("dataperf.verdict", "Recommendation"),
    "StepOptions": ("dataperf.measure.step", "StepOptions"),
    "StepResult": ("dataperf.results", "StepResult"),
    "SweepPlan": ("dataperf.workflows.sweep", "SweepPlan"),
    "SweepRequest": ("dataperf.workflows.sweep", "SweepRequest"),
    "TrialOptions": ("dataperf.measure.trial", "TrialOptions"),
    "UserError": ("dataperf.errors", "UserError"),
    "load_results": ("dataperf.results.jsonl", "load"),
    "measure_step": ("dataperf.measure.step", "measure_step"),
    "plan_sweep": ("dataperf.workflows.sweep", "plan"),
    "recommend": ("dataperf.verdict", "recommend"),
    "resolve_data": ("dataperf.data", "resolve"),
    "run_sweep": ("dataperf.workflows.sweep", "run"),
    "run_trial": ("dataperf.measure.trial", "run_trial"),
    "user_dataset": ("dataperf.data", "user_dataset"),
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'dataperf' has no attribute {name!r}")
    module, attr = _PUBLIC[name]
    value = getattr(import_module(module), attr)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
