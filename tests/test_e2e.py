from dataperf.e2e import run_e2e
from dataperf.records import LoaderConfig
from dataperf.runner import TrialOptions
from dataperf.step import StepOptions


def test_e2e_measures_stall_and_compares_with_prediction(datasets):
    cfg = LoaderConfig(format="webdataset", batch_size=8, num_workers=1, image_size=32)
    r = run_e2e(datasets["image-webdataset"], cfg, StepOptions(model="cnn-small"), steps=6, repeats=3, warmup=1,
                topts=TrialOptions(repeats=3, min_batches=3, warmup_batches=1, collect=False))
    assert r.repeats == 3 and len(r.data_stall_fraction_repeats) == 3
    assert 0 <= r.data_stall_fraction < 1
    assert r.compute_ms_median > 0 and r.data_wait_ms_median >= 0
    assert r.step_ms_median >= r.compute_ms_median
    assert r.loader_samples_per_s > 0 and r.step_samples_per_s > 0
    assert 0 <= r.predicted_stall_fraction <= 1


def test_slow_loader_shows_as_stall(datasets):
    """Throttled storage and no workers: the model must spend most of its time waiting."""
    cfg = LoaderConfig(format="files", batch_size=8, num_workers=0, image_size=16)
    r = run_e2e(datasets["image-files"], cfg, StepOptions(model="cnn-small"), steps=4, repeats=3, warmup=1,
                predict=False, topts=TrialOptions(throttle_mib_s=0.1))
    assert r.data_stall_fraction > 0.5


def test_e2e_on_tokens_pads_batches(datasets):
    cfg = LoaderConfig(format="files", batch_size=4, num_workers=0, cap_tokens=64)
    r = run_e2e(datasets["tokens-files"], cfg, StepOptions(model="gpt-tiny"), steps=3, repeats=3, warmup=1,
                predict=False)
    assert r.padded_seq_len_mean is not None and r.padded_seq_len_mean <= 64
