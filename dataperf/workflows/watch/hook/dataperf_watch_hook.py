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

This module patches torch and times next() and the steps; its neighbours in this folder (imported by plain name:
the folder is on the job's PYTHONPATH, not a package) keep the process's state (dataperf_watch_state), read a
loader's settings (dataperf_watch_loaders), time the fetch (dataperf_watch_fetch), count the files read
(dataperf_watch_files) and find the model (dataperf_watch_model).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

from dataperf_watch_fetch import timed_fetch
from dataperf_watch_files import files_read, open_counter
from dataperf_watch_loaders import batch_shape, loader_settings
from dataperf_watch_model import builder, find_model
from dataperf_watch_state import ENV_DIR, State, cpu, fail_once, perf, report_failure

STATE: State | None = None
LOADED = "loaded.pid"  # the marker's name, then the process id


def install() -> None:
    """Wait for `import torch`, then patch. Importing torch here would slow and change non-torch jobs."""
    if not os.environ.get(ENV_DIR) or os.environ.get("DATAPERF_WATCH_DISABLE"):
        return
    # an empty file saying the hook ran in this process: a job that then fails before importing torch (a wrong
    # script path) is told apart from one the hook never reached (python -I)
    with contextlib.suppress(OSError):
        open(os.path.join(os.environ[ENV_DIR], f"{LOADED}{os.getpid()}"), "a").close()
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

    STATE = State(os.environ[ENV_DIR])
    STATE.grad_enabled = torch.is_grad_enabled
    real_iter = dl.DataLoader.__iter__
    real_next = dl._BaseDataLoaderIter.__next__

    def __iter__(self):
        it = real_iter(self)
        c = cpu()
        try:
            _on_iter(self, it, perf())
        except Exception as e:
            fail_once("DataLoader settings", e)
        STATE.hook_s += cpu() - c + STATE.call_cost_s
        return it

    def __next__(self):
        t0 = perf()
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
        cls.fetch = timed_fetch(cls.fetch, STATE)
    register_optimizer_step_post_hook(_on_step)
    sys.addaudithook(open_counter(STATE))
    atexit.register(_at_exit)


def _on_iter(loader, it, t: float) -> None:
    s = STATE
    lid = id(loader)
    it._dataperf_id = lid
    fetcher = getattr(it, "_dataset_fetcher", None)  # no workers: batches are made here, by this fetcher
    if fetcher is not None:
        fetcher._dataperf_id = lid
    s.loader_iters[lid] = s.loader_iters.get(lid, 0) + 1
    if lid not in s.loaders:
        s.loaders[lid] = info = loader_settings(loader)
        info["id"] = lid
        s.write({"t": "loader", **info}, t)
    workers = [w.pid for w in getattr(it, "_workers", []) if getattr(w, "pid", None)]
    new = [p for p in workers if p not in s.worker_pids]
    if new:
        s.worker_pids.update(new)
        s.write({"t": "workers", "loader": lid, "pids": new}, t)


def _on_next(it, t0: float, batch) -> None:
    t1 = perf()
    c = cpu()
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
                shape = batch_shape(batch)
                s.eval_samples += int(shape[0]) if shape is not None else 0
            s.hook_s += cpu() - c + 2 * s.call_cost_s
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
            shape = batch_shape(batch)
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
        fail_once("DataLoader next()", e)
    s.hook_s += cpu() - c + 2 * s.call_cost_s  # two: this call's clocks and t0's


def _cuda_ready() -> bool:
    import torch

    return torch.cuda.is_initialized()  # never initialise CUDA ourselves


def _event():
    import torch

    e = torch.cuda.Event(enable_timing=True)
    e.record()
    return e


def _on_step(opt, args, kwargs) -> None:
    t = perf()
    c = cpu()
    s = STATE
    try:
        if s.primary_opt is None:
            s.primary_opt = id(opt)  # with several optimizers, the first one to step marks the boundaries
        if id(opt) != s.primary_opt:
            s.hook_s += cpu() - c + s.call_cost_s
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
        cw = cpu()
        hook_us = (s.hook_s + cw - c + s.call_cost_s) * 1e6
        s.hook_s = 0.0
        s.write_line(f"{line}{hook_us!r}}}\n", t)
        s.hook_s = cpu() - cw  # writing this line is charged to the next step
    except Exception as e:
        fail_once("optimizer step hook", e)
    if s.step_n == 1 and "torchvision.models" in sys.modules:
        try:
            find_model(opt, s)
        except Exception as e:
            fail_once("model", e)
        s.step_start = perf()  # the search is in no step's time


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
    t = perf()
    try:
        _drain_cuda(t, block=True)
    except Exception as e:
        fail_once("CUDA events", e)
    factory = None
    if s.model is not None:
        try:
            factory = builder(s.model)
        except Exception as e:
            fail_once("model builder", e)
    s.write({"t": "end", "steps": s.step_n, "loader_batches": {str(k): v for k, v in s.loader_batches.items()},
             "loader_iters": {str(k): v for k, v in s.loader_iters.items()},
             "loader_steps": {str(k): v for k, v in s.loader_steps.items()},
             "loader_batch_max": {str(k): v for k, v in s.loader_maxn.items()},
             "model_factory": factory, "files_read": files_read(s.opened),
             "fetch": {str(k): v for k, v in s.fetch.items()},
             "tail": {"wait_ms": s.wait_s * 1000, "batches": s.batches, "samples": s.samples}}, t)
    if s.f is not None:
        s.f.flush()
        s.f.close()
        s.f = None
