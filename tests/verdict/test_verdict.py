"""The judging as data: which config is picked, on which trials, and whether the model is input-bound."""

import pytest

from dataperf import verdict
from dataperf.results import (
    BUFFER_HID_READS,
    DecisionResult,
    E2EResult,
    LimitsResult,
    LoaderConfig,
    LoaderResult,
    StepResult,
)


def loader(sps, workers, pf=None, cache="warm", decode=True, verified=True):
    cfg = LoaderConfig(backend="files", num_workers=workers, prefetch_factor=pf, cache=cache, decode=decode)
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
    rec = verdict.recommend(rs, StepResult(samples_per_s=100.0), 1.2)
    assert rec.outcome == "feeds" and rec.input_bound is False and cfg_of(rec.pick) == (1, 2)
    assert rec.ratio == pytest.approx(1.3) and rec.step_samples_per_s == 100
    assert rec.predicted_samples_per_s == pytest.approx(100) and rec.predicted_stall_fraction == pytest.approx(0)
    assert rec.basis == "all" and rec.binding_limit == "model"  # fed: the model binds
    rec = verdict.recommend(rs, StepResult(samples_per_s=1000.0), 1.2)
    assert rec.outcome == "input_bound" and rec.input_bound  # the best is picked, and said to fall short
    assert cfg_of(rec.pick) == cfg_of(rec.best) == (4, 8) and rec.ratio == pytest.approx(0.4)
    assert rec.predicted_stall_fraction == pytest.approx(0.6)


def test_fed_without_the_headroom_is_not_called_input_bound():
    """1.1x the step: predicted to feed it (idle 0%), though without the 1.2x margin: not INPUT-BOUND."""
    rec = verdict.recommend([loader(110, 2, 2)], StepResult(samples_per_s=100.0), 1.2)
    assert rec.outcome == "feeds" and not rec.input_bound and cfg_of(rec.pick) == (2, 2)
    assert rec.ratio == pytest.approx(1.1) and not verdict.feeds(rec.pick, StepResult(samples_per_s=100.0), 1.2)


def test_a_buffered_trial_is_predicted_by_the_epochs_phases_at_its_steady_rate():
    """A shuffle buffer hid reads (steady rate not valid, no flow rate): the fed prediction still runs the
    epoch's phases, the tail of uneven shards and the start-up included, at the steady rate, as a valid trial's
    does (107 samples/s, as in test_predicted_fed_rate_known_answers), not the repeats' rate capped by the model
    (150, before: the H100, 37 WebDataset shards, 16 workers: 2,173 predicted, 1,469 fed)."""
    step = StepResult(samples_per_s=150.0)
    t = loader(200, 4, 2)
    t.epoch_samples, t.epoch_worker_samples, t.startup_s_median = 2000, [800, 400, 400, 400], 0.0
    t.steady_valid, t.training_samples_per_s, t.repeat_samples_per_s_median = False, 180.0, 180.0
    t.training_basis = f"the repeats' rate, start-up included: the steady rate is not valid ({BUFFER_HID_READS})"
    assert verdict.predicted_fed(t, step) == pytest.approx(2000 / (1600 / 150 + 400 / 50))
    t.startup_s_median = 1.0
    assert verdict.predicted_fed(t, step) == pytest.approx(2000 / (1 + 1600 / 150 + 400 / 50))
    assert verdict.stream_rate(t) == (200, "steady")  # what tune holds its prediction of the loader against
    t.training_basis, t.flow_samples_per_s_median = "too few batches a worker", 100.0  # the flow rate, as before
    assert verdict.predicted_fed(t, step) == pytest.approx(2000 / (1 + 1600 / 100 + 400 / 25))
    assert verdict.stream_rate(t) == (100, "flow")
    t.flow_samples_per_s_median = float("nan")
    assert verdict.stream_rate(t) == (0.0, "")  # tune then falls to the training rate, and says so


def test_undecoded_trials_get_no_verdict():
    rs = [loader(400, 4, 8, decode=False)]
    rec = verdict.recommend(rs, StepResult(samples_per_s=100.0))
    assert rec.outcome == "no_decoded" and rec.pick is None and rec.input_bound is None and rec.ratio is None


