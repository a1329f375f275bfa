"""The limits table as a limits record holds it: each ceiling (samples/s, how measured), which one binds, and,
given the trial the limits are of, the stages that spend each ceiling's resource and the share of it the trial's
rate uses. Reads a LimitsResult (one read back from a results file too); measures nothing
(dataperf.measure.limits measures and names the binding limit)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dataperf.results import LimitsResult, LoaderResult
from dataperf.verdict.attack import STAGE_LIMITS

# the six ceilings a limits record holds ({limit}_samples_per_s, {limit}_how), in the order they are shown and
# measured (dataperf.measure.limits reads this tuple)
LIMITS = ("storage", "decode", "main_process", "workers", "h2d", "model")


@dataclass
class LimitRow:
    """One row of the limits table: the ceiling (NaN: not measured), how it was measured (or why not), whether
    it binds; with the trial the limits are of, the stages spending its resource (ms a sample, pipeline order as
    the trial holds them) and the share of the ceiling the trial's rate uses (NaN: no ceiling)."""

    limit: str
    samples_per_s: float
    how: str
    binding: bool
    stages_ms: dict[str, float] = field(default_factory=dict)
    used_fraction: float = float("nan")


def limit_rows(res: LimitsResult, trial: LoaderResult | None = None, binding: str | None = None) -> list[LimitRow]:
    """The limits table of a record, in LIMITS order; given its trial, each row's stages and share used. The row
    marked binding is `binding` (the verdict's, verdict.binding) where given, else the record's lowest ceiling."""
    rows = []
    bound = res.binding_limit if binding is None else binding
    for k in LIMITS:
        row = LimitRow(k, getattr(res, f"{k}_samples_per_s"), getattr(res, f"{k}_how"), k == bound)
        if trial is not None and trial.stage_ms_per_sample:
            row.stages_ms = {s: v for s, v in trial.stage_ms_per_sample.items() if STAGE_LIMITS.get(s) == k}
            if row.samples_per_s > 0:
                row.used_fraction = trial.samples_per_s_median / row.samples_per_s
        rows.append(row)
    return rows
