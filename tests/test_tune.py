import pytest
from click.testing import CliRunner

from dataperf import records
from dataperf.cli import cli
from dataperf.records import LoaderConfig, LoaderResult, StepResult
from dataperf.step import StepOptions
from dataperf.tune import Tuner, target_from_model


def fake_trial(rates):
    """A stand-in storage whose rate depends only on the config, so the search path is checkable."""
    def trial(data, cfg, opts):
        key = (cfg.num_workers, cfg.prefetch_factor, cfg.batch_size)
        return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=rates.get(key, 10.0))
    return trial


def test_stops_when_target_met_with_fewest_workers():
    rates = {(0, None, 32): 100, (1, 2, 32): 180, (2, 2, 32): 400, (4, 2, 32): 800}
    out = Tuner("d", LoaderConfig(), None, target=350, trial=fake_trial(rates)).run()
    assert out.met and out.pick.config["num_workers"] == 2
    assert [s.result.config["num_workers"] for s in out.steps] == [0, 1, 2]


def test_flattening_gain_moves_on_to_prefetch_then_batch():
    rates = {(0, None, 32): 100, (1, 2, 32): 200, (2, 2, 32): 205, (4, 2, 32): 190, (1, 4, 32): 260,
             (1, 8, 32): 262, (1, 4, 64): 400, (1, 4, 128): 410}
    out = Tuner("d", LoaderConfig(), None, target=None, max_workers=8, trial=fake_trial(rates)).run()
    phases = [(s.phase, s.result.config["num_workers"], s.result.config["prefetch_factor"],
               s.result.config["batch_size"]) for s in out.steps]
    assert phases == [("workers", 0, None, 32), ("workers", 1, 2, 32), ("workers", 2, 2, 32),
                      ("workers", 4, 2, 32), ("prefetch", 1, 4, 32), ("prefetch", 1, 8, 32),
                      ("batch_size", 1, 4, 64), ("batch_size", 1, 4, 128), ("refine", 2, 4, 64)]
    assert out.pick.config["batch_size"] == 64 and "gains stopped" in out.stop_reason


def test_tune_cli_reports_only_measured_configs(tmp_path, datasets):
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(cli, ["tune", str(datasets["image-files"]), "--target-samples-per-s", "1e9",
                                 "--batch-size", "8", "--image-size", "16", "--max-workers", "2", "--no-collect",
                                 "--repeats", "3", "--min-batches", "3", "--out", str(out)])
    assert r.exit_code == 1, r.output  # an unreachable target is not met
    measured = {x.config_key for x in records.load(out)}
    pick_line = next(line for line in r.output.splitlines() if line.startswith("pick: "))
    assert any(x.loader_config.short() in pick_line for x in records.load(out))
    assert len(measured) == len(records.load(out)) >= 3
    assert "stopped: gains stopped below the target" in r.output


def test_one_flat_step_does_not_end_the_worker_ladder():
    rates = {(0, None, 32): 100, (1, 2, 32): 101, (2, 2, 32): 190, (4, 2, 32): 185, (8, 2, 32): 186}
    out = Tuner("d", LoaderConfig(), None, max_workers=16, max_batch_doublings=0, trial=fake_trial(rates)).run()
    assert [s.result.config["num_workers"] for s in out.steps if s.phase == "workers"] == [0, 1, 2, 4, 8]
    assert out.pick.config["num_workers"] == 2


def test_target_from_a_model_is_its_step_rate_times_the_headroom():
    """Sleepy's step sleeps 50 ms, so 4 samples a step is at most 80 samples/s (load only slows it)."""
    sopts = StepOptions(model="tiny_models:sleepy", batch_size=4, image_size=16, steps=3, repeats=3, warmup=1)
    step, target = target_from_model(sopts, 1.5)
    assert 0 < step.samples_per_s <= 80 and target == pytest.approx(1.5 * step.samples_per_s)


def test_with_a_model_the_outcome_carries_the_verdict_on_every_trial():
    rates = {(0, None, 32): 100, (1, 2, 32): 180, (2, 2, 32): 400}
    step = StepResult(samples_per_s=300.0)
    out = Tuner("d", LoaderConfig(decode=True), None, target=360, trial=fake_trial(rates), step=step,
                headroom=1.2).run()
    rec = out.recommendation
    assert out.met and rec.outcome == "feeds" and rec.pick is out.pick and rec.ratio == pytest.approx(400 / 300)
    out = Tuner("d", LoaderConfig(decode=True), None, target=1e9, trial=fake_trial(rates), max_workers=2,
                max_batch_doublings=0, step=StepResult(samples_per_s=1e9)).run()
    assert not out.met and out.recommendation.outcome == "input_bound" and out.recommendation.input_bound
    assert Tuner("d", LoaderConfig(), None, target=1, trial=fake_trial(rates)).run().recommendation is None