def test_predicted_fed_rate_known_answers():
    """No workers: serial with the step. Workers: the phases of an epoch with uneven shards (4
    workers of 50 samples/s, 5 shards of 400 samples, a step of 150 samples/s: 1,600 samples at 150, then the
    last worker's 400 at 50: 107 samples/s). Both capped by the CPU the two need together."""
    step = StepResult(samples_per_s=150.0)
    assert verdict.predicted_fed(loader(100, 0), step) == pytest.approx(1 / (1 / 100 + 1 / 150))
    uneven = loader(200, 4, 2)
    uneven.epoch_samples, uneven.epoch_worker_samples, uneven.startup_s_median = 2000, [800, 400, 400, 400], 0.0
    assert verdict.predicted_fed(uneven, step) == pytest.approx(2000 / (1600 / 150 + 400 / 50))
    uneven.startup_s_median = 1.0  # paid every epoch, the model waiting
    assert verdict.predicted_fed(uneven, step) == pytest.approx(2000 / (1 + 1600 / 150 + 400 / 50))
    uneven.epoch_samples, uneven.epoch_worker_samples = None, []  # length unknown: no start-up charged, one phase
    assert verdict.predicted_fed(uneven, step) == pytest.approx(150)
    busy = loader(200, 4, 2)  # 10 ms of CPU a sample for the loader, 5 for the step, on 2 cores: 133 samples/s
    busy.cpu_cores_busy_median, busy.env = 2.0, {"cpu_count": 2}
    assert verdict.predicted_fed(busy, StepResult(samples_per_s=150.0, cpu_cores_busy_median=0.75)) == \
        pytest.approx(2 / (0.01 + 0.005))


def test_configs_are_ranked_by_what_a_training_epoch_gets():
    """A trial whose steady rate timed no reads (a shuffle buffer) is ranked by its epoch rate;
    persistent workers win where the start-up every epoch pays is large."""
    hidden = loader(12000, 2, 4)
    hidden.training_samples_per_s, hidden.steady_valid = 2000.0, False
    plain = loader(5000, 0)
    plain.training_samples_per_s = 2600.0
    assert cfg_of(verdict.recommend([hidden, plain]).pick) == (0, None)
    fresh, kept = loader(400, 4, 2), loader(400, 4, 2)
    kept.config["persistent_workers"] = True
    fresh.training_samples_per_s, kept.training_samples_per_s = 250.0, 395.0
    rec = verdict.recommend([fresh, kept])
    assert rec.pick is kept and rec.pick_config.persistent_workers


def test_a_trial_predicted_to_beat_every_fed_config_keeps_the_fed_pick_from_standing():
    step = StepResult(samples_per_s=80.0)
    w2, w6 = loader(33, 2, 2), loader(100, 6, 2)
    runs = [fed(w2, 33, 0.58), fed(w2, 33, 0.58, 2)]
    rec = verdict.recommend([w2, w6, *runs], step)
    assert not rec.confirmed and rec.pick is w6 and rec.outcome == "feeds"
    rec = verdict.recommend([w2, *runs], step)
    assert rec.confirmed and rec.pick is w2 and rec.outcome == "input_bound"


def test_the_fullest_variant_turns_on_every_knob_the_variants_try():
    t = loader(600, 4, 2)
    t.startup_s_median, t.epoch_estimate_s = 1.0, 10.0
    c = verdict.fullest(t, "cuda:0")
    assert (c.pin_memory, c.persistent_workers, c.num_workers) == (True, True, 4)
    assert (verdict.fullest(t, "cpu").pin_memory, verdict.fullest(t, "cpu").persistent_workers) == (False, True)
    t.startup_s_median = 0.1  # a short start: persistence gains nothing, pinning still does on CUDA
    assert (verdict.fullest(t, "cuda:0").pin_memory, verdict.fullest(t, "cuda:0").persistent_workers) == (True, False)
    assert verdict.fullest(t, "cpu") == t.loader_config


