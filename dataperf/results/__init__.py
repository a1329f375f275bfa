"""Result records: plain dataclasses written as schema-versioned JSON lines, units in every field name.

Records are appended one whole line at a time and fsynced, so a crash mid-sweep keeps every finished trial;
a results file has one writer at a time (an flock on a sidecar), and a damaged line is named, never guessed at.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataperf.errors import UserError

SCHEMA_VERSION = 3  # 3: configs carry `shuffle` (older ones read in storage order); 2: `env`; older upgraded on read
MIB = 1024 * 1024
HIGH_SPREAD_PCT = 15.0  # repeats spread wider than this (max - min over the median) get a "high spread" note
TORCH_PREFETCH_FACTOR = 2  # what torch's DataLoader prefetches per worker when prefetch_factor is not given
# samples in each webdataset worker's shuffle buffer (webdataset's own `.shuffle(1000)`), and DALI's initial_fill
DEFAULT_SHUFFLE_BUFFER = 1000
BUFFER_FORMATS = ("webdataset", "dali")  # formats whose sample shuffle is a buffer (the rest: a full permutation)
# backends whose batches come out of one stream (worker -1): no per-worker ids, so no active-worker count
ONE_STREAM = ("dali", "spdl", "torchdata")


def summarize(values: list[float]) -> dict[str, float]:
    """Median with spread (min, max, relative spread) of repeated measurements."""
    if not values:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "spread_pct": float("nan")}
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    spread = (hi - lo) / med * 100 if med else 0.0
    return {"median": med, "min": lo, "max": hi, "spread_pct": spread}


def fmt(v: float | None, nd: int = 0) -> str:
    """A figure as a person reads it: thousands separated, nd decimals, '-' when not measured (None, NaN)."""
    if v is None or v != v:
        return "-"
    return f"{v:,.{nd}f}"


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

    format: str = "files"  # a backend of dataperf.backends: files | webdataset | dali | spdl | ...
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
    on_corrupt: str | None = None  # None (= fail: the trial fails naming the sample) | skip (counted)
    worker_type: str | None = None  # process | thread; None = the backend's own kind
    transform: str | None = None  # None/resize = square resize; imagenet-train | imagenet-val | MODULE:FACTORY
    seq_len: int | None = None  # tokens per window cut from a flat token stream (.bin / 1-d .npy)
    shuffle: bool = True  # read in a seeded random order, as training does; False = storage order
    shuffle_buffer: int | None = None  # webdataset: samples per worker's shuffle buffer; dali: initial_fill

    def explicit(self) -> LoaderConfig:
        """Defaults written out where they apply, so records say what ran and a config given with or without
        them is the same config: torch's prefetch_factor (2) when workers are used, and the shuffle buffer
        (DEFAULT_SHUFFLE_BUFFER) of a shuffled webdataset or DALI reader; no buffer elsewhere."""
        out = self
        if self.num_workers > 0 and self.prefetch_factor is None:
            out = dataclasses.replace(out, prefetch_factor=TORCH_PREFETCH_FACTOR)
        buffered = self.shuffle and self.format in BUFFER_FORMATS
        buffer = (self.shuffle_buffer or DEFAULT_SHUFFLE_BUFFER) if buffered else None
        return dataclasses.replace(out, shuffle_buffer=buffer) if buffer != self.shuffle_buffer else out

    def access(self) -> str:
        """The access pattern in a table cell: 'shuffled', 'shuffled buf=N' (a buffer), or 'sequential'."""
        if not self.shuffle:
            return "sequential"
        return f"shuffled buf={self.shuffle_buffer}" if self.shuffle_buffer else "shuffled"

    def key(self) -> str:
        """Stable identity of a config, used to resume sweeps and to match base and head in compare."""
        d = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(d, sort_keys=True)

    def short(self) -> str:
        if self.format == "dali":
            parts = [f"dali bs={self.batch_size} threads={self.dali_num_threads}",
                     f"queue={self.dali_prefetch_queue_depth} decode={self.dali_decode_device}"]
            return " ".join(parts) + f" {self.access()} {self.cache}"
        s = f"{self.format} bs={self.batch_size} w={self.num_workers}"
        if self.worker_type:
            s += f" {self.worker_type}"
        if self.num_workers:
            s += f" pf={self.explicit().prefetch_factor}"  # torch's default written out where none was given
        if self.pin_memory:
            s += " pin"
        if self.persistent_workers:
            s += " persist"
        if self.decode:
            s += " decode"
        return s + f" {self.access()} {self.cache}"


@dataclass
class Record:
    """Base of every result line: what kind of record, when, and with which schema."""

    kind: str
    schema_version: int = SCHEMA_VERSION
    created_unix_s: float = field(default_factory=time.time)
    status: str = "ok"  # ok | failed
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)  # where it came from: dataperf.results.provenance.collect()


@dataclass
class TrialRecord(Record):
    """A record of something a loader config fed: which data, which config (as a dict, for JSON), its key."""

    data: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    config_key: str = ""

    @property
    def loader_config(self) -> LoaderConfig:
        return LoaderConfig(**self.config)


@dataclass
class LoaderResult(TrialRecord):
    """One loader trial: medians over repeats, with every repeat kept for noise-aware comparison."""

    kind: str = "loader"
    repeats: int = 0
    batches_per_repeat: int = 0
    samples_per_repeat: int = 0
    epoch_samples: int | None = None  # samples in one epoch of this rank, when known before reading (a count)
    samples_per_s_median: float = float("nan")
    samples_per_s_min: float = float("nan")
    samples_per_s_max: float = float("nan")
    samples_per_s_spread_pct: float = float("nan")
    samples_per_s_repeats: list[float] = field(default_factory=list)
    ttfb_s_median: float = float("nan")
    flow_samples_per_s_median: float = float("nan")  # samples after every worker's first batch / first to last batch
    batch_wait_ms_p50: float = float("nan")
    batch_wait_ms_p99: float = float("nan")
    cache_mode: str = "warm"
    cache_verified: bool | None = None
    storage_read_mib_per_repeat: list[float] = field(default_factory=list)
    network_recv_mib_per_repeat: list[float] = field(default_factory=list)  # remote data: host-wide NIC bytes
    dataset_mib_read_per_repeat: float = float("nan")
    input_mib_per_sample: float | None = None  # a decoded batch's tensors (x, y) per sample: what a fed step copies
    repeat_s: list[float] = field(default_factory=list)  # each repeat, iter() to its last batch
    repeat_samples: list[int] = field(default_factory=list)  # each repeat's samples
    # this rank's epoch: its samples at the steady rate, the tail (tail_s) and one start-up; None: size unknown
    epoch_estimate_s: float | None = None
    # seconds of an epoch in which workers that ran out of data (uneven shards or batches per worker) leave the
    # rest to read alone: the epoch's time beyond its samples at the all-workers steady rate (runner.tail_s)
    tail_s: float = 0.0
    # samples each worker reads in an epoch where the split is known (runner.worker_loads): the fed prediction's
    # phases (all workers busy, then fewer); [] when unknown
    epoch_worker_samples: list[float] = field(default_factory=list)
    whole_epochs: bool = False  # every repeat ran to the end of the data
    # what a training epoch gets from this config (docs/measurement/trial.md, training rate): the whole-epoch rate when
    # the repeats were whole epochs; else an epoch's samples over epoch_estimate_s; the repeats' rate where the
    # steady rate is not valid (a shuffle buffer that hid the reads, too few batches a worker); the steady rate
    # when the epoch's size is unknown. The verdict ranks configs by it.
    training_samples_per_s: float = float("nan")
    training_basis: str = ""  # which of those, in words
    steady_valid: bool = True  # False where a note says the steady rate is not what training sees (buffer, batches)
    trial_s: float = float("nan")  # the whole trial's wall time: preparing, warm-up, repeats, baseline
    # measurement definitions (issue 11; docs/measurement/ defines each)
    epoch_samples_per_s_median: float = float("nan")  # a repeat's samples / repeat_s, start-up included
    epoch_samples_per_s_repeats: list[float] = field(default_factory=list)
    # repeat time beyond what the steady rate needs for its samples and, in a whole epoch, beyond its tail
    startup_s_median: float = float("nan")
    payload_mib_s_median: float = float("nan")  # sample payload (jpg/npy bytes) over the steady window
    payload_mib_s_repeats: list[float] = field(default_factory=list)
    storage_read_mib_s_median: float = float("nan")  # /proc read_bytes over the whole epoch
    storage_read_mib_s_repeats: list[float] = field(default_factory=list)
    file_mib_per_repeat: float = float("nan")  # the files' own bytes (st_size) the repeat's samples live in
    resident_after_evict_pct: float | None = None  # cold: worst repeat, mincore after eviction
    shards: int | None = None  # webdataset tar shards; None for other formats
    active_workers: int | None = None  # workers that delivered >= 1 sample (fewest over repeats); None: DALI
    harness_overhead_ms_per_batch: float = float("nan")  # no-op DataLoader, same workers, collectors running
    harness_overhead_pct: float = float("nan")  # of this trial's steady batch time
    collector_watch_ms_median: float = float("nan")  # registering worker pids with collectors, in ttfb
    collectors: dict[str, Any] = field(default_factory=dict)
    world_size: int = 1
    per_rank_samples_per_s: list[float] = field(default_factory=list)
    per_rank_samples_per_repeat: list[int] = field(default_factory=list)
    slowest_rank: int | None = None
    corrupt_samples: int = 0  # per repeat, skipped by on_corrupt=skip
    backend: dict[str, Any] = field(default_factory=dict)  # name, worker_type, converted store and its cost
    knobs_ignored: list[str] = field(default_factory=list)  # config knobs the backend cannot express
    cpu_cores_busy_median: float = float("nan")  # CPU-seconds of the process tree per wall second
    samples_per_s_per_core: float = float("nan")
    pss_mib_peak: float = float("nan")  # PSS of the main process plus its workers, peak over the repeats
    samples_per_s_per_gib_pss: float = float("nan")
    worker_pss_growth_pct: float = float("nan")  # workers' PSS, last sample over first, within an epoch
    worker_private_growth_mib: float = float("nan")  # workers' private memory growth within an epoch
    worker_copied_mib: float = float("nan")  # of that growth, pages they had shared with the parent (copy-on-read)


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
    # CPU seconds of the training process per wall second of its timed steps (all its threads): the cores the
    # step keeps busy, which a loader on the same machine has to share
    cpu_cores_busy_median: float = float("nan")
    # CUDA: ms to copy one MiB of an input batch (x and y) from host to device, pinned and pageable (one batch of
    # the step's own input, synchronised, median of H2D_COPIES); the fed loop adds its batch's copy to every step
    # (the step alone reads a batch already on the device). None on a CPU.
    h2d_pinned_ms_per_mib: float | None = None
    h2d_pageable_ms_per_mib: float | None = None
    input_mib_per_sample: float | None = None  # the step's own synthetic input (x, y) per sample


@dataclass
class E2EResult(TrialRecord):
    kind: str = "e2e"
    model: str = ""
    device: str = "cpu"
    batch_size: int = 0
    repeats: int = 0
    steps_per_repeat: int = 0  # as asked; steps_repeats holds what each repeat timed
    steps_repeats: list[int] = field(default_factory=list)  # timed steps of each repeat (e2e.epoch_aligned)
    step_ms_median: float = float("nan")
    step_ms_repeats: list[float] = field(default_factory=list)
    data_wait_ms_median: float = float("nan")
    data_wait_ms_p99: float = float("nan")
    epoch_restarts: int = 0
    h2d_ms_median: float = float("nan")
    compute_ms_median: float = float("nan")
    samples_per_s: float = float("nan")
    samples_per_s_repeats: list[float] = field(default_factory=list)
    data_stall_fraction: float = float("nan")
    data_stall_fraction_repeats: list[float] = field(default_factory=list)
    padded_seq_len_mean: float | None = None
    loader_samples_per_s: float | None = None
    step_samples_per_s: float | None = None
    predicted_stall_fraction: float | None = None
    # stall definitions (docs/measurement/workflows.md, e2e stall): data_stall_fraction is the device-idle share
    host_wait_fraction: float = float("nan")  # host time in next(loader) / wall
    host_wait_fraction_repeats: list[float] = field(default_factory=list)
    gpu_idle_fraction: float | None = None  # CUDA: 1 - sum(h2d + compute events) / wall; None on CPU
    gpu_idle_fraction_repeats: list[float] = field(default_factory=list)
    stall_basis: str = ""  # what data_stall_fraction was computed from
    sync_each_step: bool = False
    loader_epoch_samples_per_s: float | None = None  # the loader alone, start-up included
    loader_startup_s: float | None = None  # the loader alone: one epoch start's cost
    predicted_loader_samples_per_s: float | None = None  # steady rate with this run's epoch restarts paid
    cache_verified: bool | None = None  # cold/warm as for a loader trial (cache.verify); None: not ours to manage
    # host time per step inside the train step call (CPU: the compute; CUDA: launching it), median over steps:
    # against the step alone (1000 x batch / step_samples_per_s) it shows a training process starved of CPU
    step_host_ms_median: float = float("nan")
    effects: list[str] = field(default_factory=list)  # verdict.Effect names that split it from the prediction
    confirm_round: int | None = None  # set by `sweep --confirm` (1, 2, ...); None: a standalone e2e run
    # sweep --confirm: the config_key of the loader trial this fed run varies (pin_memory or persistent_workers
    # changed, the rest the same); None when it feeds that trial's own config
    variant_of: str | None = None

    def timed_steps(self) -> list[int]:
        """Steps each repeat timed: steps_repeats, or steps_per_repeat each (one a timed repeat, else `repeats`)
        in records written before it."""
        return self.steps_repeats or [self.steps_per_repeat] * (len(self.step_ms_repeats) or self.repeats)


@dataclass
class DiagnoseResult(TrialRecord):
    kind: str = "diagnose"
    model: str = ""
    step_samples_per_s: float = float("nan")
    warm_samples_per_s: float = float("nan")
    cold_samples_per_s: float = float("nan")
    compute_fraction: float = float("nan")
    prep_stall_fraction: float = float("nan")
    fetch_stall_fraction: float = float("nan")
    bottleneck: str = ""  # prep | fetch | none
    sentence: str = ""
    advice: list[str] = field(default_factory=list)
    what_if: list[dict[str, float]] = field(default_factory=list)
    dataset_mib: float = float("nan")
    cold_cache_verified: bool | None = None  # issue 11: an unverified cold trial is not used as cold
    binding_limit: str = ""  # the lowest ceiling of measure.limits on this config (its record follows this one)
    effects: list[str] = field(default_factory=list)  # verdict.Effect names that a fed run would see


@dataclass
class ProfileResult(TrialRecord):
    kind: str = "profile"
    model: str = ""
    device: str = "cpu"
    trace_path: str = ""
    sort_by: str = ""
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    span_ms: dict[str, float] = field(default_factory=dict)
    split_ms: dict[str, float] = field(default_factory=dict)
    split_fraction: dict[str, float] = field(default_factory=dict)
    cuda_kernels_seen: int = 0
    nsys: str = ""


@dataclass
class LengthsResult(Record):
    kind: str = "lengths"
    data: str = ""
    config_key: str = ""
    batch_size: int = 0
    cap_tokens: int | None = None
    samples: int = 0
    sample_tokens_p50: float = float("nan")
    sample_tokens_p99: float = float("nan")
    sample_tokens_max: int = 0
    batch_max_tokens_p50: float = float("nan")
    batch_max_tokens_p99: float = float("nan")
    batch_max_tokens_max: int = 0
    padding_waste_pct: float = float("nan")
    capped_batch_max_tokens_p99: float | None = None
    capped_padding_waste_pct: float | None = None
    tokens_dropped_by_cap_pct: float | None = None
    sample_lengths: list[int] = field(default_factory=list)
    batch_max_tokens: list[int] = field(default_factory=list)
    step_peak_mem_mib_uncapped: float | None = None
    step_peak_mem_mib_capped: float | None = None




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


def stamp(rec: Record) -> Record:
    """Fill the record's provenance (machine, versions, commit, command, filesystem under its data) if unset."""
    if not rec.env:
        from dataperf.results import provenance

        rec.env = provenance.collect(getattr(rec, "data", None))
    return rec



