import pytest

from dataperf.data import user_dataset
from dataperf.measure.step import StepOptions
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig
from dataperf.verdict import restart_stall
from dataperf.workflows.e2e import fed_loader_rate, in_flight_samples, run_e2e


@pytest.fixture
def paced(monkeypatch):
    """Known-answer settings for paced.py, set before any DataLoader worker starts (workers inherit them)."""

    def setenv(**kw: float) -> None:
        for k, v in kw.items():
            monkeypatch.setenv(f"PACED_{k}", str(v))

    return setenv


@pytest.mark.slow
def test_e2e_reads_the_analytic_stall_rate_and_prediction(paced, one_thread):
    """Loader: 2 workers x 8-sample batches x 50 ms a sample (paced) = 40 samples/s, a batch every 100 ms. Model:
    busy exactly 100 ms a step of 8 (paced.FixedStep) = 80 samples/s. The device idles 1 - 40/80 = 50% of the
    run, fed at 40 samples/s; the loader and the step measured apart read 40 and 80 and predict the same 50%.
    4,000 samples: no epoch ends, so nothing restarts. On CPU the stall is the host's wait."""
    paced(T=0.05, N=4000, STEP_S=0.1)
    b, w = 8, 2
    cfg = LoaderConfig(backend="user-dataset", batch_size=b, num_workers=w)
    sopts = StepOptions(model="paced:fixed_step_model", batch_size=b, image_size=8)
    # 8 batches a repeat, 3 intervals a worker: beside two busy loops the loader alone read 42.1 (the steady
    # rate's per-worker windows on short repeats read high under load, docs/measurement/trial.md); 16 halve that
    topts = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, max_batches=16, collect=False)
    r = run_e2e(user_dataset("paced:sleep_map"), cfg, sopts, steps=10, repeats=3, warmup=1, topts=topts)
    assert r.gpu_idle_fraction is None and r.stall_basis.startswith("host wait")
    assert r.epoch_restarts == 0 and r.effects == [], r.notes
    assert r.data_stall_fraction == pytest.approx(0.5, abs=0.05), r.data_stall_fraction_repeats
    assert r.samples_per_s == pytest.approx(40, rel=0.05), r.samples_per_s_repeats
    assert r.loader_samples_per_s == pytest.approx(40, rel=0.05)
    assert r.step_samples_per_s == pytest.approx(80, rel=0.05)
    assert r.predicted_stall_fraction == pytest.approx(0.5, abs=0.05)


@pytest.mark.slow
def test_e2e_headline_is_pooled_over_the_run_where_an_epoch_tail_hits_some_repeats(paced, one_thread):
    """An epoch tail on uneven shards, every phase input-bound so the pooled answer is exact: 640 samples of
    40 ms (paced) in 5 shards of 128 dealt to 4 persistent workers, batch 8: worker 0 reads two shards, the
    others one. While all 4 have data a batch comes from each every 320 ms (100 samples/s); the model is busy
    40 ms a step (paced.FixedStep: 200 samples/s), so it idles half of each 320 ms. Then worker 0 feeds alone, a
    batch every 320 ms: idle 7/8. An epoch: 32 slots of 320 ms (16 of 4 batches, 16 of 1) = 10.24 s for 80
    steps, busy 3.2 s: idle 68.75%, 62.5 samples/s; the next epoch's batches come 320 ms after its iter(), the
    same rhythm (its iter() comes one step after the last batch: 40 ms more in the run). A warm-up of 16 steps
    takes four slots (the workers catch up on their start-up), then 5 repeats of 16 steps time 32 slots:
    repeats 1-3 (phase one) read 50%, repeat 4 (the tail) 87.5%, repeat 5 (the next epoch) about 55%. The median
    repeat reads 50%, the run pooled 68.75%."""
    paced(T=0.04, N=640, SHARDS=5, STEP_S=0.04)
    cfg = LoaderConfig(backend="user-dataset", batch_size=8, num_workers=4, persistent_workers=True)
    sopts = StepOptions(model="paced:fixed_step_model", batch_size=8, image_size=8)
    r = run_e2e(user_dataset("paced:sleep_shards"), cfg, sopts, steps=16, repeats=5, warmup=16, predict=False)
    stalls = r.data_stall_fraction_repeats
    assert r.epoch_restarts == 1 and sorted(stalls)[2] < 0.6, stalls  # the median misses the tail
    assert r.data_stall_fraction == pytest.approx(0.6875, abs=0.05), stalls
    assert r.host_wait_fraction == r.data_stall_fraction
    assert r.samples_per_s == pytest.approx(62.5, rel=0.05), r.samples_per_s_repeats