def test_variants_tried_fed_and_what_they_gain():
    t = loader(600, 4, 2)
    t.startup_s_median, t.epoch_estimate_s = 1.0, 10.0
    # on CUDA persistent workers are tried on the pinned config: what a GPU script runs
    assert [(c.pin_memory, c.persistent_workers) for c in verdict.variants(t, "cuda:0")] == [(True, False),
                                                                                             (True, True)]
    assert [(c.pin_memory, c.persistent_workers) for c in verdict.variants(t, "cpu")] == [(False, True)]
    t.ttfb_s_median = 0.4  # the time to the first batch, where the record has it, says whether the start is short
    assert verdict.variants(t, "cpu") == []
    t.ttfb_s_median = float("nan")
    t.startup_s_median = 0.1
    assert verdict.variants(t, "cpu") == []
    step = StepResult(samples_per_s=250.0)
    pinned = LoaderConfig(**{**t.config, "pin_memory": True})
    runs = [fed(t, 200, 0.2), fed(t, 200, 0.2, 2)]
    vs = [E2EResult(config=pinned.__dict__, config_key=pinned.key(), samples_per_s=240, data_stall_fraction=0.04,
                    confirm_round=k, batch_size=32, steps_per_repeat=20, repeats=3, variant_of=t.config_key)
          for k in (1, 2)]
    rec = verdict.recommend([t, *runs, *vs], step)
    assert rec.confirmed and rec.pick is t and rec.pick_config.pin_memory and rec.fed_samples_per_s == 240
    assert rec.gains == [f"pin_memory=True fed 240 samples/s against 200 (+20%) on {t.loader_config.short()}"]
    ans = verdict.answer(rec)
    assert ans[0] == ("answer: DataLoader(dataset, batch_size=32, num_workers=4, prefetch_factor=2, "
                      "persistent_workers=False, pin_memory=True)")
    assert ans[1] == ("expect: 240 samples/s fed mid-epoch, training waiting on data 4% of the time; over whole fed "
                      "runs 240 (rounds 240-240)")
    both = LoaderConfig(**{**t.config, "pin_memory": True, "persistent_workers": True})
    vs2 = [E2EResult(config=both.__dict__, config_key=both.key(), samples_per_s=246, data_stall_fraction=0.02,
                     confirm_round=k, batch_size=32, steps_per_repeat=20, repeats=3, variant_of=t.config_key)
           for k in (1, 2)]
    rec = verdict.recommend([t, *runs, *vs, *vs2], step)
    assert rec.pick_config == both and rec.fed_samples_per_s == 246  # 2.5% above pinned: beyond the 2% tie
    # each variant against the fed config one knob away: pinned persistent against pinned, not against the own
    assert rec.gains == [f"pin_memory=True fed 240 samples/s against 200 (+20%) on {t.loader_config.short()}",
                         f"persistent_workers=True fed 246 samples/s against 240 (+2%) on {pinned.short()}"]
    # a budget that fed the two variants only: one line, persistent against pinned, not its mirror
    rec = verdict.recommend([t, *vs, *vs2], step)
    assert rec.gains == [f"persistent_workers=True fed 246 samples/s against 240 (+2%) on {pinned.short()}"]


def test_the_model_takes_fed_batches_at_the_step_plus_their_copy():
    """On CUDA the fed loop copies every batch to the device, which the step alone (a batch already there) does
    not: a 100 ms step on 256 samples (2,560 samples/s) whose input is 0.5 MiB a sample (128 MiB a batch), at
    0.21875 ms a MiB pageable (28 ms a batch), takes 2,000 samples/s; at 0.01875 pinned (2.4 ms) 2,500. A
    loader whose samples are a quarter of that (uint8, not float32) copies a quarter; DALI hands over batches on
    the device; a CPU step has no copy."""
    step = StepResult(samples_per_s=2560.0, batch_size=256, device="cuda:0", h2d_pinned_ms_per_mib=0.01875,
                      h2d_pageable_ms_per_mib=0.21875, input_mib_per_sample=0.5)
    assert verdict.model_rate(step, {"pin_memory": False}) == pytest.approx(2000)
    assert verdict.model_rate(step, {"pin_memory": True}) == pytest.approx(2500)
    assert verdict.model_rate(step, {"pin_memory": False}, 0.125) == pytest.approx(1 / (1 / 2560 + 7 / 256000))
    assert verdict.model_rate(step, {"pin_memory": False, "backend": "dali"}) == pytest.approx(2560)
    assert verdict.model_rate(StepResult(samples_per_s=2560.0, batch_size=256), {}) == pytest.approx(2560)
    t = loader(5000, 8, 2)  # a loader twice as fast as any of them: fed at the model's rate, copy included
    assert verdict.predicted_fed(t, step) == pytest.approx(2000)
    assert verdict.predicted_fed(t, step, LoaderConfig(**{**t.config, "pin_memory": True})) == pytest.approx(2500)
    assert not verdict.feeds(loader(2300, 8, 2), step, 1.2) and verdict.feeds(loader(2400, 8, 2), step, 1.2)


