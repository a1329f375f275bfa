"""The log every benchmark keeps: each printed line also goes to OUT/log.txt, which starts with the date, the
exact command and the cores, so a raw log filed under benchmarks/results/ says where it came from."""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable
from pathlib import Path

Say = Callable[[str], None]


def run_logged(out: Path, body: Callable[[Say], int]) -> int:
    """body(say), with say() printing a line and appending it to out/log.txt; returns body's exit code."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "log.txt", "w", encoding="utf-8") as log:

        def say(text: str) -> None:
            print(text, flush=True)
            log.write(text + "\n")
            log.flush()

        say(f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
        say(f"command: {' '.join([sys.executable, *sys.argv])}")
        say(f"cores: {len(os.sched_getaffinity(0))} (affinity), {os.cpu_count()} (machine)")
        return body(say)
