"""Known answers for dataperf/footprint.py, load-proof: CPU is counted in CPU-seconds (which other load on the
machine does not change: a busy loop on thread_time burns exactly what it is told, a sleep burns nothing),
memory in bytes a worker allocates and touches, copy-on-read against a parent's Python objects vs a numpy array.
Nothing here depends on how fast anything runs; waits are sleeps. The meter measures a whole process tree, so
each scenario runs in a fresh interpreter (`fresh`): threads and children that other tests leave behind in
pytest's process would be measured with it."""

import dataclasses
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from dataperf.data import user_dataset
from dataperf.measure.footprint import GROWTH_FLAG_MIB, MIB, Meter, memory_bytes
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig

FORK = mp.get_context("fork")
TICK_S = 1 / os.sysconf("SC_CLK_TCK")  # /proc/PID/stat counts CPU in clock ticks
ROOT = Path(__file__).resolve().parents[2]


def fresh(scenario: str, *args) -> dict:
    """Run scenario(*args) of this module in a new interpreter (a process tree of its own); its result as a dict."""
    code = (f"import json, sys; from tests.measure import test_footprint as t; "
            f"print(json.dumps(t.{scenario}(*{list(args)!r})))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def summary(m: Meter) -> dict:
    """The Footprint's fields and verdicts, as plain numbers that cross the process boundary."""
    r = m.result
    return {**dataclasses.asdict(r), "workers": len(r.workers),
            "worker_private_growth_bytes": r.worker_private_growth_bytes}


def burn(cpu_s: float) -> None:
    """Use cpu_s seconds of this thread's CPU, however long that takes on a busy machine."""
    t0 = time.thread_time()
    while time.thread_time() - t0 < cpu_s:
        pass


class Costly(Dataset):
    """Samples that each burn (or sleep) a fixed time; with alloc_mib, each worker also allocates and touches
    that much memory at its first sample and keeps it to the end."""

    def __init__(self, n: int, cost_s: float, busy: bool, alloc_mib: int = 0):
        self.n, self.cost_s, self.busy, self.alloc_mib = n, cost_s, busy, alloc_mib
        self.held = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.alloc_mib and self.held is None:
            self.held = np.ones(self.alloc_mib * MIB, dtype=np.uint8)  # every page written: resident, private
        burn(self.cost_s) if self.busy else time.sleep(self.cost_s)
        return torch.tensor(i)


def epoch(ds: Dataset, workers: int = 2, **meter) -> Meter:
    """One whole epoch of a real DataLoader inside a Meter; its workers start and are reaped inside. Each
    worker's first batch is marked, as trial.time_repeat marks it (in order, batch k comes from worker k mod
    workers), so growth is counted from there, not from whenever the meter's own cadence samples."""
    with Meter(**meter) as m:
        it = iter(DataLoader(ds, batch_size=2, num_workers=workers))
        for k, _ in enumerate(it):
            if k < workers:
                m.first_batch(it._workers[k].pid, time.perf_counter())
        del it
    return m


def rest(ready, seconds: float) -> None:
    ready.set()
    time.sleep(seconds)


def idle_tree() -> dict:
    """Three children that only sleep, metered once each has started (its start-up CPU falls before the meter's
    first sample, however late a loaded machine runs it)."""
    readies = [FORK.Event() for _ in range(3)]
    procs = [FORK.Process(target=rest, args=(ready, 3)) for ready in readies]
    for p in procs:
        p.start()
    for ready in readies:
        ready.wait()
    with Meter(interval_s=0.01, max_duty=0.5) as m:
        time.sleep(1.0)
    for p in procs:
        p.join()
    return summary(m)


@pytest.mark.slow
def test_nothing_running_is_zero_cores_and_the_meter_is_not_counted():
    r = fresh("idle_tree")
    assert r["samples"] >= 3 and r["meter_cpu_s"] > 0  # the meter did read /proc, at a cost of its own
    assert r["cpu_s"] == pytest.approx(0, abs=6 * TICK_S)  # tick rounding of 4 processes, read twice each


def child_between_samples(cpu_s: float) -> dict:
    with Meter(interval_s=60) as m:  # no sample between the first and the last: the child is never seen
        p = FORK.Process(target=burn, args=(cpu_s,))
        p.start()
        p.join()
    return summary(m)


@pytest.mark.slow
def test_cpu_of_a_process_that_ends_between_samples_is_counted():
    busy, idle = fresh("child_between_samples", 0.5), fresh("child_between_samples", 0.0)
    assert busy["samples"] == 2
    # the fork and join cost the parent the same either way
    assert busy["cpu_s"] - idle["cpu_s"] == pytest.approx(0.5, abs=5 * TICK_S)


def costly_epoch(n: int, cost_s: float, busy: bool) -> dict:
    return summary(epoch(Costly(n, cost_s, busy)))


@pytest.mark.slow
def test_cpu_seconds_of_busy_workers_against_sleeping_ones():
    n, cost = 12, 0.1
    busy, idle = fresh("costly_epoch", n, cost, True), fresh("costly_epoch", n, cost, False)
    assert idle["cpu_s"] < 0.25 * n * cost  # start-up and batch traffic only
    assert busy["cpu_s"] - idle["cpu_s"] == pytest.approx(n * cost, rel=0.1)


def held_epoch(n: int, cost_s: float, alloc_mib: int) -> dict:
    """An epoch of persistent workers, the Meter left while they still hold what they allocated: its last
    sample reads them all, whatever its cadence did during the epoch."""
    before = memory_bytes(os.getpid())[0]
    loader = DataLoader(Costly(n, cost_s, False, alloc_mib), batch_size=2, num_workers=2, persistent_workers=True)
    with Meter() as m:
        for _ in loader:
            pass
    del loader
    return {**summary(m), "main_pss_before_bytes": before}


@pytest.mark.slow
def test_pss_peak_holds_what_each_worker_allocates():
    r = fresh("held_epoch", 24, 0.05, 96)
    # the forked workers share the parent's pages (PSS splits them, the sum stays), and each adds its 96 MiB
    assert r["pss_peak_bytes"] >= r["main_pss_before_bytes"] + 0.95 * 2 * 96 * MIB


def hold(mib: int, ready, done) -> None:
    buf = np.ones(mib * MIB, dtype=np.uint8)  # noqa: F841  (kept until told)
    ready.set()
    done.wait()


def test_memory_of_one_process_counts_what_it_writes_as_private():
    ready, done = FORK.Event(), FORK.Event()
    p = FORK.Process(target=hold, args=(64, ready, done))
    p.start()
    try:
        ready.wait()
        pss, private, shared = memory_bytes(p.pid)
        assert private >= 64 * MIB and pss >= 64 * MIB  # written after the fork: its own pages, wholly
        assert shared > 0  # the pages it still shares with this process (the interpreter, torch)
    finally:
        done.set()
        p.join()
    assert memory_bytes(p.pid) is None  # gone


def grow_when_told(mib: int, go, ready, done) -> None:
    go.wait()
    hold(mib, ready, done)


def marked_worker_read_at_once() -> dict:
    go, ready, done = FORK.Event(), FORK.Event(), FORK.Event()
    p = FORK.Process(target=grow_when_told, args=(64, go, ready, done))
    p.start()
    with Meter(interval_s=3600) as m:  # no regular sample between the first and the last
        m.first_batch(p.pid, time.perf_counter())
        guard = time.monotonic() + 60  # a hang guard, not a margin: the sampler reads it when it next runs
        while len(m._mem.get(p.pid, [])) < 2 and time.monotonic() < guard:
            time.sleep(0.01)
        go.set()
        ready.wait()
    done.set()
    p.join()
    return {"private_bytes": [s[2] for s in m._mem[p.pid]]}


@pytest.mark.slow
def test_a_marked_worker_is_read_at_once_not_at_the_next_sample():
    """A worker's first batch is its baseline, and a copy is front-loaded: the sampler reads a marked worker as
    soon as it is told, not at its next regular sample (an hour away here), so what the worker writes after the
    mark is growth, not baseline."""
    private = fresh("marked_worker_read_at_once")["private_bytes"]
    assert len(private) == 3  # the first sample, the one at the mark, the last
    assert private[1] < 64 * MIB <= private[2] - private[1] + MIB  # allocated after the mark: all of it growth


N_OBJECTS = 4_000_000


class Metadata(Dataset):
    """Per-sample metadata built in the parent, as a Python list of floats (each read writes its refcount, so
    the worker copies the page) or as one numpy array (reads write nothing). Sample i reads its slice."""

    def __init__(self, kind: str, n: int = 64):
        self.n = n
        self.items = [float(i) for i in range(N_OBJECTS)] if kind == "list" else np.arange(N_OBJECTS, dtype=float)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        k = N_OBJECTS // self.n
        s = sum(self.items[i * k:(i + 1) * k])
        time.sleep(0.1)  # 3.2 s an epoch on 2 workers: enough samples for the meter to judge each worker
        return torch.tensor(float(s))


def python_list_metadata() -> Metadata:
    return Metadata("list", n=128)  # 6.4 s: enough samples at the meter's own cadence, however loaded


def metadata_epoch(kind: str) -> dict:
    return summary(epoch(Metadata(kind), max_duty=0.5))  # dense samples: both workers judged however loaded


@pytest.mark.slow
def test_copy_on_read_flagged_for_python_objects_not_for_numpy():
    objs, arr = fresh("metadata_epoch", "list"), fresh("metadata_epoch", "numpy")
    assert objs["workers_seen"] == 2 and arr["workers_seen"] == 2
    # the two workers copy the pages of the floats they read (4M x 24 B), from their first batch on
    assert objs["worker_private_growth_bytes"] > 2 * GROWTH_FLAG_MIB * MIB
    assert objs["worker_copied_bytes"] > 2 * GROWTH_FLAG_MIB * MIB  # shared pages turned private
    assert arr["worker_copied_bytes"] < GROWTH_FLAG_MIB * MIB
    assert abs(arr["worker_private_growth_bytes"]) < GROWTH_FLAG_MIB * MIB


class Hoarding(Dataset):
    """Each worker keeps 2 fresh MiB of its own per sample (as a shuffle buffer or a cache fills): private
    memory that grows over its life without a page of the parent's being touched."""

    def __init__(self, n: int = 64):
        self.n, self.kept = n, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        self.kept.append(np.ones(2 * MIB, dtype=np.uint8))  # every page written: resident, private
        time.sleep(0.1)
        return torch.tensor(i)


def hoarding_epoch() -> dict:
    return summary(epoch(Hoarding(), max_duty=0.5))


@pytest.mark.slow
def test_memory_a_worker_allocates_itself_is_growth_but_not_copy_on_read():
    """64 MiB a worker (2 MiB a sample, 32 samples each), counted from its first batch (at most 4 MiB in by
    then) to the least of its last third: private growth far past the flag's size, none of it copied from the
    parent (its shared pages do not fall)."""
    r = fresh("hoarding_epoch")
    assert r["workers_seen"] == 2
    assert r["worker_private_growth_bytes"] > GROWTH_FLAG_MIB * MIB
    assert r["worker_copied_bytes"] < GROWTH_FLAG_MIB * MIB


def list_metadata_trial() -> dict:
    cfg = LoaderConfig(backend="user-dataset", batch_size=2, num_workers=2)
    r = run_trial(user_dataset("tests.measure.test_footprint:python_list_metadata"), cfg,
                  TrialOptions(repeats=1, warmup_batches=0, min_batches=3, collect=False))
    return {k: getattr(r, k) for k in ("status", "error", "notes", "worker_private_growth_mib",
                                       "worker_copied_mib", "cpu_cores_busy_median", "pss_mib_peak")}


@pytest.mark.slow
def test_trial_notes_copy_on_read_and_records_the_growth():
    r = fresh("list_metadata_trial")
    assert r["status"] == "ok", r["error"]
    assert r["worker_private_growth_mib"] > GROWTH_FLAG_MIB and r["worker_copied_mib"] > GROWTH_FLAG_MIB
    assert any(n.startswith("copy-on-read:") for n in r["notes"]), r["notes"]
    assert r["cpu_cores_busy_median"] > 0 and r["pss_mib_peak"] > 0


N_PATHS = 200_000


class PathList(Dataset):
    """An ImageFolder's `samples`: a list of (path, label) built in the parent, read at random (the audit's F3
    case), or the same as numpy arrays. Each read of a tuple and its string writes their refcounts: the worker
    copies their pages, most of them early in the epoch (a page holds about 25 of these objects)."""

    def __init__(self, kind: str):
        paths = [f"/data/imagenet/train/n{i % 1000:08d}/n{i % 1000:08d}_{i}.JPEG" for i in range(N_PATHS)]
        if kind == "list":
            self.samples = [(p, i % 1000) for i, p in enumerate(paths)]
        else:
            self.samples = None
            self.paths, self.labels = np.array(paths, dtype="S64"), np.arange(N_PATHS) % 1000

    def __len__(self) -> int:
        return N_PATHS

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.samples is not None:
            _path, label = self.samples[i]
        else:
            _path, label = self.paths[i], self.labels[i]
        return torch.tensor(int(label))

    def object_bytes(self) -> int:
        """What the workers can copy of the list: its tuples and strings (the list's own pointer array is only
        read)."""
        return sum(sys.getsizeof(t) + sys.getsizeof(t[0]) for t in self.samples) if self.samples else 0


def path_list() -> PathList:
    return PathList("list")


def path_array() -> PathList:
    return PathList("numpy")


def front_loaded_trial(factory: str) -> dict:
    cfg = LoaderConfig(backend="user-dataset", batch_size=64, num_workers=2)
    r = run_trial(user_dataset(f"tests.measure.test_footprint:{factory}"), cfg,
                  TrialOptions(repeats=1, warmup_batches=1, repeat_seconds=None, collect=False))
    return {"status": r.status, "error": r.error, "notes": r.notes, "copied_mib": r.worker_copied_mib,
            "samples": r.worker_copied_samples, "epoch_mib": r.worker_copied_mib_epoch,
            "object_mib": PathList("list").object_bytes() / MIB}


@pytest.mark.slow
def test_copy_on_read_front_loaded_in_an_epoch_is_measured_from_the_first_batch():
    """The audit's F3: two workers reading a 200,000-entry list of (path, label) at random over a whole epoch
    each copy nearly every page of its tuples and strings (about 36 MiB each), most of it in the first third of
    the epoch; measured from the middle third of their lives the copy read 0.3 MiB of 79. From each worker's
    first batch it is counted whole: at least 60% of 2 x the objects' bytes (a worker reads half the entries, and
    a page of ~25 objects is all but surely read by both). The same metadata in numpy arrays copies nothing."""
    objs, arr = fresh("front_loaded_trial", "path_list"), fresh("front_loaded_trial", "path_array")
    assert objs["status"] == "ok" and arr["status"] == "ok", (objs["error"], arr["error"])
    assert objs["copied_mib"] >= 0.6 * 2 * objs["object_mib"], (objs["copied_mib"], objs["object_mib"])
    assert objs["samples"] == N_PATHS and objs["epoch_mib"] == objs["copied_mib"]  # a whole epoch: no scaling
    assert any(n.startswith("copy-on-read: 2 workers turned") for n in objs["notes"]), objs["notes"]
    assert arr["copied_mib"] < GROWTH_FLAG_MIB and not any(n.startswith("copy-on-read") for n in arr["notes"])


def test_other_cores_busy_is_the_machines_cpu_less_the_tree_and_the_meter():
    """Footprint.other_cores_busy: what every process on this process's cores used over the repeat, less the
    trial's tree and the meter, a second: 3.0 s of the machine's cores in 2 s, 1.2 of them the tree's and 0.2
    the meter's, leave 0.8 cores to other processes; never below 0; NaN unread."""
    from dataperf.measure.footprint import Footprint

    fp = Footprint(wall_s=2.0, cpu_s=1.2, meter_cpu_s=0.2, machine_cpu_s=3.0)
    assert fp.other_cores_busy == pytest.approx(0.8)
    assert dataclasses.replace(fp, machine_cpu_s=1.0).other_cores_busy == 0.0
    assert dataclasses.replace(fp, machine_cpu_s=float("nan")).other_cores_busy != \
        dataclasses.replace(fp, machine_cpu_s=float("nan")).other_cores_busy


@pytest.mark.slow
def test_a_busy_process_beside_the_meter_reads_as_other_load():
    """A process burning a core beside a sleeping tree (pinned to this process's cores) is other load: at least
    0.3 of a core whatever else the machine runs (it gets at least a third of a core beside two busy loops on 2
    cores), where the tree itself sleeps."""
    import signal

    loop = "import time\nt=time.time()\nwhile time.time()-t<30: pass"
    # started through a shell that exits at once: the loop is no child of this process, so not in its tree
    sh = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{loop}" >/dev/null 2>&1 & echo $!'],
                        capture_output=True, text=True, check=True)
    pid = int(sh.stdout.split()[0])
    try:
        time.sleep(0.3)
        with Meter(interval_s=0.05) as m:
            time.sleep(1.5)
    finally:
        os.kill(pid, signal.SIGKILL)
    assert m.result.cpu_s < 0.3 and m.result.other_cores_busy >= 0.3, m.result


