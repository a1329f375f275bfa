"""The stall watchdog and the Ctrl-C guard, mostly through the real CLI in a session of its own: a user
Dataset or factory that hangs ends in one `error:` line naming what it waits for, and leaves no process behind;
a Ctrl-C at any point of a sweep is exit 130 with the resume hint."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from dataperf import watchdog
from dataperf.errors import TrialError
from tests.sigint import default_sigint

ENDS_S = 300  # "it ends": generous on a box loaded by others, never a bound on how fast
GONE_S = 60  # for the processes of a finished command to be gone
SH = ["--no-collect", "--repeat-seconds", "1", "--repeats", "3", "--warmup-batches", "1", "--min-batches", "3"]

USER_CODE = {
    "hang.py": '''
        import time

        import torch
        from torch.utils.data import Dataset


        class Hang(Dataset):
            """Samples 0-2 come at once; from sample 3 on __getitem__ never returns."""

            def __len__(self):
                return 200

            def __getitem__(self, i):
                if i >= 3:
                    time.sleep(3600)
                return torch.zeros(3, 16, 16), 0


        class Slow(Dataset):
            def __len__(self):
                return 4000

            def __getitem__(self, i):
                time.sleep(0.002)
                return torch.zeros(3, 16, 16), 0


        def hang():
            return Hang()


        def slow():
            return Slow()


        def hang_factory():
            time.sleep(3600)
    ''',
    "forkint.py": '''
        """A SIGINT delivered inside an at-fork hook at this process's first fork (a DataLoader worker's start):
        the moment of the race, made certain. Python drops an exception raised in the hook."""
        import os
        import signal

        import torch
        from torch.utils.data import Dataset

        forks = 0


        def interrupt_in_the_hook():
            global forks
            forks += 1
            if forks == 1:
                signal.raise_signal(signal.SIGINT)  # its handler runs here, inside the hook


        os.register_at_fork(after_in_parent=interrupt_in_the_hook)


        class Zeros(Dataset):
            def __len__(self):
                return 256

            def __getitem__(self, i):
                return torch.zeros(3, 8, 8), 0


        def zeros():
            return Zeros()
    ''',
}


@pytest.fixture
def user_code(tmp_path: Path) -> Path:
    for name, text in USER_CODE.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def start(cwd: Path, *args: str) -> subprocess.Popen:
    """`dataperf ARGS` in cwd (the user's modules), in a session of its own: its pid is the session id, which
    every process it starts keeps (torchrun's ranks aside)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), os.environ.get("PYTHONPATH", "")]),
               PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "dataperf", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=default_sigint)


def finish(p: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = p.communicate(timeout=ENDS_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail(f"dataperf did not end within {ENDS_S} s")
    return p.returncode, out, err


def left_in_session(sid: int) -> list[int]:
    """Processes of the session still alive once they have had GONE_S to go (none: nothing was left behind)."""
    end = time.monotonic() + GONE_S
    while True:
        alive = []
        for pid in psutil.pids():
            try:
                if os.getsid(pid) == sid:
                    alive.append(pid)
            except OSError:
                pass
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.5)


def one_error(err: str) -> str:
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.slow
def test_a_stall_in_the_main_process_names_the_sample_it_fetches(user_code):
    p = start(user_code, "bench", "--dataset", "hang:hang", "--batch-size", "2", "--num-workers", "0",
              "--stall-timeout", "3", *SH)
    rc, out, err = finish(p)
    line = one_error(err)
    assert rc == 2 and "stalled for" in line and "--stall-timeout 3" in line, err
    m = re.search(r"the main process is still fetching sample (\d+) of --dataset hang:hang", line)
    assert m and int(m.group(1)) >= 3, line  # the one that hangs: samples 0-2 return
    assert left_in_session(p.pid) == []


@pytest.mark.slow
def test_a_stall_in_a_worker_names_the_worker_and_its_pid_and_none_is_left(user_code):
    p = start(user_code, "bench", "--dataset", "hang:hang", "--batch-size", "2", "--num-workers", "1",
              "--stall-timeout", "3", *SH)
    rc, out, err = finish(p)
    line = one_error(err)
    m = re.search(r"DataLoader worker 0 \(pid (\d+)\) has not returned batch \d+", line)
    assert rc == 2 and m and "stalled for" in line, err
    assert left_in_session(p.pid) == [] and not psutil.pid_exists(int(m.group(1)))


@pytest.mark.slow
def test_a_dataset_factory_that_hangs_is_one_error_line(user_code):
    p = start(user_code, "bench", "--dataset", "hang:hang_factory", "--stall-timeout", "3", *SH)
    rc, out, err = finish(p)
    line = one_error(err)
    assert rc == 2 and "the dataset factory hang:hang_factory has not returned" in line, err
    assert left_in_session(p.pid) == []


@pytest.mark.slow
def test_a_sweep_budget_bounds_a_trial_that_hangs(user_code):
    """--budget 1s with a stall time far past the test's own bound: the budget is what ends the hanging trial (no
    sooner than 3x the trial's expected 8 s, so about 24 s in), and so the sweep."""
    p = start(user_code, "sweep", "--dataset", "hang:hang", "--batch-size", "2", "--num-workers", "1",
              "--prefetch-factor", "2", "--budget", "1s", "--stall-timeout", "3600", "--out",
              str(user_code / "s.jsonl"), *SH)
    rc, out, err = finish(p)
    line = one_error(err)
    assert rc == 2 and "every trial failed" in line and "ran past its deadline (sweep --budget)" in line, err
    assert left_in_session(p.pid) == []


@pytest.mark.slow
def test_a_stall_in_thread_workers_is_caught_too(datasets):
    """torchdata's thread workers read the dataset's own files; reads throttled to nothing never return. The
    main thread is interrupted all the same (the stuck threads are daemons: the process still ends)."""
    pytest.importorskip("torchdata")
    script = textwrap.dedent(f"""
        from dataperf.results import LoaderConfig
        from dataperf.measure.trial import TrialOptions, run_trial
        cfg = LoaderConfig(backend="torchdata", batch_size=8, num_workers=2, worker_type="thread", decode=True,
                           image_size=16)
        r = run_trial({str(datasets["image-files"])!r}, cfg, TrialOptions(repeats=3, warmup_batches=1,
                      collect=False, stall_s=3, throttle_mib_s=1e-9))
        print(r.status, r.error)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=ENDS_S)
    assert p.returncode == 0 and p.stdout.startswith("failed stalled for"), p.stdout + p.stderr
    assert "TorchdataLoader" in p.stdout


@pytest.mark.slow
def test_watchdog_interrupts_a_wait_and_stays_quiet_while_batches_come():
    with watchdog.Watchdog(stall_s=1.0):
        # the seconds are whole, from when the watchdog got to look (late on a loaded machine): 1 or more
        with pytest.raises(TrialError, match=r"stalled for [1-9]\d* s \(--stall-timeout 1\): the thing it waits for"):
            with watchdog.waiting(lambda: "the thing it waits for"):
                time.sleep(ENDS_S)
        with watchdog.waiting(lambda: "never said"):
            end = time.monotonic() + 3
            while time.monotonic() < end:  # a beat every 10 ms against a 1 s stall time
                time.sleep(0.01)
                watchdog.beat()
    with watchdog.Watchdog(stall_s=None, deadline=time.monotonic() + 1):
        with pytest.raises(TrialError, match=r"ran past its deadline \(sweep --budget\).*: past it"):
            with watchdog.waiting(lambda: "past it"):
                time.sleep(ENDS_S)


def test_arming_for_a_repeat_leaves_the_watching_thread_asleep():
    """Each repeat arms the watchdog as its timed window opens; waking the watching thread there let it take the
    GIL from the loop being timed (issue 30). Only a due time earlier than the thread's wait wakes it."""
    with watchdog.Watchdog(stall_s=60) as dog:
        watcher = dog._watcher
        assert watcher is not None
        end = time.monotonic() + ENDS_S
        def waits_a_stall_time() -> bool:  # the thread has begun its wait of (at most) this watchdog's 60 s
            at = watcher.wake_at
            return at is not None and at <= time.monotonic() + 60

        while not waits_a_stall_time() and time.monotonic() < end:
            time.sleep(0.01)
        wakes = []
        notify = watcher.cond.notify
        watcher.cond.notify = lambda n=1: (wakes.append(n), notify(n))  # type: ignore[method-assign]
        try:
            for _ in range(3):
                with watchdog.waiting(lambda: "a repeat"):
                    watchdog.beat()
            assert wakes == []
            dog.deadline = time.monotonic() + 1  # sooner than the thread's wait ends: it is woken, and fires
            with pytest.raises(TrialError, match="ran past its deadline"):
                with watchdog.waiting(lambda: "past it"):
                    time.sleep(ENDS_S)
            assert wakes
        finally:
            del watcher.cond.notify


def test_one_watching_thread_serves_every_trial_of_a_process():
    """A thread started and joined by every trial cost the timed windows after it about a point once the process
    had forked (issue 30): trials share one, kept, and a watchdog inside another still fires on its own."""
    import threading

    def watchers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "dataperf-watchdog"]

    for _ in range(3):
        with watchdog.Watchdog(stall_s=60):
            with watchdog.waiting(lambda: "a repeat"):
                watchdog.beat()
    assert len(watchers()) == 1
    with watchdog.Watchdog(stall_s=60), watchdog.Watchdog(stall_s=1.0):
        with pytest.raises(TrialError, match=r"--stall-timeout 1\): the inner wait"):
            with watchdog.waiting(lambda: "the inner wait"):
                time.sleep(ENDS_S)
    assert len(watchers()) == 1


def test_watchdog_leaves_the_signal_handlers_as_it_found_them_and_does_nothing_outside_a_trial():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGUSR1)
    with watchdog.Watchdog(stall_s=60):
        assert signal.getsignal(signal.SIGUSR1) is not before[1]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGUSR1)) == before
    with watchdog.waiting(lambda: "nothing"):  # no trial: neither arms nor raises
        watchdog.beat()


