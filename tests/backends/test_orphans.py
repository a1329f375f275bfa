"""A DataLoader worker ends with the dataperf process that forked it (issue 54's kill loop: a SIGKILLed sweep's
worker, forked as the sweep died, was alive minutes later in its index queue, holding the caller's stderr).

Each scenario runs in a process of its own (`launch`) that starts one worker, says its pid, and SIGKILLs itself;
the test then watches the worker. Waits are hang guards: an orphan of torch's own check lives forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from dataperf.backends.dataloader import worker_kwargs
from dataperf.results import LoaderConfig

ROOT = Path(__file__).resolve().parents[2]


class Sleepy(Dataset):
    """Samples that each take `cost_s`; the first one touches `started` once the worker is inside it."""

    def __init__(self, cost_s: float, started: str):
        self.cost_s, self.started = cost_s, started

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        Path(self.started).touch()
        time.sleep(self.cost_s)
        return torch.tensor(i)


def orphan(guarded: bool, late_start: bool, cost_s: float, started: str) -> None:
    """One worker, then this process SIGKILLed: once the worker is inside a sample, or (late_start) before the
    worker has begun its loop, the race the kill loop met (the fork lands as its parent dies)."""
    me = os.getpid()
    if late_start:
        from torch.utils.data._utils import worker

        first = worker.signal_handling._set_worker_signal_handlers

        def after_the_parent(*args):  # the worker's first step, held until its parent is gone
            guard = time.monotonic() + 60
            while os.getppid() == me and time.monotonic() < guard:
                time.sleep(0.01)
            first(*args)

        worker.signal_handling._set_worker_signal_handlers = after_the_parent
    kw = worker_kwargs(LoaderConfig(num_workers=1, prefetch_factor=2)) if guarded else {"num_workers": 1}
    it = iter(DataLoader(Sleepy(cost_s, started), batch_size=1, **kw))
    print(it._workers[0].pid, flush=True)
    guard = time.monotonic() + 60
    while not late_start and not Path(started).exists() and time.monotonic() < guard:
        time.sleep(0.01)
    os.kill(me, signal.SIGKILL)


def launch(tmp_path: Path, *args) -> int:
    """orphan(*args) in its own interpreter; the pid of the worker it left."""
    code = f"from tests.backends import test_orphans as t; t.orphan(*{list(args) + [str(tmp_path / 'in')]!r})"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(tmp_path / "stderr", "w+") as err:  # not a pipe: an orphan holding it open would keep it from ending
        p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err,
                             text=True)
        line = p.stdout.readline()
        p.stdout.close()
        p.wait(timeout=120)
        err.seek(0)
        assert p.returncode == -signal.SIGKILL and line.strip().isdigit(), err.read()[-3000:]
    return int(line)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gone_within(pid: int, seconds: float) -> bool:
    guard = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < guard:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.parametrize("late_start", [False, True])
def test_a_worker_ends_with_its_parent_even_mid_sample_or_forked_as_it_died(tmp_path, late_start):
    """Mid-sample (a 60-s sample): torch would notice after it, and 5 s later. Forked as the parent died: torch's
    check reads the reaper as the parent and never fires; dataperf's worker_init_fn ends it at once."""
    pid = launch(tmp_path, True, late_start, 60.0)
    try:
        assert gone_within(pid, 30), f"worker {pid} outlived its parent"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_without_the_guard_a_worker_forked_as_its_parent_died_lives_on(tmp_path):
    """The control: a plain DataLoader's worker in the same race is still there after more than torch's 5-s
    check (with 0.05-s samples it checks between each): it would wait on its index queue forever."""
    pid = launch(tmp_path, False, True, 0.05)
    try:
        assert not gone_within(pid, 8), "torch ended the orphan itself: the guard's race is not reproduced"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
