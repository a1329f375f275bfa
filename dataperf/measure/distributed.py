"""Multi-process and multi-node runs through torch.distributed (launched by torchrun, never by us).

`dataperf sweep --nproc N` re-runs the same command under `python -m torch.distributed.run`; a user's own
`torchrun ... -m dataperf sweep ...` works unchanged, since each rank reads torchrun's environment.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BARRIER_TIMEOUT_S = 600
STOP_TIMEOUT_S = 30  # for torchrun to stop its ranks after Ctrl-C


@dataclass
class DistContext:
    rank: int = 0
    world_size: int = 1
    backend: str | None = None

    @property
    def barrier(self) -> Callable[[], None] | None:
        if self.world_size == 1:
            return None
        import torch.distributed as dist

        return lambda: _collective(dist.barrier)

    @property
    def gather(self) -> Callable[[Any], list[Any]] | None:
        """All ranks' objects, in rank order (every rank must call it: it is a collective)."""
        if self.world_size == 1:
            return None
        import torch.distributed as dist

        def _gather(obj: Any) -> list[Any]:
            out: list[Any] = [None] * self.world_size
            _collective(dist.all_gather_object, out, obj)
            return out

        return _gather

    def arrive(self, key: str) -> None:
        """Count this rank in under `key` without waiting for the others (the process group's own key-value
        store): a rank goes on working while the rest catch up, where a barrier would leave it idle."""
        if self.world_size > 1:
            _collective(_store().add, key, 1)

    def arrived(self, key: str) -> int:
        """How many ranks have arrived under `key` (arrive); 1 on a single process."""
        return int(_collective(_store().add, key, 0)) if self.world_size > 1 else 1

    def close(self) -> None:
        if self.world_size > 1:
            import torch.distributed as dist

            _collective(dist.barrier)
            dist.destroy_process_group()


def _store() -> Any:
    """The default process group's store (torchrun's rendezvous TCPStore)."""
    from torch.distributed.distributed_c10d import _get_default_store

    return _get_default_store()


def _collective(fn: Callable[..., Any], *args: Any) -> Any:
    """A collective call; one that fails (a peer that ended: gloo's "Connection closed by peer", or a timeout)
    is RankLost, so this rank ends quietly and the rank that ended first is the one to say why."""
    from dataperf.errors import RankLost

    try:
        return fn(*args)
    except RuntimeError as e:  # gloo and NCCL raise their transport errors as RuntimeError (DistError)
        raise RankLost(str(e)) from None


def init_from_env() -> DistContext:
    """Join the process group torchrun describes in the environment; a plain run is world size 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext()
    import torch
    import torch.distributed as dist

    backend = os.environ.get("DATAPERF_DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=BARRIER_TIMEOUT_S))
    return DistContext(rank=dist.get_rank(), world_size=dist.get_world_size(), backend=backend)


def strip_nproc(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--nproc":
            skip = True
            continue
        if a.startswith("--nproc="):
            continue
        out.append(a)
    return out


def launch_self(nproc: int, argv: list[str], on_interrupt: Callable[[], None] | None = None,
                env: dict[str, str] | None = None) -> int:
    """Run this same dataperf command on nproc local ranks through torch.distributed.run (torchrun; its agent
    through `agent`).

    Ctrl-C stops the agent with SIGTERM (the agent ignores the Ctrl-C the terminal also sends it), which stops
    the ranks, calls `on_interrupt` (the command's one line, such as how many finished trials rank 0 kept) and
    ends this command with 130: no traceback or warning from the agent, no second line from a rank."""
    from dataperf.errors import UserError

    if nproc < 1:
        raise UserError(f"--nproc must be at least 1, got {nproc}")
    cmd = [sys.executable, "-c", "from dataperf.measure.distributed import agent; agent()", "--standalone",
           f"--nproc_per_node={nproc}", "--signals-to-handle", "SIGTERM,SIGHUP,SIGQUIT", "-m", "dataperf",
           *strip_nproc(argv)]
    env = dict(os.environ, DATAPERF_DIST_BACKEND=os.environ.get("DATAPERF_DIST_BACKEND", "gloo"), **(env or {}))
    proc = subprocess.Popen(cmd, env=env, preexec_fn=_agent_start)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        held = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the stop short
        try:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        finally:
            signal.signal(signal.SIGINT, held)
        if on_interrupt is not None:
            on_interrupt()
        sys.exit(130)


def _agent_start() -> None:
    """The agent's preexec_fn: it gets SIGTERM when this launcher dies (SIGKILL, the OOM killer), and stops its
    ranks as on a Ctrl-C; else rank 0 would go on writing --out, holding its lock, for a command nobody waits for.
    It starts with SIGINT ignored, until agent() sets its own handler: a Ctrl-C while it imports torch (a second
    or two) printed a KeyboardInterrupt traceback (issue 54's kill loop)."""
    import ctypes

    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def agent() -> None:
    """torchrun's agent (torch.distributed.run's main) as launch_self runs it. SIGINT is left to launch_self (a
    Ctrl-C reaches both, and a second stop broke the agent's own shutdown with a traceback; launch_self keeps it
    out of --signals-to-handle too): on launch_self's SIGTERM the agent stops its ranks and ends quietly with
    130. Its warnings about the signal and the ranks it stops are muted, its errors are not."""
    signal.signal(signal.SIGINT, lambda signum, frame: None)  # not SIG_IGN: the ranks must not inherit it
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main

    logging.disable(logging.WARNING)
    try:
        main(sys.argv[1:])
    except SignalException:
        sys.exit(130)
    except ChildFailedError as e:
        line, code = failed_ranks({rank: f.exitcode for rank, f in e.failures.items()})
        if line:
            print(f"error: {line}", file=sys.stderr)
        sys.exit(code)


def failed_ranks(codes: dict[int, int]) -> tuple[str | None, int]:
    """The one `error:` line (None: a rank printed it already) and the exit code a --nproc command ends with,
    from its failed ranks' exit codes, instead of torchrun's ChildFailedError traceback and exit 1. A rank that
    exited with a code printed its own line (a UserError: 2); a rank that only lost its peers (RankLost) printed
    nothing; a rank killed by a signal could not say why, so it is said here."""
    from dataperf.errors import RankLost

    said = sorted(c for c in codes.values() if c > 0 and c != RankLost.exit_code)
    # torchrun's agent SIGTERMs the other ranks once one exits with an error: collateral where a rank said why
    killed = sorted((r, -c) for r, c in codes.items() if c < 0 and not (said and -c == signal.SIGTERM))
    if killed:
        rank, sig = killed[0]
        return (f"rank {rank} was killed by {signal.Signals(sig).name} (killed, or out of memory?); run the same "
                "command with --resume to keep the trials finished before it"), 2
    if said:
        return None, said[-1]
    return ("the ranks lost each other (a collective between them failed or timed out); run the same command "
            "with --resume to keep the trials finished before it"), 2
