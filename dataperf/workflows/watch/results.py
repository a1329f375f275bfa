"""From the hook's per-process files to one `watch` record per rank: steady-window figures, the hook's
cost, the loaders the script built, and the `dataperf sweep` command that starts from the training one."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataperf.data import Data, resolve
from dataperf.errors import UserError
from dataperf.measure import trial
from dataperf.results import TORCH_PREFETCH_FACTOR, WatchResult, percentile, summarize
from dataperf.workflows.watch.launch import Watched

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
    batch_shapes: dict[int, list[int]] = field(default_factory=dict)  # per loader, its first batch's
    model: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    worker_loader: dict[int, int] = field(default_factory=dict)  # worker pid -> the loader it works for
    worker_fetch: dict[int, dict[str, Any]] = field(default_factory=dict)  # worker pid -> its fetch totals


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
    fetched: dict[int, dict[str, Any]] = {}
    for p in sorted(d.glob("*.jsonl")):
        lines = read_lines(p)
        if p.name.startswith("error."):
            errors += lines
            continue
        if p.name.startswith("fetch."):  # a worker's totals: the last line holds them all
            if lines:
                fetched[lines[-1]["pid"]] = lines[-1]
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
                log.worker_loader.update(dict.fromkeys(r["pids"], r["loader"]))
            elif t == "step":
                log.steps.append(r)
            elif t == "cuda":
                log.cuda.append(r)
            elif t == "batch":
                log.batch_shapes[r["loader"]] = r["shape"]
            elif t == "model":
                log.model = r
            elif t == "end":
                log.end = r
        logs.append(log)
    for log in logs:
        log.worker_fetch = {p: fetched[p] for p in log.worker_pids if p in fetched}
    return logs, errors


def data_path_of(d: Path) -> str | None:
    """The folder of the training loader's data, in any process (a glob of shards: their folder)."""
    logs, _ = read_hook_dir(d)
    best = _main_loader([ld for log in logs for ld in _loader_rows(log)])
    path = best.get("data_path") if best else None
    return os.path.dirname(path) if path and "*" in path else path


def _loader_rows(log: ProcLog) -> list[dict[str, Any]]:
    end = log.end or {}
    rows = []
    for lid, ld in log.loaders.items():
        row = {k: v for k, v in ld.items() if k != "t"}
        for key, name in (("batches", "loader_batches"), ("iterators", "loader_iters"),
                          ("steps_fed", "loader_steps"), ("batch_max", "loader_batch_max")):
            row[key] = end.get(name, {}).get(str(lid))
        row["batch_shape"] = log.batch_shapes.get(lid)
        rows.append(row)
    return rows


