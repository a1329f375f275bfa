"""measure.ranks: a rank's window, timed while its workers deliver, counted in whole waves (issue 51)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dataperf.data import user_dataset
from dataperf.measure import ranks
from dataperf.measure.distributed import DistContext
from dataperf.measure.ranks import PacedConsumer, feed_rank
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig

TESTS = Path(__file__).resolve().parents[1]
WORKERS, BATCH, WAVE_S, STEP_S = 8, 8, 1.0, 0.05
TRUTH = WORKERS * BATCH / WAVE_S  # 64 samples/s: a wave of 8 batches of 8 every second
WINDOW_S = 1.25


def plain_count(steps: list, window_s: float) -> float:
    """What a window cut at window_s reads (the loop before whole waves): its steps' samples over their wall, up
    to the first step that ends at or past window_s."""
    samples = wall = 0.0
    for s in steps:
        samples, wall = samples + s.samples, wall + s.wall_s
        if wall >= window_s:
            break
    return samples / wall


def test_a_ranks_window_counts_whole_waves_of_workers_that_deliver_together(monkeypatch):
    """8 workers deliver their batches together, a wave of 8 batches of 8 every second on absolute deadlines
    (tests/ka_scenarios.py WaveMap): 64 samples/s whatever else the machine runs. The consumer takes a batch in
    50 ms (160 samples/s): it eats a wave in 0.4 s, then waits 0.6 s. The warm-up ends on a ready batch inside a
    wave; a window cut at 1.25 s ends among the next wave's ready batches and reads their pace too: 1.15 to 1.3
    of the truth (wherever within 0.1 s it starts). Counted in whole waves the window reads the truth within 10%
    (the deadlines hold to a few ms) and its samples are whole waves spanning the 1.25 s asked (2 s: the window
    ran on to 3 s of its cap's 3.75); its CPU figures' span is the whole window, longer, ending on the wave that
    closed it."""
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("KA_N", "100000")
    monkeypatch.setenv("KA_WAVE_S", str(WAVE_S))
    monkeypatch.setenv("KA_WAVE_T0", str(time.time() + 0.5))  # the workers' start-up before the first wave
    seen: list = []

    def timed_window(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(out[0])
        return out

    real = ranks.timed_window
    monkeypatch.setattr(ranks, "timed_window", timed_window)
    data = user_dataset("ka_scenarios:WaveMap")
    cfg = LoaderConfig(backend="user-dataset", batch_size=BATCH, num_workers=WORKERS).explicit()
    feed = feed_rank(data, cfg, TrialOptions(), PacedConsumer(BATCH / STEP_S), WINDOW_S, 1, DistContext(), "w")

    old = plain_count(seen[0], WINDOW_S)
    assert abs(old / TRUTH - 1) > 0.10, old  # the bias whole waves remove
    assert feed.waves >= 2 and feed.counted_samples == feed.waves * WORKERS * BATCH
    assert feed.counted_wall_s >= WINDOW_S
    assert feed.samples_per_s == pytest.approx(TRUTH, rel=0.10)
    assert feed.samples == sum(s.samples for s in seen[0]) > feed.counted_samples
    assert feed.wall_s >= WINDOW_S and feed.wall_s > feed.counted_wall_s