def test_an_epoch_start_costs_the_time_to_the_first_batch_and_the_first_batches_at_the_model_rate():
    """4 workers of 25 samples/s each (100 together), batches of 10, 1,000 samples an epoch, the first batch at
    0.5 s (every worker has built one by then). A model of 50 samples/s: 0.5 + 1000 / 50 = 20.5 s. A model of 200:
    the 40 samples of the first batches take 0.2 s, the other 960 come at the loader's 100: 0.5 + 0.2 + 9.6 =
    10.3 s (the intercept of the old rule credited the burst the model cannot eat as fast)."""
    t = loader(100, 4, 2)
    t.config["batch_size"], t.epoch_samples, t.ttfb_s_median, t.startup_s_median = 10, 1000, 0.5, 0.1
    assert verdict.predicted_fed(t, StepResult(samples_per_s=50.0)) == pytest.approx(1000 / 20.5)
    assert verdict.predicted_fed(t, StepResult(samples_per_s=200.0)) == pytest.approx(1000 / 10.3)
    # a steady rate that is not valid (too few batches a worker): the flow rate after the first batches, 80
    t.steady_valid, t.flow_samples_per_s_median, t.training_samples_per_s = False, 80.0, 70.0
    assert verdict.predicted_fed(t, StepResult(samples_per_s=200.0)) == pytest.approx(1000 / (0.5 + 0.2 + 12))
    t.flow_samples_per_s_median = float("nan")  # a record without it: one phase at the training rate
    assert verdict.predicted_fed(t, StepResult(samples_per_s=200.0)) == pytest.approx(70)
    t.steady_valid, t.ttfb_s_median = True, float("nan")  # without ttfb: the start-up beyond steady, no burst
    assert verdict.predicted_fed(t, StepResult(samples_per_s=200.0)) == pytest.approx(1000 / 10.1)


def test_uneven_loads_after_the_first_batches_keep_each_workers_rate():
    """Loads 64, 32, 32, 32 in batches of 32 on 4 workers of 10 samples/s each (steady 40), a model of 1,000: the
    first batches (128 samples) take 0.128 s after the 0.8 s start, then the one worker with a second batch
    reads it at its own 10 samples/s (3.2 s), not at the whole loader's 40."""
    assert verdict.fed_epoch_s([64, 32, 32, 32], 40.0, 0.8, 1000.0, 32) == pytest.approx(0.8 + 0.128 + 3.2)


def test_persistent_workers_fed_as_a_variant_skip_the_start_not_the_refill():
    """A non-persistent trial whose first batch takes 2 s (the workers' start and one batch each); kept workers
    pay only the batch: 4 workers x 10 samples at 100 samples/s, 0.4 s. 1,000 samples, a model of 50: 2 + 20 s
    for the trial's own config, 0.4 + 20 s for the persistent variant."""
    t = loader(100, 4, 2)
    t.config["batch_size"], t.epoch_samples, t.ttfb_s_median = 10, 1000, 2.0
    step = StepResult(samples_per_s=50.0)
    assert verdict.predicted_fed(t, step) == pytest.approx(1000 / 22)
    kept = LoaderConfig(**{**t.config, "persistent_workers": True})
    assert verdict.predicted_fed(t, step, kept) == pytest.approx(1000 / 20.4)


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


def fed(trial, sps, stall, rnd=1, host_ms=10.0, effects=()):
    """A confirmation run (e2e record of sweep --confirm) of a trial's config: 20 steps x 3 repeats of 32."""
    return E2EResult(config=trial.config, config_key=trial.config_key, samples_per_s=sps, data_stall_fraction=stall,
                     confirm_round=rnd, step_host_ms_median=host_ms, effects=list(effects), batch_size=32,
                     steps_per_repeat=20, repeats=3)


def test_confirmed_pick_is_the_cheapest_within_2pct_of_the_best_fed_rate():
    """Separately w=4 and w=8 feed; fed, w=2 (1.9% below the best) counts as as fast, w=1 does not."""
    w1, w2, w4, w8 = loader(100, 1, 2), loader(300, 2, 2), loader(600, 4, 2), loader(900, 8, 2)
    step = StepResult(samples_per_s=250.0)
    runs = [fed(w1, 100, 0.6), fed(w1, 100, 0.6, 2), fed(w2, 157, 0.02), fed(w2, 157, 0.02, 2),
            fed(w4, 160, 0.0), fed(w4, 160, 0.0, 2), fed(w8, 158, 0.01), fed(w8, 158, 0.01, 2)]
    rec = verdict.recommend([w1, w2, w4, w8, *runs], step)
    assert rec.confirmed and cfg_of(rec.pick) == (2, 2) and rec.outcome == "feeds" and not rec.input_bound
    assert rec.fed_samples_per_s == 157 and rec.fed_stall_fraction == 0.02
    assert [cfg_of(f.trial) for f in rec.fed] == [(1, 2), (2, 2), (4, 2), (8, 2)]  # cheapest first
    assert [len(f.runs) for f in rec.fed] == [2, 2, 2, 2]
    runs[2].samples_per_s = runs[3].samples_per_s = 150  # 6% below: no longer as fast
    assert cfg_of(verdict.recommend([w1, w2, w4, w8, *runs], step).pick) == (4, 2)
    # every config fed still leaves the model idle: input-bound as measured, the best fed config picked
    starved = [fed(w4, 120, 0.3), fed(w4, 120, 0.3, 2), fed(w8, 130, 0.25), fed(w8, 130, 0.25, 2)]
    rec = verdict.recommend([w1, w4, w8, *starved], step)
    assert rec.confirmed and rec.outcome == "input_bound" and rec.input_bound and cfg_of(rec.pick) == (8, 2)


