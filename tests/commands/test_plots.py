"""The pictures: what each shows is read back from the figure (its lines' points and legend), on records whose
content is set here; the PNGs were also looked at (benchmarks/RESULTS.md says which)."""

from __future__ import annotations

import math

from dataperf import verdict
from dataperf.commands import _plots
from dataperf.results import E2EResult, LoaderConfig, LoaderResult, StepResult


def loader(sps, workers, pf=2, status="ok", error=""):
    cfg = LoaderConfig(backend="files", num_workers=workers, prefetch_factor=pf if workers else None, decode=True)
    return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=sps, samples_per_s_min=sps,
                        samples_per_s_max=sps, cache_mode="warm", status=status, error=error)


def fed(trial, sps, rnd):
    return E2EResult(config=trial.config, config_key=trial.config_key, samples_per_s=sps, data_stall_fraction=0.01,
                     confirm_round=rnd, step_host_ms_median=10.0, batch_size=32, steps_per_repeat=20, repeats=3)


def points(ax) -> dict[str, list[tuple[float, float]]]:
    return {ln.get_label(): list(zip(ln.get_xdata(), ln.get_ydata(), strict=True)) for ln in ax.get_lines()}


def test_the_rates_plot_shows_the_model_the_fed_configs_the_pick_and_the_failures(tmp_path):
    w0, w2, w4, w4b = loader(60, 0), loader(150, 2), loader(280, 4), loader(300, 4, pf=4)
    bad = loader(0, 8, status="failed", error="63 batches cannot give 8 workers 3 each; fewer workers")
    runs = [fed(w2, 118, 1), fed(w2, 118, 2), fed(w4, 121, 1), fed(w4, 121, 2)]
    step = StepResult(samples_per_s=120.0, batch_size=32, status="ok")
    recs = [w0, w2, w4, w4b, bad, *runs]
    rec = verdict.recommend(recs, step, 1.2)
    assert rec.confirmed
    ax = _plots.rates_figure(recs, step, rec).axes[0]
    pts = points(ax)
    # 0 workers (no prefetch) starts every line
    assert pts["files pf=2"] == [(0, 60), (2, 150), (4, 280)] and pts["files pf=4"] == [(0, 60), (4, 300)]
    model = next(v for k, v in pts.items() if k.startswith("model: step alone 120"))
    assert {y for _, y in model} == {120}
    assert {y for _, y in pts["needed with 1.2x headroom"]} == {120 * 1.2}
    assert sorted(pts["fed to the model (--confirm), pooled over its rounds"]) == [(2, 118), (4, 121)]
    pick = next(v for k, v in pts.items() if k.startswith("pick: "))
    assert pick == [(rec.pick_config.num_workers, rec.fed_samples_per_s)]
    failed = next(v for k, v in pts.items() if k.startswith("failed (1): 63 batches"))
    assert failed == [(8, 0)]
    assert _plots.rates(recs, step, rec, tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_no_successful_trial_draws_nothing(tmp_path):
    recs = [loader(0, 2, status="failed", error="boom")]
    assert _plots.rates(recs, None, verdict.recommend(recs), tmp_path / "r.png") is None
    assert not (tmp_path / "r.png").exists()


def test_the_waterfalls_period_comes_from_the_rate_the_trial_stands_behind(tmp_path):
    """4 workers at 1,000 samples/s give each worker 4 ms a sample; where the trial's notes call the steady rate
    invalid, the period comes from the training rate (400 samples/s: 10 ms), not from the steady one."""
    def stages(steady_valid: bool) -> LoaderResult:
        r = loader(1000, 4)
        r.stage_ms_per_sample = {"read": 0.5, "decode": 2.0, "collate": 0.25, "transfer": 0.1}
        r.active_workers, r.training_samples_per_s, r.steady_valid = 4, 400.0, steady_valid
        return r

    def period(r: LoaderResult) -> tuple[float, str]:
        ax = _plots.waterfall_figure(r).axes[0]
        line = next(ln for ln in ax.get_lines() if ln.get_label().startswith("a worker's period"))
        return line.get_xdata()[0], line.get_label()

    x, label = period(stages(True))
    assert x == 4.0 and "steady rate 1,000 samples/s (4 streams)" in label
    x, label = period(stages(False))
    assert x == 10.0 and "training rate 400 samples/s (4 streams)" in label
    assert _plots.waterfall(stages(False), tmp_path / "w.png").read_bytes()[:4] == b"\x89PNG"
    empty = loader(1000, 4)
    assert _plots.waterfall(empty, tmp_path / "none.png") is None and not (tmp_path / "none.png").exists()


def test_a_one_stream_backends_period_is_its_threads_share_of_the_rate():
    """DALI delivers one stream (no active-worker count) from 4 threads: at 1,000 samples/s each thread has 4 ms
    a sample, the scale of its probed single-thread stage times, not the 1 ms a sample of the stream."""
    cfg = LoaderConfig(backend="dali", batch_size=8, decode=True, dali_num_threads=4)
    r = LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=1000.0, steady_valid=True,
                     stage_ms_per_sample={"read": 0.1, "decode": 1.5, "transform": 2.0}, status="ok")
    ax = _plots.waterfall_figure(r).axes[0]
    line = next(ln for ln in ax.get_lines() if ln.get_label().startswith("a worker's period"))
    assert line.get_xdata()[0] == 4.0 and "(4 streams)" in line.get_label()


