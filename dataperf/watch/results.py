"""From the hook's per-process files to one `watch` record per rank: steady-window figures, the hook's
cost, the loaders the script built, and the `dataperf sweep` command that starts from them."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataperf.formats.dataset_dir import MANIFEST
from dataperf.records import TORCH_PREFETCH_FACTOR, WatchResult, percentile, summarize
from dataperf.watch.launch import Watched

BLOCKS = 5  # the steady window is cut into this many consecutive blocks: the "repeats" compare needs
STALL_INPUT_BOUND = 0.05


@dataclass
class ProcLog:
    """Everything one process of the job wrote."""

    start: dict[str, Any] = field(default_factory=dict)
    loaders: dict[int, dict[str, Any]] = field(default_factory=dict)
    worker_pids: list[int] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    cuda: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None


def read_lines(path: Path) -> list[dict[str, Any]]:
    """JSON lines; a torn last line (the job was killed mid-write) is skipped."""
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def read_hook_dir(d: Path) -> tuple[list[ProcLog], list[dict[str, Any]]]:
    """Per-process logs (those that stepped or iterated a DataLoader) and the hook's failure lines."""
    logs, errors = [], []
    for p in sorted(d.glob("*.jsonl")):
        lines = read_lines(p)
        if p.name.startswith("error."):
            errors += lines
            continue
        log = ProcLog()
        for r in lines:
            t = r.get("t")
            if t == "start":
                log.start = r
            elif t == "loader":
                log.loaders[r["id"]] = r
            elif t == "workers":
                log.worker_pids += r["pids"]
            elif t == "step":
                log.steps.append(r)
            elif t == "cuda":
                log.cuda.append(r)
            elif t == "end":
                log.end = r
        logs.append(log)
    return logs, errors


def data_path_of(d: Path) -> str | None:
    """The dataset path of the loader that delivered the most batches, in any process."""
    logs, _ = read_hook_dir(d)
    best = _main_loader([ld for log in logs for ld in _loader_rows(log)])
    return best.get("data_path") if best else None


def _loader_rows(log: ProcLog) -> list[dict[str, Any]]:
    end = log.end or {}
    rows = []
    for lid, ld in log.loaders.items():
        row = {k: v for k, v in ld.items() if k not in ("t", "id")}
        row["batches"] = end.get("loader_batches", {}).get(str(lid))
        row["iterators"] = end.get("loader_iters", {}).get(str(lid))
        rows.append(row)
    return rows


