"""The watch hook's state in one process of the job, and what all its parts share: the clocks, where it writes,
and how it says what it could not measure (stdlib only, as the whole hook: dataperf_watch_hook says why)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque

ENV_DIR = "DATAPERF_WATCH_DIR"
FLUSH_S = 0.5
perf = time.perf_counter  # waits and step times: wall clock
cpu = time.thread_time  # the hook's own cost: CPU time of the training thread, so a GIL hand-off to the
# DataLoader's feeder or pin-memory thread in the middle of a hook is not charged to the hook


class State:
    """Per process. A forked DataLoader worker inherits a copy; `owner` keeps it from writing."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir
        self.owner = os.getpid()
        self.t0 = perf()
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
        self.call_cost_s = _calibrate(perf) + _calibrate(cpu)  # the clock calls the hook cannot time
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


def _calibrate(clock, n: int = 2000) -> float:
    """CPU cost of one clock call, charged to the hook for the part of each wrapper its timers cannot see."""
    t = cpu()
    for _ in range(n):
        clock()
    return (cpu() - t) / n


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


_failed: set[str] = set()


def fail_once(what: str, e: BaseException) -> None:
    """report_failure, once for each part of the hook that failed."""
    if what not in _failed:
        _failed.add(what)
        report_failure(what, e)