def test_fed_loader_rate_arithmetic():
    # 100 samples at 50/s take 2 s; one restart of 0.5 s makes it 2.5 s: 40 samples/s
    assert fed_loader_rate(50, 0.5, 100, 1) == pytest.approx(40)
    assert fed_loader_rate(50, 0.5, 100, 0) == pytest.approx(50)


def test_restart_stall_arithmetic():
    # a loader slower than the step: 100 samples take 2.5 s with one restart, the step needs 1 s: 60% idle
    assert restart_stall(50, 0.5, 100, 1, 100) == pytest.approx(0.6)
    # a loader faster than the step: the step sets the pace (1 s), and the 0.5 s start-up is all idle: 1/3
    assert restart_stall(500, 0.5, 100, 1, 100) == pytest.approx(0.5 / 1.5)
    assert restart_stall(500, 0.5, 100, 0, 100) == 0 and restart_stall(50, 0.5, 100, 0, 100) == pytest.approx(0.5)


@pytest.mark.slow
def test_e2e_on_tokens_pads_batches(datasets):
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=0, cap_tokens=64)
    r = run_e2e(datasets["tokens-files"], cfg, StepOptions(model="gpt-tiny"), steps=3, repeats=3, warmup=1,
                predict=False)
    assert r.padded_seq_len_mean is not None and r.padded_seq_len_mean <= 64


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_e2e_prepares_and_verifies_the_cache_as_a_loader_trial_does(datasets, workers):
    """Cold: every repeat evicts and then reads its samples' files from storage (those already in flight at
    its start excepted), so it is verified cold; warm: pre-read, so it reads (almost) nothing."""
    tiny = StepOptions(model="tests.tiny_models:tiny")
    for cache in ("cold", "warm"):
        cfg = LoaderConfig(backend="files", batch_size=4, num_workers=workers, image_size=16, cache=cache)
        r = run_e2e(datasets["image-files"], cfg, tiny, steps=8, repeats=3, warmup=1, predict=False)
        assert r.cache_verified is True, (cache, [n for n in r.notes if "verified" in n])  # the MiB read, whole
        assert not any("NOT verified" in n for n in r.notes)


def test_e2e_cold_on_memory_is_not_verified(datasets, monkeypatch):
    """Eviction that leaves the files resident (as on tmpfs) is named, never reported as cold."""
    from dataperf.measure import cache

    monkeypatch.setattr(cache, "evict", lambda paths, drop=False: [])
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=0, image_size=16, cache="cold")
    r = run_e2e(datasets["image-files"], cfg, StepOptions(model="tests.tiny_models:tiny"), steps=4, repeats=2,
                warmup=1, predict=False)
    assert r.cache_verified is False and any(n.startswith("cold cache NOT verified") for n in r.notes)


def test_in_flight_samples():
    assert in_flight_samples(LoaderConfig(batch_size=8, num_workers=0)) == 0
    assert in_flight_samples(LoaderConfig(batch_size=8, num_workers=2).explicit()) == 32
    assert in_flight_samples(LoaderConfig(backend="dali", batch_size=8, dali_prefetch_queue_depth=3)) == 24


