"""A trial that stops making progress fails, naming what it waits for, instead of hanging with no output.

A user's Dataset that blocks (a lock, a dead mount, a sleep), in a worker or in the main process, leaves the
main thread waiting for a batch forever; torch's own `timeout=` covers only process workers and only raises in
the main thread's next(). So a thread of ours watches the time since the last batch (and the trial's
deadline, set by `sweep --budget`) and, past it, interrupts the main thread (SIGUSR1 to that thread, whose
handler raises a TrialError there): that works the same for process workers, thread workers and the main
process. The runner shuts the workers down as the error passes (trial.time_repeat).

The same guard keeps a Ctrl-C: Python drops an exception raised in an at-fork hook, and a SIGINT landing while
DataLoader workers fork raised its KeyboardInterrupt there, so a sweep went on and exited 0. The guard's SIGINT
handler sets a flag; while the runner starts workers (`forking`) or a finalizer runs (`__del__`, where Python
prints the exception as "Exception ignored" and drops it) it raises nothing, and the KeyboardInterrupt comes when
the workers have started or at the next batch; a Ctrl-C dropped anywhere else in the trial is raised at the next
batch or at the trial's end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from dataperf.errors import TrialError, UserError

DEFAULT_STALL_S = 120.0

# this process's stall time for waits outside a trial (a --dataset factory's first build, before the trial
# options exist): the CLI's --stall-timeout sets it as it is parsed
stall_s_default = DEFAULT_STALL_S
_active: Watchdog | None = None
_forking = False  # the main thread is starting workers: a Ctrl-C waits until they have started


class Watchdog:
    """Armed while the main thread waits on the loader (`waiting`); fires when armed with no beat for stall_s, or
    past the deadline (time.monotonic()), and again every stall_s while the main thread stays in the armed wait
    (a loader whose own shutdown waits for its stuck threads). Only in the main thread: signals reach no other."""

    def __init__(self, stall_s: float | None = DEFAULT_STALL_S, deadline: float | None = None,
                 error: type[Exception] = TrialError):
        self.stall_s, self.deadline, self.error = stall_s, deadline, error
        self.what: Callable[[], str] | None = None  # armed: says what the main thread is waiting for
        self.last = time.monotonic()
        self.fired_at: float | None = None  # when it last fired in this wait (None: not since the last beat)
        self.fires = 0  # how often since the last beat
        self.interrupted = False
        self._saved: dict[int, Any] = {}
        self._prev: Watchdog | None = None
        self._watcher: _Watcher | None = None  # the process's watching thread, while this one is watched

    def __enter__(self) -> Watchdog:
        global _active
        if threading.current_thread() is not threading.main_thread():
            return self
        self._saved[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, self._on_usr1)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._saved[signal.SIGINT] = signal.signal(signal.SIGINT, self._on_sigint)
        self._prev, _active = _active, self
        if self.stall_s is not None or self.deadline is not None:
            self._watcher = _watcher()
            with self._watcher.cond:  # woken to wait no longer than this one's stall time
                self._watcher.dogs.append(self)
                self._watcher.cond.notify()
        return self

    def __exit__(self, kind, exc, tb) -> None:
        global _active
        if self._watcher is not None:
            with self._watcher.cond:  # the watcher signals only while holding it: none comes after this
                self._watcher.dogs.remove(self)
                self.what = None
            self._watcher = None
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        if self._saved:
            _active = self._prev
        if self.interrupted:  # a Ctrl-C that Python dropped, or one that made the trial fail otherwise
            raise KeyboardInterrupt

    def arm(self, what: Callable[[], str] | None) -> None:
        """Arm (or disarm, with None). The watching thread is woken only when the new due time comes before its
        wait ends: a wake-up inside a timed window would take the GIL from the loop being timed (issue 30)."""
        w = self._watcher
        if w is None:
            self.what, self.last, self.fired_at, self.fires = what, time.monotonic(), None, 0
            return
        with w.cond:
            self.what, self.last, self.fired_at, self.fires = what, time.monotonic(), None, 0
            due = self._due()
            if due is not None and (w.wake_at is None or due < w.wake_at):
                w.cond.notify()

    def beat(self) -> None:
        """Progress (a batch arrived); also where a dropped Ctrl-C is raised again."""
        self.last, self.fired_at, self.fires = time.monotonic(), None, 0
        if self.interrupted:
            raise KeyboardInterrupt

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.interrupted = True
        if not _forking and not _in_finalizer(frame):
            raise KeyboardInterrupt

    def _on_usr1(self, signum: int, frame: Any) -> None:
        reason = self._overdue()
        if reason is not None:  # else a batch came in meanwhile, or the wait ended
            raise self.error(reason)

    @property
    def _grace(self) -> float:
        return self.stall_s if self.stall_s is not None else DEFAULT_STALL_S

    def _due(self) -> float | None:
        """When the armed wait becomes overdue (monotonic); None when nothing is armed or bounded."""
        if self.what is None:
            return None
        if self.fired_at is not None:
            return self.fired_at + self._grace
        times = [t for t in (self.deadline, self.last + self.stall_s if self.stall_s is not None else None)
                 if t is not None]
        return min(times) if times else None

    def _overdue(self) -> str | None:
        """The error's text when the armed wait is overdue now, else None."""
        what, last, now = self.what, self.last, time.monotonic()
        stalled = self.stall_s is not None and now >= last + self.stall_s
        late = self.deadline is not None and now >= self.deadline
        if what is None or not (stalled or late):
            return None
        try:
            waiting = what()
        except Exception:  # describing must never be what fails
            waiting = "waiting for the loader"
        if self.fires > 1:
            return f"stalled for {now - last:.0f} s, and stopping the loader stalled too (threads stuck: {waiting})"
        if stalled:
            return (f"stalled for {now - last:.0f} s (--stall-timeout {self.stall_s:g}): {waiting} (blocked: a lock, "
                    "a dead mount, a read that never ends?); if that can really take so long, raise --stall-timeout")
        # not a stall: the budget's time ran out mid-trial (the H200: 20 workers, the last batch 0 s before)
        return (f"ran past its deadline (sweep --budget), {now - last:.0f} s after its last batch: {waiting}; the "
                "budget cut it, nothing was stuck")


