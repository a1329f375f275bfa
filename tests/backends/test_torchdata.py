"""The torchdata backend on the tiny datasets (skipped where it is not installed)."""

import pytest

from tests.backends.backend_cases import bench_and_sweep, same_samples, trial_ok

pytestmark = pytest.mark.slow  # the slow tier: the torchdata backend: an install of its own

pytest.importorskip("torchdata.nodes", reason="torchdata not installed")


@pytest.mark.parametrize("worker_type", ["thread", "process"])
@pytest.mark.parametrize("name", ["image-webdataset", "image-files", "tokens-files"])
def test_reads_the_same_samples_as_the_dataloader(datasets, name, worker_type):
    same_samples(datasets[name], "torchdata", worker_type)


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_trial_records_backend_and_footprint(datasets, worker_type):
    trial_ok(datasets["image-webdataset"], "torchdata", worker_type)


def test_bench_and_sweep(datasets, tmp_path):
    bench_and_sweep(datasets["image-webdataset"], "torchdata", tmp_path)
