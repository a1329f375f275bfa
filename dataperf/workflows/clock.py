"""When a command started, for --budget: the budget counts the interpreter's start and imports too (on the H200
a 5-minute sweep ended 16 s past its budget when counted from the command's body). Kept light: cli.py imports
it before any command runs."""

from __future__ import annotations

import os
import time

BUDGET_START_ENV = "DATAPERF_BUDGET_START"  # --nproc: when the launching command started (time.monotonic())
_main_started: float | None = None  # cli.main() sets it (mark_started): when this command's process started


def process_start() -> float:
    """When this process started, on the time.monotonic() clock."""
    import psutil

    return time.monotonic() - max(0.0, time.time() - psutil.Process().create_time())


def mark_started() -> None:
    """Called by the command's own process only (cli.main): a caller that imports the CLI keeps its clock."""
    global _main_started
    _main_started = process_start()


def started() -> float:
    """When the budget's clock started: under --nproc the launching command's start (one host: one monotonic
    clock), else this process's (main()), else, called in-process (tests), now."""
    return float(os.environ.get(BUDGET_START_ENV) or _main_started or time.monotonic())
