"""Real DALI CPU pipelines (device_id=None) on the tiny datasets; CI installs the dali extra."""

import pytest

from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig

dali = pytest.importorskip("nvidia.dali", reason="DALI not installed: pip install 'dataperf[dali]'")

FAST = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False, repeat_seconds=None)  # whole epochs


def dali_cfg(**kw):
    base = dict(backend="dali", batch_size=8, image_size=32, dali_num_threads=2, dali_prefetch_queue_depth=2,
                dali_decode_device="cpu")
    return LoaderConfig(**{**base, **kw})


@pytest.mark.parametrize("name", ["image-webdataset", "image-files"])
def test_dali_decodes_every_image(datasets, name):
    from dataperf.backends.dali import DaliLoader
    from dataperf.data.manifest import read_manifest

    m = read_manifest(datasets[name])
    batches = list(DaliLoader(datasets[name], m, dali_cfg(decode=True, shuffle=False)))  # storage order
    assert sum(b["n"] for b in batches) == 96
    assert batches[0]["x"].shape == (8, 3, 32, 32)
    assert sum(b["nbytes"] for b in batches) == m.total_bytes
    if name == "image-files":
        assert batches[0]["y"].tolist() == m.labels[:8]


def test_dali_trial_records_like_the_dataloader(datasets):
    r = run_trial(datasets["image-webdataset"], dali_cfg(decode=True), FAST)
    assert r.status == "ok", r.error
    assert r.samples_per_repeat == 96 and r.samples_per_s_median > 0 and r.payload_mib_s_median > 0


def test_dali_tokens_files_are_padded_arrays(datasets):
    from dataperf.backends.dali import DaliLoader
    from dataperf.data.manifest import read_manifest

    m = read_manifest(datasets["tokens-files"])
    b = next(iter(DaliLoader(datasets["tokens-files"], m, dali_cfg(decode=True, shuffle=False))))
    assert b["x"].shape[1] == max(m.token_lengths[:8])


def test_gpu_decode_without_gpu_is_a_clear_failure(datasets):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = run_trial(datasets["image-webdataset"], dali_cfg(decode=True, dali_decode_device="mixed"), FAST)
    assert r.status == "failed" and "needs a CUDA GPU" in r.error


def test_sweep_grid_has_dali_axes():
    from dataperf.workflows.sweep import Grid

    grid = Grid(backends=["dali"], own={"dali_num_threads": [1, 2], "dali_prefetch_queue_depth": [2, 3]})
    cfgs = list(grid.configs("files"))
    assert len(cfgs) == 4 and all(c.num_workers == 0 and c.backend == "dali" for c in cfgs)
