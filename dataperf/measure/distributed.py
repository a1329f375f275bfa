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

        return dist.barrier

    @property
    def gather(self) -> Callable[[Any], list[Any]] | None:
        """All ranks' objects, in rank order (every rank must call it: it is a collective)."""
        if self.world_size == 1:
            return None
        import torch.distributed as dist

        def _gather(obj: Any) -> list[Any]:
            out: list[Any] = [None] * self.world_size
            dist.all_gather_object(out, obj)
            return out

        return _gather

    def close(self) -> None:
        if self.world_size > 1:
            import torch.distributed as dist

            dist.barrier()
            dist.destroy_process_group()


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
    proc = subprocess.Popen(cmd, env=env)
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


def agent() -> None:
    """torchrun's agent (torch.distributed.run's main) as launch_self runs it. SIGINT is left to launch_self (a
    Ctrl-C reaches both, and a second stop broke the agent's own shutdown with a traceback; launch_self keeps it
    out of --signals-to-handle too): on launch_self's SIGTERM the agent stops its ranks and ends quietly with
    130. Its warnings about the signal and the ranks it stops are muted, its errors are not."""
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main

    signal.signal(signal.SIGINT, lambda signum, frame: None)  # not SIG_IGN: the ranks must not inherit it
    logging.disable(logging.WARNING)
    try:
        main(sys.argv[1:])
    except SignalException:
        sys.exit(130)