def lock_path(path: str | os.PathLike) -> Path:
    """The sidecar file whose flock marks a results file as in use; it holds the holder's pid.

    The lock is on a sidecar, not on the results file, so `--overwrite` can replace the results file while
    the lock stays where a second run looks for it. The sidecar is left in place: unlinking it would let a
    late opener lock an orphaned inode."""
    p = Path(path)
    return p.with_name(f".{p.name}.lock")


_held: dict[Path, int] = {}  # results file (resolved) -> fd of its lock, for this process


@contextlib.contextmanager
def exclusive(path: str | os.PathLike) -> Iterator[None]:
    """Hold the exclusive lock on a results file for as long as this run writes to it.

    A second writer (a second sweep, `--resume` or `--overwrite` alike) gets a UserError naming the pid of
    the run that holds it, instead of interleaving or deleting that run's trials."""
    key = Path(path).resolve()
    if key in _held:
        yield
        return
    lp = lock_path(path)
    try:
        lp.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lp, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise UserError(f"cannot create the lock file {lp}: {e.strerror}; choose an --out in a folder "
                        "you can write") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise UserError(f"{path} is being written by another dataperf run (pid {holder}); wait for it to "
                        "finish, or choose another --out") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held[key] = fd
    try:
        yield
    finally:
        del _held[key]
        os.ftruncate(fd, 0)
        os.close(fd)  # closing releases the flock