class Leaking(Dataset):
    """Each sample allocates 1 MiB in the worker (every page written: resident, private); `keep` keeps it in a list
    that grows (the review's leaking Dataset), else it is dropped at once (the control)."""

    def __init__(self, keep: bool, n: int = 600):
        self.keep, self.n, self.kept = keep, n, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        buf = np.ones(MIB, dtype=np.uint8)
        if self.keep:
            self.kept.append(buf)
        time.sleep(0.005)  # 600 samples on 2 workers: about 1.5 s a repeat, some 30 meter readings
        return torch.tensor(i)


def leaking() -> Leaking:
    return Leaking(keep=True)


def not_leaking() -> Leaking:
    return Leaking(keep=False)


def leak_trial(factory: str, persistent: bool) -> dict:
    cfg = LoaderConfig(backend="user-dataset", batch_size=2, num_workers=2, persistent_workers=persistent)
    r = run_trial(user_dataset(f"tests.measure.test_footprint:{factory}"), cfg,
                  TrialOptions(repeats=3, warmup_batches=0, min_batches=3, repeat_seconds=None, collect=False))
    return {"status": r.status, "error": r.error, "notes": r.notes}


def leak_per_1k_mib(notes: list[str]) -> float | None:
    """The MiB per 1,000 samples the leak warning names; None without the warning."""
    import re

    m = next((re.search(r"([\d,.]+) MiB per 1,000 samples", n) for n in notes
              if n.startswith("warning: worker memory grows:")), None)
    return float(m.group(1).replace(",", "")) if m else None


