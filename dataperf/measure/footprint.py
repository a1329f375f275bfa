"""What a loader costs while it runs: CPU cores busy and resident memory (PSS) of the process tree.

PSS (proportional set size, from /proc/PID/smaps_rollup) is summed over the main process and its worker
processes, so pages shared between them count once in total, unlike RSS. Thread workers live inside the main
process and are covered by it.

CPU is counted from /proc/PID/stat, each process's own time plus that of its children it has reaped
(cutime/cstime): a worker that ends between two samples is reaped by the main process, whose reaped-children
time then holds all of its CPU, so nothing is lost however sparse the samples. The meter's own reading of /proc
(smaps_rollup costs milliseconds per process) runs in a thread of the main process; its CPU is taken off, and
it samples no more often than keeps it under `max_duty` cores (5% of the machine, at most one core).

Copy-on-read (forked workers touching the parent's Python objects: a refcount write copies the page) turns a
worker's shared pages (mapped by it and the parent) into private ones (pages no other process maps): its
private memory grows and its shared memory falls by as much. Memory a worker allocates (a shuffle buffer, a
heap that grows) is private from the start and leaves the shared pages alone; a flag on private growth alone
named copy-on-read on the H200 for 32 decode-off WebDataset workers (264 MiB) whose parent holds only shard
names. What counts as copied is each worker's private growth up to its shared pages' fall.

Growth (and fall) is counted from each worker's first batch (the consumer marks it, `first_batch`: its
start-up is done by then) to the least memory of the last third of its observed life. Copy-on-read is
front-loaded: random reads of a list of Python objects dirty most of its pages in the first part of an epoch
(the audit's 100,000-entry list: 49 MiB private after 12 batches, 128 at a third of the epoch, 130 at its end),
so a baseline later than the first batch misses it (the middle third read 0.3 MiB of 79). The least of the last
third, because a worker's memory also swings with the batch it is building (a decoded batch is MiBs, there one
sample and gone the next), while a copy stays. A worker with no mark (a backend whose workers the consumer
cannot name) is measured from the least of the middle third of its life, the first third holding its start-up.
A worker needs MIN_SAMPLES samples (two or more per third) to be judged; fewer (a short repeat) gives no growth
rather than a guess. A trial keeps each worker's first-batch memory across repeats (persistent workers copy in
the warm-up and the first repeat, and not again), in a `CopyLedger`.
A worker whose memory is still growing late in its life leaks (its Dataset keeps what it returns: a cache, a list
that grows), where a warm-up (a shuffle buffer filled before the first sample, a copy-on-read, a first decode's
buffers) is over by its middle third. `worker_late` reads the workers together between the middle and the last
third of the span they were all alive (the regular samples read every worker at one time): their summed private
memory at the least of each third, less what their shared pages' fall explains (a copy), and when those two
readings were taken, so the trial can count the samples delivered between them (a known answer: 1 MiB kept a
sample reads 1 MiB a sample).
Private rather than PSS: when one worker copies a page, the other processes' PSS of the original grows too,
and the parent's shared memory inflates every worker's PSS, so a PSS ratio understates a copy in a big parent.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from dataperf.results import MIB

GROWTH_FLAG_PCT = 20.0  # workers' private memory growing more than this over an epoch is flagged as copy-on-read
GROWTH_FLAG_MIB = 8.0  # ... and by at least this much (tiny workers wobble by a few pages)
LEAK_FLAG_MIB = 64.0  # workers still growing late in every repeat, by more than this over the trial: a leak
MIN_SAMPLES = 6  # a worker's samples needed to read its growth: two or more in each third of its life
CLK = os.sysconf("SC_CLK_TCK")


def memory_bytes(pid: int) -> tuple[int, int, int] | None:
    """(PSS, private, shared) of one process: private = Private_Clean + Private_Dirty, pages it alone maps;
    shared = Shared_Clean + Shared_Dirty, resident pages other processes map too. None when it is gone, a
    zombie (no memory left), or /proc does not say (non-Linux, no permission)."""
    got: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("Pss", "Private_Clean", "Private_Dirty", "Shared_Clean", "Shared_Dirty"):
                got[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if "Pss" not in got:
        return None
    return (got["Pss"], got.get("Private_Clean", 0) + got.get("Private_Dirty", 0),
            got.get("Shared_Clean", 0) + got.get("Shared_Dirty", 0))


def cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) of a process and of the children it has reaped, so far."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return sum(int(f) for f in fields[11:15]) / CLK


def machine_cpu_s() -> float | None:
    """The busy time since boot (/proc/stat: all but idle and iowait), in seconds, of the cores this process may
    run on (its affinity: under taskset or a cpuset, load on the other cores competes with nothing here); None
    off Linux."""
    try:
        mine = {f"cpu{c}" for c in os.sched_getaffinity(0)}
        with open("/proc/stat") as f:
            lines = [ln.split() for ln in f if ln.startswith("cpu") and not ln.startswith("cpu ")]
    except (OSError, AttributeError):
        return None
    ticks = [[int(x) for x in parts[1:9]] for parts in lines if parts[0] in mine]
    if not ticks:
        return None
    return sum(sum(t) - t[3] - t[4] for t in ticks) / os.sysconf("SC_CLK_TCK")


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
    """One repeat's cost: cores busy, peak PSS of the tree, workers' memory at a third of their life vs last."""

    wall_s: float = 0.0
    cpu_s: float = 0.0  # the tree's CPU over the repeat, the meter's own taken off
    meter_cpu_s: float = 0.0  # the meter's own reading of /proc (not in cpu_s)
    machine_cpu_s: float = float("nan")  # every process's CPU on the machine over the repeat (/proc/stat)
    pss_peak_bytes: int = 0
    worker_pss_first_bytes: int = 0  # summed over workers, each the least of the middle third of its life
    worker_pss_last_bytes: int = 0  # summed over workers, each the least of the last third of its life
    worker_private_first_bytes: int = 0
    worker_private_last_bytes: int = 0
    worker_copied_bytes: int = 0  # summed over workers: private growth up to the fall of its shared pages
    workers_seen: int = 0
    samples: int = 0
    # each judged worker: (time of its first batch or None, memory then or None, memory at the end), memory as
    # (PSS, private, shared); what a CopyLedger keeps across repeats
    workers: dict[int, tuple[float | None, tuple[int, ...] | None, tuple[int, ...]]] = field(default_factory=dict)
    # the workers' growth late in their life, not copied: (perf_counter of the reading at the least of the middle
    # third, of the one at the least of the last third, bytes grown between); None when too few samples
    worker_late: tuple[float, float, int] | None = None

    @property
    def cores_busy(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def other_cores_busy(self) -> float:
        """Cores other processes of the machine kept busy over the repeat (not this tree, not the meter): load
        that competes with the trial for the cores."""
        if not self.wall_s > 0 or self.machine_cpu_s != self.machine_cpu_s:
            return float("nan")
        return max(0.0, (self.machine_cpu_s - self.cpu_s - self.meter_cpu_s) / self.wall_s)

    @property
    def worker_growth_pct(self) -> float:
        if not self.worker_pss_first_bytes:
            return float("nan")
        return (self.worker_pss_last_bytes / self.worker_pss_first_bytes - 1) * 100

    @property
    def worker_private_growth_bytes(self) -> int:
        return self.worker_private_last_bytes - self.worker_private_first_bytes


@dataclass
class Meter:
    """Samples the tree in a thread while a repeat runs (`with Meter() as m:`), every interval_s or less often,
    so that its own CPU stays under max_duty cores."""

    interval_s: float = 0.05
    max_duty: float = field(default_factory=lambda: min(1.0, 0.05 * (os.cpu_count() or 1)))
    pid: int = field(default_factory=os.getpid)
    result: Footprint = field(default_factory=Footprint)

    def __enter__(self) -> Meter:
        self._stop = threading.Event()
        self._cpu0: dict[int, float] = {}  # CPU at the first sample, of the processes alive then
        self._cpu_last: dict[int, float] = {}
        self._alive: set[int] = set()  # processes found by the latest sample (zombies included)
        self._mem: dict[int, list[tuple[float, int, int, int]]] = {}  # worker -> (time, PSS, private, shared)
        self._t0 = time.perf_counter()
        self._machine0 = machine_cpu_s()
        self._first: dict[int, float] = {}  # worker pid -> when the consumer got its first batch
        self._marked: deque[int] = deque()  # workers marked since the sampler last looked: read them at once
        self._wake = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="dataperf-footprint", daemon=True)
        self._thread.start()
        return self

    def first_batch(self, pid: int, t: float) -> None:
        """The consumer got worker pid's first batch at t (perf_counter): its start-up is over, and its memory
        read then is its baseline. Cheap: the main thread only notes it and wakes the sampler, which reads that
        worker at once (a copy is front-loaded: the audit's list grew a worker's private memory
        by 80 MiB/s at first, and a baseline left to the next regular sample, 0.2 s on, lost a third of it)."""
        if pid not in self._first:
            self._first[pid] = t
            self._marked.append(pid)
            self._wake.set()

    def _run(self) -> None:
        due = time.perf_counter() + self.interval_s
        while True:
            self._wake.wait(max(0.0, due - time.perf_counter()))
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._marked:
                self._sample_marked()
                if time.perf_counter() < due:
                    continue
            due = time.perf_counter() + max(self.interval_s, self._sample() * (1 / self.max_duty - 1))

    def _sample_marked(self) -> None:
        """Memory of each newly marked worker alone (one smaps_rollup each): its baseline, taken promptly."""
        own0 = time.thread_time()
        while self._marked:
            pid = self._marked.popleft()
            now, mem = time.perf_counter(), memory_bytes(pid)
            if mem is not None:
                self._mem.setdefault(pid, []).append((now, *mem))
        self.result.meter_cpu_s += time.thread_time() - own0

    def _sample(self) -> float:
        """One look at the tree; returns its own CPU seconds (also added to meter_cpu_s)."""
        own0, now = time.thread_time(), time.perf_counter()
        first = self.result.samples == 0
        total, alive = 0, set()
        for p in [self.pid, *children(self.pid)]:
            cpu = cpu_s(p)
            if cpu is None:
                continue
            alive.add(p)
            self._cpu_last[p] = cpu
            if first:
                self._cpu0[p] = cpu
            mem = memory_bytes(p)
            if mem is None:
                continue
            total += mem[0]
            if p != self.pid:
                self._mem.setdefault(p, []).append((now, *mem))
        self._alive = alive
        self.result.pss_peak_bytes = max(self.result.pss_peak_bytes, total)
        self.result.samples += 1
        own = time.thread_time() - own0
        self.result.meter_cpu_s += own
        return own

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()
        r = self.result
        own = r.meter_cpu_s  # the last sample reads the main process's CPU first: its own cost falls after
        self._sample()
        r.meter_cpu_s = own
        r.wall_s = time.perf_counter() - self._t0
        machine = machine_cpu_s()
        if machine is not None and self._machine0 is not None:
            r.machine_cpu_s = machine - self._machine0
        # alive at the end: CPU since the start (all of it if started later); ended: reaped by a process of
        # the tree, whose reaped-children time holds all its CPU, of which only the part before the start is off
        used = sum(self._cpu_last[p] - self._cpu0.get(p, 0.0) for p in self._alive)
        before = sum(cpu for p, cpu in self._cpu0.items() if p not in self._alive)
        r.cpu_s = used - before - own
        judged = []
        for pid, trace in _while_siblings_live(self._mem).items():
            t = _thirds(trace)
            if t is None:
                continue
            mark = self._first.get(pid)
            at_first = next((smp[1:] for smp in trace if smp[0] >= mark), None) if mark is not None else None
            r.workers[pid] = (mark, at_first, t[1])
            judged.append((at_first or t[0], t[1]))
        r.workers_seen = len(judged)
        r.worker_pss_first_bytes = sum(mid[0] for mid, _ in judged)
        r.worker_pss_last_bytes = sum(last[0] for _, last in judged)
        r.worker_private_first_bytes = sum(mid[1] for mid, _ in judged)
        r.worker_private_last_bytes = sum(last[1] for _, last in judged)
        r.worker_copied_bytes = sum(max(0, min(last[1] - mid[1], mid[2] - last[2])) for mid, last in judged)
        r.worker_late = _late_growth({pid: trace for pid, trace in _while_siblings_live(self._mem).items()
                                      if pid in r.workers})


def _late_growth(traces: dict[int, list[tuple[float, int, int, int]]]) -> tuple[float, float, int] | None:
    """The workers' summed private memory between the least of the middle third and the least of the last third
    of the span every one of them was read in (the regular samples, which read all at one time), less what the
    fall of their shared pages explains (a copy-on-read, not new memory); with the times of those two readings.
    None without workers or with fewer than two joint readings in either third."""
    if not traces:
        return None
    at = [{s[0]: s for s in trace} for trace in traces.values()]
    times = set.intersection(*(set(a) for a in at))
    rows = sorted((t, sum(a[t][2] for a in at), sum(a[t][3] for a in at)) for t in times)
    if not rows:
        return None
    t0, t1 = rows[0][0], rows[-1][0]
    mid = [r for r in rows if t0 + (t1 - t0) / 3 <= r[0] < t0 + 2 * (t1 - t0) / 3]
    last = [r for r in rows if r[0] >= t0 + 2 * (t1 - t0) / 3]
    if len(mid) < 2 or len(last) < 2:
        return None
    a, b = min(mid, key=lambda r: r[1]), min(last, key=lambda r: r[1])
    grown = b[1] - a[1]
    return a[0], b[0], grown - max(0, min(grown, a[2] - b[2]))


def _while_siblings_live(mem: dict[int, list[tuple[float, int, int, int]]]) \
        -> dict[int, list[tuple[float, int, int, int]]]:
    """Each worker's samples up to the first exit of another worker seen during its life: pages it shared only
    with that sibling (the parent having written its own copy since the fork) turn private to it at the exit,
    which is not a copy it made."""
    end = max(trace[-1][0] for trace in mem.values()) if mem else 0.0
    exits = [trace[-1][0] for trace in mem.values() if trace[-1][0] < end]
    out = {}
    for pid, trace in mem.items():
        cut = min((t for t in exits if t >= trace[0][0] and t != trace[-1][0]), default=end)
        out[pid] = [s for s in trace if s[0] <= cut]
    return out


def _thirds(trace: list[tuple[float, int, int, int]]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(PSS, private, shared), each the least over the middle third of the worker's observed life and over the
    last third; None when either third holds fewer than two samples."""
    t0, t1 = trace[0][0], trace[-1][0]
    mid = [s for s in trace if t0 + (t1 - t0) / 3 <= s[0] < t0 + 2 * (t1 - t0) / 3]
    last = [s for s in trace if s[0] >= t0 + 2 * (t1 - t0) / 3]
    if len(trace) < MIN_SAMPLES or len(mid) < 2 or len(last) < 2:
        return None
    return tuple(min(s[k] for s in mid) for k in (1, 2, 3)), tuple(min(s[k] for s in last) for k in (1, 2, 3))