def test_a_trial_not_fed_outshines_the_fed_best_only_by_its_prediction_against_the_fed_ones():
    """Predictions 20% above every fed run (the H200: w=16 predicted 1,815, fed 1,506; w=20 predicted 1,764):
    the unfed w=20 is predicted below the fed w=16, so the fed pick stands; predicted 6% above it, it does not."""
    w16, w20 = loader(1815, 16, 2), loader(1764, 20, 2)
    step = StepResult(samples_per_s=2186.0)
    runs = [fed(w16, 1506, 0.28), fed(w16, 1506, 0.28, 2)]
    rec = verdict.recommend([w16, w20, *runs], step)
    assert not verdict.outshone(rec.fed, verdict.by_prediction([w16, w20], step), step)
    assert rec.confirmed and cfg_of(rec.pick) == (16, 2) and rec.fed_samples_per_s == 1506 and rec.input_bound
    w20.samples_per_s_median = w20.samples_per_s_min = w20.samples_per_s_max = 1815 / 0.94
    rec = verdict.recommend([w16, w20, *runs], step)
    assert not rec.confirmed and cfg_of(rec.pick) == (20, 2)  # the pick rests on the predictions: w=20 to feed


def test_plain_e2e_runs_are_not_confirmations():
    w4 = loader(600, 4, 2)
    run = fed(w4, 10, 0.9)
    run.confirm_round = None  # a standalone `dataperf e2e` appended to the same file
    rec = verdict.recommend([w4, run], StepResult(samples_per_s=250.0))
    assert not rec.confirmed and rec.fed == [] and rec.outcome == "feeds"


def test_confirm_candidates_are_the_cheapest_feeding_then_the_fastest_predicted():
    rs = [loader(90, 0), loader(130, 1, 2), loader(125, 1, 4), loader(400, 4, 8), loader(300, 2, 2)]
    step = StepResult(samples_per_s=100.0)
    assert [cfg_of(r) for r in verdict.confirm_candidates(rs, step, 1.2, 2)] == [(1, 2), (1, 4)]
    assert [cfg_of(r) for r in verdict.confirm_candidates(rs, step, 1.2, 6)] == [(1, 2), (1, 4), (2, 2), (4, 8),
                                                                                (0, None)]
    assert [cfg_of(r) for r in verdict.confirm_candidates(rs, StepResult(samples_per_s=1e4), 1.2, 2)] == \
        [(4, 8), (2, 2)]


def test_binding_limit_is_the_model_when_fed_and_never_beside_input_bound():
    rs = [loader(130, 1, 2), loader(400, 4, 8)]
    mine = LimitsResult(config_key=rs[0].config_key, binding_limit="decode", decode_samples_per_s=150.0)
    other = LimitsResult(config_key=rs[1].config_key, binding_limit="model", model_samples_per_s=1000.0,
                         decode_samples_per_s=410.0, decode_how="2 cores / 4.9 ms")
    rec = verdict.recommend([*rs, other, mine], StepResult(samples_per_s=100.0))
    # the record's lowest ceiling is decode, but the pick feeds the model: the model binds
    assert cfg_of(rec.pick) == (1, 2) and rec.binding_limit == "model" and rec.limits is mine
    rec = verdict.recommend([*rs, other], StepResult(samples_per_s=1000.0))  # input-bound: the best is picked
    # the record names the model; the verdict, input-bound, names the loader's lowest ceiling the rate reaches
    assert cfg_of(rec.pick) == cfg_of(rec.best) == (4, 8) and rec.input_bound
    assert rec.binding_limit == "decode" and rec.binding.samples_per_s == 410.0
    assert "reaches 98% of it" in rec.binding.sentence