@pytest.mark.slow
def test_warmup_ends_once_nothing_is_queued_and_the_timed_steps_read_the_analytic_rate(paced, one_thread):
    """2 workers x prefetch 4 can queue 8 batches. Input-bound (2 workers x 4 samples x 50 ms: a batch every
    100 ms, the two workers' in a pair; the model busy 50 ms a step of 4): once every worker's first batch is in
    (2 steps) every other step waits 100 ms, past the 50 ms a step computes, and the warm-up ends before 8; the
    timed steps read 40 samples/s and 50% idle. Fed (the model busy 200 ms a step: 20 samples/s): no step
    waits, so all 8 warm up and the model's rate is read."""
    paced(T=0.05, N=4000, STEP_S=0.05)
    cfg = LoaderConfig(backend="user-dataset", batch_size=4, num_workers=2, prefetch_factor=4)
    sopts = StepOptions(model="paced:fixed_step_model", batch_size=4, image_size=8)
    r = run_e2e(user_dataset("paced:sleep_map"), cfg, sopts, steps=10, repeats=3, warmup=1, predict=False)
    note = next(n for n in r.notes if n.startswith("warm-up raised from 1 to "))
    assert int(note.split()[5]) < 8 and "nothing was queued any more" in note, note
    assert r.samples_per_s == pytest.approx(40, rel=0.05), r.samples_per_s_repeats
    assert r.data_stall_fraction == pytest.approx(0.5, abs=0.05), r.data_stall_fraction_repeats
    paced(STEP_S=0.2)
    r = run_e2e(user_dataset("paced:sleep_map"), cfg, sopts, steps=10, repeats=3, warmup=1, predict=False)
    assert "warm-up raised from 1 to 8 steps of at most 8" in " ".join(r.notes), r.notes
    assert r.samples_per_s == pytest.approx(20, rel=0.05), r.samples_per_s_repeats


def test_warmup_covers_the_batches_the_workers_queue_ahead(datasets):
    """2 workers x prefetch 4 hold 8 batches ready when the loop starts: a warm-up of 1 would let the first
    timed steps eat that head start and read no stall, so it is raised to 8 and said; 1 worker x 1 is not."""
    tiny = StepOptions(model="tests.tiny_models:tiny", image_size=8)
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=2, prefetch_factor=4, image_size=8)
    r = run_e2e(datasets["image-files"], cfg, tiny, steps=3, repeats=2, warmup=1, predict=False)
    assert "warm-up raised from 1 to " in " ".join(r.notes) and "of at most 8 (" in " ".join(r.notes)
    r = run_e2e(datasets["image-files"], LoaderConfig(backend="files", batch_size=4, num_workers=1, prefetch_factor=1,
                                                      image_size=8), tiny, steps=3, repeats=2, warmup=1, predict=False)
    assert not any("warm-up raised" in n for n in r.notes)


def test_epoch_aligned_splits_whole_epochs_into_the_repeats():
    """An epoch at most twice the run: the nearest whole number of epochs (at least one), split evenly; a longer
    epoch, or one of unknown length, leaves the run as asked."""
    from dataperf.workflows.e2e import epoch_aligned

    assert epoch_aligned(20, 3, 63) == [21, 21, 21]  # the H200: 16,000 images at batch 256
    assert epoch_aligned(4, 2, 10) == [5, 5]
    assert epoch_aligned(8, 3, 10) == [7, 7, 6]  # 24 steps: 2.4 epochs -> 2, 20 steps
    assert epoch_aligned(10, 3, 4) == [11, 11, 10]  # 30 steps: 7.5 epochs -> 8, 32 steps
    assert epoch_aligned(1, 3, 2) == [2, 1, 1]  # 3 steps: 1.5 epochs -> 2, 4 steps
    assert epoch_aligned(20, 3, 121) == [20, 20, 20] and epoch_aligned(20, 3, None) == [20, 20, 20]


