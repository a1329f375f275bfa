"""How a trial measures: TrialOptions, and the repeat budget it defaults to (not what it measures: that is the
LoaderConfig)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataperf import watchdog

# A repeat's time budget. Training reads an epoch (minutes to hours); a repeat only needs a steady window long
# enough that each worker's own window spans several of its batches: 5 s holds >= 10 batches per worker
# while a worker makes a batch in under half a second, and keeps a 3-repeat trial near 20 s. Measured on the
# H200 host (benchmarks/results/2026-12-03-h200-repeat_budget*.log: 40k ImageNet-sized JPEGs, 16 workers):
# with shuffled reads, 5 s trials within 2% of whole-epoch trials on average, trial to trial about 5% apart
# (whole epochs: 2%). That holds for shuffled reads only: sequential 2, 5 and 10 s trials read 0.832-0.881 of
# a whole epoch's rate, their epoch estimates 1.142-1.168 of the measured epoch (one trial each): likely a bias.
DEFAULT_REPEAT_S = 5.0


@dataclass
class TrialOptions:
    """How a trial measures (not what it measures: that is the LoaderConfig)."""

    repeats: int = 5
    warmup_batches: int = 2
    max_batches: int | None = None  # per repeat; None = up to one epoch's worth of samples
    repeat_seconds: float | None = DEFAULT_REPEAT_S  # per repeat, from iter(); None = no time budget
    min_batches: int = 5
    drop_caches: bool = False
    collect: bool = True
    ebpf: bool = False
    raw_dir: Path | None = None
    throttle_mib_s: float | None = None  # simulated slow storage (diagnose's fetch what-if, tests)
    sample_cost_s: float | None = None  # a fixed wall time per sample, paced on deadlines (known answers, slowdowns)
    seek_s: float | None = None  # files: a simulated seek, slept by a read not next in storage order (tests)
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    gather: Callable[[Any], list[Any]] | None = None  # distributed: every rank's object, in rank order; ranks
    # meet at it before each repeat (starting together), and a rank whose trial failed says so there
    footprint: bool = True  # CPU cores busy and PSS of the process tree per repeat (dataperf.measure.footprint)
    stall_s: float | None = watchdog.DEFAULT_STALL_S  # no batch for this long fails the trial (watchdog)
    deadline: float | None = None  # time.monotonic() past which a wait for a batch fails the trial (sweep --budget)
