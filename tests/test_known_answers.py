"""Known-answer tests: inputs whose figures are analytic. Samples and steps cost a fixed sleep, which uses no
CPU, so the answers hold on a loaded 2-core machine; tolerances are 10% (rates) and 5 points (stalls)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner
from tiny_models import Sleepy

from dataperf import report, verdict
from dataperf import sweep as sw
from dataperf.cli import cli
from dataperf.diagnose import diagnose
from dataperf.e2e import idle_fraction, run_e2e
from dataperf.formats.generate import ImageSpec, write_dataset
from dataperf.records import LoaderConfig
from dataperf.runner import Arrival, TrialOptions, run_trial, steady_rate
from dataperf.step import StepOptions, measure_step

SAMPLE_S = 0.04  # wake-up latency on a loaded box is ~1-2 ms a sleep: a few percent of this


def test_steady_rate_is_exact_for_staggered_fixed_cost_workers():
    """W workers, start-ups staggered, each batch B*s after the last: the rate is W/s, whatever the burst."""
    b, s, w = 4, 0.01, 3
    arr = [Arrival(0.2 * k + (j + 1) * b * s, k, b, 100) for k in range(w) for j in range(6)]
    arr.sort(key=lambda a: a.t_s)
    assert steady_rate(arr) == pytest.approx(w / s)
    assert steady_rate(arr, "nbytes") == pytest.approx(w / s * 100 / b)
    # the old definition (samples after the first batch over first-to-last) credits the burst to the window
    old = (sum(a.samples for a in arr) - b) / (arr[-1].t_s - arr[0].t_s)
    assert old != pytest.approx(w / s, rel=0.1)


@pytest.mark.parametrize("workers,persistent", [(0, False), (4, True), (4, False)])
def test_sleeping_samples_give_the_analytic_rate(datasets, workers, persistent):
    """96 samples, batch 2: 4 workers make 12 batches each, 160 ms apart; the old first-batch window would
    read (48-1)/(48-4) = +7% high, the epoch including start-up of non-persistent workers is lower. Samples cost
    twice SAMPLE_S here: the epoch rate also pays the main process's per-batch work, which a loaded machine
    stretches, and a longer sample keeps that a small share."""
    cost_s = 2 * SAMPLE_S
    cfg = LoaderConfig(format="files", batch_size=2, num_workers=workers, persistent_workers=persistent)
    r = run_trial(datasets["image-files"], cfg, TrialOptions(repeats=3, warmup_batches=1, min_batches=3,
                                                           max_batches=None if workers else 8, collect=False,
                                                           sample_cost_s=cost_s))
    assert r.status == "ok", r.error
    analytic = max(workers, 1) / cost_s
    assert r.samples_per_s_median == pytest.approx(analytic, rel=0.1)
    assert r.active_workers == workers
    if workers == 0 or persistent:  # no worker start-up per epoch: the epoch rate is the analytic rate too
        assert r.epoch_samples_per_s_median == pytest.approx(analytic, rel=0.1)
    else:
        assert r.epoch_samples_per_s_median < r.samples_per_s_median  # spawning workers every epoch costs


@pytest.fixture(scope="module")
def two_shards(tmp_path_factory):
    p = tmp_path_factory.mktemp("two") / "wds"
    write_dataset(p, "image", "webdataset", 48, seed=3, image=ImageSpec(16, 16, 80), shards=2)
    return p


def test_two_shards_four_workers_two_active_and_one_idle_warning(two_shards):
    r = run_trial(two_shards, LoaderConfig(format="webdataset", batch_size=4, num_workers=4),
                  TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False))
    assert r.status == "ok", r.error
    assert r.shards == 2 and r.active_workers == 2
    idle = [n for n in r.notes if "idle" in n]
    assert len(idle) == 1 and "--shards 4" in idle[0]
    out = CliRunner().invoke(cli, ["bench", str(two_shards), "--batch-size", "4", "--num-workers", "4",
                                   "--repeats", "3", "--no-collect", "--min-batches", "3"]).output
    lines = [ln for ln in out.splitlines() if "idle" in ln and "warning" in ln]
    assert len(lines) == 1 and "shards convert" in lines[0], out
    assert report.workers_cell(r) == "2/4 [red]idle[/red] (2 sh)"


def test_gpu_idle_arithmetic_from_events():
    """The H200 DALI run (audit H1): 18.82 ms wall per step, 17.30 ms h2d+compute on the GPU -> 8% idle,
    although the host waited 58% of the time."""
    steps = 100
    assert idle_fraction([17.30] * steps, 18.82e-3 * steps) == pytest.approx(0.081, abs=0.001)
    assert idle_fraction([20.0] * steps, 18.82e-3 * steps) == 0.0  # clock skew never goes negative


@pytest.fixture(scope="module")
def fed_data(tmp_path_factory):
    p = tmp_path_factory.mktemp("fed") / "img"
    write_dataset(p, "image", "files", 96, seed=4, image=ImageSpec(16, 16, 80))
    return p


def test_e2e_diagnose_and_sweep_agree_on_an_analytic_stall(fed_data, one_thread):
    """Loader: 2 workers x 4-sample batches x 50 ms/sample = 40 samples/s. Model: 4 samples per 50 ms step =
    80 samples/s. The model idles 1 - 40/80 = 50% of the time; all three commands must say so."""
    cost, b, w = 0.05, 4, 2
    analytic = 1 - (w / cost) / (b / Sleepy.STEP_S)
    cfg = LoaderConfig(format="files", batch_size=b, num_workers=w, image_size=16)
    sopts = StepOptions(model="tiny_models:sleepy", batch_size=b, image_size=16, steps=4, repeats=3, warmup=1)
    topts = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, max_batches=6, collect=False,
                         sample_cost_s=cost)
    e = run_e2e(fed_data, cfg, sopts, steps=6, repeats=3, warmup=2, topts=topts)
    assert e.epoch_restarts == 0
    assert e.data_stall_fraction == pytest.approx(analytic, abs=0.05)
    assert e.predicted_stall_fraction == pytest.approx(analytic, abs=0.05)

    d, _ = diagnose(fed_data, cfg, sopts, topts)
    assert d.bottleneck == "prep" and d.cold_cache_verified
    assert d.prep_stall_fraction + d.fetch_stall_fraction == pytest.approx(analytic, abs=0.05)

    results = sw.run_sweep([(fed_data, replace(cfg, decode=True))], topts, None)
    step = measure_step(sopts)
    rec = verdict.recommend(results, step)
    assert rec.outcome == "input_bound" and 1 - rec.ratio == pytest.approx(analytic, abs=0.05), rec
