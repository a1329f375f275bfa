"""Disk and per-process figures from /proc via psutil: always available on Linux, no privileges needed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from dataperf.results import MIB


def device_of(path: Path | None) -> str | None:
    """The block device name (as in /proc/diskstats) holding path, or None (tmpfs, overlay without one, or
    remote data: no path)."""
    if path is None:
        return None
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    link = Path(f"/sys/dev/block/{major}:{minor}")
    if link.exists():
        return link.resolve().name
    return None


class DiskCollector:
    """Read MiB/s, read IOPS and utilisation of the dataset's device over the trial.

    With data None (`dataperf watch`, which learns the dataset from the job), set `dev` before stop().
    """

    name = "disk"

    def __init__(self, data: Path | None):
        self.dev = device_of(data) if data is not None else None
        self.t0 = 0.0
        self.c0: Any = None

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.c0 = psutil.disk_io_counters(perdisk=True)

    def stop(self) -> dict[str, Any]:
        dt = time.perf_counter() - self.t0
        c0 = (self.c0 or {}).get(self.dev) if self.dev else None
        c1 = psutil.disk_io_counters(perdisk=True).get(self.dev) if self.dev else None
        if c0 is None or c1 is None:
            return {"available": False, "why": f"no block device found for the dataset (device {self.dev})"}
        out = {
            "available": True,
            "device": self.dev,
            "read_mib_s": (c1.read_bytes - c0.read_bytes) / MIB / dt,
            "read_iops": (c1.read_count - c0.read_count) / dt,
            "read_mib": (c1.read_bytes - c0.read_bytes) / MIB,
        }
        busy = getattr(c1, "busy_time", None)
        if busy is not None:
            out["util_pct"] = min(100.0, (busy - c0.busy_time) / (dt * 1000) * 100)
        return out


class ProcessCollector:
    """Per-process read syscalls, bytes, CPU% and peak RSS for the main process and every worker.

    Samples in a thread every `interval_s`, keeping the last reading of each pid, so workers that exit
    before the trial ends (non-persistent workers) are still counted. `root_pid` follows another process
    tree (`dataperf watch`); `since_fork` says that root was started for this measurement, so all its I/O
    counts. A root that has exited but is not yet reaped (a zombie) still gives its final counters, which
    include every descendant it reaped.
    """

    name = "processes"
    ignore = frozenset({"iostat", "pidstat", "sadc"})  # our own sysstat collectors, not the loader

    def __init__(self, interval_s: float = 0.1, root_pid: int | None = None, since_fork: bool = False):
        self.interval_s = interval_s
        self.main = psutil.Process(root_pid)
        self.since_fork = since_fork
        self.procs: dict[int, psutil.Process] = {}
        self.first: dict[int, Any] = {}
        self.last: dict[int, dict[str, Any]] = {}
        self.born_before: set[int] = set()
        self.stop_evt = threading.Event()
        self.thread: threading.Thread | None = None

    def _sample(self) -> None:
        current = {self.main.pid: self.main, **{c.pid: c for c in self._children()}}
        for pid, p in list(self.procs.items()):
            if pid not in current and pid not in self.last:
                current[pid] = p  # watched worker not yet sampled: try it once
        for p in current.values():
            proc = self.procs.setdefault(p.pid, p)
            io = None
            try:
                io = proc.io_counters()  # a zombie still has these (its final counts); not the rest
                with proc.oneshot():
                    cpu = proc.cpu_percent(None)
                    rss = proc.memory_info().rss
                    name = proc.name()
            except psutil.ZombieProcess:
                if io is not None and proc.pid in self.last:
                    self.last[proc.pid]["io"] = io
                continue
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if proc.pid not in self.first:
                # a child forked during the trial starts with zeroed counters, so its whole count is ours
                self.first[proc.pid] = io if proc.pid in self.born_before else type(io)(*[0] * len(io))
                cpu = None  # the first cpu_percent reading is always 0: it has no interval yet
            rec = self.last.setdefault(proc.pid, {"name": name, "rss_peak": 0, "cpu": []})
            rec["io"] = io
            rec["rss_peak"] = max(rec["rss_peak"], rss)
            if cpu is not None:
                rec["cpu"].append(cpu)

    def watch(self, pids: list[int]) -> None:
        """Start following these workers now (their counters start at zero at fork)."""
        for pid in pids:
            try:
                self.procs.setdefault(pid, psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        self._sample()

    def _loop(self) -> None:
        while not self.stop_evt.wait(self.interval_s):
            self._sample()

    def start(self) -> None:
        self.born_before = {c.pid for c in self._children()} | (set() if self.since_fork else {self.main.pid})
        self._sample()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="dataperf-proc")
        self.thread.start()

    def stop(self) -> dict[str, Any]:
        self.stop_evt.set()
        if self.thread:
            self.thread.join()
        self._sample()
        rows = []
        for pid, rec in self.last.items():
            a, b = self.first[pid], rec["io"]
            role = "main" if pid == self.main.pid else "worker"
            rows.append({
                "pid": pid, "role": role, "name": rec["name"],
                "read_syscalls": b.read_count - a.read_count,
                "read_chars_mib": (getattr(b, "read_chars", 0) - getattr(a, "read_chars", 0)) / MIB,
                "storage_read_mib": (b.read_bytes - a.read_bytes) / MIB,
                "cpu_pct_mean": sum(rec["cpu"]) / len(rec["cpu"]) if rec["cpu"] else None,
                "rss_peak_mib": rec["rss_peak"] / MIB,
            })
        rows.sort(key=lambda r: (r["role"] != "main", r["pid"]))
        alive = {c.pid for c in self._children()}
        for r in rows:
            r["exited"] = r["role"] == "worker" and r["pid"] not in alive
        # The kernel adds a reaped child's counters to its parent's, so the main row already holds the
        # exited workers' share: totals are main + workers still alive, never the plain sum of rows.
        counted = [r for r in rows if not r["exited"]]
        return {
            "per_process": rows,
            "main_includes_exited_workers": any(r["exited"] for r in rows),
            "read_syscalls_total": sum(r["read_syscalls"] for r in counted),
            "read_chars_mib_total": sum(r["read_chars_mib"] for r in counted),
            "storage_read_mib_total": sum(r["storage_read_mib"] for r in counted),
            "cpu_pct_total": sum(r["cpu_pct_mean"] or 0 for r in rows),
            "rss_peak_mib_sum": sum(r["rss_peak_mib"] for r in rows),
            "workers_seen": sum(r["role"] == "worker" for r in rows),
        }

    def _children(self) -> list[psutil.Process]:
        try:
            kids = self.main.children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        out = []
        for k in kids:
            try:
                if k.name() not in self.ignore:
                    out.append(k)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return out
