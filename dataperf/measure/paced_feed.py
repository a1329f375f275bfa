"""A consumer paced at a demand: what a training loop whose step takes a fixed time a sample takes from a loader.

Each batch of n samples is followed by a step of n / demand seconds, paced on absolute deadlines (a late wake-up is
caught up, not added), starting when the batch is in hand or when the last step ended, whichever is later: the
consumer never runs faster than the demand, and takes less only while it waits for data. Used by sizing
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
        for b in it:
            watchdog.beat()
            now = time.perf_counter()
            deadline = max(deadline, now) + b["n"] / demand
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