def append(path: str | os.PathLike, rec: Record) -> None:
    """Append one record as one whole line, then fsync, so finished trials survive a crash of the rest.

    A partial last line (a crash or a full disk mid-write) is cut off first, never glued onto. If the write
    or fsync fails (ENOSPC, EIO) the file is cut back to where it was, so it stays valid JSONL holding every
    record written before, and the failure is a UserError naming the file."""
    p = Path(path)
    line = (to_json(stamp(rec)) + "\n").encode("utf-8")
    with exclusive(p):
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise UserError(f"cannot write results to {p}: {e.strerror}; choose another --out") from None
        try:
            end = _cut_partial_tail(fd)
            try:
                n = os.pwrite(fd, line, end)
                if n != len(line):
                    raise OSError(errno.ENOSPC, "short write (disk full?)")
                os.fsync(fd)
            except OSError as e:
                os.ftruncate(fd, end)
                raise UserError(f"cannot write results to {p}: {e.strerror or e}; the {_count_lines(fd)} "
                                "records written before are kept; free space (or fix the disk) and run the "
                                "same command with --resume") from None
        finally:
            os.close(fd)


def _cut_partial_tail(fd: int) -> int:
    """Truncate a last line that has no newline (a record cut short); return the size to write at."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    pos = size
    while pos > 0:
        step = min(65536, pos)
        chunk = os.pread(fd, step, pos - step)
        i = chunk.rfind(b"\n")
        if i >= 0:
            pos = pos - step + i + 1
            break
        pos -= step
    os.ftruncate(fd, pos)
    return pos


def _count_lines(fd: int) -> int:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0).count(b"\n") if size else 0


def from_dict(d: Any, where: str = "record") -> Record:
    if not isinstance(d, dict):
        raise UserError(f"{where}: a JSON {type(d).__name__}, not a record object; is this a dataperf "
                        "results file?")
    kind = d.get("kind")
    cls = RECORD_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise UserError(f"{where}: unknown record kind {kind!r}; is this a dataperf results file?")
    d = upgrade(d)
    if d.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            f"{where}: record has schema_version {d.get('schema_version')}, this dataperf reads up to "
            f"{SCHEMA_VERSION}; upgrade dataperf to read it"
        )
    fields_ = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for k, v in d.items():
        if k not in fields_:
            continue  # a field a newer dataperf added: readable, ignored
        if not _type_ok(str(fields_[k].type), v):
            raise UserError(f"{where}: field {k!r} holds {v!r}, not a {fields_[k].type}; the file is damaged")
        kwargs[k] = float("nan") if v is None and _is_float_field(cls, k) else v
    cfg = kwargs.get("config")
    if isinstance(cfg, dict) and cfg:
        names = {f.name for f in dataclasses.fields(LoaderConfig)}
        bad = sorted(set(cfg) - names)
        if bad:
            raise UserError(f"{where}: unknown loader config keys {bad}; the file is damaged or from another "
                            "dataperf version")
    return cls(**kwargs)


def upgrade(d: dict[str, Any]) -> dict[str, Any]:
    """Bring an older record up to SCHEMA_VERSION instead of refusing it (as asv migrates its results).

    Before schema 3 every loader read in storage order: an old config gets `shuffle: False` and its
    config_key is recomputed, so an old sequential trial never matches a new shuffled one (resume, compare)."""
    if d.get("schema_version") == 1:
        d = {**d, "schema_version": 2, "env": d.get("env") or {}}
    if d.get("schema_version") == 2:
        d = {**d, "schema_version": 3}
        cfg = d.get("config")
        if isinstance(cfg, dict) and cfg and "shuffle" not in cfg:
            d["config"] = cfg = {**cfg, "shuffle": False}
            names = {f.name for f in dataclasses.fields(LoaderConfig)}
            if set(cfg) <= names:  # unknown keys are named as damage by from_dict
                d["config_key"] = LoaderConfig(**cfg).key()
    return d


_TYPES: dict[str, tuple[type, ...]] = {
    "float": (int, float), "int": (int,), "str": (str,), "bool": (bool,), "list": (list,), "dict": (dict,),
    "None": (type(None),),
}


def _type_ok(annotation: str, v: Any) -> bool:
    """Does a JSON value fit a field's annotation (as written: 'float', 'list[float]', 'int | None')?"""
    for alt in (a.strip() for a in annotation.split("|")):
        base, _, inner = alt.partition("[")
        types = _TYPES.get(base)
        if types is None:
            return True  # Any and friends
        if base == "float" and v is None:
            return True  # NaN is written as null
        if isinstance(v, bool) and base in ("int", "float"):
            continue
        if isinstance(v, types):
            if base == "list" and inner.rstrip("]") in ("float", "int"):
                return all(_type_ok(inner.rstrip("]"), x) for x in v)
            return True
    return False


