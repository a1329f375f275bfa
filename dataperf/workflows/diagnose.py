"""The differential method for data stalls: the model on synthetic data (no stalls), the loader on a warm
page cache (prep cost only), and on a cold cache (prep + fetch). The gaps between them are the prep stall
(CPU decode/collate) and the fetch stall (storage), each as a share of the real step time. Which part of the
path causes the stall is the binding limit of the config's ceilings (dataperf.measure.limits): the sentence and the
advice follow it, so "prep" caused by idle workers is named as idle workers, with the reshard fix."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from pathlib import Path

import psutil

from dataperf import backends, verdict
from dataperf.data import Data, as_data
from dataperf.errors import UserError
from dataperf.measure.fed import shape_for_model
from dataperf.measure.limits import LimitsOptions, measure_limits
from dataperf.measure.step import StepOptions, measure_step
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import DiagnoseResult, LimitsResult, LoaderConfig, LoaderResult, StepResult

NEGLIGIBLE = 0.05
GPU_DECODE = "move JPEG decode to the GPU with {} ({})".format(*backends.gpu_decode_hint())
WHAT_IF_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


def stall_split(step_sps: float, warm_sps: float, cold_sps: float) -> tuple[float, float, float]:
    """(compute, prep, fetch) shares of the real per-sample time, assuming loader and model overlap."""
    t_step = 1 / step_sps
    t_warm = 1 / min(step_sps, warm_sps)
    t_cold = max(1 / min(step_sps, cold_sps), t_warm)
    return t_step / t_cold, (t_warm - t_step) / t_cold, (t_cold - t_warm) / t_cold


def predicted_stall(step_sps: float, warm_sps: float, cold_sps: float, cached_fraction: float) -> float:
    """Model idle fraction when `cached_fraction` of samples come from page cache at the warm rate and the
    rest from storage at the cold rate."""
    f = min(max(cached_fraction, 0.0), 1.0)
    loader_sps = 1 / (f / warm_sps + (1 - f) / cold_sps)
    return max(0.0, 1 - loader_sps / step_sps)


def advise(bottleneck: str, cfg: LoaderConfig, fmt: str) -> list[str]:
    cores = psutil.cpu_count() or 1
    if bottleneck == "prep":
        out = []
        if backends.of(cfg).workers_knob == "num_workers" and cfg.num_workers < cores:
            out.append(f"more DataLoader workers (now {cfg.num_workers}, this machine has {cores} cores)")
        out.append(GPU_DECODE)
        out.append("store smaller or pre-decoded samples, so less CPU work per sample")
        return out
    if bottleneck == "fetch":
        out = []
        if fmt == "files":
            out.append("pack files into WebDataset shards (dataperf shards convert): large sequential reads")
        out.append("more workers / deeper prefetch to overlap more reads")
        out.append("faster storage, a local NVMe cache, or enough page cache for the dataset")
        return out
    return ["the loader keeps up: spend effort on the model step instead"]


def advise_limit(lim: LimitsResult, cfg: LoaderConfig, data: Data, step_sps: float) -> list[str]:
    """What to change for the limit that binds (None: that limit has no advice of its own here)."""
    b = lim.binding_limit
    if b == "storage":
        return advise("fetch", cfg, data.format)
    if b == "decode":
        out = []
        if data.kind == "image":
            out.append(GPU_DECODE)
        out += ["store smaller or pre-decoded samples, so less CPU work per sample",
                f"more workers do not help past the cores: {lim.usable_cores} usable cores at "
                f"{lim.decode_cpu_ms_per_sample:.2f} ms of CPU a sample are the ceiling"]
        return out
    if b == "workers":
        w, a = cfg.num_workers, lim.active_workers
        if w and a is not None and a < w:
            return [f"reshard to at least {w} shards per rank so every worker has one: dataperf shards convert "
                    f"SRC OUT --shards {w} (or shards make --shards {w})", f"or use {a} workers: the others idle"]
        need = math.ceil(step_sps / lim.per_worker_samples_per_s) if lim.per_worker_samples_per_s > 0 else None
        more = f"about {need} to reach the model's rate" if need else "more"
        return [f"more DataLoader workers (now {w}; {more}; CPU decode allows {lim.decode_samples_per_s:,.0f} "
                "samples/s)"]
    if b == "main_process":
        return ["a larger batch size: the main process pays per batch (receive, unpickle, pin), so fewer, larger "
                "batches cost it less", "return tensors rather than many Python objects per sample (each is "
                "pickled in a worker and unpickled in the main process)", "more workers do not raise this ceiling"]
    if b == "h2d":
        return ["pin memory (--pin-memory) so copies are DMA from page-locked memory", "move uint8 images and "
                "normalise on the GPU: a quarter of float32's bytes"]
    return []


def explain(lim: LimitsResult, cfg: LoaderConfig, step_sps: float, prep: float, fetch: float) -> str | None:
    """The sentence for an input-bound config, from the limit that binds (None: it is the model or nothing was
    measured, so the ceilings do not say which loader part falls short)."""
    b, stall = lim.binding_limit, f"the model idles {(prep + fetch) * 100:.0f}% of step time (prep " \
                                   f"{prep * 100:.0f}%, fetch {fetch * 100:.0f}%)"
    vs = f"against the model's {step_sps:,.0f} samples/s: {stall}"
    if b == "storage":
        return (f"bottleneck: storage: {lim.readers} readers get {lim.storage_mib_s:,.1f} MiB/s from the dataset's "
                f"files, {lim.storage_samples_per_s:,.0f} samples/s, {vs}")
    if b == "decode":
        return (f"bottleneck: CPU decode: {lim.decode_cpu_ms_per_sample:.2f} ms of CPU a sample on "
                f"{lim.usable_cores} usable cores allow {lim.decode_samples_per_s:,.0f} samples/s, {vs}")
    if b == "workers":
        w, a = cfg.num_workers, lim.active_workers
        who = (f"only {a} of {w} workers have work" if w and a is not None and a < w
               else f"{max(w, 1)} {'worker' if w else 'loading stream (num_workers=0)'}{'s' if w > 1 else ''}")
        return (f"bottleneck: workers: {who}, at {lim.per_worker_samples_per_s:,.0f} samples/s each "
                f"{lim.workers_samples_per_s:,.0f} samples/s, {vs}")
    if b == "main_process":
        return (f"bottleneck: the main process: it takes in at most {lim.main_process_samples_per_s:,.0f} samples/s "
                f"of these batches (receive, unpickle, pin), {vs}")
    if b == "h2d":
        return f"bottleneck: host-to-device copies: {lim.h2d_samples_per_s:,.0f} samples/s, {vs}"
    return None


def diagnose(data: Data | Path, cfg: LoaderConfig, sopts: StepOptions, topts: TrialOptions,
             throttle_mib_s: float | None = None, page_cache_gib: float | None = None,
             lopts: LimitsOptions | None = None) -> tuple[DiagnoseResult, LimitsResult]:
    """The three measurements, the stall split, and the limits of the config as it reads storage (the cold
    trial's when its cache was verified cold, else the warm one's): the sentence and advice follow the binding
    limit, and the effects a fed run would see are named. Returns the record and the limits record."""
    data = as_data(data)
    cfg, sopts = shape_for_model(data, cfg, sopts)
    step = measure_step(sopts)
    warm = run_trial(data, replace(cfg, cache="warm"), replace(topts, throttle_mib_s=None))
    cold = run_trial(data, replace(cfg, cache="cold"), replace(topts, throttle_mib_s=throttle_mib_s))
    for name, r in (("warm", warm), ("cold", cold)):
        if r.status != "ok":
            raise UserError(f"the {name}-cache loader trial failed: {r.error}")
    res = DiagnoseResult(data=data.spec, config=asdict(cfg), config_key=cfg.key(), model=sopts.model,
                         step_samples_per_s=step.samples_per_s, warm_samples_per_s=warm.samples_per_s_median,
                         cold_samples_per_s=cold.samples_per_s_median,
                         dataset_mib=(data.total_bytes or float("nan")) / 2**20)
    if not data.cache_managed:
        res.notes.append("warm and cold trials read the same way (" + data.cache_note().split(":")[0] + "), so "
                         "the fetch share is what --throttle-mib-s simulates, not a page-cache difference")
    res.notes += [f"warm: {n}" for n in warm.notes] + [f"cold: {n}" for n in cold.notes]
    res.cold_cache_verified = bool(cold.cache_verified)
    measured = cold if res.cold_cache_verified else warm
    lim = measure_limits(data, measured.loader_config,
                         replace(topts, throttle_mib_s=throttle_mib_s if measured is cold else None),
                         step=step, best=measured, lopts=lopts)
    res.binding_limit = lim.binding_limit
    judge(res, warm, cold, step, lim, cfg, data)
    fractions = list(WHAT_IF_FRACTIONS)
    if page_cache_gib is not None:
        fractions.append(min(1.0, page_cache_gib * 1024 / res.dataset_mib))
    if res.cold_cache_verified:
        res.what_if = [{"cached_fraction": f, "predicted_stall_fraction": predicted_stall(
            step.samples_per_s, warm.samples_per_s_median, cold.samples_per_s_median, f)} for f in fractions]
    return res, lim


def judge(res: DiagnoseResult, warm: LoaderResult, cold: LoaderResult, step: StepResult, lim: LimitsResult,
          cfg: LoaderConfig, data: Data) -> None:
    """The stall split, the bottleneck sentence and the advice (following the binding limit), and the effects."""
    cold_sps = cold.samples_per_s_median
    if not res.cold_cache_verified:
        # an unverified cold trial read from page cache: it says nothing about storage, so fetch is not measured
        res.cold_samples_per_s = cold_sps = float("nan")
        res.notes.append("cold cache not verified, so the fetch stall was not measured; the verdict rests on "
                         "the prep stall alone")
    res.compute_fraction, res.prep_stall_fraction, res.fetch_stall_fraction = stall_split(
        step.samples_per_s, warm.samples_per_s_median,
        cold_sps if res.cold_cache_verified else warm.samples_per_s_median)
    prep, fetch = res.prep_stall_fraction, res.fetch_stall_fraction
    effects = verdict.loader_effects(warm, step)
    res.effects = [e.name for e in effects]
    if prep + fetch < NEGLIGIBLE:
        res.bottleneck = "none"
        src = "even from cold storage" if res.cold_cache_verified else "from page cache (cold not verified)"
        rate = cold_sps if res.cold_cache_verified else warm.samples_per_s_median
        res.sentence = (f"not input-bound: the loader outruns the model {src} "
                        f"({rate:.0f} vs {step.samples_per_s:.0f} samples/s)")
        restarts = next((e for e in effects if e.name == "epoch_restarts"), None)
        if restarts is not None:
            res.sentence = (f"not input-bound at the loader's steady rate ({rate:.0f} vs {step.samples_per_s:.0f} "
                            f"samples/s), but its workers start again every epoch: per epoch the model would idle "
                            f"{restarts.stall_fraction * 100:.0f}% of the time (use --persistent-workers)")
        res.advice = advise("none", cfg, data.format)
    else:
        res.bottleneck = "prep" if prep >= fetch else "fetch"
        res.sentence = explain(lim, cfg, step.samples_per_s, prep, fetch) or _split_sentence(
            res, warm.samples_per_s_median, cold_sps, step.samples_per_s)
        res.advice = advise_limit(lim, cfg, data, step.samples_per_s) or advise(res.bottleneck, cfg, data.format)
    if not res.cold_cache_verified:
        res.fetch_stall_fraction = float("nan")
    res.notes += [f"effect: {e.sentence}" for e in effects]
    if "shared_cpu" not in res.effects:
        res.notes.append("loader and model were measured apart; on a shared CPU they also compete for cores")


def _split_sentence(res: DiagnoseResult, warm_sps: float, cold_sps: float, step_sps: float) -> str:
    """The stall split's own sentence, where the ceilings do not name a loader part (the loader gives less than
    every ceiling allows)."""
    if res.bottleneck == "prep":
        return (f"bottleneck: prep (CPU decode/collate) costs {res.prep_stall_fraction * 100:.0f}% of step time: "
                f"even from page cache the loader gives {warm_sps:.0f} samples/s against the model's "
                f"{step_sps:.0f}")
    return (f"bottleneck: fetch (storage) costs {res.fetch_stall_fraction * 100:.0f}% of step time: cold-cache "
            f"reads drop the loader from {warm_sps:.0f} to {cold_sps:.0f} samples/s")
