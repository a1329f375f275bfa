"""What `dataperf watch` measures inside the user's job (stdlib and torch only: the job's Python may not have
dataperf installed, and importing it would change the job).

Nothing happens until the job imports torch; then, without editing the script:
- every `next()` on a DataLoader iterator is timed, and each DataLoader's settings are recorded at its first
  `iter()` (batch size, workers, prefetch, pin memory, persistent workers, dataset type and path, the
  dataset's transform ops), and per loader the largest batch and the first batch's shape;
- torch's global optimizer step post-hook marks step boundaries: step time, data wait and samples per step,
  and which loader delivered the batch each step trained on (a validation loader feeds no step);
- when the job imported torchvision.models, the model the optimizer trains is found once at the first step
  (outside the timed figures) and, at exit, the torchvision builder that makes the same model, so `next:`
  can name it;
- on CUDA, two events per step (after the step's first batch arrives, and at the step's end) give the GPU's
  busy time per step, read back only once complete, so the hook adds no synchronisation;
- the hook's own time is measured per step and written beside it;
- the data files the process opens for reading are counted (a Python audit hook on "open"; code, libraries and
  /proc are left out), so a loop that reads its data without a DataLoader (nanoGPT's `np.memmap` in
  `get_batch`) still names what it read;
- where a batch is made (a forked worker, or the main process without workers), the time the Dataset takes to
  give its samples and the time the collate_fn takes: each worker writes its totals to a file of its own
  (`fetch.pid*.jsonl`, at most every FLUSH_S and at its exit), the main process per loader in its end line.

One JSON-lines file per process that steps (its rank from torchrun's RANK), written as the job runs and
flushed at least every FLUSH_S, so a crash loses at most that much.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import json
import os
import sys
import time
from collections import deque

ENV_DIR = "DATAPERF_WATCH_DIR"
FLUSH_S = 0.5
PATH_ATTRS = ("root", "path", "data_path", "data_dir", "root_dir", "directory", "folder", "urls")
WRAPPERS = ("DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "OptimizedModule")
NOT_DATA_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".json", ".cfg", ".toml", ".txt", ".yaml", ".yml", ".pkl", ".lock")
NOT_DATA_DIRS = ("/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/tmp/torchinductor")
MAX_FILES = 500  # distinct data files counted; past that only those already seen
_perf = time.perf_counter  # waits and step times: wall clock
_cpu = time.thread_time  # the hook's own cost: CPU time of the training thread, so a GIL hand-off to the
# DataLoader's feeder or pin-memory thread in the middle of a hook is not charged to the hook


class _State:
    """Per process. A forked DataLoader worker inherits a copy; `owner` keeps it from writing."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir
        self.owner = os.getpid()
        self.t0 = _perf()
        self.f = None
        self.last_flush = 0.0
        self.loaders: dict[int, dict] = {}
        self.loader_batches: dict[int, int] = {}
        self.loader_iters: dict[int, int] = {}
        self.loader_steps: dict[int, int] = {}  # steps whose last batch came from this loader
        self.loader_maxn: dict[int, int] = {}  # the largest leading dimension of its batches
        self.last_lid: int | None = None
        self.model: dict | None = None  # the trained model's class and parameter shapes (torchvision jobs)
        self.worker_pids: set[int] = set()
        self.primary_opt: int | None = None
        self.step_n = 0
        self.step_start: float | None = None  # end of the previous step, or the first next() of the job
        self.wait_s = 0.0
        self.batches = 0
        self.samples = 0
        # evaluation: batches taken with gradients off (an eval loop under no_grad or inference_mode), kept out of
        # the step's training figures: their waits, and the span from the first to the next training batch
        self.eval_wait_s = 0.0
        self.eval_batches = 0
        self.eval_samples = 0
        self.eval_s = 0.0
        self.eval_start: float | None = None
        self.grad_enabled = None  # torch.is_grad_enabled, bound once torch is imported
        self.hook_s = 0.0
        self.cuda_start = None
        self.cuda_pending: deque = deque()
        self.cuda_prev_end = None
        self.call_cost_s = _calibrate(_perf) + _calibrate(_cpu)  # the clock calls the hook cannot time
        self.opened: dict[str, int] = {}  # data files opened for reading, and how often
        # batches made in this process without workers, per loader: [batches, samples, fetch_s, collate_s]
        self.fetch: dict[int | None, list] = {}
        self.skip_roots = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix, out_dir})

    def write(self, rec: dict, now: float) -> None:
        self.write_line(json.dumps(rec, default=str) + "\n", now)

    def write_line(self, line: str, now: float) -> None:
        """Buffered, flushed every FLUSH_S: a per-step write syscall would cost more than the rest."""
        if os.getpid() != self.owner:
            return
        if self.f is None:
            rank = os.environ.get("RANK")
            name = f"rank{rank if rank is not None else '-'}.pid{os.getpid()}.jsonl"
            self.f = open(os.path.join(self.out_dir, name), "a", encoding="utf-8")  # noqa: SIM115
            self.f.write(json.dumps(_start_line()) + "\n")
        self.f.write(line)
        if now - self.last_flush > FLUSH_S:
            self.f.flush()
            self.last_flush = now