def _is_float_field(cls: type, name: str) -> bool:
    f = cls.__dataclass_fields__[name]
    return f.type in ("float", float)


def load(path: str | os.PathLike) -> list[Record]:
    """Read a results file. A last line cut short (no newline: a crash while writing) is skipped, not fatal;
    any other line that is not a record is damage and named by line number."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{p} is a folder, not a results file; pass the .jsonl written by `--out`")
    if not p.is_file():
        raise UserError(f"results file not found: {p}; pass the .jsonl written by `dataperf sweep --out`")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UserError(f"cannot read {p}: {e.strerror}") from None
    out: list[Record] = []
    lines = raw.split(b"\n")
    for i, bline in enumerate(lines, 1):
        if not bline.strip():
            continue
        partial = i == len(lines)  # text after the last newline: a line cut short
        try:
            d = json.loads(bline.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            if partial:
                continue
            why = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8 text"
            raise UserError(f"{p}:{i}: not valid JSON ({why}); the file is damaged") from None
        out.append(from_dict(d, f"{p}:{i}"))
    return out


def current(recs: list[Record]) -> list[Record]:
    """The latest record of each loader trial: a trial re-run by --resume supersedes its old failure."""
    last: dict[str, int] = {}
    for i, r in enumerate(recs):
        if isinstance(r, LoaderResult):
            last[f"{Path(r.data).resolve()}|{r.config_key}|{r.world_size}"] = i
    keep = set(last.values())
    return [r for i, r in enumerate(recs) if not isinstance(r, LoaderResult) or i in keep]


@dataclass
class WatchResult(Record):
    """One rank of the user's own training job, watched by `dataperf watch` (hooks in the job, collectors on
    its process tree). Steps after the first are the steady window; the first step (worker start-up, first
    batch) is kept apart. `*_repeats` are consecutive blocks of that window, so `compare` can gate a job."""

    kind: str = "watch"
    command: list[str] = field(default_factory=list)
    config_key: str = ""
    rank: int | None = None
    world_size: int = 1
    pid: int | None = None
    exit_code: int | None = None
    hook_loaded: bool = False
    steps_total: int = 0
    steps_measured: int = 0
    first_step_ms: float = float("nan")
    step_ms_median: float = float("nan")
    step_ms_p99: float = float("nan")
    step_ms_repeats: list[float] = field(default_factory=list)
    data_wait_ms_median: float = float("nan")
    data_wait_ms_p99: float = float("nan")
    samples_per_s: float = float("nan")
    samples_per_s_repeats: list[float] = field(default_factory=list)
    run_samples_per_s: float = float("nan")
    model_samples_per_s: float = float("nan")
    data_stall_fraction: float = float("nan")
    data_stall_fraction_repeats: list[float] = field(default_factory=list)
    gpu_idle_fraction: float | None = None
    gpu_idle_fraction_repeats: list[float] = field(default_factory=list)
    hook_us_per_step_median: float = float("nan")
    hook_overhead_pct: float = float("nan")
    loaders: list[dict[str, Any]] = field(default_factory=list)
    worker_pids: list[int] = field(default_factory=list)
    data_path: str | None = None
    next_step: str = ""
    next_notes: list[str] = field(default_factory=list)
    collectors: dict[str, Any] = field(default_factory=dict)



@dataclass
class MemoryResult(Record):
    """One optimizer's GPU memory at one batch size (dataperf memory), and the largest batch that fit."""

    kind: str = "memory"
    model: str = ""
    optimizer: str = ""
    device: str = ""
    batch_size: int = 0
    seq_len: int | None = None
    amp: str | None = None
    params_m: float = float("nan")
    cuda_max_allocated_mib: float | None = None
    nvml_peak_used_mib: float | None = None  # sampled every nvml_interval_s, as nvidia-smi -l 1 shows
    nvml_interval_s: float = 1.0
    step_ms_median: float = float("nan")
    samples_per_s: float = float("nan")
    reduction_vs_adamw_pct: float | None = None  # of cuda_max_allocated_mib; None without an adamw row
    max_batch: int | None = None  # largest batch that ran, when --max-batch searched
    max_batch_tried: list[int] = field(default_factory=list)
    oom_summary: str | None = None  # memory_summary file of the first batch that did not fit