def test_a_shortfall_no_measured_ceiling_explains_is_said_with_its_evidence():
    def staged(sps, w, worker_ms, busy):
        r = loader(sps, w, 2)
        r.stage_ms_per_sample, r.cpu_cores_busy_median = {"transform": worker_ms}, busy
        return r

    # a lock: one worker 26 ms a sample, six 63 ms at the same CPU a sample; the rate flat at 95
    rs = [staged(38, 1, 26.0, 0.01), staged(95, 6, 63.0, 0.025)]
    lim = LimitsResult(config_key=rs[1].config_key, per_worker_samples_per_s=38.0, decode_samples_per_s=8000.0)
    rec = verdict.recommend([*rs, lim], StepResult(samples_per_s=200.0))
    assert rec.input_bound and rec.binding_limit == verdict.UNMEASURED
    assert "a limit dataperf does not measure" in rec.binding.sentence and "26.0 ms at 1 worker" in rec.binding.sentence
    assert rec.attack.startswith("find what the workers share")


def test_effects_predicted_from_the_separate_measurements():
    """Each effect from records built to show it, and none on a plain config."""
    step = StepResult(samples_per_s=100.0, cpu_cores_busy_median=1.0, device="cpu")
    plain = loader(400, 4, 2)
    assert verdict.loader_effects(plain, step) == []
    idle = loader(400, 4, 2)
    idle.active_workers, idle.shards = 1, 1
    e, = verdict.loader_effects(idle, step)
    assert e.name == "idle_workers" and "only 1 of 4 workers" in e.sentence and "--shards 4" in e.sentence
    restarts = loader(400, 4, 2)  # 48 samples: 0.12 s at the steady rate, 0.5 s start-up; the step needs 0.48 s
    restarts.epoch_samples, restarts.startup_s_median = 48, 0.5
    e, = verdict.loader_effects(restarts, step)
    assert e.name == "epoch_restarts" and e.stall_fraction == pytest.approx(1 - 0.48 / (0.48 + 0.5))
    restarts.config["persistent_workers"] = True
    assert verdict.loader_effects(restarts, step) == []
    cpu = loader(400, 4, 2)  # 4 ms of CPU a sample: at the step's 100 samples/s 0.4 cores, + 1 for the step
    cpu.cpu_cores_busy_median, cpu.env = 1.6, {"cpu_count": 2}
    assert verdict.loader_effects(cpu, step) == []
    cpu.cpu_cores_busy_median = 5.0  # 12.5 ms a sample: 1.25 cores + 1
    e, = verdict.loader_effects(cpu, step)
    assert e.name == "shared_cpu" and "needs 1.2 cores" in e.sentence
    inline = loader(400, 0)
    inline.cpu_cores_busy_median, inline.env = 5.0, {"cpu_count": 2}
    assert verdict.loader_effects(inline, step) == []
    dali = LoaderResult(config={"backend": "dali", "dali_decode_device": "mixed", "decode": True},
                        samples_per_s_median=400.0)
    assert verdict.loader_effects(dali, step) == []
    e, = verdict.loader_effects(dali, StepResult(samples_per_s=100.0, device="cuda:0"))
    assert e.name == "shared_gpu"


def test_effects_measured_in_a_fed_run():
    """A starved training process (fed step host time 3x alone), restarts that move the prediction, DALI's GPU
    decode slowing the fed compute; and a run that matches its prediction names none."""
    trial = loader(400, 4, 2)
    run = E2EResult(config=trial.config, batch_size=32, step_samples_per_s=320.0, loader_samples_per_s=400.0,
                    predicted_stall_fraction=0.0, data_stall_fraction=0.02, step_host_ms_median=100.0,
                    compute_ms_median=100.0)
    assert verdict.fed_effects(run, trial, None) == []  # 100 ms fed, 32 / 320 = 100 ms alone
    run.step_host_ms_median = 300.0
    e, = verdict.fed_effects(run, trial, None)
    assert e.name == "shared_cpu" and "300.0 ms" in e.sentence and "100.0 ms alone" in e.sentence
    assert verdict.fed_effects(run, trial, StepResult(step_ms_max=250.0)) == []  # within the step's own spread
    inline = loader(400, 0)
    run.config = inline.config  # no workers: loading runs between the steps, not beside them
    assert verdict.fed_effects(run, inline, None) == []
    run.config = trial.config
    run.step_host_ms_median, run.epoch_restarts, run.predicted_stall_fraction = 100.0, 3, 0.4
    run.loader_startup_s = 0.5
    e, = verdict.fed_effects(run, trial, None)
    assert e.name == "epoch_restarts" and e.stall_fraction == 0.4
    dali = LoaderResult(config={"backend": "dali", "dali_decode_device": "mixed"})
    gpu = E2EResult(config=dali.config, device="cuda", batch_size=32, step_samples_per_s=320.0,
                    loader_samples_per_s=1000.0, predicted_stall_fraction=0.0, data_stall_fraction=0.01,
                    step_host_ms_median=5.0, compute_ms_median=100.0)
    assert verdict.fed_effects(gpu, dali, None) == []
    gpu.compute_ms_median = 120.0
    assert [e.name for e in verdict.fed_effects(gpu, dali, None)] == ["shared_gpu"]


