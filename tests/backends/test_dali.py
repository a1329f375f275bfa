"""Real DALI CPU pipelines (device_id=None) on the tiny datasets; CI installs the dali extra."""

import pytest

from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig

pytestmark = pytest.mark.slow  # the slow tier: the DALI backend (nvidia-dali): an install of its own

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


def test_a_dali_trial_gets_its_stages_from_differential_runs(datasets):
    """DALI keeps no stage books dataperf can read: after the trial its pipeline is timed cut after the reader,
    after the decoder and whole (serial, one thread), and the differences are its read, decode and transform."""
    r = run_trial(datasets["image-files"], dali_cfg(decode=True), FAST)
    assert r.status == "ok", r.error
    ms = r.stage_ms_per_sample
    assert set(ms) == {"read", "decode", "transform"} and all(v >= 0 for v in ms.values()), ms
    assert ms["decode"] + ms["transform"] > 0
    assert any("differential runs" in n for n in r.notes), r.notes
    assert any("collate, transfer, pin and h2d (DALI" in n for n in r.notes), r.notes


def test_the_stage_probe_charges_each_stage_its_cut_less_the_one_before(datasets, monkeypatch):
    """Cuts costing 0.5, 2.0 and 4.5 ms a sample give read 0.5, decode 1.5, transform 2.5; a cut that reads
    faster than the one before (noise) gives 0, not a negative stage."""
    from dataperf.backends.dali import DaliLoader
    from dataperf.data.manifest import read_manifest

    loader = DaliLoader(datasets["image-files"], read_manifest(datasets["image-files"]), dali_cfg(decode=True))
    cuts = {"read": 0.5, "decode": 2.0, None: 4.5}
    monkeypatch.setattr(DaliLoader, "_serial_ms", lambda self, dali, cut, batches: cuts[cut])
    assert loader.stage_ms()[0] == {"read": 0.5, "decode": 1.5, "transform": 2.5}
    cuts["decode"] = 0.4
    assert loader.stage_ms()[0] == {"read": 0.5, "decode": 0.0, "transform": 4.1}
    tokens = DaliLoader(datasets["tokens-files"], read_manifest(datasets["tokens-files"]), dali_cfg(decode=True))
    assert tokens.stage_ms() == ({}, "DALI's stages are probed for decoded images only")
