"""measure.ranks.ModelConsumer: the consumer each rank runs where the host has an accelerator a rank (the real
model on the rank's own device). Only one GPU is lent, so the path is checked here on the CPU, in one process:
the rank's loader feeds the real train step, whose fed rate and wait are the rank's figures."""

from __future__ import annotations

from pathlib import Path

from dataperf.data import user_dataset
from dataperf.measure.distributed import DistContext
from dataperf.measure.fed import shape_for_model
from dataperf.measure.ranks import ModelConsumer, feed_rank
from dataperf.measure.step import StepOptions
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig

TESTS = Path(__file__).resolve().parents[1]
BATCH, STEP_S = 8, 0.05  # tests/paced.py FixedStep: each train step busy 50 ms, waiting or not: 160 samples/s


def test_a_rank_fed_by_the_real_model_is_held_to_the_models_step(monkeypatch):
    """Samples burning 1 ms of CPU each, 2 workers (hundreds of samples/s even on a loaded box, 8 a batch) feed a
    real train step that is busy exactly 50 ms a batch of 8 (160 samples/s, never faster): the rank's fed rate is
    the model's, never above it, and each step is busy at least the model's 50 ms. A consumer that skipped the
    step, or a rate read off the loader alone, would read several times 160. The lower bound is structural (half
    the model's rate: the model, not a starved loader, binds); a loaded box's hand-overs between steps, which the
    paced model does not make up, read 10% under 160 beside two busy loops."""
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("KA_BURN_S", "0.001")
    monkeypatch.setenv("KA_N", "4000")
    monkeypatch.setenv("PACED_STEP_S", str(STEP_S))
    data = user_dataset("ka_scenarios:BurnMap")
    cfg = LoaderConfig(backend="user-dataset", batch_size=BATCH, num_workers=2).explicit()
    cfg, sopts = shape_for_model(data, cfg, StepOptions(model="paced:fixed_step_model", device="cpu"))
    feed = feed_rank(data, cfg, TrialOptions(), ModelConsumer(sopts), 1.5, 10, DistContext(), "m")
    assert 0.5 * BATCH / STEP_S <= feed.samples_per_s <= BATCH / STEP_S * 1.01
    assert (feed.wall_s - feed.wait_s) / feed.steps >= STEP_S * 0.99
    assert feed.workers_cpu_s > 0  # the rank's own workers read the samples