STATE: _State | None = None


def _calibrate(clock, n: int = 2000) -> float:
    """CPU cost of one clock call, charged to the hook for the part of each wrapper its timers cannot see."""
    t = _cpu()
    for _ in range(n):
        clock()
    return (_cpu() - t) / n


def _start_line() -> dict:
    import torch

    return {"t": "start", "pid": os.getpid(), "ppid": os.getppid(), "rank": os.environ.get("RANK"),
            "local_rank": os.environ.get("LOCAL_RANK"), "world_size": os.environ.get("WORLD_SIZE"),
            "argv": sys.argv, "torch": torch.__version__, "executable": sys.executable, "unix_s": time.time()}


def report_failure(what: str, e: BaseException) -> None:
    """One line in the watch folder saying what could not be measured, for the launcher to print."""
    d = os.environ.get(ENV_DIR)
    if not d:
        return
    with open(os.path.join(d, f"error.pid{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"t": "error", "what": what, "why": f"{type(e).__name__}: {e}", "pid": os.getpid(),
                            "rank": os.environ.get("RANK")}) + "\n")


def install() -> None:
    """Wait for `import torch`, then patch. Importing torch here would slow and change non-torch jobs."""
    if not os.environ.get(ENV_DIR) or os.environ.get("DATAPERF_WATCH_DISABLE"):
        return
    if "torch" in sys.modules:
        _patch(sys.modules["torch"])
        return
    sys.meta_path.insert(0, _TorchFinder())


