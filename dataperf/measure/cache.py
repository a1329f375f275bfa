"""Page-cache control for cold and warm trials, and proof that a cold trial really read storage.

One policy for every command that reads a dataset cold or warm: `prepare` before reading (warm: read it all
once; cold: evict, then ask mincore what stayed) and `verify` after (a cold repeat read at least 90% of its
files' bytes from storage and found at most 10% resident; a warm one read at most 10%)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import mmap
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from dataperf.measure import footprint
from dataperf.results import MIB

CHUNK = 4 * 1024 * 1024
COLD_MIN_READ_FRACTION = 0.9  # a cold repeat reads at least 90% of the files' own bytes from storage
COLD_MAX_RESIDENT_FRACTION = 0.1  # and at most 10% of them are still in page cache after eviction
WARM_MAX_READ_FRACTION = 0.1
# /proc read_bytes counts the process tree's every storage read, its own page-ins (code pages first touched since
# boot, metadata) as well as the dataset's: a few KiB that, on a dataset of 0.06 MiB, were over 10% of it (a warm
# e2e test read [0.0, 0.0, 0.01] MiB, 2026-12-05). So a warm dataset up to this size is also checked by
# residency: repeats that start with WARM_MIN_RESIDENT_FRACTION of their files' bytes in page cache (mincore,
# asked once before them: a dataset this small that fits stays resident) read them from there, whatever else
# their processes page in.
WARM_RESIDENT_MAX_BYTES = 64 * MIB
WARM_MIN_RESIDENT_FRACTION = 0.9


@dataclass
class Prepared:
    """What preparing the cache left: notes on what could not be done, and (cold) the bytes still resident."""

    notes: list[str] = field(default_factory=list)
    resident_bytes: int | None = None  # cold: mincore after eviction; None warm, or where mincore is missing


def prepare(paths: list[Path], mode: str, drop_caches: bool = False) -> Prepared:
    """Warm: read every byte once, so reads are served from page cache. Cold: evict (before every repeat),
    then measure what stayed resident, which `verify` judges."""
    if mode == "warm":
        preread(paths)
        return Prepared()
    notes = evict(paths, drop_caches)
    return Prepared(notes, resident_bytes(paths))


def expected_read_bytes(paths: list[Path], count: int | None, samples: list[int], world_size: int = 1) -> list[float]:
    """Per repeat, the files' own bytes (st_size) a rank's samples live in: the share of the epoch it read
    (all of it when the sample count is unknown, as for text files)."""
    per_rank = file_bytes(paths) / max(world_size, 1)
    n = (count or 0) / max(world_size, 1)
    return [per_rank * min(1.0, s / n) if n else per_rank for s in samples]


@dataclass
class Verification:
    verified: bool
    resident_after_evict_pct: float | None = None  # cold: the worst repeat
    note: str | None = None  # why not, when not verified


def warm_resident(paths: list[Path]) -> int | None:
    """Warm repeats' files' bytes in page cache before they start (mincore), where the dataset is small enough that
    its processes' own page-ins can pass 10% of it (WARM_RESIDENT_MAX_BYTES); None otherwise."""
    return resident_bytes(paths) if file_bytes(paths) <= WARM_RESIDENT_MAX_BYTES else None


def verify(mode: str, read_bytes: list[int], expected: list[float], resident: list[int | None],
           total_bytes: int) -> Verification:
    """Judge repeats by what they read from storage (`read_bytes`, /proc read_bytes) against what their
    samples' files hold (`expected`), and by what mincore found resident: cold, after each eviction; warm (a
    small dataset), at each repeat's start."""
    got = [round(b / MIB, 2) for b in read_bytes]
    exp_mib = statistics.median(expected) / MIB if expected else float("nan")
    if mode != "cold":
        little = [b <= WARM_MAX_READ_FRACTION * e for b, e in zip(read_bytes, expected, strict=True)]
        held = [r is not None and r >= WARM_MIN_RESIDENT_FRACTION * total_bytes for r in resident]
        if all(little):
            return Verification(True)
        if all(a or h for a, h in zip(little, held, strict=True)):
            return Verification(True, note=(
                f"warm cache verified by residency: repeats read {got} MiB from storage, over 10% of the "
                f"{exp_mib:.2f} MiB of files, but every such repeat started with at least 90% of the files in page "
                "cache (mincore): those reads were its processes' own page-ins (code, metadata), not the data"))
        return Verification(False, note=(
            f"warm cache NOT verified: repeats still read {got} MiB from storage, over 10% of the {exp_mib:.2f} "
            "MiB of files (dataset larger than free page cache?)"))
    known = [x for x in resident if x is not None]
    pct = max(known) / max(total_bytes, 1) * 100 if known else None
    read_ok = all(b >= COLD_MIN_READ_FRACTION * e for b, e in zip(read_bytes, expected, strict=True))
    evicted = bool(known) and max(known) <= COLD_MAX_RESIDENT_FRACTION * max(total_bytes, 1)
    if read_ok and evicted:
        return Verification(True, pct)
    why = []
    if not read_ok:
        why.append(f"storage read {got} MiB per repeat, under 90% of the {exp_mib:.2f} MiB of files read")
    if not evicted:
        why.append("mincore unavailable" if not known else
                   f"{pct:.0f}% of the files stayed in page cache after eviction")
    return Verification(False, pct, "cold cache NOT verified: " + "; ".join(why) + " (the files are mapped by "
                        "another process, sit on tmpfs/RAM, or the filesystem ignores fadvise): this is not a cold "
                        "measurement, and diagnose and the recommendation will not use it as one")
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