@dataclass
class CopyOnRead:
    """What the workers of a trial's last repeat copied from the parent since each one's first batch."""

    workers: int
    copied_bytes: int  # summed: private growth up to the fall of shared pages, first batch -> end of the repeat
    samples: int  # delivered by the loader over that span (every worker's)
    private_first_bytes: int  # their private memory at the first batch
    shared_first_bytes: int  # what they shared with the parent then: the most they could copy

    def per_epoch_bytes(self, epoch_samples: int | None) -> float:
        """At the pace measured, over an epoch: the measured copy where the span held an epoch or more, else
        scaled by samples (copying slows as the pages fill, so this is an upper estimate), at most the shared
        memory; NaN without an epoch's size."""
        if not epoch_samples or not self.samples:
            return float("nan")
        if self.samples >= epoch_samples:
            return float(self.copied_bytes)
        return min(self.copied_bytes * epoch_samples / self.samples, float(self.shared_first_bytes))

    @property
    def flagged(self) -> bool:
        """More than GROWTH_FLAG_MIB copied, and more than GROWTH_FLAG_PCT of the workers' private memory."""
        return self.copied_bytes > GROWTH_FLAG_MIB * MIB \
            and self.copied_bytes > self.private_first_bytes * GROWTH_FLAG_PCT / 100


@dataclass
class CopyLedger:
    """Each worker's memory at its first batch, kept across a trial's warm-up and repeats (persistent workers
    copy in the warm-up and the first repeat, then not again), and the samples delivered since."""

    base: dict[int, tuple[int, ...]] = field(default_factory=dict)
    since: dict[int, int] = field(default_factory=dict)
    last: dict[int, tuple[int, ...]] = field(default_factory=dict)  # the latest repeat's workers: memory at its end

    def add(self, fp: Footprint, samples: int) -> None:
        """One metered span (the warm-up or a repeat) that delivered `samples`."""
        self.last = {}
        for pid, (_, at_first, end) in fp.workers.items():
            if pid not in self.base and at_first is not None:
                self.base[pid], self.since[pid] = at_first, 0
            if pid in self.base:
                self.since[pid] += samples
                self.last[pid] = end

    def result(self) -> CopyOnRead | None:
        if not self.last:
            return None
        base = {p: self.base[p] for p in self.last}
        copied = sum(max(0, min(end[1] - base[p][1], base[p][2] - end[2])) for p, end in self.last.items())
        return CopyOnRead(len(self.last), copied, max(self.since[p] for p in self.last),
                          sum(b[1] for b in base.values()), sum(b[2] for b in base.values()))
