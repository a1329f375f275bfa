"""The GPU paths, measured on a CUDA machine in one run (the lent H200 here; see RESULTS.md):

1. JPEG decode: DALI GPU ("mixed") decode vs DataLoader + PIL on the same WebDataset shards (warm cache)
2. host-to-device copies: pinned vs pageable memory, and the e2e loop with pin_memory on and off
3. CUDA peak memory of the built-in GPT step: AdamW vs bitsandbytes Adam8bit vs CPU-offloaded AdamW
4. torch.profiler CUDA activity around the fed loop

    python benchmarks/gpu_paths.py --out DIR

Each section is written to DIR/gpu_paths.json as soon as it finishes; a failing section records its error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import torch

from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure.step import StepOptions, measure_step
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig
from dataperf.workflows.e2e import run_e2e
from dataperf.workflows.profile import run_profile

RESULTS: dict = {}


def save(out: Path) -> None:
    (out / "gpu_paths.json").write_text(json.dumps(RESULTS, indent=1, default=str))


def section(name: str, out: Path, only: set[str]):
    def wrap(fn):
        if only and name not in only:
            return fn
        t0 = time.perf_counter()
        try:
            RESULTS[name] = fn()
        except Exception as e:
            RESULTS[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]}
        RESULTS[name] = {**RESULTS[name], "wall_s": round(time.perf_counter() - t0, 1)}
        save(out)
        print(f"== {name}: {json.dumps(RESULTS[name], default=str)[:1500]}", flush=True)
        return fn
    return wrap


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=None, help="[/tmp/dataperf-gpu/jpeg-wds-<shards>sh]")
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--shards", type=int, default=None,
                    help="shard count [2 x cores]: at least the most workers used, so none sits idle (audit H2)")
    ap.add_argument("--only", default="", help="comma list of sections to run [all]")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    a.out.mkdir(parents=True, exist_ok=True)
    RESULTS["env"] = {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform(),
                      "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                      "cpus": os.cpu_count()}
    cores = os.cpu_count() or 1
    shards = a.shards or 2 * cores
    a.data = a.data or Path(f"/tmp/dataperf-gpu/jpeg-wds-{shards}sh")
    if not a.data.exists():
        write_dataset(a.data, "image", "webdataset", a.count, seed=0, image=ImageSpec(512, 512, 90), shards=shards)
    RESULTS["env"]["data"] = {"path": str(a.data), "shards": shards, "count": a.count}
    opts = TrialOptions(repeats=5, warmup_batches=3, collect=False)

    @section("decode", a.out, only)
    def _decode():
        rows = []
        for w in sorted({4, 8, cores}):
            cfg = LoaderConfig(backend="webdataset", batch_size=128, num_workers=w, prefetch_factor=4, decode=True,
                               image_size=224)
            r = run_trial(a.data, cfg, opts)
            rows.append({"backend": f"DataLoader+PIL w={w}", "status": r.status, "error": r.error,
                         "samples_per_s": r.samples_per_s_median, "repeats": r.samples_per_s_repeats,
                         "repeat_samples_per_s": r.repeat_samples_per_s_median, "shards": r.shards,
                         "active_workers": r.active_workers, "notes": r.notes})
        for dev in ("mixed", "cpu"):
            for threads in (4, 8):
                cfg = LoaderConfig(backend="dali", batch_size=128, decode=True, image_size=224,
                                   dali_num_threads=threads, dali_prefetch_queue_depth=2, dali_decode_device=dev)
                r = run_trial(a.data, cfg, opts)
                rows.append({"backend": f"DALI decode={dev} threads={threads}", "status": r.status,
                             "error": r.error, "samples_per_s": r.samples_per_s_median,
                             "repeats": r.samples_per_s_repeats, "repeat_samples_per_s": r.repeat_samples_per_s_median})
        ok = [x for x in rows if x["status"] == "ok"]
        best_dl = max((x for x in ok if x["backend"].startswith("DataLoader")), key=lambda x: x["samples_per_s"],
                      default=None)
        best_gpu = max((x for x in ok if "mixed" in x["backend"]), key=lambda x: x["samples_per_s"], default=None)
        ratio = best_gpu["samples_per_s"] / best_dl["samples_per_s"] if best_dl and best_gpu else None
        return {"rows": rows, "best_dataloader": best_dl, "best_dali_gpu": best_gpu,
                "ratio_dali_gpu_over_dataloader": ratio}

    @section("h2d_copy", a.out, only)
    def _copy():
        x = torch.randint(0, 256, (256, 3, 224, 224), dtype=torch.uint8)
        out = {}
        for name, src in (("pageable", x), ("pinned", x.pin_memory())):
            for _ in range(3):
                src.to("cuda", non_blocking=True)
            torch.cuda.synchronize()
            times = []
            for _ in range(20):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                src.to("cuda", non_blocking=True)
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
            times.sort()
            ms = times[len(times) // 2]
            out[name] = {"ms_median": ms, "gib_s": x.numel() / 2**30 / (ms / 1000)}
        out["ratio_pinned_over_pageable_gib_s"] = out["pinned"]["gib_s"] / out["pageable"]["gib_s"]
        return out

    @section("e2e_pin_memory", a.out, only)
    def _e2e():
        rows = {}
        for pin in (False, True):
            cfg = LoaderConfig(backend="webdataset", batch_size=128, num_workers=cores, prefetch_factor=4,
                               decode=True, image_size=224, pin_memory=pin)
            r = run_e2e(a.data, cfg, StepOptions(model="cnn-small", device="cuda"), steps=20, repeats=3, warmup=5,
                        topts=opts)
            rows["pinned" if pin else "pageable"] = {k: v for k, v in asdict(r).items() if k in (
                "step_ms_median", "data_wait_ms_median", "h2d_ms_median", "compute_ms_median", "samples_per_s",
                "data_stall_fraction", "gpu_idle_fraction", "host_wait_fraction", "stall_basis",
                "predicted_stall_fraction", "loader_samples_per_s", "loader_repeat_samples_per_s",
                "predicted_loader_samples_per_s", "step_samples_per_s", "epoch_restarts", "notes")}
        return rows

    @section("optimizer_memory", a.out, only)
    def _mem():
        rows = {}
        for opt in ("adamw", "adam8bit", "adamw-cpu-offload"):
            try:
                # a 190M-parameter GPT on short sequences: optimizer state, not activations, dominates memory
                r = measure_step(StepOptions(model="gpt-medium", batch_size=4, seq_len=256, device="cuda",
                                             optimizer=opt, steps=10, repeats=3, warmup=3))
                rows[opt] = {"step_ms_median": r.step_ms_median, "peak_mem_mib": r.peak_mem_mib,
                             "nvml_peak_used_mib": r.nvml_peak_used_mib, "params_m": r.params_m,
                             "samples_per_s": r.samples_per_s, "peak_mem_mib_repeats": r.peak_mem_mib_repeats}
            except Exception as e:
                rows[opt] = {"error": f"{type(e).__name__}: {e}"}
            torch.cuda.empty_cache()
        base = rows.get("adamw", {}).get("peak_mem_mib")
        for row in rows.values():
            if base and "peak_mem_mib" in row:
                row["reduction_pct_vs_adamw"] = (1 - row["peak_mem_mib"] / base) * 100
        return rows

    @section("step_gpt_cuda", a.out, only)
    def _step():
        r = measure_step(StepOptions(model="gpt-small", batch_size=32, seq_len=1024, device="cuda", amp="bf16",
                                     steps=10, repeats=3, warmup=3))
        return {k: v for k, v in asdict(r).items() if k in ("step_ms_median", "step_ms_min", "step_ms_max",
                "samples_per_s", "tokens_per_s", "peak_mem_mib", "cuda_max_allocated_mib", "nvml_peak_used_mib",
                "notes")}

    @section("profile_cuda", a.out, only)
    def _prof():
        cfg = LoaderConfig(backend="webdataset", batch_size=128, num_workers=cores, prefetch_factor=4, decode=True,
                           image_size=224, pin_memory=True)
        r = run_profile(a.data, cfg, StepOptions(model="cnn-small", device="cuda"), Path("/tmp/dataperf-gpu/profile"))
        return {"cuda_kernels_seen": r.cuda_kernels_seen, "sort_by": r.sort_by, "top_ops": r.top_ops[:8],
                "split_ms": r.split_ms, "split_fraction": r.split_fraction,
                "trace_mib": Path(r.trace_path).stat().st_size / 2**20}

    return 0


if __name__ == "__main__":
    sys.exit(main())
