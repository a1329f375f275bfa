"""The ceilings that bound a loader config, each in samples/s, each measured on the trial's own data and config,
and the one that binds: storage, decode, main_process, workers, h2d, model.

Each ceiling is what one part of the path from storage to the model could deliver if every other part were
free, so the lowest one is the rate no tuning of the others can pass, and a measured config's rate as a share
of it says how much is left to gain (docs/measurement/limits.md). The measurement only measures: it returns
a LimitsResult, and `rows`/`describe` turn one into what a report prints.

Split by job: ceiling.py (Ceiling, LimitsOptions), reads.py (raw reads past the page cache), storage.py (the
storage reading), probe.py (the worker probe: decode and workers), replay.py (main_process), h2d.py. Here: every
ceiling measured together, the binding one, and the names callers import from dataperf.measure.limits.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from dataperf.data import Data, as_data
from dataperf.errors import describe_failure
from dataperf.measure.limits.ceiling import LIMITS, MIB, NAN, Ceiling, LimitsOptions
from dataperf.measure.limits.h2d import h2d_ceiling, h2d_samples_per_s, pinned_copy_bytes_per_s
from dataperf.measure.limits.probe import (
    STABLE,
    STABLE_BLOCKS,
    WorkerProbe,
    active_workers,
    decode_ceiling,
    probe_worker,
    workers_ceiling,
)
from dataperf.measure.limits.reads import (
    BLOCK,
    MAX_PASSES,
    MIN_FIO_BYTES,
    MIN_READ_S,
    RawRead,
    Task,
    fio_read,
    python_read,
    raw_read,
    read_plan,
    split_tasks,
)
from dataperf.measure.limits.replay import batch_tensor_bytes, main_process_ceiling
from dataperf.measure.limits.storage import StorageReading, measure_storage, remote_get, tar_samples
from dataperf.measure.trial import TrialOptions
from dataperf.results import LimitsResult, LoaderConfig, LoaderResult, StepResult
from dataperf.verdict.rates import machine_cores

__all__ = ["BLOCK", "LIMITS", "MAX_PASSES", "MIB", "MIN_FIO_BYTES", "MIN_READ_S", "NAN", "STABLE", "STABLE_BLOCKS",
           "Ceiling", "LimitsOptions", "RawRead", "StorageReading", "Task", "WorkerProbe", "active_workers",
           "batch_tensor_bytes", "bind", "binding", "ceilings", "decode_ceiling", "fio_read", "h2d_ceiling",
           "h2d_samples_per_s", "main_process_ceiling", "measure_limits", "measure_storage", "model_ceiling",
           "pinned_copy_bytes_per_s", "probe_worker", "put", "python_read", "raw_read", "read_plan", "remote_get",
           "split_tasks", "tar_samples", "usable_cores", "workers_ceiling"]


def usable_cores() -> int:
    """Cores the workers may decode on: this process's affinity (as taskset/cgroups cpusets set it), every one
    of them, as the loader trial a ceiling is judged against had: with one taken off for a model the ceiling sat
    below rates measured under the same conditions (the 2026-12-03 audit, F2: configs at 133-139% of their
    "ceiling" on 2 cores). What a training step takes from them when fed is the fed prediction's to count
    (verdict.cpu_cap, from the step's own busy cores). At least 1."""
    return max(1, machine_cores())


def model_ceiling(step: StepResult | None) -> Ceiling:
    if step is None:
        return Ceiling("model", how="not measured: no model given")
    if step.status != "ok":
        return Ceiling("model", how=f"not measured: the step failed ({step.error})")
    return Ceiling("model", step.samples_per_s, f"{step.model} train step {step.step_ms_mean:.1f} ms at batch "
                                                f"{step.batch_size} on {step.device}")


def measure_limits(data: Data | Path | str, cfg: LoaderConfig, opts: TrialOptions | None = None,
                   step: StepResult | None = None, best: LoaderResult | None = None,
                   lopts: LimitsOptions | None = None,
                   advance: Callable[[int], None] | None = None) -> LimitsResult:
    """Every ceiling for one config, the binding one, and (given the best loader trial) its share of it.

    advance(1) is called as each of the five measurements finishes (storage, worker probe, main process, h2d,
    model), for a progress bar."""
    data, cfg = as_data(data), cfg.explicit()
    opts, lopts = opts or TrialOptions(), lopts or LimitsOptions()
    tick = advance or (lambda n=1: None)
    cores = usable_cores()
    device = lopts.device or (step.device if step is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    res = LimitsResult(data=data.spec, config=asdict(cfg), config_key=cfg.key(), device=device, usable_cores=cores)
    with tempfile.TemporaryDirectory(prefix="dataperf-limits-") as scratch:
        try:
            st = measure_storage(data, cfg, opts, lopts, Path(scratch))
        except KeyboardInterrupt:
            raise
        except Exception as e:
            st = StorageReading(f"not measured: {describe_failure(e)}", probe_data=None)
        tick(1)
        probe = probe_worker(st.probe_data or data, cfg, opts, lopts)
        res.notes += probe.notes
        tick(1)
        main = main_process_ceiling(probe.template, cfg, cores, lopts, probe.error)
        tick(1)
    if st.file_bytes_per_sample is None and probe.samples:
        st.file_bytes_per_sample = probe.payload_bytes / probe.samples
        st.ceiling_how += "; bytes per sample from the samples' payload"
    bps = st.file_bytes_per_sample
    storage = Ceiling("storage", st.mib_s * MIB / bps if bps and math.isfinite(st.mib_s) else NAN, st.ceiling_how)
    res.storage_mib_s, res.storage_direct_mib_s, res.readers = st.mib_s, st.direct_mib_s, st.readers
    res.file_bytes_per_sample = bps if bps else NAN
    res.decode_cpu_ms_per_sample = probe.per_sample(probe.fetch_cpu_s) * 1000
    res.decode_wall_ms_per_sample = probe.per_sample(probe.fetch_wall_s) * 1000
    res.collate_ms_per_sample = probe.per_sample(probe.collate_wall_s) * 1000
    res.per_worker_samples_per_s = probe.worker_rate
    res.probe_samples = probe.samples
    active = active_workers(data, cfg, opts, probe, best)
    res.active_workers = active[0]
    if probe.template is not None:
        res.decoded_bytes_per_sample = batch_tensor_bytes(probe.template) / probe.template["n"]
    h2d = h2d_ceiling(probe.template, device, cfg)
    tick(1)
    for c in (storage, decode_ceiling(probe, cores), main, workers_ceiling(probe, active), h2d, model_ceiling(step)):
        put(res, c)
    tick(1)
    bind(res, best)
    return res


def put(res: LimitsResult, c: Ceiling) -> None:
    setattr(res, f"{c.limit}_samples_per_s", c.samples_per_s)
    setattr(res, f"{c.limit}_how", c.how)


def ceilings(res: LimitsResult) -> list[Ceiling]:
    """The six ceilings of a record (one read back from a results file too), in LIMITS order."""
    return [Ceiling(k, getattr(res, f"{k}_samples_per_s"), getattr(res, f"{k}_how")) for k in LIMITS]


def binding(cs: list[Ceiling]) -> Ceiling | None:
    """The lowest measured ceiling (ties: the first in LIMITS order); None when none was measured."""
    measured = [c for c in cs if c.measured]
    return min(measured, key=lambda c: c.samples_per_s) if measured else None


def bind(res: LimitsResult, best: LoaderResult | None = None) -> None:
    """Name the binding limit and, given the best loader trial, the share of it that trial reaches."""
    b = binding(ceilings(res))
    res.binding_limit = b.limit if b else ""
    res.binding_samples_per_s = b.samples_per_s if b else NAN
    if best is not None and best.status == "ok":
        res.best_config_key = best.config_key
        res.best_samples_per_s = best.samples_per_s_median
        if b is not None:
            res.best_of_binding_pct = best.samples_per_s_median / b.samples_per_s * 100