def _in_finalizer(frame: Any) -> bool:
    """Is the main thread inside a __del__ (a DataLoader iterator's, a tar stream's)? Python prints an exception
    raised there as "Exception ignored in ..." with a traceback and drops it; the flag raises it later instead (at
    the next batch, or as the trial ends)."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


class _Watcher:
    """The one thread that watches every live Watchdog of this process, started with the first and kept: a thread
    started and joined by each trial cost the timed windows after it about a point once the process had forked
    (2-core box, 2026-12-06: raw bytes at 0 workers, 0.956 of the plain loop after a fork, 0.965 with no
    watchdog; a process that never forked 0.967-0.976 either way)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.dogs: list[Watchdog] = []
        self.wake_at: float | None = None  # when its current wait ends (None: it is not waiting)
        threading.Thread(target=self._run, name="dataperf-watchdog", daemon=True).start()

    def _run(self) -> None:
        main = threading.main_thread().ident
        with self.cond:
            while True:
                now = time.monotonic()
                soonest: float | None = None
                for dog in self.dogs:
                    due = dog._due()
                    if due is not None and now >= due:
                        dog.fired_at, dog.fires = now, dog.fires + 1
                        signal.pthread_kill(main, signal.SIGUSR1)  # type: ignore[arg-type]
                        due = dog._due()
                    if due is not None and (soonest is None or due < soonest):
                        soonest = due
                # with nothing armed it looks again after the shortest stall time: arming need not wake it
                wait_s = min((d._grace for d in self.dogs), default=DEFAULT_STALL_S) if soonest is None \
                    else max(soonest - now, 0.0)
                self.wake_at = now + wait_s
                self.cond.wait(wait_s)
                self.wake_at = None


_the_watcher: _Watcher | None = None


def _watcher() -> _Watcher:
    global _the_watcher
    if _the_watcher is None:
        _the_watcher = _Watcher()
    return _the_watcher


@contextlib.contextmanager
def waiting(what: Callable[[], str]) -> Iterator[None]:
    """Arm the trial's watchdog while the main thread waits on the loader; `what` says on what, if it stalls.
    Outside a trial (no watchdog) this does nothing."""
    dog = _active
    if dog is None:
        yield
        return
    before = dog.what
    dog.arm(what)
    try:
        yield
    finally:
        dog.arm(before)


@contextlib.contextmanager
def forking() -> Iterator[None]:
    """The main thread starts workers (forks): a Ctrl-C meanwhile only sets the flag, and is raised here once they
    have started, not in an at-fork hook where Python would drop it."""
    global _forking
    _forking = True
    try:
        yield
    finally:
        _forking = False
    if _active is not None and _active.interrupted:
        raise KeyboardInterrupt


def _child_after_fork() -> None:
    global _forking, _the_watcher
    _forking = False  # a worker answers Ctrl-C as it always did
    _the_watcher = None  # the parent's thread is not in the child (and its lock may have been held)


os.register_at_fork(after_in_child=_child_after_fork)


def beat() -> None:
    """A batch arrived: the trial's watchdog starts counting again (nothing outside a trial)."""
    if _active is not None:
        _active.beat()


@contextlib.contextmanager
def bounded(what: str) -> Iterator[None]:
    """A wait on the user's code that must end: inside a trial its watchdog covers it; outside one (the first
    build of a --dataset factory) a watchdog of its own does, with this process's stall time, and a stall is a
    UserError."""
    if _active is not None:
        with waiting(lambda: what):
            yield
        return
    with Watchdog(stall_s_default, error=UserError) as dog:
        dog.arm(lambda: what)
        yield


def loader_wait(batches: Any, it: Any) -> str:
    """What a main thread stuck in next() waits for: the DataLoader worker owing the next batch in order (its
    id and pid), the sample the main process is fetching (a user's Dataset says which: data.user), or the
    backend's pipeline."""
    if it is None:
        return f"starting the workers of {type(batches).__name__}"
    workers = getattr(it, "_workers", None)
    if workers is not None:  # torch's multi-process iterator: batches are returned in the order they were sent
        idx = getattr(it, "_rcvd_idx", None)
        info = getattr(it, "_task_info", {}).get(idx)
        if info is not None and len(info) == 1 and info[0] < len(workers):
            w = info[0]
            return f"DataLoader worker {w} (pid {workers[w].pid}) has not returned batch {idx}"
        return f"waiting on {len(workers)} DataLoader workers"
    dataset = getattr(batches, "dataset", None)
    if dataset is not None:
        fetching = getattr(dataset, "fetching", None) or f"a sample of {type(dataset).__name__}"
        return f"the main process is still fetching {fetching} (num_workers=0)"
    return f"waiting on the workers of the {type(batches).__name__} pipeline"
