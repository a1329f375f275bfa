from dataperf import report
from dataperf.records import LoaderConfig, LoaderResult, StepResult


def loader(sps, workers, pf=None, cache="warm", decode=True, verified=True):
    cfg = LoaderConfig(format="files", num_workers=workers, prefetch_factor=pf, cache=cache, decode=decode)
    return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=sps,
                        samples_per_s_min=sps, samples_per_s_max=sps, cache_mode=cache, cache_verified=verified)


def test_verdict_text():
    assert report.verdict_text(60, 100).startswith("input-bound by 40%")
    assert "1.50x headroom" in report.verdict_text(150, 100)
    assert "below the 1.2x headroom" in report.verdict_text(110, 100)


def test_cheapest_config_that_feeds_with_headroom():
    rs = [loader(90, 0), loader(130, 1, 2), loader(125, 1, 4), loader(400, 4, 8), loader(300, 2, 2)]
    pick = report.cheapest_feeding(rs, step_sps=100, headroom=1.2)
    assert pick.config["num_workers"] == 1 and pick.config["prefetch_factor"] == 2
    assert report.cheapest_feeding(rs, step_sps=100, headroom=5) is None
    line = report.recommendation(rs, StepResult(samples_per_s=100.0), 1.2)
    assert line.startswith("recommended: files bs=32 w=1 pf=2 decode")
    assert "INPUT-BOUND" in report.recommendation(rs, StepResult(samples_per_s=1000.0), 1.2)


def test_undecoded_trials_get_no_verdict():
    rs = [loader(400, 4, 8, decode=False)]
    assert report.cheapest_feeding(rs, step_sps=100) is None
    assert report.recommendation(rs, StepResult(samples_per_s=100.0)).startswith("no verdict")
    assert "no verdict" in report.verdict_caveats(rs, StepResult(samples_per_s=100.0))[0]


def test_unverified_cold_trials_are_not_judged_as_cold():
    rs = [loader(1000, 8, 2, "warm"), loader(900, 4, 2, "cold", verified=False), loader(100, 2, 2, "cold")]
    line = report.recommendation(rs)
    assert "w=2 pf=2" in line and "verified cold-cache" in line  # only the verified cold trial is the basis
    rs = [loader(1000, 8, 2, "warm"), loader(900, 4, 2, "cold", verified=False)]
    assert "not verified as cold" in report.recommendation(rs)


def test_recommendation_without_model_prefers_cheap_near_best_and_cold():
    rs = [loader(1000, 8, 2, "warm"), loader(500, 4, 2, "cold"), loader(490, 2, 2, "cold"),
          loader(200, 0, None, "cold")]
    line = report.recommendation(rs)
    assert "w=2 pf=2" in line and "cold-cache" in line


def test_heatmap_png(tmp_path):
    rs = [loader(100, 0), loader(200, 1, 2), loader(250, 1, 4), loader(300, 2, 2)]
    p = report.heatmap(rs, tmp_path / "h.png")
    assert p.read_bytes()[:4] == b"\x89PNG"
