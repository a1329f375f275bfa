"""The differential method for data stalls: the model on synthetic data (no stalls), the loader on a warm
page cache (prep cost only), and on a cold cache (prep + fetch). The gaps between them are the prep stall
(CPU decode/collate) and the fetch stall (storage), each as a share of the real step time."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import psutil

from dataperf.errors import UserError
from dataperf.fed import shape_for_model
from dataperf.records import DiagnoseResult, LoaderConfig
from dataperf.runner import TrialOptions, run_trial
from dataperf.sources import Data, as_data
from dataperf.step import StepOptions, measure_step

NEGLIGIBLE = 0.05
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
        if cfg.format != "dali" and cfg.num_workers < cores:
            out.append(f"more DataLoader workers (now {cfg.num_workers}, this machine has {cores} cores)")
        out.append("move JPEG decode to the GPU with DALI (--format dali --dali-decode mixed)")
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


def diagnose(data: Data | Path, cfg: LoaderConfig, sopts: StepOptions, topts: TrialOptions,
             throttle_mib_s: float | None = None, page_cache_gib: float | None = None) -> DiagnoseResult:
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
    if prep + fetch < NEGLIGIBLE:
        res.bottleneck = "none"
        src = "even from cold storage" if res.cold_cache_verified else "from page cache (cold not verified)"
        rate = cold_sps if res.cold_cache_verified else warm.samples_per_s_median
        res.sentence = (f"not input-bound: the loader outruns the model {src} "
                        f"({rate:.0f} vs {step.samples_per_s:.0f} samples/s)")
    elif prep >= fetch:
        res.bottleneck = "prep"
        res.sentence = (f"bottleneck: prep (CPU decode/collate) costs {prep * 100:.0f}% of step time: even from "
                        f"page cache the loader gives {warm.samples_per_s_median:.0f} samples/s against the "
                        f"model's {step.samples_per_s:.0f}")
    else:
        res.bottleneck = "fetch"
        res.sentence = (f"bottleneck: fetch (storage) costs {fetch * 100:.0f}% of step time: cold-cache reads "
                        f"drop the loader from {warm.samples_per_s_median:.0f} to {cold_sps:.0f} "
                        "samples/s")
    if not res.cold_cache_verified:
        res.fetch_stall_fraction = float("nan")
    res.advice = advise(res.bottleneck, cfg, data.format)
    fractions = list(WHAT_IF_FRACTIONS)
    if page_cache_gib is not None:
        fractions.append(min(1.0, page_cache_gib * 1024 / res.dataset_mib))
    if res.cold_cache_verified:
        res.what_if = [{"cached_fraction": f, "predicted_stall_fraction": predicted_stall(
            step.samples_per_s, warm.samples_per_s_median, cold_sps, f)} for f in fractions]
    res.notes.append("loader and model were measured apart; on a shared CPU they also compete for cores")
    return res
