"""measure.ranks.ModelConsumer: the consumer each rank runs where the host has an accelerator a rank (the real
model on the rank's own device). Only one GPU is lent, so the path is checked here on the CPU, in one process:
the rank's loader feeds the real train step, whose fed rate and wait are the rank's figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataperf.data import user_dataset
from dataperf.measure.distributed import DistContext
from dataperf.measure.fed import shape_for_model
from dataperf.measure.ranks import ModelConsumer, feed_rank
from dataperf.measure.step import StepOptions
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig

TESTS = Path(__file__).resolve().parents[1]
BATCH, STEP_S = 8, 0.05  # tests/paced.py FixedStep: each train step busy 50 ms, waiting or not: 160 samples/s


def test_a_rank_fed_by_the_real_model_reads_the_models_rate_where_the_workers_keep_ahead(monkeypatch):
    """Samples burning 1 ms of CPU each, 2 workers (up to 2,000 samples/s on 2 cores, 8 a batch) feed a real
    train step that is busy exactly 50 ms a batch of 8 (160 samples/s, never faster): the model binds, the
    rank's fed rate is the model's within 10% and it waits on data little. A consumer that skipped the step, or
    a rate read off the loader alone, would read far above 160."""
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("KA_BURN_S", "0.001")
    monkeypatch.setenv("KA_N", "4000")
    monkeypatch.setenv("PACED_STEP_S", str(STEP_S))
    data = user_dataset("ka_scenarios:BurnMap")
    cfg = LoaderConfig(backend="user-dataset", batch_size=BATCH, num_workers=2).explicit()
    cfg, sopts = shape_for_model(data, cfg, StepOptions(model="paced:fixed_step_model", device="cpu"))
    consumer = ModelConsumer(sopts)
    feed = feed_rank(data, cfg, TrialOptions(), consumer, 1.5, 10, DistContext(), "m")
    assert feed.samples_per_s == pytest.approx(BATCH / STEP_S, rel=0.10)
    assert feed.samples_per_s <= BATCH / STEP_S * 1.01
    assert feed.wait_s / feed.wall_s < 0.10
    assert feed.workers_cpu_s > 0  # the rank's own workers read the samples
