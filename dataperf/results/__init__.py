"""Result records: the schema (`kinds`, with `config`'s LoaderConfig inside every trial record), the
statistics they carry (`stats`), and their JSON-lines storage (`jsonl`). Imports nothing of dataperf but errors."""

from __future__ import annotations

from dataperf.results.config import (
    BUFFER_BACKENDS,
    DEFAULT_SHUFFLE_BUFFER,
    TORCH_PREFETCH_FACTOR,
    LoaderConfig,
    option_flag,
    own_knobs,
)
from dataperf.results.jsonl import (
    append,
    current,
    exclusive,
    from_dict,
    load,
    lock_path,
    stamp,
    to_json,
    upgrade,
)
from dataperf.results.kinds import (
    RECORD_TYPES,
    SCHEMA_VERSION,
    DecisionResult,
    DiagnoseResult,
    E2EResult,
    LengthsResult,
    LimitsResult,
    LoaderResult,
    MemoryResult,
    ProfileResult,
    Record,
    StepResult,
    TrialRecord,
    WatchResult,
)
from dataperf.results.stats import (
    HIGH_SPREAD_PCT,
    MIB,
    fmt,
    percentile,
    summarize,
)

__all__ = [
    "BUFFER_BACKENDS",
    "DEFAULT_SHUFFLE_BUFFER",
    "DecisionResult",
    "DiagnoseResult",
    "E2EResult",
    "HIGH_SPREAD_PCT",
    "LengthsResult",
    "LimitsResult",
    "LoaderConfig",
    "LoaderResult",
    "MIB",
    "MemoryResult",
    "ProfileResult",
    "RECORD_TYPES",
    "Record",
    "SCHEMA_VERSION",
    "StepResult",
    "TORCH_PREFETCH_FACTOR",
    "TrialRecord",
    "WatchResult",
    "append",
    "current",
    "exclusive",
    "fmt",
    "from_dict",
    "load",
    "lock_path",
    "option_flag",
    "own_knobs",
    "percentile",
    "stamp",
    "summarize",
    "to_json",
    "upgrade",
]