def _main_loader(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The training loader: the one whose batches the optimizer steps trained on (a validation loader's
    batches are never the last before a step), then the one that delivered the most, then the first built."""
    return max(rows, key=lambda r: (r.get("steps_fed") or 0, r.get("batches") or 0)) if rows else None


def _training(steps: list[dict[str, Any]], rec: WatchResult) -> list[dict[str, Any]]:
    """The steps' training time: an evaluation between two steps (its batches taken with gradients off) is
    taken out of the step it fell in, and counted on the record apart, with a note: its waits are not the
    training loop's data stall (a validation loader waiting 1.2 s a step read as a 73% stall where training
    waited 60%)."""
    out = []
    for s in steps:
        if s.get("eval_ms") or s.get("eval_batches"):
            rec.eval_batches += int(s.get("eval_batches", 0))
            rec.eval_s += s.get("eval_ms", 0.0) / 1000
            rec.eval_wait_s += s.get("eval_wait_ms", 0.0) / 1000
            s = {**s, "step_ms": max(s["step_ms"] - s.get("eval_ms", 0.0), 0.0)}
        out.append(s)
    if rec.eval_batches:
        rec.notes.append(f"evaluation: {rec.eval_batches} batches taken with gradients off (no_grad or "
                         f"inference_mode), {rec.eval_s:,.1f} s of the run, {rec.eval_wait_s:,.1f} s of it waiting "
                         "for data: left out of the training figures (step time, data stall, samples/s)")
    return out


def _blocks(xs: list[Any], n: int) -> list[list[Any]]:
    k = max(1, min(n, len(xs) // 2))
    size = len(xs) / k
    return [xs[round(i * size):round((i + 1) * size)] for i in range(k)]


def _rank(log: ProcLog) -> int | None:
    r = log.start.get("rank")
    return int(r) if r not in (None, "") else None


def build(w: Watched, cmd: list[str], label: str | None, cores: int | None = None) -> list[WatchResult]:
    """One record per rank (per stepping process); with no hook data, one record that says why."""
    raw, errors = read_hook_dir(w.hook_dir) if w.hook_dir else ([], [])
    logs = [g for g in raw if g.steps or g.loaders]
    ident = label or shlex.join(cmd)
    failures = [f"hook could not measure {e.get('what')} (pid {e.get('pid')}): {e.get('why')}" for e in errors]
    if not logs:
        rec = WatchResult(command=cmd, config_key=_key(ident, None), exit_code=w.exit_code, hook_loaded=False,
                          collectors=w.collectors, notes=w.notes + failures)
        if w.hook_dir is not None:
            loaded = any(w.hook_dir.glob("loaded.pid*"))  # the hook's marker (dataperf_watch_hook.LOADED)
            rec.notes.append(no_data_note(w, loaded, torch_seen=any(g.start for g in raw)))
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


def no_data_note(w: Watched, loaded: bool, torch_seen: bool) -> str:
    """Why a watched job gave no step or DataLoader data: a job the hook loaded in that failed before importing
    torch (a wrong script path exits 2 at once) is its own error, not the hook's; one that imported torch ran
    with the hook and never iterated a DataLoader nor stepped; one the hook never loaded in says how that
    happens."""
    lost = ("step time, data stall, loader settings and the hook's cost were not measured; the collectors below "
            "still were")
    exited = f"the job exited {w.exit_code} after {w.wall_s:.1f} s" if w.exit_code not in (None, 0) else ""
    if not loaded:
        return ("no step or DataLoader data from the job: the startup hook did not load (python -S or -I, a "
                f"PYTHONPATH reset by the command, a non-Python job){'; ' + exited if exited else ''}; {lost}")
    if exited and not torch_seen:
        return (f"{exited}, before it imported torch (its own error is above): nothing was measured; fix the "
                "command and watch it again")
    if not torch_seen:
        return f"the job never imported torch: no DataLoader or optimizer step to measure; {lost}"
    end = f" ({exited}; its own error is above)" if exited else ""
    return f"the hook loaded, but the job iterated no torch DataLoader and called no optimizer.step(){end}; {lost}"


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
                      data_path=main.get("data_path") if main else None, notes=list(w.notes),
                      files_read=list((log.end or {}).get("files_read") or []))
    steps = _training([s for s in log.steps if s.get("step_ms") is not None], rec)
    if not steps:
        rec.notes.append("the job iterated a DataLoader but never called optimizer.step(): no step boundaries, so "
                         "no step time or data stall")
        rec.next_step, rec.next_notes = sweep_command(main, cores, model=_model_factory(log), cuda=bool(log.cuda),
                                                      world_size=ws)
        return rec
    rec.first_step_ms = steps[0]["step_ms"]
    steady = steps[1:] if len(steps) > 1 else steps
    if len(steps) == 1:
        rec.notes.append("only one optimizer step: its figures include worker start-up and the first batch")
    rec.steps_measured = len(steady)
    ms = [s["step_ms"] for s in steady]
    waits = [s["wait_ms"] for s in steady]
    rec.step_ms_median, rec.step_ms_p99 = summarize(ms)["median"], percentile(ms, 99)
    rec.step_ms_mean = sum(ms) / len(ms)
    if rec.step_ms_mean > 1.25 * rec.step_ms_median:
        rec.notes.append(f"steps are uneven: mean {rec.step_ms_mean:,.1f} ms against median {rec.step_ms_median:,.1f} "
                         "ms (a few long steps: evaluation, checkpoints, data waits); the rates use the whole time")
    rec.data_wait_ms_median, rec.data_wait_ms_p99 = summarize(waits)["median"], percentile(waits, 99)
    rec.data_stall_fraction = sum(waits) / sum(ms)
    samples = sum(s["samples"] for s in steady)
    rec.samples_per_s = samples / (sum(ms) / 1000)
    busy_s = (sum(ms) - sum(waits)) / 1000
    rec.model_samples_per_s = samples / busy_s if busy_s > 0 else float("nan")
    rec.run_samples_per_s = sum(s["samples"] for s in steps) / (sum(s["step_ms"] for s in steps) / 1000)
    _spread_and_cost(rec, steady)
    if not samples:
        rec.notes.append("no DataLoader batch reached the optimizer steps: the loop reads its data some other way, "
                         "so samples/s and data stall are not known (shown as unknown)")
    _gpu(rec, log, samples / len(steady))
    if main is not None and samples:
        rec.stage_ms_per_sample = _stages(log, main)
        rec.main_wait_ms_per_sample = sum(waits) / samples
        if rec.stage_ms_per_sample:
            rec.notes.append("stages: the Dataset's own code gives each sample (its reads, decodes and transforms, "
                             "which the hook cannot split) booked as transform; collate is the collate_fn; the "
                             "hand-over to the main process and the copy to the device are not seen")
    rec.next_step, rec.next_notes = sweep_command(main, cores, rec.model_samples_per_s, _model_factory(log),
                                                  bool(log.cuda), world_size=ws)
    if main is None and rec.files_read:
        rec.next_step, rec.next_notes = bench_command(rec.files_read)
    return rec


def _spread_and_cost(rec: WatchResult, steady: list[dict[str, Any]]) -> None:
    """The figures per block of steady steps (their spread, as a bench's repeats), and the hook's own cost."""
    for b in _blocks(steady, BLOCKS):
        bms = sum(s["step_ms"] for s in b)
        rec.step_ms_repeats.append(bms / len(b))
        rec.samples_per_s_repeats.append(sum(s["samples"] for s in b) / (bms / 1000))
        rec.data_stall_fraction_repeats.append(sum(s["wait_ms"] for s in b) / bms)
    hook = [s.get("hook_us", 0.0) for s in steady]
    rec.hook_us_per_step_median = summarize(hook)["median"]
    rec.hook_overhead_pct = sum(hook) / 1000 / sum(s["step_ms"] for s in steady) * 100
    if rec.hook_overhead_pct >= 1:
        rec.notes.append(f"the hook cost {rec.hook_overhead_pct:.2f}% of step time (over the 1% budget): steps "
                         "this short are slowed by the measurement itself")


def _stages(log: ProcLog, loader: dict[str, Any]) -> dict[str, float]:
    """ms a sample the training loader's batches took to make, over all its batches: the Dataset's part and the
    collate_fn's, from its workers' files (or, without workers, the main process's end line). A loader that
    batches nothing (batch_size=None: a WebDataset pipeline's .batched(16) under WebLoader) fetches whole batches
    as its items: each counts the samples the loop got in a batch, not one (it was booked 16x too slow)."""
    lid = loader.get("id")
    parts = [w for p, w in log.worker_fetch.items() if log.worker_loader.get(p) == lid]
    main = ((log.end or {}).get("fetch") or {}).get(str(lid))
    if main:
        parts.append({"samples": main[1], "fetch_s": main[2], "collate_s": main[3]})
    per_item = int(loader.get("batch_max") or 1) if loader.get("batch_size") is None else 1
    n = sum(w["samples"] for w in parts) * per_item
    if not n:
        return {}
    return {"transform": sum(w["fetch_s"] for w in parts) / n * 1000,
            "collate": sum(w["collate_s"] for w in parts) / n * 1000}


def bench_command(files: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """Where no DataLoader fed the steps: `dataperf bench` on the data file the job opened most, which dataperf
    reads as the job did (a token .bin as windows; the script's own window length is not known here)."""
    top = files[0]
    cmd = f"dataperf bench {shlex.quote(top['path'])}"
    opened = ", ".join(f"{Path(f['path']).name} ({f['opens']}x, {f['bytes'] / 2**20:,.1f} MiB)" for f in files[:3])
    notes = [f"the job read its data without a DataLoader: it opened {opened}"]
    if top["path"].endswith(".bin"):
        notes.append("add --seq-len with the script's block size and --batch-size with its batch size")
    return cmd, notes


def _model_factory(log: ProcLog) -> str | None:
    return (log.end or {}).get("model_factory")


def _gpu(rec: WatchResult, log: ProcLog, samples_per_step: float) -> None:
    """GPU idle share, 1 - sum(busy) / sum(wall), over the steady steps whose CUDA events completed; and the
    model's rate from the GPU's busy time a step. On CUDA, step - wait is the CPU's side of a step: kernels are
    queued, so while the job waits on data the GPU finishes the step inside that wait, and step - wait reads the
    launch time (ResNet-50 at batch 256 on the H200: 4,401 samples/s where the GPU's busy time gave 2,071)."""
    cu = [c for c in log.cuda if c.get("n", 0) > 1 and c.get("wall_ms")]
    if not cu:
        return
    busy_ms = sum(c["busy_ms"] for c in cu)
    if busy_ms > 0 and samples_per_step > 0:
        rec.model_samples_per_s = samples_per_step * len(cu) / (busy_ms / 1000)
    rec.gpu_idle_fraction = max(0.0, 1 - busy_ms / sum(c["wall_ms"] for c in cu))
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


PRESET_OPS = {"imagenet-train": {"RandomResizedCrop"}, "imagenet-val": {"Resize", "CenterCrop"},
              "resize": {"Resize"}}
SIZE_OP = {"imagenet-train": "RandomResizedCrop", "imagenet-val": "CenterCrop", "resize": "Resize"}
# ops that only convert, normalise or flip: every preset does them too, or they cost next to nothing
PLAIN_OPS = {"RandomHorizontalFlip", "ToTensor", "PILToTensor", "ToImage", "ToDtype", "ConvertImageDtype",
             "Normalize"}
KNOWN_DATASETS = ("torchvision.datasets.", "webdataset.")  # readers that do what sweep's own readers do
DEFAULT_IMAGE_SIZE = 224
DEFAULT_SEQ_LEN = 512
PLACEHOLDER_MODEL = "yourpkg.models:build"
PLACEHOLDER_DATASET = "yourpkg.data:build"


def transform_preset(t: dict[str, Any] | None) -> tuple[str | None, int | None]:
    """The --transform preset that does what the script's transform does (its ops beyond converting,
    normalising and flipping match the preset's exactly) and the side it sets; (None, None) when none does."""
    if not t:
        return None, None
    ops = {name: size for name, size in t.get("ops", [])}
    for preset, need in PRESET_OPS.items():
        if set(ops) - PLAIN_OPS == need:
            return preset, ops.get(SIZE_OP[preset])
    return None, None


def _data_cap(data: Data | None, loader: dict[str, Any], bs: int) -> int | None:
    if data is not None and data.count:
        return trial.worker_cap(data, bs)
    n = loader.get("dataset_len")
    return max(1, n // (bs * trial.STEADY_BATCHES)) if n else None


def _resolve(path: str | None, dtype: str | None) -> tuple[Data | None, str]:
    """The data sweep reads at the script's path, or why there is none."""
    if not path:
        return None, f"its {dtype} keeps no path attribute"
    try:
        return resolve(path), ""
    except UserError as e:
        return None, f"{path}: {e}"


def sweep_command(loader: dict[str, Any] | None, cores: int | None, model_sps: float | None = None,
                  model: str | None = None, cuda: bool = False, world_size: int = 1) -> tuple[str, list[str]]:
    """The `dataperf sweep` that starts from the script's training loader, on the data it read, runnable as
    printed (empty when no data sweep can read is known), and the notes that go after it. A job of several ranks
    (torchrun) gets `sweep --ranks` with its own world size: workers per rank with every rank reading at once,
    each fed at the step rate the job's model showed (--step-rate), else at its model's step measured."""
    if loader is None:
        return "", ["no DataLoader seen: nothing to sweep; to measure the loop's input, wrap it in a torch Dataset "
                    "(a factory returning it) and run: dataperf bench --dataset yourpkg.data:build_dataset"]
    w = int(loader.get("num_workers") or 0)
    pf = int(loader.get("prefetch_factor") or TORCH_PREFETCH_FACTOR)  # torch's own, when the script left it
    bs = int(loader.get("batch_max") or loader.get("batch_size") or 32)  # batch_max: what the loop really got
    path, dtype = loader.get("data_path"), loader.get("dataset_type")
    data, why = _resolve(path, dtype)
    # no --num-workers: the sweep's own ladder is sized by the cores and the data, and only its own ladder goes
    # on past its top while the best is the largest count tried and does not feed the model (a list given here
    # would stop there: on 2 cores a paced job that needed 6 workers got a sweep of 1 and 2, 0.42 of the best)
    if world_size > 1:
        return _ranks_command(loader, world_size, bs, pf, model_sps, model, cuda, data, why)
    cap = _data_cap(data, loader, bs)
    flags = ["--batch-size", str(bs), "--prefetch-factor", f"{pf},{2 * pf}", "--decode", *_kept_flags(loader)]
    shape = loader.get("batch_shape") or []
    image = data.kind == "image" if data is not None else len(shape) == 4  # without data: NCHW batches
    if not image and len(shape) == 2 and shape[1] != DEFAULT_SEQ_LEN:
        flags += ["--seq-len", str(shape[1])]
    notes: list[str] = []
    if data is None:
        notes.append(f"no next command: dataperf sweep cannot read the data the script's loader reads ({why}); "
                     f"to time the script's own Dataset, write a function that returns it ({PLACEHOLDER_DATASET}) "
                     f"and run: dataperf sweep --dataset {PLACEHOLDER_DATASET} {' '.join(flags)}")
    if model_sps and model_sps == model_sps:
        notes.append(f"your model consumes {model_sps:,.0f} samples/s when fed: look for a config with workers "
                     f"(>0) above {1.2 * model_sps:,.0f} samples/s (1.2x headroom); at num_workers=0 loading runs "
                     "in the training process, serial with every step, so no 0-worker rate feeds the model"
                     + (" (your script's setting: its loading adds to every step)" if w == 0 else ""))
    model_flags = (f"--model {model or PLACEHOLDER_MODEL} --input {'image' if image else 'tokens'}"
                   + (" --device cuda" if cuda else "") + " --confirm 2")
    whose = (f"{model} builds your script's model" if model else
             f"{PLACEHOLDER_MODEL}: a function that returns your model as the script builds it")
    notes.append(f"for a verdict, add {model_flags} to the sweep ({whose}): the loader alone cannot say whether "
                 "training will wait on data (on a CPU-bound box a loader-only pick made a training script 20% "
                 "slower); the model-aware sweep feeds your model from each config")
    if data is not None and image:  # a --dataset sweep runs the Dataset's own transform
        flags += _transform_flags(loader.get("transform"), dtype, notes)
    if cap is not None and w > cap:
        notes.append(f"your {w} workers cannot each get {trial.STEADY_BATCHES} batches of an epoch of this data at "
                     f"batch {bs}, so the sweep tries at most {cap}")
    elif w > (cores or trial.cores()):
        notes.append(f"your {w} workers are more than the {cores or trial.cores()} cores: the sweep's ladder stops at "
                     "the cores and goes on past them only while more workers still gain; add --num-workers "
                     f"{w} to time your own count too")
    if data is None:
        return "", notes
    if dtype and not dtype.startswith(KNOWN_DATASETS):
        notes.append(f"the sweep reads {path} as {data.describe()} with its own reader, not through your {dtype}; "
                     f"to time your Dataset itself, give --dataset {PLACEHOLDER_DATASET} (a function that returns "
                     "it) in place of the path")
    return " ".join(["dataperf", "sweep", shlex.quote(path), *flags]), notes


def _kept_flags(loader: dict[str, Any]) -> list[str]:
    """The script's pinning and persistence, kept as set."""
    return ((["--pin-memory", "on"] if loader.get("pin_memory") else [])
            + (["--persistent-workers", "on"] if loader.get("persistent_workers") else []))


def _ranks_command(loader: dict[str, Any], ranks: int, bs: int, pf: int, model_sps: float | None,
                   model: str | None, cuda: bool, data: Data | None, why: str) -> tuple[str, list[str]]:
    """`sweep --ranks G` for a job of G ranks: its batch size, prefetch, pinning and persistence as set, each
    rank's consumer paced at the rate the job's model took batches when fed (watch measured it), else the model's
    step measured; `data`: the job's data as sweep reads it (sweep_command resolved it), else `why` not."""
    flags = ["--ranks", str(ranks), "--batch-size", str(bs), "--prefetch-factor", str(pf), *_kept_flags(loader)]
    notes = []
    if model_sps and model_sps == model_sps:
        flags += ["--step-rate", f"{model_sps:.0f}"]
        notes.append(f"each of the {ranks} ranks' consumers is paced at {model_sps:,.0f} samples/s, the rate your "
                     "model took batches at when fed; the sweep answers how many workers each rank needs with all "
                     f"{ranks} reading at once on this host's cores")
    else:
        flags += ["--model", model or PLACEHOLDER_MODEL] + (["--device", "cuda"] if cuda else [])
        notes.append(f"no step rate seen, so the sweep measures your model's step once "
                     f"({model or PLACEHOLDER_MODEL}: a function that returns your model) and paces each rank at it")
    if data is None:
        notes.append(f"no next command: dataperf sweep cannot read the data the script's loader reads ({why}); give "
                     f"--dataset {PLACEHOLDER_DATASET} (a function that returns your Dataset) with: "
                     f"dataperf sweep {' '.join(flags)}")
        return "", notes
    return " ".join(["dataperf", "sweep", shlex.quote(loader.get("data_path")), *flags]), notes


def _transform_flags(t: dict[str, Any] | None, dtype: str | None, notes: list[str]) -> list[str]:
    """--transform/--image-size for the script's transform, or a note that says what the sweep does instead."""
    preset, size = transform_preset(t)
    if preset is None:
        seen = (f"the script's transform ({t['repr']}) matches no preset" if t else
                f"the script's transform is not visible to watch (its {dtype} keeps none in .transform)")
        notes.append(f"{seen}: the sweep decodes each image and resizes it to {DEFAULT_IMAGE_SIZE}x"
                     f"{DEFAULT_IMAGE_SIZE} (--transform resize); to pay what the script pays, add --transform "
                     "yourpkg.data:build_transform (a function that returns your transform)")
        return []
    flags = [] if preset == "resize" else ["--transform", preset]
    if size and size != DEFAULT_IMAGE_SIZE:
        flags += ["--image-size", str(size)]
    return flags
