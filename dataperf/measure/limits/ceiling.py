"""What every probe shares: the limits' names, a Ceiling (one limit's samples/s and how it was measured), and
LimitsOptions (how much the probes read and for how long)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dataperf.verdict.limits import LIMITS  # the six ceilings' names, as a limits record holds them

__all__ = ["LIMITS", "NAN", "MIB", "Ceiling", "LimitsOptions"]
MIB = 1024 * 1024
NAN = float("nan")


@dataclass
class LimitsOptions:
    """How much the probes read and for how long (not what they measure: that is the data and the config)."""

    storage_budget_mib: float = 256.0  # raw read: whole files spread over the dataset, up to this many MiB
    probe_batches: int = 8  # decode probe: measured batches after one warm-up batch
    # ... and at least this many samples: on the H200 (2026-12-03) 8 batches of 32 read 1.50 ms CPU a sample
    # where 8 of 128 read 1.01 and the grid's 32 workers decoded at 0.97 (cause not isolated)
    probe_samples: int = 1024
    probe_s: float = 5.0  # ... or fewer, once this long has passed (at least 2 measured batches)
    main_probe_s: float = 2.0  # main-process probe: how long the replay workers feed the main process
    main_probe_inflight_mib: float = 1024.0  # replay batches in flight at most (shared memory they hold)
    device: str | None = None  # where the model trains (h2d on cuda); None: the step's device, else cuda if present


@dataclass
class Ceiling:
    """One limit: what it allows in samples/s (NaN: not measured) and how it was measured, or why not."""

    limit: str
    samples_per_s: float = NAN
    how: str = ""

    @property
    def measured(self) -> bool:
        return math.isfinite(self.samples_per_s) and self.samples_per_s > 0
