"""Raw reads of the dataset's own files past the page cache, by several readers at once: a read plan within a
budget, fio where installed and able, else O_DIRECT preads in Python (the storage ceiling's measurement)."""

from __future__ import annotations

import json
import math
import mmap
import os
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dataperf.measure import cache
from dataperf.measure.limits.ceiling import MIB, NAN

BLOCK = 1 << 20  # one read: 1 MiB at 1 MiB-aligned offsets, as fio --bs=1M; O_DIRECT needs the alignment
MIN_READ_S = 0.5  # a raw read lasts at least this long (whole passes over the planned files)
MIN_FIO_BYTES = 512 * MIB  # fio: as many passes as read at least this much (its runtime is in whole ms)
MAX_PASSES = 100


@dataclass
class RawRead:
    """Bytes read by several readers at once, over the wall time of the whole read."""

    nbytes: int
    seconds: float
    method: str

    @property
    def mib_s(self) -> float:
        return self.nbytes / MIB / self.seconds if self.seconds > 0 else NAN


Task = tuple[Path, int, int]  # (file, offset, length): one reader's unit of work


def read_plan(paths: list[Path], budget_bytes: float, sizes: list[int] | None = None) -> list[Task]:
    """Whole files spread evenly over the dataset up to the budget (at least one file); a first file larger
    than the budget is read over its first budget bytes (a whole number of blocks), so a dataset of any size
    costs at most the budget. sizes: the files' sizes when already known (a million-file dataset is not
    stat'ed again)."""
    sizes = sizes if sizes is not None else [p.stat().st_size for p in paths]
    total = sum(sizes)
    if total <= budget_bytes:
        return [(p, 0, s) for p, s in zip(paths, sizes, strict=True) if s > 0]
    stride = max(1, math.ceil(total / budget_bytes))
    plan: list[Task] = []
    used = 0
    for p, s in zip(paths[::stride], sizes[::stride], strict=True):
        if used + s > budget_bytes:
            if not plan:
                plan.append((p, 0, min(s, max(BLOCK, int(budget_bytes) // BLOCK * BLOCK))))
            break
        if s > 0:
            plan.append((p, 0, s))
            used += s
    return plan


def split_tasks(plan: list[Task], readers: int) -> list[Task]:
    """Cut ranges larger than one reader's share into block-aligned pieces, so one big file keeps every reader
    busy; small files stay whole (a reader reads a file start to end, as a loader worker does)."""
    share = max(BLOCK, math.ceil(sum(n for _, _, n in plan) / max(readers, 1) / BLOCK) * BLOCK)
    out: list[Task] = []
    for p, off, n in plan:
        for k in range(off, off + n, share):
            out.append((p, k, min(share, off + n - k)))
    return out


_buffers = threading.local()


def _buffer() -> mmap.mmap:
    """A page-aligned 1 MiB buffer per reader thread (O_DIRECT needs aligned memory; mmap gives it)."""
    if not hasattr(_buffers, "buf"):
        _buffers.buf = mmap.mmap(-1, BLOCK)
    return _buffers.buf


def _read_task(task: Task, direct: bool, throttle_mib_s: float | None) -> int:
    """Read one range in 1 MiB preads; a simulated throttle sleeps as long as the bytes take at its rate."""
    path, off, length = task
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    got = 0
    try:
        buf = _buffer()
        pos, end = off, off + length
        while pos < end:
            n = os.preadv(fd, [buf], pos)
            if n <= 0:
                break
            n = min(n, end - pos)
            got += n
            pos += n
            if throttle_mib_s:
                time.sleep(n / (throttle_mib_s * MIB))
    finally:
        os.close(fd)
    return got


def _direct_refused(path: Path) -> str | None:
    """Why O_DIRECT cannot read this file (tmpfs, some network filesystems), or None if it can."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:
        return e.strerror or str(e)
    try:
        os.preadv(fd, [_buffer()], 0)
    except OSError as e:
        return e.strerror or str(e)
    finally:
        os.close(fd)
    return None


def python_read(tasks: list[Task], readers: int, direct: bool = True, throttle_mib_s: float | None = None,
                min_s: float = MIN_READ_S) -> RawRead:
    """`readers` threads reading the tasks (os.preadv releases the GIL, so the reads really overlap), in as many
    whole passes as fill min_s (a tiny dataset read once would time the thread start-up).

    direct: O_DIRECT, past the page cache; where the filesystem refuses it, the files are evicted
    (POSIX_FADV_DONTNEED) and read buffered, once, and the method says so. Not direct: buffered reads, i.e. from
    the page cache when the files are resident (a warm trial)."""
    method = f"{readers} parallel buffered readers, 1 MiB preads"
    if direct:
        method = f"{readers} parallel O_DIRECT readers, 1 MiB preads"
        why = _direct_refused(tasks[0][0]) if tasks else None
        if why is not None:
            cache.evict(sorted({p for p, _, _ in tasks}))
            direct, min_s = False, 0.0
            method = (f"{readers} parallel buffered readers after POSIX_FADV_DONTNEED (O_DIRECT refused: {why}; "
                      "on tmpfs this reads memory)")
    if throttle_mib_s:
        method += f", throttled to {throttle_mib_s:g} MiB/s per reader (simulated)"
    nbytes, passes = 0, 0
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, readers)) as ex:
        while passes == 0 or (time.perf_counter() - t0 < min_s and passes < MAX_PASSES):
            nbytes += sum(ex.map(lambda t: _read_task(t, direct, throttle_mib_s), tasks))
            passes += 1
    if passes > 1:
        method += f", {passes} passes"
    return RawRead(nbytes, time.perf_counter() - t0, method)


def fio_read(tasks: list[Task], readers: int) -> tuple[RawRead | None, str]:
    """fio (`--readonly`, `direct=1`, 1 MiB sequential psync reads), one job per reader, all at once.

    fio reads whole blocks only (it skips a file smaller than a block and the tail past the last whole
    block), so it is used when every file holds at least one block, and its figure only if it read at least
    90% of the bytes it was given. Returns (reading or None, why not)."""
    if shutil.which("fio") is None:
        return None, "fio not installed"
    if any(n < BLOCK for _, _, n in tasks):
        return None, "files under 1 MiB (fio reads whole 1 MiB blocks only)"
    jobs = min(readers, len(tasks))
    expected = sum(n // BLOCK * BLOCK for _, _, n in tasks)
    loops = max(1, min(MAX_PASSES, math.ceil(MIN_FIO_BYTES / expected)))  # a tiny dataset: read it again
    lines = ["[global]", "direct=1", "rw=read", "bs=1M", "ioengine=psync", f"loops={loops}"]
    for j in range(jobs):
        mine = tasks[j::jobs]
        whole = all(off == 0 and n == p.stat().st_size for p, off, n in mine)
        if whole:
            names = ":".join(str(p).replace(":", "\\:") for p, _, _ in mine)
            lines += [f"[r{j}]", f"filename={names}"]
        else:  # pieces of one big file: a job section each (fio jobs run at once)
            for k, (p, off, n) in enumerate(mine):
                lines += [f"[r{j}-{k}]", f"filename={str(p).replace(':', chr(92) + ':')}", f"offset={off}",
                          f"size={n}"]
    with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        p = subprocess.run(["fio", "--readonly", "--output-format=json", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    try:
        out = json.loads(p.stdout[p.stdout.index("{"):]) if p.returncode == 0 else None
    except ValueError:
        out = None
    if out is None:
        return None, f"fio failed: {(p.stderr.strip().splitlines() or ['exit ' + str(p.returncode)])[-1]}"
    reads = [j["read"] for j in out["jobs"]]
    nbytes = sum(r["io_bytes"] for r in reads)
    seconds = max(r["runtime"] for r in reads) / 1000
    if nbytes < 0.9 * expected * loops or seconds <= 0:
        return None, f"fio read {nbytes} of {expected * loops} bytes"
    passes = f", {loops} passes" if loops > 1 else ""
    return RawRead(nbytes, seconds, f"fio --readonly direct=1 bs=1M psync, {jobs} jobs at once{passes}"), ""


def raw_read(plan: list[Task], readers: int, throttle_mib_s: float | None = None) -> RawRead:
    """A read plan read past the page cache by `readers` readers: fio where installed (and able), else O_DIRECT
    reads in Python. A simulated throttle is dataperf's own, so it is always read in Python."""
    tasks = split_tasks(plan, readers)
    why = "throttle simulated"
    if not throttle_mib_s:
        got, why = fio_read(tasks, readers)
        if got is not None:
            return got
    got = python_read(tasks, readers, True, throttle_mib_s)
    got.method += f" ({why})" if why else ""
    return got