def test_report_takes_the_lower_bound_from_the_sweeps_own_decision():
    """A results file does not hold the plan a lower bound rests on: the sweep's decision record gives it, but only
    while it decided on the same records (same pick, same trial count)."""
    w1, w2 = loader(100, 1, 2), loader(150, 2, 2)
    step = StepResult(samples_per_s=1000.0)
    rec = verdict.recommend([w1, w2], step)
    assert rec.input_bound and not rec.lower_bound
    d = DecisionResult(command="sweep", config_key=rec.pick_config.key(), trials=2, lower_bound=True,
                       lower_bound_why="the best is the largest of the --num-workers given; try 3 and more")
    verdict.saved_bound(rec, [w1, w2, d])
    assert rec.lower_bound and "try 3" in rec.lower_bound_why
    later = verdict.recommend([w1, w2, d, loader(400, 3, 2)], step)  # a trial appended since: the record is stale
    verdict.saved_bound(later, [w1, w2, d, loader(400, 3, 2)])
    assert not later.lower_bound


@pytest.mark.parametrize("backend, knobs", [("files", {"num_workers": 16}), ("dali", {"dali_num_threads": 16})])
def test_cores_taken_counts_a_backends_own_workers(backend, knobs):
    """16 workers (DALI: 16 threads, with num_workers 0) on 16 usable cores, each sample keeping its core busy:
    more could only share those cores. With 8 of them, or samples that mostly wait, they are not taken."""
    cfg = LoaderConfig(backend=backend, batch_size=8, decode=True, **knobs).explicit()
    trial = LoaderResult(data="d", config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=100.0,
                         env={"cpu_count": 16})
    lim = LimitsResult(data="d", config=cfg.__dict__, config_key=cfg.key(), usable_cores=16,
                       decode_cpu_ms_per_sample=5.95, decode_wall_ms_per_sample=6.09)
    assert verdict.cores_taken(trial, lim)
    lim.decode_cpu_ms_per_sample = 1.0
    assert not verdict.cores_taken(trial, lim)
    lim.decode_cpu_ms_per_sample = 5.95
    half = {k: 8 for k in knobs}
    trial.config = LoaderConfig(backend=backend, batch_size=8, decode=True, **half).explicit().__dict__
    assert not verdict.cores_taken(trial, lim)


def test_the_epoch_start_is_its_own_finding_as_a_share_of_the_users_epoch():
    """A loader that feeds the model mid-epoch (2 workers, 100 samples/s against 50) but makes it wait 1 s for
    its first batch every epoch: over an epoch of its 200 samples (4 s at 50/s) that is 20%, its own finding,
    not INPUT-BOUND; over the user's epoch of 10,000 samples (--epoch-samples) 0.5%, no finding."""
    t = loader(100, 2, 2)
    t.ttfb_s_median, t.epoch_samples = 1.0, 200
    rec = verdict.recommend([t], StepResult(samples_per_s=50.0))
    assert rec.outcome == "feeds" and rec.epoch_start_s == 1.0
    assert rec.epoch_start_fraction == pytest.approx(0.2)
    assert any(f.startswith("epoch start: each epoch start keeps the model waiting 1.00 s") and
               "persistent_workers=True" in f for f in rec.findings)
    rec = verdict.recommend([t], StepResult(samples_per_s=50.0), epoch_samples=10_000)
    assert rec.epoch_start_fraction == pytest.approx(1 / 201) and not any("epoch start" in f for f in rec.findings)


def cuda_fed(trial, cfg, sps, steady, idle, rnd=1):
    """A confirmation run on CUDA of `cfg` (a pinned variant of the trial's config), its steady figures given."""
    return E2EResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s=sps, data_stall_fraction=idle,
                     steady_samples_per_s=steady, steady_stall_fraction=idle, confirm_round=rnd, device="cuda",
                     batch_size=256, steps_per_repeat=20, repeats=3,
                     variant_of=trial.config_key if cfg.key() != trial.config_key else None)


