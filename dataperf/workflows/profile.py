"""torch.profiler around the end-to-end loop: Chrome trace, top ops, and step time split into
data wait / host-to-device copy / compute."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

from dataperf.data import Data, as_data
from dataperf.errors import UserError
from dataperf.measure.fed import EpochStream, shape_for_model, train_loop
from dataperf.measure.step import StepOptions, Trainer
from dataperf.measure.trial import TrialOptions, make_batches
from dataperf.results import LoaderConfig, ProfileResult

WAIT, WARMUP, ACTIVE = 1, 1, 3
SPANS = ("data_wait", "h2d", "forward", "backward", "optimizer")


def run_profile(data: Data | Path, cfg: LoaderConfig, sopts: StepOptions, out_dir: Path,
                top: int = 15) -> ProfileResult:
    data = as_data(data)
    cfg, sopts = shape_for_model(data, cfg, sopts)
    tr = Trainer(sopts)
    batches = make_batches(data, cfg, TrialOptions())
    cuda = tr.device.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    out_dir.mkdir(parents=True, exist_ok=True)
    trace = out_dir / "trace.json"
    with profile(activities=acts, schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(trace)), record_shapes=False) as prof:
        times, _ = train_loop(EpochStream(batches), tr, WAIT + WARMUP + ACTIVE, on_step=prof.step)
    res = ProfileResult(data=data.spec, config=asdict(cfg), config_key=cfg.key(), model=sopts.model,
                        device=str(tr.device), trace_path=str(trace))
    avgs = prof.key_averages()
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    res.sort_by = key
    ops = [e for e in avgs if e.key not in SPANS and not e.key.startswith("ProfilerStep")]
    ops.sort(key=lambda e: -getattr(e, key, 0))
    res.top_ops = [{"name": e.key, "calls": e.count, "self_ms": getattr(e, key, 0) / 1000,
                    "cpu_total_ms": e.cpu_time_total / 1000} for e in ops[:top]]
    # host-side span times from the CPU events only: on CUDA each span also appears as a GPU annotation,
    # and averaging by name would mix the two
    spans: dict[str, float] = {}
    for e in prof.events():
        if e.name in SPANS and e.device_type == DeviceType.CPU:
            spans[e.name] = spans.get(e.name, 0.0) + e.cpu_time_total / 1000 / ACTIVE
    res.span_ms = spans
    res.cuda_kernels_seen = sum(1 for e in avgs if cuda and getattr(e, "self_device_time_total", 0) > 0)
    # the split from the loop's own timers over the active steps (CUDA events on the GPU), and the host time
    # between the last step's return and each one's ask for data (the profiler's own work at the step boundary,
    # starting its trace before the first: beside two busy loops on 2 cores the loader's batch once came on 75 ms
    # meanwhile, and that step's wait was 75 ms less)
    act = slice(WAIT + WARMUP, None)
    wait = sum(times.wait_s[act]) * 1000 / ACTIVE
    h2d = sum(times.h2d_ms[act]) / ACTIVE
    comp = sum(times.compute_ms[act]) / ACTIVE
    between = sum(times.between_ms[act]) / ACTIVE
    total = wait + h2d + comp + between
    res.split_ms = {"data_wait": wait, "h2d": h2d, "compute": comp, "between_steps": between}
    res.split_fraction = {k: v / total for k, v in res.split_ms.items()} if total else {}
    return res


def nsys_wrap(argv: list[str], out_dir: Path) -> tuple[int, str]:
    """Re-run this profile command under Nsight Systems; returns (exit code, report path or reason)."""
    exe = shutil.which("nsys")
    if exe is None:
        return 0, "nsys not installed (NVIDIA Nsight Systems); skipped"
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "nsys-report"
    inner = [a for a in argv if a != "--nsys"]
    rc = subprocess.call([exe, "profile", "-o", str(report), "--force-overwrite", "true", "--trace", "cuda,nvtx,osrt",
                          sys.executable, "-m", "dataperf", *inner])
    if rc != 0:
        raise UserError(f"nsys profile exited with {rc}")
    return rc, str(report) + ".nsys-rep"

