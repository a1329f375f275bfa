"""Result records: plain dataclasses written as schema-versioned JSON lines, units in every field name.

Records are appended one per line and flushed at once, so a crash mid-sweep keeps every finished trial.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataperf.errors import UserError

SCHEMA_VERSION = 1


def summarize(values: list[float]) -> dict[str, float]:
    """Median with spread (min, max, relative spread) of repeated measurements."""
    if not values:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "spread_pct": float("nan")}
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    spread = (hi - lo) / med * 100 if med else 0.0
    return {"median": med, "min": lo, "max": hi, "spread_pct": spread}


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]; NaN for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class LoaderConfig:
    """One point of the sweep grid: everything that changes how samples reach the model."""

    format: str = "files"  # files | webdataset | dali
    batch_size: int = 32
    num_workers: int = 0
    prefetch_factor: int | None = None
    pin_memory: bool = False
    persistent_workers: bool = False
    decode: bool = False
    cache: str = "warm"  # warm | cold
    image_size: int = 224
    cap_tokens: int | None = None
    dali_num_threads: int | None = None
    dali_prefetch_queue_depth: int | None = None
    dali_decode_device: str | None = None  # cpu | mixed
    transform: str | None = None  # None/resize = square resize; imagenet-train | imagenet-val | MODULE:FACTORY
    seq_len: int | None = None  # tokens per window cut from a flat token stream (.bin / 1-d .npy)

    def explicit(self) -> LoaderConfig:
        """torch's default prefetch_factor (2) written out when workers are used, so records say what ran and
        a config given with or without it is the same config."""
        if self.num_workers > 0 and self.prefetch_factor is None:
            return dataclasses.replace(self, prefetch_factor=2)
        return self

    def key(self) -> str:
        """Stable identity of a config, used to resume sweeps and to match base and head in compare."""
        d = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(d, sort_keys=True)

    def short(self) -> str:
        if self.format == "dali":
            parts = [f"dali bs={self.batch_size} threads={self.dali_num_threads}",
                     f"queue={self.dali_prefetch_queue_depth} decode={self.dali_decode_device}"]
            return " ".join(parts) + f" {self.cache}"
        s = f"{self.format} bs={self.batch_size} w={self.num_workers}"
        if self.num_workers:
            s += f" pf={self.prefetch_factor}"
        if self.pin_memory:
            s += " pin"
        if self.persistent_workers:
            s += " persist"
        if self.decode:
            s += " decode"
        return s + f" {self.cache}"


@dataclass
class Record:
    """Base of every result line: what kind of record, when, and with which schema."""

    kind: str
    schema_version: int = SCHEMA_VERSION
    created_unix_s: float = field(default_factory=time.time)
    status: str = "ok"  # ok | failed
    error: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class LoaderResult(Record):
    """One loader trial: medians over repeats, with every repeat kept for noise-aware comparison."""

    kind: str = "loader"
    data: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    config_key: str = ""
    repeats: int = 0
    batches_per_repeat: int = 0
    samples_per_repeat: int = 0
    samples_per_s_median: float = float("nan")
    samples_per_s_min: float = float("nan")
    samples_per_s_max: float = float("nan")
    samples_per_s_spread_pct: float = float("nan")
    samples_per_s_repeats: list[float] = field(default_factory=list)
    read_mib_s_median: float = float("nan")
    read_mib_s_repeats: list[float] = field(default_factory=list)
    ttfb_s_median: float = float("nan")
    batch_wait_ms_p50: float = float("nan")
    batch_wait_ms_p99: float = float("nan")
    harness_overhead_ms_per_batch: float = float("nan")
    cache_mode: str = "warm"
    cache_verified: bool | None = None
    storage_read_mib_per_repeat: list[float] = field(default_factory=list)
    network_recv_mib_per_repeat: list[float] = field(default_factory=list)  # remote data: host-wide NIC bytes
    dataset_mib_read_per_repeat: float = float("nan")
    collectors: dict[str, Any] = field(default_factory=dict)
    world_size: int = 1
    per_rank_samples_per_s: list[float] = field(default_factory=list)
    per_rank_samples_per_repeat: list[int] = field(default_factory=list)
    slowest_rank: int | None = None


@dataclass
class StepResult(Record):
    """One model step measurement on synthetic in-memory batches."""

    kind: str = "step"
    model: str = ""
    device: str = "cpu"
    optimizer: str = "adamw"
    batch_size: int = 0
    seq_len: int | None = None
    image_size: int | None = None
    config_key: str = ""
    repeats: int = 0
    steps_per_repeat: int = 0
    step_ms_median: float = float("nan")
    step_ms_min: float = float("nan")
    step_ms_max: float = float("nan")
    step_ms_repeats: list[float] = field(default_factory=list)
    samples_per_s: float = float("nan")
    samples_per_s_repeats: list[float] = field(default_factory=list)
    tokens_per_s: float | None = None
    peak_mem_mib: float = float("nan")
    peak_mem_mib_repeats: list[float] = field(default_factory=list)
    peak_rss_mib: float | None = None
    cuda_max_allocated_mib: float | None = None
    nvml_peak_used_mib: float | None = None
    params_m: float = float("nan")


RECORD_TYPES: dict[str, type[Record]] = {"loader": LoaderResult, "step": StepResult}


def register(cls: type[Record]) -> type[Record]:
    """Let other modules add record kinds (e2e, diagnose) without this module importing them."""
    RECORD_TYPES[cls.__dataclass_fields__["kind"].default] = cls
    return cls


def _clean(v: Any) -> Any:
    if isinstance(v, float) and v != v:  # NaN is not JSON; None says "not measured"
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def to_json(rec: Record) -> str:
    return json.dumps(_clean(asdict(rec)), sort_keys=True)


def append(path: str | os.PathLike, rec: Record) -> None:
    """Append one record and fsync, so finished trials survive a crash of the rest of the sweep."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a", encoding="utf-8") as f:
        f.write(to_json(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


def from_dict(d: dict[str, Any]) -> Record:
    kind = d.get("kind")
    cls = RECORD_TYPES.get(kind)
    if cls is None:
        raise UserError(f"unknown record kind {kind!r}; is this a dataperf results file?")
    if d.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            f"record has schema_version {d.get('schema_version')}, this dataperf reads {SCHEMA_VERSION}; "
            "re-run the measurement with this version"
        )
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: (float("nan") if v is None and _is_float_field(cls, k) else v) for k, v in d.items() if k in names}
    return cls(**kwargs)


def _is_float_field(cls: type, name: str) -> bool:
    f = cls.__dataclass_fields__[name]
    return f.type in ("float", float)


def load(path: str | os.PathLike) -> list[Record]:
    """Read a results file; a truncated last line (crash while writing) is skipped, not fatal."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"results file not found: {p}; pass the .jsonl written by `dataperf sweep --out`")
    out: list[Record] = []
    lines = p.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines):
                continue
            raise UserError(f"{p}:{i}: not valid JSON ({e.msg}); the file is damaged") from None
        out.append(from_dict(d))
    return out
