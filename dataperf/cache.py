"""Page-cache control for cold and warm trials, and proof that a cold trial really read storage."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

CHUNK = 4 * 1024 * 1024


def evict(paths: list[Path], drop_caches: bool = False) -> list[str]:
    """Drop the dataset's pages from the page cache; returns notes on anything that could not be done.

    fdatasync first: dirty pages (a just-generated dataset) are not dropped by POSIX_FADV_DONTNEED.
    """
    notes: list[str] = []
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            try:
                os.fdatasync(fd)
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if drop_caches:
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1\n")
        except OSError as e:
            notes.append(f"drop_caches not possible ({e.strerror}); used posix_fadvise only")
    return notes


def preread(paths: list[Path]) -> int:
    """Read every byte once so a warm trial is served from the page cache."""
    total = 0
    buf = bytearray(CHUNK)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total


def tree_read_bytes(proc: psutil.Process | None = None) -> int:
    """Bytes this process and its live children fetched from storage (/proc/PID/io read_bytes).

    Reaped children's counts are folded into the parent's by the kernel, so sampling main + live children
    before and after a repeat counts every worker, whether it is still alive or already joined.
    """
    proc = proc or psutil.Process()
    total = proc.io_counters().read_bytes
    for c in proc.children(recursive=True):
        try:
            total += c.io_counters().read_bytes
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total
