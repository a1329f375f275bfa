"""A consumer paced at a demand: what a training loop whose step takes a fixed time a sample takes from a loader.

Each batch of n samples is followed by a step of n / demand seconds, paced on absolute deadlines: a step ends
n / demand after the last one did, plus the time next() blocked for its batch. A late wake-up from a sleep is caught
up, not added (the load on the machine does not slow the consumer); the consumer never runs faster than the demand,
and takes less only by what it waits for data. Used by sizing
(workflows.ray_size) to tell which cluster feeds a model of that step rate, without the model.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from dataperf import watchdog


def paced_feed(batches: Iterable[dict[str, Any]], demand: float, seconds: float, warmup_batches: int = 2) -> float:
    """Samples/s a consumer paced at `demand` took over about `seconds` (each step included, the pipeline's start-up
    and `warmup_batches` batches left out: the epoch start is the trial's time to first batch); NaN when fewer than
    2 batches came after the warm-up."""
    it = iter(batches)
    try:
        for _ in range(warmup_batches):
            if next(it, None) is None:
                return float("nan")
        t0 = deadline = time.perf_counter()
        samples = n = 0
        while True:
            asked = time.perf_counter()
            b = next(it, None)
            if b is None:
                break
            watchdog.beat()
            deadline += time.perf_counter() - asked + b["n"] / demand  # the data wait, then the step
            left = deadline - time.perf_counter()
            if left > 0:
                time.sleep(left)
            samples, n = samples + b["n"], n + 1
            if time.perf_counter() - t0 >= seconds:
                break
        end = max(deadline, time.perf_counter())
        return samples / (end - t0) if n >= 2 and end > t0 else float("nan")
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
