"""What a loader costs while it runs: CPU cores busy and resident memory (PSS) of the process tree.

PSS (proportional set size, from /proc/PID/smaps_rollup) is summed over the main process and its worker
processes, so pages shared between them count once in total, unlike RSS. Thread workers live inside the main
process and are covered by it. Copy-on-read (forked workers touching the parent's Python objects, which turns
shared pages private) shows as the workers' PSS growing over an epoch; it is measured over the last two
thirds of each worker's observed life (the first third holds its start-up: imports, first buffers).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

GROWTH_FLAG_PCT = 20.0  # workers' PSS growing more than this over an epoch is flagged as copy-on-read
GROWTH_FLAG_MIB = 8.0  # ... and by at least this much (tiny workers wobble by a few pages)
CLK = os.sysconf("SC_CLK_TCK")


def pss_bytes(pid: int) -> int | None:
    """PSS of one process, or None when it is gone or /proc does not say (non-Linux, no permission)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpu_s(pid: int) -> float | None:
    """User+system CPU seconds of a process (all its threads) so far."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def children(pid: int) -> list[int]:
    """Every descendant of pid (workers, their helpers), from /proc's children lists of every thread (a
    pool started from a background thread, as SPDL's is, hangs its processes under that thread)."""
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        kids = []
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids += [int(x) for x in task.read_text().split()]
            except (OSError, ValueError):
                continue
        out += kids
        stack += kids
    return out


@dataclass
class Footprint:
    """One repeat's cost: cores busy, peak PSS of the tree, workers' PSS first vs last."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    pss_peak_bytes: int = 0
    worker_pss_first_bytes: int = 0  # summed over workers, each at a third of its observed life
    worker_pss_last_bytes: int = 0  # summed over workers, each at its last sample
    workers_seen: int = 0
    samples: int = 0

    @property
    def cores_busy(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def worker_growth_pct(self) -> float:
        if not self.worker_pss_first_bytes:
            return float("nan")
        return (self.worker_pss_last_bytes / self.worker_pss_first_bytes - 1) * 100


@dataclass
class Meter:
    """Samples the tree every interval_s in a thread while a repeat runs (`with Meter() as m:`)."""

    interval_s: float = 0.05
    pid: int = field(default_factory=os.getpid)
    result: Footprint = field(default_factory=Footprint)

    def __enter__(self) -> Meter:
        self._stop = threading.Event()
        self._cpu0: dict[int, float] = {}
        self._cpu_last: dict[int, float] = {}
        self._pss: dict[int, list[tuple[float, int]]] = {}
        self._t0 = time.perf_counter()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="dataperf-footprint", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        total = 0
        for p in [self.pid, *children(self.pid)]:
            pss, cpu = pss_bytes(p), cpu_s(p)
            if pss is None or cpu is None:
                continue
            total += pss
            # alive at the start: CPU counted from now; started during the repeat: all its CPU is the repeat's
            self._cpu0.setdefault(p, cpu if self.result.samples == 0 else 0.0)
            self._cpu_last[p] = cpu
            if p != self.pid:
                self._pss.setdefault(p, []).append((time.perf_counter(), pss))
        self.result.pss_peak_bytes = max(self.result.pss_peak_bytes, total)
        self.result.samples += 1

    def __exit__(self, *exc) -> None:
        self._sample()  # workers already shut down count as of their last sample (at most interval_s old)
        self._stop.set()
        self._thread.join()
        r = self.result
        r.wall_s = time.perf_counter() - self._t0
        r.cpu_s = sum(self._cpu_last[p] - self._cpu0[p] for p in self._cpu_last)
        lived = [trace for trace in self._pss.values() if len(trace) >= 3]
        r.workers_seen = len(lived)
        r.worker_pss_first_bytes = sum(_at_third(trace) for trace in lived)
        r.worker_pss_last_bytes = sum(trace[-1][1] for trace in lived)


def _at_third(trace: list[tuple[float, int]]) -> int:
    """PSS at a third of the way from the first sample to the last (past start-up)."""
    t = trace[0][0] + (trace[-1][0] - trace[0][0]) / 3
    return next(pss for ts, pss in trace if ts >= t)