class _TorchFinder:
    """A meta-path finder that lets the real import of torch run, then patches it once it is loaded."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real = spec.loader.exec_module

        def exec_module(module):
            real(module)
            try:
                _patch(module)
            except Exception as e:
                report_failure("patch torch", e)

        spec.loader.exec_module = exec_module
        return spec


def _patch(torch) -> None:
    global STATE
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data import dataloader as dl

    STATE = _State(os.environ[ENV_DIR])
    STATE.grad_enabled = torch.is_grad_enabled
    real_iter = dl.DataLoader.__iter__
    real_next = dl._BaseDataLoaderIter.__next__

    def __iter__(self):
        it = real_iter(self)
        c = _cpu()
        try:
            _on_iter(self, it, _perf())
        except Exception as e:
            _fail_once("DataLoader settings", e)
        STATE.hook_s += _cpu() - c + STATE.call_cost_s
        return it

    def __next__(self):
        t0 = _perf()
        try:
            batch = real_next(self)
        except StopIteration:
            _on_next(self, t0, None)
            raise
        _on_next(self, t0, batch)
        return batch

    dl.DataLoader.__iter__ = __iter__
    dl._BaseDataLoaderIter.__next__ = __next__
    from torch.utils.data._utils import fetch as fetchers

    for cls in (fetchers._MapDatasetFetcher, fetchers._IterableDatasetFetcher):
        cls.fetch = _timed_fetch(cls.fetch)
    register_optimizer_step_post_hook(_on_step)
    sys.addaudithook(_on_audit)
    atexit.register(_at_exit)


def _timed_fetch(real):
    """A fetcher's fetch (one batch: the Dataset's samples, then the collate_fn) with the two parts timed."""

    def fetch(self, possibly_batched_index):
        t0 = _perf()
        real_collate = self.collate_fn
        spent = [0.0]

        def collate(data):
            t1 = _perf()
            try:
                return real_collate(data)
            finally:
                spent[0] += _perf() - t1

        self.collate_fn = collate
        try:
            batch = real(self, possibly_batched_index)
        finally:
            self.collate_fn = real_collate
        try:
            _on_fetch(self, _perf() - t0 - spent[0], spent[0], possibly_batched_index)
        except Exception as e:
            _fail_once("DataLoader fetch", e)
        return batch

    return fetch


_WORKER: dict = {}  # this worker's totals, its file and when it last wrote


def _on_fetch(fetcher, fetch_s: float, collate_s: float, index) -> None:
    s = STATE
    if s is None:
        return
    n = len(index) if isinstance(index, (list, tuple)) else 1
    if os.getpid() == s.owner:  # no workers: the batch was made here, for the loader the fetcher was tagged with
        c = _cpu()
        acc = s.fetch.setdefault(getattr(fetcher, "_dataperf_id", None), [0, 0, 0.0, 0.0])
        acc[0], acc[1], acc[2], acc[3] = acc[0] + 1, acc[1] + n, acc[2] + fetch_s, acc[3] + collate_s
        s.hook_s += _cpu() - c + 4 * s.call_cost_s
        return
    w = _WORKER
    if w.get("pid") != os.getpid():  # the first batch of this worker (a fork copies the parent's dict)
        import multiprocessing.util

        w.clear()
        w.update(pid=os.getpid(), batches=0, samples=0, fetch_s=0.0, collate_s=0.0, last=0.0,
                 path=os.path.join(s.out_dir, f"fetch.pid{os.getpid()}.jsonl"))
        multiprocessing.util.Finalize(None, _write_worker, exitpriority=100)  # run as the worker exits
    w["batches"] += 1
    w["samples"] += n
    w["fetch_s"] += fetch_s
    w["collate_s"] += collate_s
    now = _perf()
    if now - w["last"] > FLUSH_S:
        _write_worker()
        w["last"] = now


def _write_worker() -> None:
    """This worker's totals so far, one line (the reader keeps the last)."""
    w = _WORKER
    if w.get("pid") != os.getpid():
        return
    line = {"t": "fetch", "pid": w["pid"], "parent": os.getppid(), "batches": w["batches"],
            "samples": w["samples"], "fetch_s": w["fetch_s"], "collate_s": w["collate_s"]}
    with contextlib.suppress(OSError), open(w["path"], "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _on_audit(event: str, args: tuple) -> None:
    """Count a data file opened for reading (audit event "open": path, mode, flags). Cheap for every other
    event, and never raises (an audit hook that raises fails the job's own call)."""
    if event != "open":
        return
    try:
        s = STATE
        path, mode, flags = args
        if s is None or not isinstance(path, str) or os.getpid() != s.owner:
            return
        if mode is not None and any(c in mode for c in "wax+") or mode is None and flags & 3:
            return
        if path in s.opened:
            s.opened[path] += 1
        elif len(s.opened) < MAX_FILES and not path.endswith(NOT_DATA_SUFFIXES):
            full = os.path.abspath(path)
            if not full.startswith(NOT_DATA_DIRS) and not full.startswith(s.skip_roots):
                s.opened[path] = 1
    except Exception:
        return


def _files_read(opened: dict[str, int], n: int = 10) -> list[dict]:
    """The most-opened data files, with their sizes (the files that no longer exist are left out)."""
    out = []
    for path, opens in sorted(opened.items(), key=lambda kv: -kv[1]):
        with contextlib.suppress(OSError):
            if os.path.isfile(path):
                out.append({"path": os.path.abspath(path), "opens": opens, "bytes": os.path.getsize(path)})
        if len(out) >= n:
            break
    return out


_failed: set[str] = set()


def _fail_once(what: str, e: BaseException) -> None:
    if what not in _failed:
        _failed.add(what)
        report_failure(what, e)


def _on_iter(loader, it, t: float) -> None:
    s = STATE
    lid = id(loader)
    it._dataperf_id = lid
    fetcher = getattr(it, "_dataset_fetcher", None)  # no workers: batches are made here, by this fetcher
    if fetcher is not None:
        fetcher._dataperf_id = lid
    s.loader_iters[lid] = s.loader_iters.get(lid, 0) + 1
    if lid not in s.loaders:
        s.loaders[lid] = info = _settings(loader)
        info["id"] = lid
        s.write({"t": "loader", **info}, t)
    workers = [w.pid for w in getattr(it, "_workers", []) if getattr(w, "pid", None)]
    new = [p for p in workers if p not in s.worker_pids]
    if new:
        s.worker_pids.update(new)
        s.write({"t": "workers", "loader": lid, "pids": new}, t)


def _settings(loader) -> dict:
    ds = loader.dataset
    bs = loader.batch_size
    if bs is None and getattr(loader, "batch_sampler", None) is not None:
        bs = getattr(loader.batch_sampler, "batch_size", None)
    import torch.utils.data as tud

    try:
        n = len(ds)
    except Exception:
        n = None
    return {"batch_size": bs, "num_workers": loader.num_workers, "prefetch_factor": loader.prefetch_factor,
            "pin_memory": bool(loader.pin_memory), "persistent_workers": bool(loader.persistent_workers),
            "drop_last": bool(loader.drop_last),
            "dataset_type": f"{type(ds).__module__}.{type(ds).__qualname__}",
            "iterable": isinstance(ds, tud.IterableDataset), "dataset_len": n,
            "sampler_type": type(loader.sampler).__qualname__ if loader.sampler is not None else None,
            "data_path": _data_path(ds), "transform": _transform(ds)}


def _data_path(ds, depth: int = 0):
    """The folder or file a dataset reads, from the attributes datasets commonly keep it in (a WebDataset
    pipeline keeps its shard list in its first stage)."""
    for a in PATH_ATTRS:
        v = getattr(ds, a, None)
        if isinstance(v, list | tuple) and v:
            return _one_path(list(v))
        if isinstance(v, str | os.PathLike):
            return _abs(v)
    stages = getattr(ds, "pipeline", None)
    for inner in ([getattr(ds, "dataset", None)] + (stages[:1] if isinstance(stages, list) else [])):
        if inner is not None and inner is not ds and depth < 3:
            found = _data_path(inner, depth + 1)
            if found:
                return found
    return None


def _abs(v) -> str:
    v = os.fspath(v)
    return v if "://" in v else os.path.abspath(v)


def _one_path(items: list):
    """One path for a list of files: the file itself, or a glob of one folder that matches exactly these files
    (shards train-0000.tar ... train-0009.tar -> train-*.tar); None when no such glob exists."""
    if not all(isinstance(v, str | os.PathLike) for v in items):
        return None
    paths = [_abs(v) for v in items]
    if len(paths) == 1 or "://" in paths[0]:
        return paths[0]
    folder = os.path.dirname(paths[0])
    names = [os.path.basename(p) for p in paths]
    if any(os.path.dirname(p) != folder for p in paths) or any(c in n for n in names for c in "*?[{"):
        return None
    head = os.path.commonprefix(names)
    tail = os.path.commonprefix([n[len(head):][::-1] for n in names])[::-1]
    pattern = os.path.join(folder, f"{head}*{tail}")
    return pattern if set(glob.glob(pattern)) == set(paths) else None


def _transform(ds, depth: int = 0):
    """The dataset's `transform` (torchvision datasets keep it there), as its ops in order, each with the
    output side it sets (a crop's or resize's size, when square), and a short repr."""
    t = getattr(ds, "transform", None)
    if t is None:
        inner = getattr(ds, "dataset", None)
        return _transform(inner, depth + 1) if inner is not None and inner is not ds and depth < 3 else None
    ops: list = []
    _ops(t, ops, 0)
    return {"ops": ops, "repr": " ".join(repr(t).split())[:300]}  # one line, whatever its own repr


def _ops(t, out: list, depth: int) -> None:
    inner = getattr(t, "transforms", None)
    if isinstance(inner, list | tuple) and depth < 4:
        for x in inner:
            _ops(x, out, depth + 1)
        return
    size = getattr(t, "size", None)
    if isinstance(size, list | tuple) and len(size) == 2 and size[0] == size[1]:
        size = size[0]
    name = type(t).__name__ if not hasattr(t, "__code__") else getattr(t, "__qualname__", "function")
    out.append([name, size if isinstance(size, int) else None])


def _shape(batch):
    """The shape of a batch's first tensor (shallow: tensor, sequence or dict); its leading dimension is the
    batch's samples."""
    x = batch
    for _ in range(3):
        shape = getattr(x, "shape", None)
        if shape is not None:
            return shape if len(shape) else None
        if isinstance(x, dict):
            x = next(iter(x.values()), None)
        elif isinstance(x, list | tuple):
            x = x[0] if x else None
        else:
            return None
    return None


def _on_next(it, t0: float, batch) -> None:
    t1 = _perf()
    c = _cpu()
    s = STATE
    try:
        if s.step_start is None:
            s.step_start = t0
        if not s.grad_enabled():  # an evaluation batch: not the training loop's wait, batches or samples
            if s.eval_start is None:
                s.eval_start = t0
            s.eval_wait_s += t1 - t0
            if batch is not None:
                s.eval_batches += 1
                shape = _shape(batch)
                s.eval_samples += int(shape[0]) if shape is not None else 0
            s.hook_s += _cpu() - c + 2 * s.call_cost_s
            return
        if s.eval_start is not None:  # the first training batch after an evaluation ends its span
            s.eval_s += t0 - s.eval_start
            s.eval_start = None
        s.wait_s += t1 - t0
        if batch is not None:
            s.batches += 1
            lid = getattr(it, "_dataperf_id", None)
            s.last_lid = lid
            s.loader_batches[lid] = s.loader_batches.get(lid, 0) + 1
            shape = _shape(batch)
            if shape is None:
                n = s.loaders.get(lid, {}).get("batch_size") or 0
            else:
                n = int(shape[0])
                if lid not in s.loader_maxn:
                    s.write({"t": "batch", "loader": lid, "shape": [int(d) for d in shape]}, t1)
                if n > s.loader_maxn.get(lid, 0):
                    s.loader_maxn[lid] = n
            s.samples += n
            if s.cuda_start is None and _cuda_ready():
                s.cuda_start = _event()
    except Exception as e:
        _fail_once("DataLoader next()", e)
    s.hook_s += _cpu() - c + 2 * s.call_cost_s  # two: this call's clocks and t0's


def _cuda_ready() -> bool:
    import torch

    return torch.cuda.is_initialized()  # never initialise CUDA ourselves


def _event():
    import torch

    e = torch.cuda.Event(enable_timing=True)
    e.record()
    return e


def _on_step(opt, args, kwargs) -> None:
    t = _perf()
    c = _cpu()
    s = STATE
    try:
        if s.primary_opt is None:
            s.primary_opt = id(opt)  # with several optimizers, the first one to step marks the boundaries
        if id(opt) != s.primary_opt:
            s.hook_s += _cpu() - c + s.call_cost_s
            return
        s.step_n += 1
        if s.batches:
            s.loader_steps[s.last_lid] = s.loader_steps.get(s.last_lid, 0) + 1
        step_ms = "null" if s.step_start is None else repr((t - s.step_start) * 1000)
        if s.eval_start is not None:  # an evaluation ran up to this step
            s.eval_s += t - s.eval_start
            s.eval_start = None
        ev = ""
        if s.eval_s or s.eval_batches:
            ev = (f'"eval_ms": {s.eval_s * 1000!r}, "eval_wait_ms": {s.eval_wait_s * 1000!r}, '
                  f'"eval_batches": {s.eval_batches}, "eval_samples": {s.eval_samples}, ')
            s.eval_s = s.eval_wait_s = 0.0
            s.eval_batches = s.eval_samples = 0
        line = (f'{{"t": "step", "n": {s.step_n}, "end_s": {t - s.t0!r}, "step_ms": {step_ms}, '
                f'"wait_ms": {s.wait_s * 1000!r}, "batches": {s.batches}, "samples": {s.samples}, {ev}"hook_us": ')
        if _cuda_ready():
            s.cuda_pending.append((s.step_n, s.cuda_start, _event()))
            s.cuda_start = None
            _drain_cuda(t, block=False)
        s.step_start = t
        s.wait_s, s.batches, s.samples = 0.0, 0, 0
        cw = _cpu()
        hook_us = (s.hook_s + cw - c + s.call_cost_s) * 1e6
        s.hook_s = 0.0
        s.write_line(f"{line}{hook_us!r}}}\n", t)
        s.hook_s = _cpu() - cw  # writing this line is charged to the next step
    except Exception as e:
        _fail_once("optimizer step hook", e)
    if s.step_n == 1 and "torchvision.models" in sys.modules:
        try:
            _find_model(opt)
        except Exception as e:
            _fail_once("model", e)
        s.step_start = _perf()  # the search is in no step's time


def _find_model(opt) -> None:
    """The outermost module holding the optimizer's first parameter (wrappers such as DDP taken off): its
    class and parameter shapes, written once. A scan of every object, so only for jobs that imported
    torchvision.models (the only models watch can name) and only once, outside the steps' timing."""
    import gc

    import torch

    t0 = _perf()
    first = next((p for g in opt.param_groups for p in g["params"]), None)
    if first is None:
        return
    best, best_n = None, -1
    module = torch.nn.Module
    for o in [o for o in gc.get_objects() if issubclass(type(o), module)]:  # type(): no __class__ property runs
        ps = list(o.parameters())
        if len(ps) > best_n and any(p is first for p in ps):
            best, best_n = o, len(ps)
    while best is not None and type(best).__name__ in WRAPPERS:
        best = getattr(best, "module", None) or getattr(best, "_orig_mod", None)
    if best is None:
        return
    STATE.model = {"type": f"{type(best).__module__}.{type(best).__qualname__}", "shapes": _shapes(best)}
    STATE.write({"t": "model", "type": STATE.model["type"], "params": sum(p.numel() for p in best.parameters()),
                 "scan_ms": (_perf() - t0) * 1000}, _perf())


def _shapes(m) -> list:
    return [list(p.shape) for p in m.parameters()]


def _builder() -> str | None:
    """The torchvision.models builder (module:function, no arguments) that makes a model of the found class
    with the same parameter shapes; each candidate of the class's module is built on the meta device (no
    memory, no weights). At exit, so the job's steps never pay for it."""
    import inspect
    import warnings

    import torch

    m = STATE.model
    mod_name, _, cls_name = m["type"].rpartition(".")
    mod = sys.modules.get(mod_name)
    if mod is None or not mod_name.startswith("torchvision.models"):
        return None
    top = sys.modules.get("torchvision.models")
    for name, fn in sorted(vars(mod).items()):
        if name.startswith("_") or not name[:1].islower() or not inspect.isfunction(fn):
            continue
        if getattr(fn, "__module__", None) != mod_name:
            continue
        try:
            with warnings.catch_warnings(), torch.device("meta"), contextlib.redirect_stdout(None):
                warnings.simplefilter("ignore")
                built = fn()
        except Exception:
            continue
        if type(built).__qualname__ == cls_name and _shapes(built) == m["shapes"]:
            return f"torchvision.models:{name}" if getattr(top, name, None) is fn else f"{mod_name}:{name}"
    return None


def _drain_cuda(now: float, block: bool) -> None:
    """Busy time (first batch in -> step end) and wall (previous step end -> step end) on the GPU timeline,
    for every finished step; an unfinished one waits for a later call, so no host sync is added."""
    s = STATE
    while s.cuda_pending:
        n, start, end = s.cuda_pending[0]
        if block:
            end.synchronize()
        elif not end.query():
            return
        s.cuda_pending.popleft()
        if start is not None:  # a step without a DataLoader batch has no busy span, only an end
            rec = {"t": "cuda", "n": n, "busy_ms": start.elapsed_time(end)}
            if s.cuda_prev_end is not None:
                rec["wall_ms"] = s.cuda_prev_end.elapsed_time(end)
            s.write(rec, now)
        s.cuda_prev_end = end


def _at_exit() -> None:
    s = STATE
    if s is None or os.getpid() != s.owner or (s.f is None and not s.loaders and not s.step_n):
        return
    t = _perf()
    try:
        _drain_cuda(t, block=True)
    except Exception as e:
        _fail_once("CUDA events", e)
    factory = None
    if s.model is not None:
        try:
            factory = _builder()
        except Exception as e:
            _fail_once("model builder", e)
    s.write({"t": "end", "steps": s.step_n, "loader_batches": {str(k): v for k, v in s.loader_batches.items()},
             "loader_iters": {str(k): v for k, v in s.loader_iters.items()},
             "loader_steps": {str(k): v for k, v in s.loader_steps.items()},
             "loader_batch_max": {str(k): v for k, v in s.loader_maxn.items()},
             "model_factory": factory, "files_read": _files_read(s.opened),
             "fetch": {str(k): v for k, v in s.fetch.items()},
             "tail": {"wait_ms": s.wait_s * 1000, "batches": s.batches, "samples": s.samples}}, t)
    if s.f is not None:
        s.f.flush()
        s.f.close()
        s.f = None
