"""Debian sysstat's iostat and pidstat run beside a trial: raw logs kept, key figures parsed.

When the tools are missing the record says "not installed" rather than leaving the figures out silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from dataperf.measure.collectors.proc import device_of


def parse_table(text: str, header_first: str) -> list[dict[str, str]]:
    """Rows of sysstat's whitespace tables, keyed by the most recent header line starting with header_first."""
    rows: list[dict[str, str]] = []
    cols: list[str] | None = None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == header_first or (parts[0] == "#" and len(parts) > 1 and parts[1] == header_first):
            cols = parts[1:] if parts[0] == "#" else parts
            continue
        if cols and len(parts) == len(cols):
            rows.append(dict(zip(cols, parts, strict=True)))
    return rows


def _f(v: str | None) -> float | None:
    try:
        return float(v.replace(",", ".")) if v is not None else None
    except ValueError:
        return None


REPORT_WAIT_S = 5.0  # a hang guard: how long past its 1 s interval a tool may take to print its first report


def has_report(text: str, header_first: str) -> bool:
    """The log holds a whole report: a header line and a row after it (each report is written and flushed at
    once, so one row means the report landed)."""
    return bool(parse_table(text, header_first))


class _SysstatTool:
    """Runs one sysstat command with a 1 s interval for the length of the trial."""

    name = ""
    binary = ""
    header_first = ""  # the first word of its report's header line (parse_table's)

    def __init__(self, raw_dir: Path | None, tag: str):
        self.raw_dir = raw_dir
        self.tag = tag
        self.proc: subprocess.Popen | None = None
        self.log: Path | None = None
        self.t0 = 0.0

    def args(self) -> list[str] | None:
        raise NotImplementedError

    def start(self) -> None:
        self.t0 = time.perf_counter()
        args = self.args()
        if args is None or shutil.which(self.binary) is None:
            return
        d = self.raw_dir or Path(tempfile.mkdtemp(prefix="dataperf-sysstat-"))
        d.mkdir(parents=True, exist_ok=True)
        self.log = d / f"{self.tag}.{self.name}.log"
        env = dict(os.environ, LC_ALL="C", S_TIME_FORMAT="ISO")
        with open(self.log, "w") as f:
            self.proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=env)

    def finish(self) -> str | None:
        if self.proc is None:
            return None
        # sysstat prints each 1 s report when its interval ends; let the last one land before stopping, and for a
        # trial under 1 s, the first one, however late a loaded machine lets the tool print it (CI: a report
        # due at 1.0 s not yet written at 1.1 s left none)
        time.sleep(max(0.0, 1.1 - (time.perf_counter() - self.t0)))
        guard = time.perf_counter() + REPORT_WAIT_S
        while self.log is not None and self.proc.poll() is None and time.perf_counter() < guard \
                and not has_report(self.log.read_text(errors="replace"), self.header_first):
            time.sleep(0.05)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.log.read_text(errors="replace") if self.log else ""

    def unavailable(self) -> dict[str, Any]:
        why = f"{self.binary} not installed (apt-get install sysstat)" if shutil.which(self.binary) is None \
            else "no block device for the dataset"
        return {"available": False, "why": why}


class IostatCollector(_SysstatTool):
    name = "iostat"
    binary = "iostat"
    header_first = "Device"

    def __init__(self, data: Path | None, raw_dir: Path | None, tag: str):
        """data None: every device is logged, and the one reported is `dev` if set before stop() (watch learns
        the dataset from the job), else the device that read the most."""
        super().__init__(raw_dir, tag)
        self.all_devices = data is None
        self.dev = None if data is None else device_of(data)

    def args(self) -> list[str] | None:
        if self.all_devices:
            return ["iostat", "-dxk", "-y", "1"]
        return None if self.dev is None else ["iostat", "-dxk", "-y", "1", self.dev]

    def stop(self) -> dict[str, Any]:
        text = self.finish()
        if text is None:
            return self.unavailable()
        table = parse_table(text, "Device")
        if self.dev is None and table:
            read: dict[str, float] = {}
            for r in table:
                read[r["Device"]] = read.get(r["Device"], 0.0) + (_f(r.get("rkB/s")) or 0.0)
            self.dev = max(read, key=read.get)
        rows = [r for r in table if r.get("Device") == self.dev]
        out: dict[str, Any] = {"available": True, "device": self.dev, "raw_log": str(self.log),
                               "intervals": len(rows)}
        if not rows:
            out["note"] = "trial shorter than iostat's 1 s interval: no report"
            return out
        for col, key in (("r/s", "read_iops_mean"), ("rkB/s", "read_kib_s_mean"), ("%util", "util_pct_mean"),
                         ("r_await", "read_await_ms_mean"), ("aqu-sz", "queue_depth_mean")):
            vals = [v for v in (_f(r.get(col)) for r in rows) if v is not None]
            if vals:
                out[key] = sum(vals) / len(vals)
        if "read_kib_s_mean" in out:
            out["read_mib_s_mean"] = out.pop("read_kib_s_mean") / 1024
        return out


class PidstatCollector(_SysstatTool):
    """pidstat -u -d for every active process; parsed down to this process tree."""

    name = "pidstat"
    binary = "pidstat"
    header_first = "Time"

    def __init__(self, raw_dir: Path | None, tag: str, root_pid: int | None = None):
        super().__init__(raw_dir, tag)
        self.root_pid = root_pid or os.getpid()
        self.known: set[int] = set()

    def watch(self, pids: list[int]) -> None:
        """Remember processes of this tree that may be gone by stop(): non-persistent DataLoader workers (audit M8),
        a watched job's workers and ranks."""
        self.known.update(pids)

    def args(self) -> list[str] | None:
        return ["pidstat", "-h", "-u", "-d", "1"]

    def stop(self) -> dict[str, Any]:
        import psutil

        mine = {self.root_pid} | self.known
        try:
            mine |= {c.pid for c in psutil.Process(self.root_pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            pass
        text = self.finish()
        if text is None:
            return self.unavailable()
        rows = parse_table(text, "Time")
        per_pid: dict[str, dict[str, list[float]]] = {}
        for r in rows:
            if r.get("Command") == "pidstat":
                continue
            d = per_pid.setdefault(r["PID"], {"cpu": [], "kb_rd": [], "cmd": r.get("Command", "")})
            for col, k in (("%CPU", "cpu"), ("kB_rd/s", "kb_rd")):
                v = _f(r.get(col))
                if v is not None:
                    d[k].append(v)
        summary = []
        for pid, d in per_pid.items():
            summary.append({
                "pid": int(pid), "command": d["cmd"], "ours": int(pid) in mine,
                "cpu_pct_mean": sum(d["cpu"]) / len(d["cpu"]) if d["cpu"] else None,
                "read_mib_s_mean": sum(d["kb_rd"]) / len(d["kb_rd"]) / 1024 if d["kb_rd"] else None,
            })
        summary.sort(key=lambda r: -(r["cpu_pct_mean"] or 0))
        ours = [r for r in summary if r["ours"]]  # every one of ours, however busy the rest of the machine
        others = [r for r in summary if not r["ours"]][: max(0, 20 - len(ours))]
        return {"available": True, "raw_log": str(self.log), "intervals": len({r["Time"] for r in rows}),
                "processes": sorted(ours + others, key=lambda r: -(r["cpu_pct_mean"] or 0))}
