"""Page-cache control for cold and warm trials, and proof that a cold trial really read storage."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

import psutil

CHUNK = 4 * 1024 * 1024
PAGE = mmap.PAGESIZE
_PROT_READ, _MAP_SHARED = 0x1, 0x01


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


def file_bytes(paths: list[Path]) -> int:
    """The files' own sizes (st_size): tar headers and every member included, what storage must deliver."""
    return sum(p.stat().st_size for p in paths)


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    return libc


def resident_bytes(paths: list[Path]) -> int | None:
    """Bytes of these files now in the page cache, from mincore(2) on a fresh read-only mapping (mapping
    faults no page in, so asking does not change the answer). None where mincore is not available."""
    try:
        libc = _libc()
    except OSError:
        return None
    total = 0
    for p in paths:
        size = p.stat().st_size
        if size == 0:
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                pages = (size + PAGE - 1) // PAGE
                vec = (ctypes.c_ubyte * pages)()
                if libc.mincore(addr, size, vec) != 0:
                    return None
                total += sum(1 for v in vec if v & 1) * PAGE
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)
    return min(total, file_bytes(paths))