def test_a_cuda_run_at_the_models_own_rate_feeds_whatever_idle_its_events_read():
    """The H100, ResNet-50 fp32 (issue 50): fed at 1,848 samples/s mid-epoch against 1,852 alone, CUDA events read
    the GPU idle 7% (the gaps between a step's last kernel and the next copy, which the step alone pays too), and
    the unmodified ImageNet script ran flat from 8 to 16 workers: fed, the model binds. The judged wait is the
    smaller of the two: at 1,500 (19% short) with the events' 30% it is 19%, with the events' 2% it is 2% (the
    step ran slower, the data did not keep it waiting). On the CPU the host wait is the wait."""
    step = StepResult(samples_per_s=1852.0, batch_size=256, device="cuda:0")
    t = loader(2400, 16, 2)
    pinned = LoaderConfig(**{**t.config, "pin_memory": True})
    rec = verdict.recommend([t, cuda_fed(t, pinned, 1413, 1848, 0.066), cuda_fed(t, pinned, 1413, 1848, 0.066, 2)],
                            step)
    assert rec.confirmed and rec.outcome == "feeds" and rec.binding_limit == "model"
    assert rec.steady_stall_fraction == pytest.approx(1 - 1848 / 1852)
    rec = verdict.recommend([t, cuda_fed(t, pinned, 1300, 1500, 0.02), cuda_fed(t, pinned, 1300, 1500, 0.02, 2)],
                            step)
    assert rec.outcome == "feeds" and rec.steady_stall_fraction == pytest.approx(0.02)
    rec = verdict.recommend([t, cuda_fed(t, pinned, 1300, 1500, 0.3), cuda_fed(t, pinned, 1300, 1500, 0.3, 2)],
                            step)
    assert rec.input_bound and rec.steady_stall_fraction == pytest.approx(1 - 1500 / 1852)
    cpu = [fed(t, 1848, 0.066), fed(t, 1848, 0.066, 2)]
    for r in cpu:
        r.steady_samples_per_s, r.steady_stall_fraction = 1848.0, 0.066
    assert verdict.recommend([t, *cpu], StepResult(samples_per_s=1852.0)).input_bound


def test_on_a_gpu_the_answer_pins_where_pinned_copies_make_the_model_faster():
    """Loader trials run unpinned; on CUDA the pick is judged and answered as the user runs it, pinned (the
    H100: pin_memory=False answered, 1,657 samples/s expected, where pinned fed runs gave 1,807-1,842). The model
    binding says its rate alone and with the config's copies."""
    step = StepResult(samples_per_s=2560.0, batch_size=256, device="cuda:0", h2d_pinned_ms_per_mib=0.01875,
                      h2d_pageable_ms_per_mib=0.21875, input_mib_per_sample=0.5)
    rs = [loader(3100, 8, 2), loader(3500, 12, 2)]
    rec = verdict.recommend(rs, step, 1.2)
    assert rec.pick_config.pin_memory and rec.predicted_samples_per_s == pytest.approx(2500)
    # 3,100 is 1.24x the pinned model's 2,500: the cheapest with headroom as pinned (unpinned it had 1.55x)
    assert cfg_of(rec.pick) == (8, 2) and rec.outcome == "feeds"
    assert "2,560 samples/s alone, 2,000 with" in rec.binding.sentence
    rec = verdict.recommend(rs, StepResult(samples_per_s=2560.0, batch_size=256), 1.2)  # the CPU: nothing to pin
    assert not rec.pick_config.pin_memory


def test_the_decision_states_the_epoch_start_once():
    """The loader trial's own restart estimate ("epoch restarts: ... use --persistent-workers") is not said beside
    the decision's epoch start (the H100: 0.81 s each beside "each epoch start 2.7 s", the pick persistent)."""
    t = loader(200, 4, 2)
    t.startup_s_median, t.ttfb_s_median, t.epoch_samples = 3.0, 3.0, 400
    step = StepResult(samples_per_s=100.0)
    assert any(e.name == "epoch_restarts" for e in verdict.loader_effects(t, step))
    rec = verdict.recommend([t], step, epoch_samples=400)
    assert rec.epoch_start_s == pytest.approx(3.0)
    assert not any(e.name == "epoch_restarts" for e in rec.effects)
    assert any(f.startswith("epoch start:") for f in rec.findings)