def _main_loader(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return max(rows, key=lambda r: r.get("batches") or 0) if rows else None


def _blocks(xs: list[Any], n: int) -> list[list[Any]]:
    k = max(1, min(n, len(xs) // 2))
    size = len(xs) / k
    return [xs[round(i * size):round((i + 1) * size)] for i in range(k)]


def _rank(log: ProcLog) -> int | None:
    r = log.start.get("rank")
    return int(r) if r not in (None, "") else None


def build(w: Watched, cmd: list[str], label: str | None, cores: int | None = None) -> list[WatchResult]:
    """One record per rank (per stepping process); with no hook data, one record that says why."""
    logs, errors = read_hook_dir(w.hook_dir) if w.hook_dir else ([], [])
    logs = [g for g in logs if g.steps or g.loaders]
    ident = label or shlex.join(cmd)
    failures = [f"hook could not measure {e.get('what')} (pid {e.get('pid')}): {e.get('why')}" for e in errors]
    if not logs:
        rec = WatchResult(command=cmd, config_key=_key(ident, None), exit_code=w.exit_code, hook_loaded=False,
                          collectors=w.collectors, notes=w.notes + failures)
        if w.hook_dir is not None:
            rec.notes.append("no step or DataLoader data from the job: the startup hook did not load (python -S or "
                             "-I, a PYTHONPATH reset by the command, a non-Python job) or the job never iterated a "
                             "torch DataLoader nor called optimizer.step(); step time, data stall, loader settings "
                             "and the hook's cost were not measured; the collectors below still were")
        return [rec]
    logs.sort(key=lambda g: (_rank(g) is None, _rank(g) or 0, g.start.get("pid", 0)))
    out = []
    for i, log in enumerate(logs):
        rec = _one(log, cmd, ident, w, cores)
        rec.notes += failures
        if i == 0:
            rec.collectors = _label_processes(w.collectors, logs)
        else:
            rec.notes.append(f"collectors cover the whole job; they are in rank {_rank(logs[0])}'s record")
        out.append(rec)
    return out


def _key(ident: str, rank: int | None) -> str:
    """The same job (command, or --label) and rank match across base and head in `compare`."""
    return json.dumps({"watch": ident, **({} if rank is None else {"rank": rank})}, sort_keys=True)


def _one(log: ProcLog, cmd: list[str], ident: str, w: Watched, cores: int | None) -> WatchResult:
    rank = _rank(log)
    ws = int(log.start.get("world_size") or 1)
    loaders = _loader_rows(log)
    main = _main_loader(loaders)
    rec = WatchResult(command=cmd, config_key=_key(ident, rank),
                      rank=rank, world_size=ws, pid=log.start.get("pid"), exit_code=w.exit_code, hook_loaded=True,
                      steps_total=len(log.steps), loaders=loaders, worker_pids=log.worker_pids,
                      data_path=main.get("data_path") if main else None, notes=list(w.notes))
    steps = [s for s in log.steps if s.get("step_ms") is not None]
    if not steps:
        rec.notes.append("the job iterated a DataLoader but never called optimizer.step(): no step boundaries, so "
                         "no step time or data stall")
        rec.next_step = sweep_command(main, cores)
        return rec
    rec.first_step_ms = steps[0]["step_ms"]
    steady = steps[1:] if len(steps) > 1 else steps
    if len(steps) == 1:
        rec.notes.append("only one optimizer step: its figures include worker start-up and the first batch")
    rec.steps_measured = len(steady)
    ms = [s["step_ms"] for s in steady]
    waits = [s["wait_ms"] for s in steady]
    rec.step_ms_median, rec.step_ms_p99 = summarize(ms)["median"], percentile(ms, 99)
    rec.data_wait_ms_median, rec.data_wait_ms_p99 = summarize(waits)["median"], percentile(waits, 99)
    rec.data_stall_fraction = sum(waits) / sum(ms)
    samples = sum(s["samples"] for s in steady)
    rec.samples_per_s = samples / (sum(ms) / 1000)
    busy_s = (sum(ms) - sum(waits)) / 1000
    rec.model_samples_per_s = samples / busy_s if busy_s > 0 else float("nan")
    rec.run_samples_per_s = sum(s["samples"] for s in steps) / (sum(s["step_ms"] for s in steps) / 1000)
    for b in _blocks(steady, BLOCKS):
        bms = sum(s["step_ms"] for s in b)
        rec.step_ms_repeats.append(bms / len(b))
        rec.samples_per_s_repeats.append(sum(s["samples"] for s in b) / (bms / 1000))
        rec.data_stall_fraction_repeats.append(sum(s["wait_ms"] for s in b) / bms)
    hook = [s.get("hook_us", 0.0) for s in steady]
    rec.hook_us_per_step_median = summarize(hook)["median"]
    rec.hook_overhead_pct = sum(hook) / 1000 / sum(ms) * 100
    if rec.hook_overhead_pct >= 1:
        rec.notes.append(f"the hook cost {rec.hook_overhead_pct:.2f}% of step time (over the 1% budget): steps "
                         "this short are slowed by the measurement itself")
    if not samples:
        rec.notes.append("no DataLoader batch reached the optimizer steps: samples/s and data stall are 0")
    _gpu(rec, log)
    rec.next_step = sweep_command(main, cores, rec.model_samples_per_s)
    return rec


def _gpu(rec: WatchResult, log: ProcLog) -> None:
    """GPU idle share, 1 - sum(busy) / sum(wall), over the steady steps whose CUDA events completed."""
    cu = [c for c in log.cuda if c.get("n", 0) > 1 and c.get("wall_ms")]
    if not cu:
        return
    rec.gpu_idle_fraction = max(0.0, 1 - sum(c["busy_ms"] for c in cu) / sum(c["wall_ms"] for c in cu))
    rec.gpu_idle_fraction_repeats = [max(0.0, 1 - sum(c["busy_ms"] for c in b) / sum(c["wall_ms"] for c in b))
                                     for b in _blocks(cu, BLOCKS)]


def _label_processes(collectors: dict[str, Any], logs: list[ProcLog]) -> dict[str, Any]:
    """Name each process row by what the hook saw it do: a rank's main process or one of its workers."""
    roles: dict[int, str] = {}
    for log in logs:
        r = _rank(log)
        tag = f"rank {r}" if r is not None else "job"
        roles[log.start.get("pid")] = f"{tag} main"
        for p in log.worker_pids:
            roles[p] = f"{tag} worker"
    procs = collectors.get("processes")
    if procs:
        for row in procs["per_process"]:
            if row["pid"] in roles:
                row["role"] = roles[row["pid"]]
            elif row["role"] == "main":
                row["role"] = "launched"
    return collectors


def _ladder(w: int, cores: int) -> list[int]:
    top = max(2 * cores, w)
    if w == 0:
        return [x for x in (0, 1, 2, 4) if x <= top]
    return sorted({max(1, w // 2), w, min(2 * w, top), min(4 * w, top)})


def sweep_command(loader: dict[str, Any] | None, cores: int | None, model_sps: float | None = None) -> str:
    """The `dataperf sweep` that starts from the script's loader settings, on the same data."""
    if loader is None:
        return "no DataLoader seen: nothing to sweep"
    cores = cores or os.cpu_count() or 1
    w = int(loader.get("num_workers") or 0)
    pf = int(loader.get("prefetch_factor") or TORCH_PREFETCH_FACTOR)  # torch's own, when the script left it
    bs = loader.get("batch_size") or 32
    data = loader.get("data_path")
    args = ["dataperf", "sweep", shlex.quote(data) if data else "DATA", "--batch-size", str(bs),
            "--num-workers", ",".join(map(str, _ladder(w, cores))), "--prefetch-factor", f"{pf},{2 * pf}",
            "--decode"]
    if loader.get("pin_memory"):
        args += ["--pin-memory", "on"]
    if loader.get("persistent_workers"):
        args += ["--persistent-workers", "on"]
    cmd = " ".join(args)
    extra = []
    if data is None:
        extra.append(f"the dataset ({loader.get('dataset_type')}) keeps no path attribute: put its folder for DATA")
    elif not (Path(data) / MANIFEST).is_file():
        extra.append(f"{data} is not a dataperf dataset: pack it first (`dataperf shards convert {shlex.quote(data)}"
                     " OUT`) and sweep OUT")
    if model_sps and model_sps == model_sps:
        extra.append(f"your model consumes {model_sps:,.0f} samples/s when fed: look for a config above "
                     f"{1.2 * model_sps:,.0f} (1.2x headroom)")
    return cmd + ("" if not extra else " # " + "; ".join(extra))
