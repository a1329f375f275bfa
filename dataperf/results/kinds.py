"""Every record kind: plain dataclasses with units in every field name, and the schema version they are written at."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from dataperf.results.config import LoaderConfig

# 4: a config names its loader `backend` (it said `format`); 3: configs carry `shuffle` (older ones read in
# storage order); 2: `env`; older records are upgraded on read (results.jsonl.upgrade)
SCHEMA_VERSION = 5


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


# training_basis says this where a shuffle buffer made the steady rate not valid (verdict.rates reads it)
BUFFER_HID_READS = "the shuffle buffer hid the reads"


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
    # where a sample's time goes (dataperf.measure.breakdown): ms per sample in each stage a backend books (read,
    # decode, transform, collate in the worker; transfer, the hand-over to the consumer), and the consumer's wait
    stage_ms_per_sample: dict[str, float] = field(default_factory=dict)
    main_wait_ms_per_sample: float = float("nan")
    flow_samples_per_s_median: float = float("nan")  # samples after every worker's first batch / first to last batch
    batch_wait_ms_p50: float = float("nan")
    batch_wait_ms_p99: float = float("nan")
    cache_mode: str = "warm"
    cache_verified: bool | None = None
    storage_read_mib_per_repeat: list[float] = field(default_factory=list)
    network_recv_mib_per_repeat: list[float] = field(default_factory=list)  # remote data: host-wide NIC bytes
    dataset_mib_read_per_repeat: float = float("nan")
    input_mib_per_sample: float | None = None  # a decoded batch's tensors (x, y) per sample: what a fed step copies
    tokens_per_sample: float | None = None  # token data: real tokens a sample delivered (padding left out)
    repeat_s: list[float] = field(default_factory=list)  # each repeat, iter() to its last batch
    repeat_samples: list[int] = field(default_factory=list)  # each repeat's samples
    # this rank's epoch: its samples at the steady rate, the tail (tail_s) and one start-up; None: size unknown
    epoch_estimate_s: float | None = None
    # seconds of an epoch in which workers that ran out of data (uneven shards or batches per worker) leave the
    # rest to read alone: the epoch's time beyond its samples at the all-workers steady rate (measure.trial.tail_s)
    tail_s: float = 0.0
    # samples each worker reads in an epoch where the split is known (measure.trial.worker_loads): the fed prediction's
    # phases (all workers busy, then fewer); [] when unknown
    epoch_worker_samples: list[float] = field(default_factory=list)
    whole_epochs: bool = False  # every repeat ran to the end of the data
    # what a training epoch gets from this config (docs/measurement/trial.md, training rate): the whole-epoch rate when
    # the repeats were whole epochs; else an epoch's samples over epoch_estimate_s; the repeats' rate where the
    # steady rate is not valid (a shuffle buffer that hid the reads, too few batches a worker), with the tail of
    # uneven work at that rate; the steady rate
    # when the epoch's size is unknown. The verdict ranks configs by it.
    training_samples_per_s: float = float("nan")
    training_basis: str = ""  # which of those, in words
    steady_valid: bool = True  # False where a note says the steady rate is not what training sees (buffer, batches)
    trial_s: float = float("nan")  # the whole trial's wall time: preparing, warm-up, repeats, baseline
    # measurement definitions (issue 11; docs/measurement/ defines each)
    repeat_samples_per_s_median: float = float("nan")  # a repeat's samples / repeat_s, start-up included
    repeat_samples_per_s_repeats: list[float] = field(default_factory=list)
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
    # cores other processes of the machine kept busy during the repeats (/proc/stat less this tree): a trial
    # measured beside other load reads low, and a pick made on it follows that load
    other_cores_busy_median: float = float("nan")
    # the consumer's own cost to take a batch, ms a sample: the hand-over of batches done before it asked
    # (measure.breakdown.ready_receive); NaN where too few were
    receive_ms_per_sample: float = float("nan")
    samples_per_s_per_core: float = float("nan")
    pss_mib_peak: float = float("nan")  # PSS of the main process plus its workers, peak over the repeats
    samples_per_s_per_gib_pss: float = float("nan")
    worker_pss_growth_pct: float = float("nan")  # workers' PSS growth in a repeat (the most of the repeats)
    worker_private_growth_mib: float = float("nan")  # workers' private memory growth in a repeat (the most)
    # copy-on-read: pages the last repeat's workers had shared with the parent and copied, from each one's first
    # batch (front-loaded: a list of Python objects read at random is mostly copied in the first third of an
    # epoch) over worker_copied_samples samples, and at that pace over an epoch (at most what they shared)
    worker_copied_mib: float = float("nan")
    worker_copied_samples: int | None = None
    worker_copied_mib_epoch: float = float("nan")


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
    # one image sample (C, H, W) and its dtype as the loader delivers it, where a user's Dataset or transform
    # decides them (then image_size is None: it did not shape the step's input)
    image_shape: list[int] | None = None
    image_dtype: str | None = None
    config_key: str = ""
    repeats: int = 0
    steps_per_repeat: int = 0
    step_ms_median: float = float("nan")  # the median over repeats of each repeat's mean step (the spread's centre)
    step_ms_min: float = float("nan")
    step_ms_max: float = float("nan")
    step_ms_repeats: list[float] = field(default_factory=list)
    step_ms_mean: float = float("nan")  # every timed step's mean, pooled over the repeats: what samples_per_s is of
    samples_per_s: float = float("nan")  # batch / step_ms_mean
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
    # where a sample's time goes fed (dataperf.measure.breakdown): the loader's stages, the hand-over, and the
    # copy to the device (h2d: the run's copy time over its samples), beside the step's wait for data
    stage_ms_per_sample: dict[str, float] = field(default_factory=dict)
    main_wait_ms_per_sample: float = float("nan")
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
    # mid-epoch and epoch start apart (measure.fed.StartSplit): the rate and idle share of the steps outside the
    # epoch starts' windows (an epoch start's step and the next workers - 1: the refill of every worker's first
    # batch), and what each epoch start timed cost beyond the steady rate (NaN: the run timed none)
    steady_samples_per_s: float = float("nan")
    steady_stall_fraction: float = float("nan")
    steady_waves: int = 0  # whole waves the steady figures count (measure.fed.waves_in); 0: counted whole
    steady_step_wall_ms: list[float] = field(default_factory=list)  # each steady step's wall, in order
    steady_step_wait_ms: list[float] = field(default_factory=list)  # each steady step's wait for its batch
    epoch_start_s: float = float("nan")
    epoch_starts_timed: int = 0
    sync_each_step: bool = False
    loader_repeat_samples_per_s: float | None = None  # the loader alone: its trial's repeat_samples_per_s_median
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
    step_ms_mean: float = float("nan")  # beside the median: with two kinds of step (bimodal) the median misleads
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
    # the training loader's batches: ms a sample its Dataset took to give them ("transform": a user's Dataset
    # reads, decodes and transforms in its own code) and its collate_fn ("collate"), where they were made
    stage_ms_per_sample: dict[str, float] = field(default_factory=dict)
    main_wait_ms_per_sample: float = float("nan")  # the training loop blocked in next(), a sample (steady steps)
    # evaluation between steps (batches taken with gradients off), left out of every training figure above
    eval_batches: int = 0
    eval_s: float = 0.0  # from an evaluation's first batch to the next training batch (or step), summed
    eval_wait_s: float = 0.0  # of which waiting for its batches
    hook_us_per_step_median: float = float("nan")
    hook_overhead_pct: float = float("nan")
    loaders: list[dict[str, Any]] = field(default_factory=list)
    worker_pids: list[int] = field(default_factory=list)
    data_path: str | None = None
    files_read: list[dict[str, Any]] = field(default_factory=list)  # data files opened for reading: path, opens, bytes
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
    # mid-epoch and epoch start apart (verdict: Recommendation): the pick's rate and the model's idle share
    # mid-epoch (fed where the fed loop measured them, else predicted), and what each epoch start costs the model
    # waiting, in seconds and as a share of an epoch of the data
    steady_samples_per_s: float = float("nan")
    steady_stall_fraction: float = float("nan")
    epoch_start_s: float = float("nan")
    epoch_start_fraction: float = float("nan")
    epoch_samples: int | None = None  # the epoch the share is of (--epoch-samples, else the data's size)
    # the pick is the largest worker count that could be tried and does not feed the model: a lower bound
    lower_bound: bool = False
    lower_bound_why: str = ""
    trials: int = 0  # loader trials the decision rests on
    trials_not_run: int = 0  # planned trials left out (the budget ran out): a budget not spent is a defect then
    wall_s: float = float("nan")  # the command, start to decision
    budget_s: float | None = None
    # each rate the command predicted on the way and what was then measured: {"config", "predicted", "measured",
    # "kind"}: kind "fed" (the fed rate of a config, measured fed) or "loader" (the loader alone, measured alone;
    # "measured_as" says which of its rates: "steady" or "flow", as the prediction, or "training" without either)
    predictions: list[dict[str, Any]] = field(default_factory=list)
    answer: str = ""  # the decision in the user's terms: the DataLoader arguments, the rate and wait to expect


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


# RanksResult.consumer: how each rank's consumer took its batches
CONSUMER_MEASURED = "paced at measured rate"  # the model's step measured once on this machine's device, then paced
CONSUMER_GIVEN = "given"  # --step-rate: paced at the rate the user gave
CONSUMER_MODEL = "real model per rank"  # an accelerator per rank: each rank steps the real model on its own


@dataclass
class RanksResult(TrialRecord):
    """One worker count per rank of `sweep --ranks G`: G ranks on one host read at once, each its own split
    through its own DataLoader (config: each rank's), each fed by a consumer taking batches at the model's step
    rate, over one timed window every rank's reading overlaps (measure.ranks; docs/distributed.md). Per-rank
    lists are in rank order."""

    kind: str = "ranks"
    ranks: int = 1
    consumer: str = ""  # CONSUMER_MEASURED | CONSUMER_GIVEN | CONSUMER_MODEL
    model: str = ""  # the model the step rate is of ("" where --step-rate gave it)
    device: str = ""  # where the step rate was measured, or each rank's model ran
    demand_samples_per_s_per_rank: float = float("nan")  # the step rate each rank's consumer takes batches at
    host_cores: int = 0  # the cores the G ranks share (this process's affinity)
    window_s: float = float("nan")  # the timed window each rank runs (at least; longer to hold whole waves)
    warmup_steps_per_rank: list[int] = field(default_factory=list)
    # each rank's whole window: the span its CPU figures were counted over
    steps_per_rank: list[int] = field(default_factory=list)
    samples_per_rank: list[int] = field(default_factory=list)
    wall_s_per_rank: list[float] = field(default_factory=list)
    # the part of it the fed rate counts: whole waves of batches (measure.ranks.timed_window), and how many; 0
    # waves: the workers delivered in none (or one), every step counted, as before schema 5
    counted_samples_per_rank: list[int] = field(default_factory=list)
    counted_wall_s_per_rank: list[float] = field(default_factory=list)
    waves_per_rank: list[int] = field(default_factory=list)
    fed_samples_per_s_per_rank: list[float] = field(default_factory=list)  # counted samples / counted wall
    fed_samples_per_s_slowest: float = float("nan")  # the lowest of them: what a synchronous step gets
    fed_samples_per_s_total: float = float("nan")  # their sum
    slowest_rank: int | None = None
    data_wait_fraction_per_rank: list[float] = field(default_factory=list)  # time in next(loader) / window wall
    # CPU seconds per wall second over each rank's window: its main process (the pin-memory thread included)
    # and its workers; the host's: every process of the machine (/proc/stat), other users' included
    main_cpu_cores_busy_per_rank: list[float] = field(default_factory=list)
    workers_cpu_cores_busy_per_rank: list[float] = field(default_factory=list)
    host_cpu_cores_busy: float = float("nan")  # the median over ranks' windows
    # the ranks' main processes and workers together: CPU seconds per sample fed, in ms (over the whole windows:
    # their CPU seconds over their samples)
    cpu_ms_per_sample: float = float("nan")


RECORD_TYPES: dict[str, type[Record]] = {
    c.__dataclass_fields__["kind"].default: c
    for c in (LoaderResult, StepResult, E2EResult, DiagnoseResult, ProfileResult, LengthsResult, WatchResult,
              MemoryResult, DecisionResult, LimitsResult, RanksResult)
}
