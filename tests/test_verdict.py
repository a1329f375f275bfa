"""The judging as data: which config is picked, on which trials, and whether the model is input-bound."""

import pytest

from dataperf import verdict
from dataperf.records import LoaderConfig, LoaderResult, StepResult


def loader(sps, workers, pf=None, cache="warm", decode=True, verified=True):
    cfg = LoaderConfig(format="files", num_workers=workers, prefetch_factor=pf, cache=cache, decode=decode)
    return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=sps,
                        samples_per_s_min=sps, samples_per_s_max=sps, cache_mode=cache, cache_verified=verified)


def cfg_of(r):
    return r.config["num_workers"], r.config["prefetch_factor"]


def test_fit_ratio_idle_and_headroom():
    f = verdict.fit(60, 100)
    assert f.input_bound and f.ratio == pytest.approx(0.6) and f.idle_fraction == pytest.approx(0.4)
    f = verdict.fit(110, 100, headroom=1.2)
    assert not f.input_bound and not f.has_headroom and f.idle_fraction == 0
    assert verdict.fit(150, 100, headroom=1.2).has_headroom


def test_cheapest_config_that_feeds_with_headroom():
    rs = [loader(90, 0), loader(130, 1, 2), loader(125, 1, 4), loader(400, 4, 8), loader(300, 2, 2)]
    assert cfg_of(verdict.cheapest_feeding(rs, step_sps=100, headroom=1.2)) == (1, 2)
    assert verdict.cheapest_feeding(rs, step_sps=100, headroom=5) is None
    rec = verdict.recommend(rs, StepResult(samples_per_s=100.0), 1.2)
    assert rec.outcome == "feeds" and rec.input_bound is False and cfg_of(rec.pick) == (1, 2)
    assert cfg_of(rec.best) == (4, 8) and rec.ratio == pytest.approx(1.3) and rec.step_samples_per_s == 100
    assert rec.basis == "all" and rec.binding_limit is None
    rec = verdict.recommend(rs, StepResult(samples_per_s=1000.0), 1.2)
    assert rec.outcome == "input_bound" and rec.input_bound and rec.pick is None
    assert cfg_of(rec.best) == (4, 8) and rec.ratio == pytest.approx(0.4)


def test_fed_without_the_headroom_is_still_judged_input_bound():
    rec = verdict.recommend([loader(110, 2, 2)], StepResult(samples_per_s=100.0), 1.2)
    assert rec.outcome == "input_bound" and rec.pick is None and rec.ratio == pytest.approx(1.1)


def test_undecoded_trials_get_no_verdict():
    rs = [loader(400, 4, 8, decode=False)]
    assert verdict.cheapest_feeding(rs, step_sps=100) is None
    rec = verdict.recommend(rs, StepResult(samples_per_s=100.0))
    assert rec.outcome == "no_decoded" and rec.pick is None and rec.input_bound is None and rec.ratio is None


def test_no_successful_trial():
    failed = loader(100, 1, 2)
    failed.status = "failed"
    assert verdict.recommend([failed]).outcome == "no_trials"
    assert verdict.recommend([]).pick is None


def test_unverified_cold_trials_are_not_judged_as_cold():
    rs = [loader(1000, 8, 2, "warm"), loader(900, 4, 2, "cold", verified=False), loader(100, 2, 2, "cold")]
    rec = verdict.recommend(rs)
    assert rec.basis == "verified_cold" and cfg_of(rec.pick) == (2, 2) and cfg_of(rec.best) == (2, 2)
    rec = verdict.recommend([loader(1000, 8, 2, "warm"), loader(900, 4, 2, "cold", verified=False)])
    assert rec.basis == "unverified_cold_as_warm" and rec.unverified_cold == 1


def test_recommendation_without_model_prefers_cheap_near_best_and_cold():
    rs = [loader(1000, 8, 2, "warm"), loader(500, 4, 2, "cold"), loader(490, 2, 2, "cold"),
          loader(200, 0, None, "cold")]
    rec = verdict.recommend(rs)
    assert rec.outcome == "best_without_model" and rec.basis == "verified_cold"
    assert cfg_of(rec.pick) == (2, 2) and cfg_of(rec.best) == (4, 2)
    assert rec.input_bound is None and rec.ratio is None


def test_latest_step_is_the_last_successful_one():
    a, b, c = StepResult(samples_per_s=1.0), StepResult(samples_per_s=2.0), StepResult(samples_per_s=3.0)
    c.status = "failed"
    assert verdict.latest_step([a, loader(10, 0), b, c]) is b
    assert verdict.latest_step([loader(10, 0)]) is None
