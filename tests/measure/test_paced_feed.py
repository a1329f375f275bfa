"""A consumer paced at a demand takes the demand from a loader that keeps up, and less from one that does not."""

import math
import time

import pytest

from dataperf.measure.paced_feed import paced_feed


def batches(period_s: float, n: int = 8):
    """A loader whose batches of n samples are ready every period_s (paced on deadlines)."""
    deadline = time.perf_counter()
    while True:
        deadline += period_s
        left = deadline - time.perf_counter()
        if left > 0:
            time.sleep(left)
        yield {"n": n}


def test_a_loader_faster_than_the_demand_feeds_it_exactly():
    """Steps paced on deadlines, the batches always ready: the consumer takes the demand (5%: its last step's
    wake-up), never more."""
    rate = paced_feed(batches(0.001), demand=400.0, seconds=0.5)  # loader 8,000/s
    assert rate == pytest.approx(400.0, rel=0.05) and rate <= 400.0 * 1.0001


def test_a_loader_slower_than_the_demand_gives_its_own_rate():
    """A paced loader of 200 samples/s behind a demand of 400: the consumer waits for each batch and takes 200."""
    rate = paced_feed(batches(0.04), demand=400.0, seconds=0.6)
    assert rate == pytest.approx(200.0, rel=0.1)


def test_too_few_batches_measure_nothing():
    assert math.isnan(paced_feed(iter([{"n": 8}]), demand=100.0, seconds=1.0))
