"""GPU memory of optimizer choices at one batch size, and the largest batch each fits.

Each trial runs in its own process (`python -m dataperf.workflows.memory`), so one optimizer's cached blocks,
pinned host buffers and DeepSpeed's global state never reach the next one's figures.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from dataperf.errors import UserError
from dataperf.results import MemoryResult

NVML_INTERVAL_S = 1.0  # what nvidia-smi -l 1 would show; a shorter peak between samples is not seen
Trial = Callable[[dict], dict]  # StepOptions fields -> {"status": ok|oom|failed, ...}


def reduction_pct(base_mib: float | None, mib: float | None) -> float | None:
    """How much less memory than the AdamW row, in percent (negative: more)."""
    if not base_mib or mib is None:
        return None
    return (1 - mib / base_mib) * 100


def search_max_batch(fits: Callable[[int], bool], start: int, limit: int,
                     tolerance_pct: float = 0.0) -> tuple[int, list[int]]:
    """Largest batch in [1, limit] for which fits(b) is True: double from start until one fails, then bisect
    until the gap is within tolerance_pct of the fitting batch. Returns (largest fitting batch or 0, tried)."""
    if start <= 0 or limit < start:
        raise UserError("--batch-size must be positive and not above --max-batch-limit")
    tried: list[int] = []

    def check(b: int) -> bool:
        tried.append(b)
        return fits(b)

    lo, hi = 0, None  # lo fits (0: none yet), hi does not
    b = start
    while b <= limit:
        if check(b):
            lo = b
            if b == limit:
                return lo, tried
            b = min(b * 2, limit)
        else:
            hi = b
            break
    if hi is None:
        return lo, tried
    while hi - lo > max(1, lo * tolerance_pct / 100):
        mid = (lo + hi) // 2
        if check(mid):
            lo = mid
        else:
            hi = mid
    return lo, tried


def subprocess_trial(opts: dict) -> dict:
    """One trial in a fresh interpreter; its stdout/stderr tail becomes the error of a failed trial."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "result.json"
        p = subprocess.run([sys.executable, "-m", "dataperf.workflows.memory", json.dumps(opts, default=str), str(out)],
                           capture_output=True, text=True)
        if out.is_file():
            return json.loads(out.read_text())
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        return {"status": "failed", "error": f"trial process exited {p.returncode}: {tail[0]}"}


def _run_trial(opts: dict) -> dict:
    """Inside the trial process: measure one step configuration, an OOM reported with its memory summary."""
    import torch

    from dataperf.measure.step import StepOptions, _measure_step, is_oom

    so = StepOptions(**{k: (Path(v) if k == "results_dir" and v else v) for k, v in opts.items()})
    try:
        r = _measure_step(so)
    except UserError as e:
        return {"status": "failed", "error": str(e)}
    except Exception as e:
        if not is_oom(e):
            return {"status": "failed", "error": f"{type(e).__name__}: {e}"}
        d = so.results_dir or Path("results")
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"oom-{so.model.replace(':', '_').replace('/', '_')}-{so.optimizer}-bs{so.batch_size}.txt"
        path.write_text(torch.cuda.memory_summary() if torch.cuda.is_available() else str(e))
        return {"status": "oom", "error": str(e).splitlines()[0][:300], "oom_summary": str(path)}
    return {"status": "ok", "step": dataclasses.asdict(r)}


def measure_memory(base: dict, optimizers: list[str], max_batch: bool = False, max_batch_limit: int = 1024,
                   tolerance_pct: float = 10.0, trial: Trial = subprocess_trial,
                   on_result: Callable[[MemoryResult], None] | None = None) -> list[MemoryResult]:
    """One row per optimizer at base["batch_size"]; with max_batch, each row's largest fitting batch."""
    if not optimizers:
        raise UserError("--optimizers is empty; give e.g. adamw,adam8bit,zero2-offload")
    rows: list[MemoryResult] = []
    for name in optimizers:
        opts = dict(base, optimizer=name, nvml_interval_s=NVML_INTERVAL_S)
        got = trial(opts)
        row = MemoryResult(model=opts["model"], optimizer=name, device=opts["device"],
                           batch_size=opts["batch_size"], seq_len=opts.get("seq_len"), amp=opts.get("amp"),
                           nvml_interval_s=NVML_INTERVAL_S)
        if got["status"] == "ok":
            s = got["step"]
            row.params_m, row.step_ms_median, row.samples_per_s = s["params_m"], s["step_ms_median"], s["samples_per_s"]
            row.cuda_max_allocated_mib, row.nvml_peak_used_mib = s["cuda_max_allocated_mib"], s["nvml_peak_used_mib"]
            row.notes += s["notes"]
        else:
            row.status, row.error, row.oom_summary = "failed", got["error"], got.get("oom_summary")
        if max_batch and got["status"] != "failed":
            first_oom: list[str] = []

            def fits(b: int, name=name, opts=opts, first_oom=first_oom) -> bool:
                r = trial(dict(opts, batch_size=b, repeats=1, steps=2, warmup=1))
                if r["status"] == "failed":
                    raise UserError(f"{name} at batch {b} failed (not out of memory): {r['error']}")
                if r["status"] == "oom" and not first_oom:
                    first_oom.append(r["oom_summary"])
                return r["status"] == "ok"

            try:
                row.max_batch, row.max_batch_tried = search_max_batch(fits, opts["batch_size"], max_batch_limit,
                                                                      tolerance_pct)
            except UserError as e:
                row.notes.append(f"max-batch search stopped: {e}")
            row.oom_summary = row.oom_summary or (first_oom[0] if first_oom else None)
        rows.append(row)
    base_row = next((r for r in rows if r.optimizer == "adamw" and r.status == "ok"), None)
    for r in rows:
        r.reduction_vs_adamw_pct = reduction_pct(base_row.cuda_max_allocated_mib if base_row else None,
                                                 r.cuda_max_allocated_mib)
        if on_result:
            on_result(r)
    return rows


if __name__ == "__main__":
    result = _run_trial(json.loads(sys.argv[1]))
    Path(sys.argv[2]).write_text(json.dumps(result, default=str))
