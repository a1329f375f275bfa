"""Where a record came from: machine, filesystem under the data, library versions, commit and command.

A figure means nothing without the machine it was measured on; `compare` warns when base and head differ here,
and `report` prints it once. Gathered once per process (the data's filesystem once per path): it is read at
record-writing time, never inside a timed loop.
"""

from __future__ import annotations

import functools
import os
import platform
import shlex
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

# keys that say which machine and software ran; differing values make two results incomparable
MACHINE_KEYS = ("host", "cpu_model", "cpu_count", "mem_total_gib", "kernel", "gpu_model", "gpu_driver")
SOFTWARE_KEYS = ("python", "torch", "webdataset", "dali", "dataperf", "dataperf_commit")
STORAGE_KEYS = ("fs_type", "fs_device")
COMPARED_KEYS = MACHINE_KEYS + SOFTWARE_KEYS + STORAGE_KEYS


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _gpu() -> tuple[str | None, str | None]:
    """GPU model and driver through NVML (no CUDA context is created); (None, None) without a GPU."""
    try:
        import pynvml
    except ImportError:
        return None, None
    try:
        pynvml.nvmlInit()
        try:
            n = pynvml.nvmlDeviceGetCount()
            if n == 0:
                return None, None
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            name = name.decode() if isinstance(name, bytes) else name
            driver = pynvml.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else driver
            return (f"{n} x {name}" if n > 1 else name), driver
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML present but no driver: the machine has no usable GPU
        return None, None


def _commit() -> str | None:
    """The dataperf checkout's commit, with '-dirty' when its tracked files changed; None when not a checkout."""
    src = Path(__file__).resolve().parents[2]  # dataperf/results/provenance.py -> the checkout
    if not (src / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _usable_cores() -> int | None:
    """The cores this process may run on (its affinity: taskset, a cgroup cpuset), which a judgement of cores
    busy or full is against; the machine's count where affinity is not known."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count()


@functools.lru_cache(maxsize=1)
def machine_and_software() -> dict[str, Any]:
    """The per-process part: gathered once, shared by every record this process writes."""
    gpu_model, gpu_driver = _gpu()
    return {
        "host": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cores": _usable_cores(),
        "mem_total_gib": _mem_total_gib(),
        "kernel": platform.release(),
        "gpu_model": gpu_model,
        "gpu_driver": gpu_driver,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "webdataset": _version("webdataset"),
        "dali": _version("nvidia-dali-cuda120") or _version("nvidia-dali-cuda110"),
        "dataperf": _version("dataperf"),
        "dataperf_commit": _commit(),
        "command": shlex.join(["dataperf", *sys.argv[1:]]) if sys.argv else None,
    }


def _mount_of(path: Path) -> tuple[str | None, str | None]:
    """(filesystem type, device) of the mount holding path: the longest mount point that prefixes it."""
    try:
        target = path.resolve()
        best: tuple[int, str, str] | None = None
        for line in Path("/proc/self/mounts").read_text().splitlines():
            dev, mnt, fstype = line.split()[:3]
            mnt = mnt.replace("\\040", " ")
            if target == Path(mnt) or Path(mnt) in target.parents:
                if best is None or len(mnt) > best[0]:
                    best = (len(mnt), fstype, dev)
        return (best[1], best[2]) if best else (None, None)
    except OSError:
        return None, None


@functools.lru_cache(maxsize=64)
def storage(data: str) -> dict[str, Any]:
    """Filesystem type and device under the data; remote URLs have none."""
    if not data or "://" in data:
        return {"fs_type": None, "fs_device": None}
    fstype, dev = _mount_of(Path(data))
    return {"fs_type": fstype, "fs_device": dev}


def collect(data: str | None = None) -> dict[str, Any]:
    """Everything a record needs to say where it came from."""
    return {**machine_and_software(), **storage(data or "")}


def differences(base: dict[str, Any], head: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The compared keys whose values differ between two envs (a key missing on one side counts only when the
    other side has it, so old records without provenance do not warn on every key; a storage key only where both
    records read storage: a step or a decision reads none, and its None is no other filesystem)."""
    out = []
    for k in COMPARED_KEYS:
        b, h = base.get(k), head.get(k)
        if k in STORAGE_KEYS and (b is None or h is None):
            continue
        if b != h and k in base and k in head:
            out.append((k, b, h))
    return out