@dataclass
class DecisionResult(TrialRecord):
    """One decision a command made (sweep's recommendation, tune's pick, watch's suggested next step), with the
    rates it expects, so that it can be checked against the measured best on the same data
    (benchmarks/pick_quality.py). `config` is the pick ({} when there is none)."""

    kind: str = "decision"
    command: str = ""  # sweep | tune | watch
    outcome: str = ""  # verdict.Outcome: feeds | input_bound | best_without_model | no_trials | no_decoded
    input_bound: bool | None = None  # None without a model
    binding_limit: str = ""
    model: str = ""
    device: str = ""
    step_samples_per_s: float = float("nan")  # the model alone at the pick's batch size
    # what the decision expects the pick to deliver: fed to the model when there is one (loader and step measured
    # apart, epoch start-up and tails paid), else the loader's training-epoch rate
    predicted_samples_per_s: float = float("nan")
    predicted_stall_fraction: float | None = None
    confirmed: bool = False  # chosen by fed runs (sweep --confirm) rather than by the separate figures
    fed_samples_per_s: float | None = None  # the pick's fed rate: pooled over its fed rounds
    fed_samples_per_s_rounds: list[float] = field(default_factory=list)
    fed_stall_fraction: float | None = None
    # the pick is the largest worker count that could be tried and does not feed the model: a lower bound
    lower_bound: bool = False
    lower_bound_why: str = ""
    trials: int = 0  # loader trials the decision rests on
    trials_not_run: int = 0  # planned trials left out (the budget ran out): a budget not spent is a defect then
    wall_s: float = float("nan")  # the command, start to decision
    budget_s: float | None = None
    # each rate the command predicted on the way and what was then measured: {"config", "predicted", "measured",
    # "kind"}: kind "fed" (the fed rate of a config, measured fed) or "loader" (the loader alone, measured alone)
    predictions: list[dict[str, Any]] = field(default_factory=list)
    answer: str = ""  # the decision in the user's terms: the DataLoader arguments, the rate and wait to expect


