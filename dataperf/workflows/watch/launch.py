"""Run the user's command unchanged (or attach to a running pid) with the collectors on its process tree.

The job is the user's: its stdout and stderr are inherited untouched, its exit code is returned, and the
signals dataperf receives are forwarded. The job runs in its own process group; with a terminal that group
is put in the foreground, so Ctrl-C reaches the job (and its workers) exactly once, as without dataperf.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from dataperf.errors import UserError
from dataperf.measure.collectors import Collector
from dataperf.measure.collectors.ebpf import EbpfReadCollector
from dataperf.measure.collectors.nvml import NvmlMemoryCollector
from dataperf.measure.collectors.proc import DiskCollector, ProcessCollector, device_of
from dataperf.measure.collectors.sysstat import IostatCollector, PidstatCollector

HOOK_DIR = Path(__file__).parent / "hook"
ENV_DIR = "DATAPERF_WATCH_DIR"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


@dataclass
class Watched:
    """What came back from one watched job: its exit code, where its hooks wrote, and the collectors."""

    exit_code: int | None
    hook_dir: Path | None
    collectors: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def child_env(hook_out: Path) -> dict[str, str]:
    """The job's environment: ours, with the hook folder first on PYTHONPATH and where to write."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HOOK_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env[ENV_DIR] = str(hook_out)
    return env


def nsys_prefix(out_dir: Path) -> tuple[list[str], str]:
    """`nsys profile ...` in front of the command when Nsight Systems is installed, else a note."""
    exe = shutil.which("nsys")
    if exe is None:
        return [], "nsys not installed (NVIDIA Nsight Systems); the job ran without it"
    report = out_dir / "nsys-report"
    return ([exe, "profile", "-o", str(report), "--force-overwrite", "true", "--trace", "cuda,nvtx,osrt"],
            f"nsys report: {report}.nsys-rep")


def _collectors(raw_dir: Path, tag: str, root_pid: int | None, ebpf: bool) -> list[Collector]:
    """Those that can start before the job exists: they follow this process's descendants (or root_pid)."""
    cs: list[Collector] = [DiskCollector(None), IostatCollector(None, raw_dir, tag),
                           PidstatCollector(raw_dir, tag, root_pid), NvmlMemoryCollector()]
    if ebpf:
        cs.append(EbpfReadCollector(root_pid=root_pid))
    return cs


def _stop_all(procs: ProcessCollector, others: list[Collector], data_path: str | None) -> dict[str, Any]:
    out = {procs.name: procs.stop()}
    seen = [r["pid"] for r in out[procs.name]["per_process"]]
    dev = None
    if data_path and os.path.exists(data_path):
        dev = device_of(Path(data_path))
    for c in others:
        if isinstance(c, PidstatCollector):
            c.watch(seen)
        if isinstance(c, DiskCollector | IostatCollector) and dev is not None:
            c.dev = dev
        out[c.name] = c.stop()
    return out


@contextlib.contextmanager
def _forwarding(pid_box: list[int]) -> Iterator[None]:
    """Forward signals dataperf receives to the job: SIGINT to its process group (as a terminal's Ctrl-C
    would), the others to the job's main process (as `kill` would). dataperf itself keeps waiting."""

    def handler(sig, _frame):
        if not pid_box:
            return
        with contextlib.suppress(ProcessLookupError):
            if sig == signal.SIGINT:
                os.killpg(pid_box[0], sig)
            else:
                os.kill(pid_box[0], sig)

    saved = {s: signal.signal(s, handler) for s in FORWARDED}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


@contextlib.contextmanager
def _foreground(pgid: int) -> Iterator[None]:
    """With a controlling terminal, give it to the job's process group (keyboard signals and reads go to the
    job), and take it back afterwards."""
    try:
        fd = sys.stdin.fileno()
        ours = os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except (OSError, ValueError):
        ours = False
    if not ours:
        yield
        return
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, pgid)
            os.killpg(pgid, signal.SIGCONT)  # in case it read the terminal before it was given it
        yield
    finally:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, os.getpgrp())
        signal.signal(signal.SIGTTOU, old)


def run(cmd: list[str], raw_dir: Path, ebpf: bool = False, nsys: bool = False,
        data_path_of=lambda d: None) -> Watched:
    """Run cmd with the startup hook and the collectors; returns after the job has exited.

    data_path_of(hook_dir) names the dataset the job read (from its hook files), so the disk figures are for
    that device; it is called after the job exits and before the collectors stop.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = raw_dir / f"watch-{stamp}-{os.getpid()}"
    hook_out = run_dir / "hook"
    hook_out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    if nsys:
        prefix, note = nsys_prefix(run_dir)
        cmd = prefix + cmd
        notes.append(note)
    others = _collectors(run_dir, "watch", None, ebpf)
    for c in others:
        c.start()
    pid_box: list[int] = []
    t0 = time.perf_counter()
    group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    with _forwarding(pid_box):
        try:
            proc = subprocess.Popen(cmd, env=child_env(hook_out), **group)
        except (FileNotFoundError, PermissionError) as e:
            for c in others:
                c.stop()
            raise UserError(f"cannot run {cmd[0]!r}: {e.strerror}; give the command after `--`, e.g. "
                            "`dataperf watch -- python train.py`") from None
        pid_box.append(proc.pid)
        procs = ProcessCollector(root_pid=proc.pid, since_fork=True)
        procs.start()
        with _foreground(proc.pid):
            while True:  # wait without reaping: the exited job's final /proc counters are still readable
                try:
                    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
                    break
                except ChildProcessError:
                    break
        wall = time.perf_counter() - t0
        collected = _stop_all(procs, others, data_path_of(hook_out))
        rc = proc.wait()
    return Watched(exit_code=128 - rc if rc < 0 else rc, hook_dir=hook_out, collectors=collected, notes=notes,
                   wall_s=wall)


def attach(pid: int, raw_dir: Path, ebpf: bool = False, on_started=lambda: None) -> Watched:
    """Collectors only, on a job already running (no hooks can be injected): until it exits or Ctrl-C.
    on_started() runs once every collector is running."""
    if not psutil.pid_exists(pid):
        raise UserError(f"no process with pid {pid}; pass the pid of the running training job (`pgrep -f train.py`)")
    run_dir = raw_dir / f"watch-pid{pid}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    procs = ProcessCollector(root_pid=pid)
    others = _collectors(run_dir, f"pid{pid}", pid, ebpf)
    for c in [procs, *others]:
        c.start()
    on_started()
    t0 = time.perf_counter()
    notes = ["attached by pid: no hooks in the job, so no step time, data wait or loader settings; "
             "start the job under `dataperf watch -- CMD` for those"]
    target = psutil.Process(pid)
    try:
        while True:  # an exited job not yet reaped by its parent is a zombie: done, and its counters remain
            try:
                if target.status() == psutil.STATUS_ZOMBIE:
                    break
                target.wait(timeout=0.2)
                break
            except psutil.TimeoutExpired:
                continue
            except psutil.NoSuchProcess:
                break
        notes.append("the job exited while watched")
    except KeyboardInterrupt:
        notes.append("stopped watching (Ctrl-C); the job keeps running")
    wall = time.perf_counter() - t0
    return Watched(exit_code=None, hook_dir=None, collectors=_stop_all(procs, others, None), notes=notes, wall_s=wall)