def test_each_point_has_its_repeats_range_and_a_batch_size_that_all_failed_gets_its_panel(tmp_path):
    """issue 53: no error bars, so noise looked like a winner; the bs=64 trials that all failed got no panel."""
    w1 = loader(100, 1)
    w1.samples_per_s_min, w1.samples_per_s_max = 80, 130
    big = LoaderConfig(backend="files", batch_size=64, num_workers=1, prefetch_factor=2, decode=True)
    bad = LoaderResult(config=big.__dict__, config_key=big.key(), cache_mode="warm", status="failed",
                       error="only 3 batches per repeat")
    recs = [loader(60, 0), w1, bad]
    fig = _plots.rates_figure(recs, None, verdict.recommend(recs))
    assert len(fig.axes) == 2
    small, failed = sorted(fig.axes, key=lambda ax: ax.get_title())
    bars = [c for c in small.containers if type(c).__name__ == "ErrorbarContainer"]
    (segments,) = [c.lines[2][0].get_segments() for c in bars]
    assert [(x, lo, hi) for (x, lo), (_, hi) in segments] == [(0, 60, 60), (1, 80, 130)]
    assert "(every trial failed)" in failed.get_title()
    assert next(v for k, v in points(failed).items() if k.startswith("failed (1): only 3 batches")) == [(1, 0)]


def test_a_model_far_below_the_loader_gets_a_log_axis():
    """The loader at 1,600 samples/s, the model at 13: on a linear axis the model, the fed points and the pick
    sat in its bottom 2% (fed 26 and model 13 under a pixel apart); on a log axis both stand clear of its foot
    and a tenth of its height apart."""
    w0, w2 = loader(1600, 0), loader(1500, 2)
    step = StepResult(samples_per_s=13.0, batch_size=32, status="ok")
    recs = [w0, w2, fed(w2, 26, 1), fed(w2, 27, 2)]
    ax = _plots.rates_figure(recs, step, verdict.recommend(recs, step, 1.2)).axes[0]
    assert ax.get_yscale() == "log"
    lo, hi = (math.log(v) for v in ax.get_ylim())
    up = {y: (math.log(y) - lo) / (hi - lo) for y in (13.0, 26.5)}
    assert min(up.values()) > 0.05 and up[26.5] - up[13.0] > 0.1, up
    near = [loader(200, 0), loader(150, 2)]
    ax = _plots.rates_figure(near, StepResult(samples_per_s=120.0, batch_size=32, status="ok"),
                             verdict.recommend(near)).axes[0]
    assert ax.get_yscale() == "linear"