def tree_read_bytes(pid: int | None = None) -> int:
    """Bytes this process (or pid) and its live children fetched from storage (/proc/PID/io read_bytes).

    Reaped children's counts are folded into the parent's by the kernel, so sampling main + live children
    before and after a repeat counts every worker, whether it is still alive or already joined.
    """
    root = os.getpid() if pid is None else pid
    return sum(_read_bytes(p) for p in [root, *tree_pids(root)])


def tree_pids(pid: int) -> list[int]:
    """pid's live descendants: footprint.children's walk of each thread's /proc children file (a few small
    reads, where psutil's children() reads every process's stat: 1.1 ms a call on the 2-core box with 127
    processes, twice a repeat, its cache misses landing in the timed repeat's first batches); psutil's where the
    kernel has no such file."""
    if _HAS_CHILDREN_FILE:
        return footprint.children(pid)
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _read_bytes(pid: int) -> int:
    """/proc/PID/io's read_bytes; 0 for a process gone meanwhile or not ours to read."""
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            for line in f:
                if line.startswith(b"read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


_HAS_CHILDREN_FILE = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def file_bytes(paths: list[Path]) -> int:
    """The files' own sizes (st_size): tar headers and every member included, what storage must deliver."""
    return sum(p.stat().st_size for p in paths)


@functools.cache
def _libc() -> ctypes.CDLL:
    """libc, found once a process (find_library runs ldconfig in a subprocess)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    libc.syscall.restype = ctypes.c_long
    return libc


class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]


# cachestat(2), Linux 6.5+ (one number on every architecture that has it): a file's pages in page cache, asked of
# an open file with no mapping. mincore needs a mapping per file, and 2,000 mmap/munmap pairs before a window
# slowed the plain loop's next 2 epochs of those files by 6.6% (2-core box, 2026-12-06; each unmapping flushes
# TLB entries, a likely cause, not measured). None: not tried yet; False: refused here (older kernel, seccomp).
_CACHESTAT_NR = 451 if os.uname().machine in ("x86_64", "aarch64") else None
_cachestat_ok: bool | None = None


def _cachestat_pages(libc: ctypes.CDLL, fd: int) -> int | None:
    """The file's pages in page cache (cachestat), or None where the kernel refuses the call."""
    global _cachestat_ok
    if _CACHESTAT_NR is None or _cachestat_ok is False:
        return None
    st = _Cachestat()
    if libc.syscall(_CACHESTAT_NR, fd, ctypes.byref(_CachestatRange(0, 0)), ctypes.byref(st), 0) != 0:
        _cachestat_ok = False  # ENOSYS or EPERM: mincore from now on
        return None
    _cachestat_ok = True
    return st.nr_cache


def _mincore_pages(libc: ctypes.CDLL, fd: int, size: int) -> int | None:
    """The file's pages in page cache, from mincore(2) on a fresh read-only mapping (mapping faults no page in,
    so asking does not change the answer); None where mapping or mincore fails."""
    addr = libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        return None
    try:
        pages = (size + PAGE - 1) // PAGE
        vec = (ctypes.c_ubyte * pages)()
        if libc.mincore(addr, size, vec) != 0:
            return None
        return sum(1 for v in vec if v & 1)
    finally:
        libc.munmap(addr, size)


def resident_bytes(paths: list[Path]) -> int | None:
    """Bytes of these files now in the page cache: cachestat(2) where the kernel has it, else mincore(2). None
    where neither is available."""
    try:
        libc = _libc()
    except OSError:
        return None
    total = stored = 0
    for p in paths:
        size = p.stat().st_size
        stored += size
        if size == 0:
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            pages = _cachestat_pages(libc, fd)
            if pages is None:
                pages = _mincore_pages(libc, fd, size)
            if pages is None:
                return None
            total += pages * PAGE
        finally:
            os.close(fd)
    return min(total, stored)  # the last page counts whole: no more than the files hold