def test_a_ctrl_c_inside_a_finalizer_is_raised_at_the_next_batch_not_printed_as_ignored(monkeypatch):
    """A SIGINT whose handler runs inside a __del__ (a DataLoader iterator's, a tar stream's, as the review saw):
    raised there, Python printed "Exception ignored in ... KeyboardInterrupt" with a traceback. Now nothing is
    printed and the Ctrl-C comes at the next batch."""
    import sys

    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    # Python's own handler, as a CLI run starts with: the watchdog takes over only that one, and where another was
    # installed the Ctrl-C went to it (1 failure in 3 fast-tier runs; which handler was not caught)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the autouse fixture puts the one found back

    class Closes:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # its handler runs here, inside the finalizer
            self.closed = True

    with pytest.raises(KeyboardInterrupt), watchdog.Watchdog(stall_s=60):
        obj = Closes()
        del obj
        assert ignored == []
        watchdog.beat()
        raise AssertionError("the Ctrl-C was lost")
    assert ignored == []


@pytest.mark.slow
def test_a_ctrl_c_while_workers_fork_is_not_swallowed(user_code):
    """The SIGINT lands in an at-fork hook as the first DataLoader worker forks, where Python drops the
    KeyboardInterrupt: the sweep went on and exited 0. Now it is held until the workers have started."""
    p = start(user_code, "sweep", "--dataset", "forkint:zeros", "--batch-size", "4", "--num-workers", "1",
              "--prefetch-factor", "2", "--out", str(user_code / "s.jsonl"), *SH)
    rc, out, err = finish(p)
    assert rc == 130 and "Traceback" not in err and "Exception ignored" not in err, out + err
    assert "interrupted: 0 finished trials are kept" in err and "--resume" in err
    assert left_in_session(p.pid) == []


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.0, 1.0, 2.5, 4.5, 7.0, 10.0])
def test_a_ctrl_c_anywhere_in_a_sweep_is_exit_130(user_code, after_s):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) at points spread over a sweep of three
    trials (start-up, workers forking, repeats, between trials): every time exit 130, saying so (with the resume
    hint once the sweep runs its trials). Their 5 x 1 s repeats alone outlast the latest point by 5 s."""
    p = start(user_code, "sweep", "--dataset", "hang:slow", "--batch-size", "4", "--num-workers", "0,1,2",
              "--prefetch-factor", "2", "--out", str(user_code / "s.jsonl"), *SH, "--repeats", "5")
    assert p.stdout is not None
    for line in p.stdout:  # the plan line: the sweep has started
        if line.startswith("plan:"):
            break
    time.sleep(after_s)
    os.killpg(p.pid, signal.SIGINT)
    rc, out, err = finish(p)
    assert rc == 130 and "Traceback" not in err and "Exception ignored" not in err, out + err
    assert [ln for ln in err.splitlines() if ln.startswith("interrupted")], err
    assert left_in_session(p.pid) == []


def test_a_trial_cut_by_the_budget_is_not_called_stuck():
    """Past the budget's deadline with batches still coming, the error says the budget cut it; the guesses at
    what blocks (a lock, a dead mount) belong to a stall only (the H200: '20 workers ... stalled for 0 s ...
    its Dataset blocked')."""
    with watchdog.Watchdog(stall_s=None, deadline=time.monotonic() + 0.5):
        with pytest.raises(TrialError) as e:
            with watchdog.waiting(lambda: "DataLoader worker 4 (pid 1) has not returned batch 4"):
                time.sleep(ENDS_S)
    assert "the budget cut it, nothing was stuck" in str(e.value) and "dead mount" not in str(e.value)