@pytest.mark.slow
@pytest.mark.parametrize("persistent", [False, True])
def test_a_dataset_that_keeps_what_it_returns_is_warned_of_with_its_pace(persistent: bool):
    """Known answer: a Dataset that keeps 1 MiB a sample grows its workers by 1,000 MiB per 1,000 samples (1 MiB
    and the page np.ones rounds it to, 0.4%), whether the workers restart each repeat or persist. Tolerance 15%:
    the two readings fall between batches, up to a batch a worker (2 x 2 samples) off at each end of a window of
    about 200 samples. The same Dataset dropping its 1 MiB at once gets no warning."""
    leak, control = fresh("leak_trial", "leaking", persistent), fresh("leak_trial", "not_leaking", persistent)
    assert leak["status"] == "ok" and control["status"] == "ok", (leak["error"], control["error"])
    assert leak_per_1k_mib(leak["notes"]) == pytest.approx(1000, rel=0.15), leak["notes"]
    assert "the Dataset (or its transform) keeps what it returns" in next(
        n for n in leak["notes"] if n.startswith("warning: worker memory grows:"))
    assert leak_per_1k_mib(control["notes"]) is None, control["notes"]


def test_the_leak_warning_needs_growth_late_in_every_repeat_and_64_mib_in_all():
    """_note_leak from readings given: 100 samples between the two readings of each repeat, 300 a repeat. Growth
    late in every repeat, 50 MiB per 100 samples: 500 MiB per 1,000, 150 MiB a repeat, over an epoch of 3,000
    samples 1,500. Growth in the first repeat only is a warm-up, and a repeat not read (None) shows nothing. 9 MiB
    late in each repeat (over the 8 MiB a repeat must grow) is 81 MiB over the trial's 900 samples at 9 MiB per
    100 samples: warned of; at 9 MiB per 200 samples it is 40.5 MiB, under the 64 MiB the warning asks for."""
    from dataperf.measure.footprint import LEAK_FLAG_MIB, Footprint
    from dataperf.measure.trial import Arrival, Repeat
    from dataperf.measure.trial.fill import _note_leak
    from dataperf.results import LoaderResult

    def trial(*late_mib: float | None, to: float = 101.95) -> list[str]:
        res = LoaderResult(epoch_samples=3000)
        reps = [Repeat(300, 0, 30, 0.0, 3.0, [], 0, [Arrival(0.1 * k, k % 2, 10, 0) for k in range(30)], t0=100.0)
                for _ in late_mib]
        # readings at 100.95 and 101.95 s: the arrivals at 1.0 ... 1.9 s after t0, 10 batches of 10 (to 102.95: 20)
        costs = [Footprint(worker_late=None if m is None else (100.95, to, int(m * MIB))) for m in late_mib]
        _note_leak(res, costs, reps)
        return res.notes

    [note] = trial(50, 50, 50)
    assert note.startswith("warning: worker memory grows: the DataLoader workers' private memory grew through each "
                           "of the 3 repeats, 500.0 MiB per 1,000 samples (about 150 MiB a repeat of 300 samples; "
                           "about 1,500 MiB over an epoch of 3,000 samples)"), note
    assert trial(50, 0, 0) == [] and trial(50, None, 50) == []
    assert len(trial(9, 9, 9)) == 1 and 9 * 9 / 2 < LEAK_FLAG_MIB and trial(9, 9, 9, to=102.95) == []
