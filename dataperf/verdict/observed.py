"""What the collectors saw while a trial ran, as a person reads it: each collector's stored figures (plain JSON in
a record's `collectors`) said as lines, tables and histograms, plain data a renderer draws without knowing any
collector's keys. Reads records; measures nothing (dataperf.measure.collectors gathers the figures).

Each describer reads the figures its collector stores under its name (DiskCollector "disk", ProcessCollector
"processes", IostatCollector "iostat", PidstatCollector "pidstat", EbpfReadCollector "ebpf", NvmlMemoryCollector
"nvml"), in the order they are shown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dataperf.results import fmt


@dataclass
class Table:
    """Rows a person reads as a table; cells already formatted, every column right-aligned."""

    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass
class Histogram:
    title: str
    bins: list[tuple[int, int, int]]  # (low, high, count)


Description = list[str | Table | Histogram]


def disk(d: dict[str, Any]) -> Description:
    line = f"disk {d['device']}: {d['read_mib_s']:.1f} MiB/s read, {d['read_iops']:.0f} IOPS"
    if "util_pct" in d:
        line += f", {d['util_pct']:.0f}% util"
    return [line]


def processes(d: dict[str, Any]) -> Description:
    rows = [[str(p["pid"]), p["role"] + (" (exited)" if p["exited"] else ""), str(p["read_syscalls"]),
             fmt(p["storage_read_mib"], 2), fmt(p["cpu_pct_mean"], 0), fmt(p["rss_peak_mib"], 0)]
            for p in d["per_process"]]
    out: Description = [
        Table("processes (/proc/PID/io)", ["pid", "role", "read_syscalls", "storage_read_mib", "cpu_pct_mean",
                                           "rss_peak_mib"], rows),
        "note: read_syscalls count every read(), worker result pipes and the collectors' own /proc reads "
        "included, not only dataset reads; exited workers' rows hold their last sample (totals are right via "
        "main)"]
    if d.get("main_includes_exited_workers"):
        out.append("note: the main row includes exited workers' counts (the kernel folds a reaped child's I/O "
                   "into its parent)")
    return out


def iostat(d: dict[str, Any]) -> Description:
    return [f"iostat {d.get('device')}: {d.get('intervals')} intervals, {fmt(d.get('read_mib_s_mean'), 1)} MiB/s, "
            f"{fmt(d.get('read_iops_mean'))} r/s, {fmt(d.get('util_pct_mean'), 0)}% util (log {d.get('raw_log')})"]


def pidstat(d: dict[str, Any]) -> Description:
    ours = [p for p in d.get("processes", []) if p["ours"]]
    return [f"pidstat: {d.get('intervals')} intervals, our processes "
            + ", ".join(f"{p['pid']} {fmt(p['cpu_pct_mean'])}% CPU" for p in ours)
            + f" (log {d.get('raw_log')})"]


def ebpf(d: dict[str, Any]) -> Description:
    rows = [[str(p["pid"]), p["comm"], str(p["reads"]), fmt(p["read_mib"], 2)] for p in d.get("per_process", [])]
    out: Description = [Table(f"eBPF read syscalls by process (via {d.get('backend')})",
                              ["pid", "comm", "reads", "read_mib"], rows)]
    if d.get("skipped"):
        out.append(f"note: eBPF first choice skipped: {d['skipped']}")
    hist = d.get("read_size_histogram_bytes") or {}
    if hist:
        out.append(Histogram("read() sizes (bytes)", [(int(k.split("-")[0]), int(k.split("-")[1]), v)
                                                     for k, v in hist.items()]))
    return out


def nvml(d: dict[str, Any]) -> Description:
    return [f"GPU {g['index']} {g['name']}: peak {g['peak_used_mib']:,.0f} of {g['total_mib']:,.0f} MiB used "
            f"(NVML, {len(g['used_mib_windows'])} x {d['window_s']:g} s windows)" for g in d["gpus"]]


# each collector's describer, by the name its figures are stored under, in the order they are shown
DESCRIBERS: dict[str, Callable[[dict[str, Any]], Description]] = {
    "disk": disk, "processes": processes, "iostat": iostat, "pidstat": pidstat, "ebpf": ebpf, "nvml": nvml}


def describe(results: dict[str, Any]) -> Description:
    """What every collector of a record saw, as a person reads it (a collector that could not run says why)."""
    out: Description = []
    for name, describe_one in DESCRIBERS.items():
        d = results.get(name)
        if not d:
            continue
        if "available" in d and not d["available"]:
            stand_in = f"; {d['fallback']} stand in" if d.get("fallback") else ""
            out.append(f"{name}: unavailable: {d.get('why')}{stand_in}")
        else:
            out += describe_one(d)
    return out