@pytest.mark.parametrize("warmup", [1, 4])
def test_a_fed_run_near_an_epoch_pays_exactly_one_epoch_start_wherever_it_begins(paced, one_thread, warmup):
    """80 paced samples at batch 8 are an epoch of 10 steps; 2 x 4 steps are asked. Before, the 8 timed steps
    held the epoch's start or not by where the warm-up left the stream (with a warm-up of 1-2 steps, none): the
    fed rate of one config read its steady rate and another's paid a restart. Now the run is one whole epoch
    (2 x 5 steps) and pays exactly one start, as an epoch of training does."""
    from dataperf.verdict import run_samples

    paced(T=0.01, N=80, STEP_S=0.01)
    cfg = LoaderConfig(backend="user-dataset", batch_size=8, num_workers=2)
    sopts = StepOptions(model="paced:fixed_step_model", batch_size=8, image_size=8)
    r = run_e2e(user_dataset("paced:sleep_map"), cfg, sopts, steps=4, repeats=2, warmup=warmup, predict=False)
    assert r.status == "ok", r.error
    assert r.steps_repeats == [5, 5] and r.repeats == 2 and run_samples(r) == 80
    assert r.epoch_restarts == 1, r.notes
    assert any("1 whole epoch(s) of 10" in n for n in r.notes), r.notes


@pytest.mark.slow
def test_mid_epoch_and_epoch_start_apart_read_their_known_answers(paced, one_thread):
    """Mid-epoch and epoch start apart (measure.fed.StartSplit). Loader: 2 workers x 10 ms a sample (paced) =
    200 samples/s; model: busy 80 ms a step of 8 (100 samples/s): fed, it never waits mid-epoch. Each epoch (160
    samples, 20 steps) starts fresh workers that sleep 0.5 s (PACED_START) and then build a batch of 8 (80 ms)
    before the model gets one: the model waits at least 0.58 s an epoch start, a sample's worth of which the
    steady rate already counts: the start costs at least 0.5 s beyond it (more: the workers' fork). The whole
    run pooled reads input-bound (3 epochs of 1.6 s + 0.58 s: idle over 25%); mid-epoch it is fed."""
    paced(T=0.01, N=160, STEP_S=0.08, START=0.5)
    cfg = LoaderConfig(backend="user-dataset", batch_size=8, num_workers=2)
    sopts = StepOptions(model="paced:fixed_step_model", batch_size=8, image_size=8)
    r = run_e2e(user_dataset("paced:sleep_map"), cfg, sopts, steps=20, repeats=3, warmup=3, predict=False)
    assert r.epoch_starts_timed == 3 and r.steps_repeats == [20, 20, 20]
    assert r.data_stall_fraction > 0.25, r.data_stall_fraction_repeats
    # tolerance: beside two busy loops each hand-over waits for a core (read 93 and 6% here at load 4)
    assert r.steady_samples_per_s == pytest.approx(100, rel=0.15)
    assert r.steady_stall_fraction < 0.15
    assert 0.5 <= r.epoch_start_s <= 0.58 + 1.0  # the fork's cost on a busy box: a bound, not the answer


def test_a_fed_run_goes_on_while_its_repeats_disagree_until_an_epoch_or_its_cap():
    """FedPlan.until_ci: repeats reading 200, 150 and 210 samples/s (a slow-sample tail) leave the pooled rate's
    95% interval at +-31%: one more repeat of the planned steps; repeats that agree, an epoch timed, or
    MAX_EXTRA x the plan end the run."""
    from dataperf.workflows.e2e import MAX_EXTRA, FedPlan, _extend, _Timed

    def timed(rates: list[float]) -> _Timed:
        t = _Timed()
        t.sps, t.samples, t.wall_s = rates, [int(r) for r in rates], [1.0] * len(rates)
        return t

    plan = FedPlan(steps=20, repeats=3, until_ci=0.05)
    assert _extend(plan, None, None)(timed([200, 150, 210]), [20, 20, 20]) == 20
    assert _extend(plan, None, None)(timed([200, 199, 201]), [20, 20, 20]) == 0
    assert _extend(plan, 60, None)(timed([200, 150, 210]), [20, 20, 20]) == 0  # a whole epoch is timed
    assert _extend(plan, None, None)(timed([200, 150] * 5), [20] * (3 * MAX_EXTRA)) == 0
    assert _extend(FedPlan(steps=20, repeats=3), None, None)(timed([200, 150, 210]), [20, 20, 20]) == 0
