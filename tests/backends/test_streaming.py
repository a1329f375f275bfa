"""The streaming backend on the tiny datasets. mosaicml-streaming cannot join dataperf's environment
(docs/backends.md), so these skip there; `bash scripts/streaming_env.sh` builds its own environment and runs them."""

import importlib.util

import pytest

from dataperf.measure.trial import run_trial
from dataperf.results import LoaderConfig
from tests.backends.backend_cases import FAST, bench_and_sweep, same_samples, trial_ok

MISSING = importlib.util.find_spec("streaming") is None
needs_streaming = pytest.mark.skipif(MISSING, reason="mosaicml-streaming not installed: bash scripts/streaming_env.sh")


@needs_streaming
@pytest.mark.parametrize("worker_type", [None])
@pytest.mark.parametrize("name", ["image-webdataset", "image-files", "tokens-files"])
def test_reads_the_same_samples_as_the_dataloader(datasets, name, worker_type):
    same_samples(datasets[name], "streaming", worker_type)


@needs_streaming
@pytest.mark.parametrize("worker_type", [None])
def test_trial_records_backend_and_footprint(datasets, worker_type):
    trial_ok(datasets["image-webdataset"], "streaming", worker_type)


@needs_streaming
def test_bench_and_sweep(datasets, tmp_path):
    bench_and_sweep(datasets["image-webdataset"], "streaming", tmp_path)


@pytest.mark.skipif(not MISSING, reason="mosaicml-streaming is installed here")
def test_missing_streaming_says_why_and_how(datasets):
    r = run_trial(datasets["image-webdataset"], LoaderConfig(backend="streaming", batch_size=8, num_workers=1), FAST)
    assert r.status == "failed" and "Mosaic Streaming is not installed" in r.error
    assert "numpy<2.2" in r.error and "scripts/streaming_env.sh" in r.error
