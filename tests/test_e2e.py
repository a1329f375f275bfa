import pytest

from dataperf.e2e import fed_loader_rate, in_flight_samples, run_e2e
from dataperf.records import LoaderConfig
from dataperf.runner import TrialOptions
from dataperf.step import StepOptions
from dataperf.verdict import restart_stall


def test_e2e_on_cpu_stall_is_host_wait_and_prediction_pays_restarts(datasets):
    """On CPU the step is synchronous: device idle is host wait. 96 samples at batch 8 = 12 batches an epoch,
    so 1 + 3 x 6 steps cross at least one epoch end, and the prediction must pay those restarts."""
    cfg = LoaderConfig(format="webdataset", batch_size=8, num_workers=1, image_size=32)
    r = run_e2e(datasets["image-webdataset"], cfg, StepOptions(model="cnn-small"), steps=6, repeats=3, warmup=1,
                topts=TrialOptions(repeats=3, min_batches=3, warmup_batches=1, collect=False))
    assert r.data_stall_fraction_repeats == r.host_wait_fraction_repeats
    assert r.gpu_idle_fraction is None and r.stall_basis.startswith("host wait")
    assert r.epoch_restarts >= 1
    expected = fed_loader_rate(r.loader_samples_per_s, r.loader_startup_s, 6 * 8, r.epoch_restarts / 3)
    assert r.predicted_loader_samples_per_s == pytest.approx(expected)
    assert r.predicted_loader_samples_per_s < r.loader_samples_per_s  # restarts cost start-up
    assert r.predicted_stall_fraction == pytest.approx(
        restart_stall(r.loader_samples_per_s, r.loader_startup_s, 6 * 8, r.epoch_restarts / 3, r.step_samples_per_s))


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


def test_e2e_on_tokens_pads_batches(datasets):
    cfg = LoaderConfig(format="files", batch_size=4, num_workers=0, cap_tokens=64)
    r = run_e2e(datasets["tokens-files"], cfg, StepOptions(model="gpt-tiny"), steps=3, repeats=3, warmup=1,
                predict=False)
    assert r.padded_seq_len_mean is not None and r.padded_seq_len_mean <= 64


@pytest.mark.parametrize("workers", [0, 2])
def test_e2e_prepares_and_verifies_the_cache_as_a_loader_trial_does(datasets, workers):
    """Cold: every repeat evicts and then reads its samples' files from storage (those already in flight at
    its start excepted), so it is verified cold; warm: pre-read, so it reads (almost) nothing."""
    tiny = StepOptions(model="tests.tiny_models:tiny")
    for cache in ("cold", "warm"):
        cfg = LoaderConfig(format="files", batch_size=4, num_workers=workers, image_size=16, cache=cache)
        r = run_e2e(datasets["image-files"], cfg, tiny, steps=8, repeats=3, warmup=1, predict=False)
        assert r.cache_verified is True, (cache, r.notes)
        assert not any("NOT verified" in n for n in r.notes)


def test_e2e_cold_on_memory_is_not_verified(datasets, monkeypatch):
    """Eviction that leaves the files resident (as on tmpfs) is named, never reported as cold."""
    from dataperf import cache

    monkeypatch.setattr(cache, "evict", lambda paths, drop=False: [])
    cfg = LoaderConfig(format="files", batch_size=4, num_workers=0, image_size=16, cache="cold")
    r = run_e2e(datasets["image-files"], cfg, StepOptions(model="tests.tiny_models:tiny"), steps=4, repeats=2,
                warmup=1, predict=False)
    assert r.cache_verified is False and any(n.startswith("cold cache NOT verified") for n in r.notes)


def test_in_flight_samples():
    assert in_flight_samples(LoaderConfig(batch_size=8, num_workers=0)) == 0
    assert in_flight_samples(LoaderConfig(batch_size=8, num_workers=2).explicit()) == 32
    assert in_flight_samples(LoaderConfig(format="dali", batch_size=8, dali_prefetch_queue_depth=3)) == 24


def test_warmup_covers_the_batches_the_workers_queue_ahead(datasets):
    """2 workers x prefetch 4 hold 8 batches ready when the loop starts: a warm-up of 1 would let the first
    timed steps eat that head start and read no stall, so it is raised to 8 and said; 1 worker x 1 is not."""
    tiny = StepOptions(model="tests.tiny_models:tiny", image_size=8)
    cfg = LoaderConfig(format="files", batch_size=4, num_workers=2, prefetch_factor=4, image_size=8)
    r = run_e2e(datasets["image-files"], cfg, tiny, steps=3, repeats=2, warmup=1, predict=False)
    assert "warm-up raised from 1 to 8 steps" in " ".join(r.notes)
    r = run_e2e(datasets["image-files"], LoaderConfig(format="files", batch_size=4, num_workers=1, prefetch_factor=1,
                                                      image_size=8), tiny, steps=3, repeats=2, warmup=1, predict=False)
    assert not any("warm-up raised" in n for n in r.notes)