RECORD_TYPES: dict[str, type[Record]] = {
    c.__dataclass_fields__["kind"].default: c
    for c in (LoaderResult, StepResult, E2EResult, DiagnoseResult, ProfileResult, LengthsResult, WatchResult,
              MemoryResult, DecisionResult)
}


@dataclass
class LimitsResult(Record):
    """The ceilings that bound one loader config, each in samples/s with how it was measured (or why not), and
    the lowest, which binds (dataperf.measure.limits; docs/measurement/limits.md). NaN: not measured."""

    kind: str = "limits"
    data: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    config_key: str = ""
    device: str = "cpu"
    usable_cores: int = 0  # affinity cores, all of them (limits.usable_cores)
    readers: int = 0  # parallel readers of the storage probe (the config's workers)
    storage_samples_per_s: float = float("nan")  # for this config's cache mode (warm: page cache)
    storage_how: str = ""
    storage_mib_s: float = float("nan")
    storage_direct_mib_s: float = float("nan")  # the device past the page cache (fio / O_DIRECT), or GETs
    file_bytes_per_sample: float = float("nan")  # stored bytes per sample (tar headers included)
    decode_samples_per_s: float = float("nan")  # usable cores / CPU time per sample in one worker
    decode_how: str = ""
    decode_cpu_ms_per_sample: float = float("nan")  # read + decode + transform, thread CPU time, warm cache
    decode_wall_ms_per_sample: float = float("nan")
    collate_ms_per_sample: float = float("nan")
    probe_samples: int = 0
    main_process_samples_per_s: float = float("nan")  # real decoded batches from workers that only copy them
    main_process_how: str = ""
    decoded_bytes_per_sample: float = float("nan")  # tensor bytes of the decoded batch per sample
    workers_samples_per_s: float = float("nan")  # active workers x per-worker rate
    workers_how: str = ""
    active_workers: int | None = None
    per_worker_samples_per_s: float = float("nan")  # 1 / wall time of read + decode + transform + collate
    h2d_samples_per_s: float = float("nan")  # pinned host-to-device copies of the decoded batch (CUDA)
    h2d_how: str = ""
    model_samples_per_s: float = float("nan")  # the train step's rate
    model_how: str = ""
    binding_limit: str = ""  # storage | decode | main_process | workers | h2d | model; "" when none measured
    binding_samples_per_s: float = float("nan")
    best_config_key: str = ""
    best_samples_per_s: float = float("nan")
    best_of_binding_pct: float = float("nan")  # the best loader trial's steady rate / the binding ceiling


RECORD_TYPES[LimitsResult.kind] = LimitsResult
