"""The DataLoader backend's Dataset over files: a batch fetched whole gives what sample-by-sample fetching gives."""

from __future__ import annotations

import pytest
import torch

from dataperf import stages
from dataperf.backends.dataloader import FilesDataset
from dataperf.data import resolve
from dataperf.measure.trial import TrialOptions
from dataperf.results import LoaderConfig


@pytest.mark.parametrize("decode", [False, True])
def test_a_batch_fetched_whole_is_the_samples_one_by_one(datasets, decode):
    data = resolve(str(datasets["image-files"]))
    ds = FilesDataset(data, LoaderConfig(backend="files", decode=decode, image_size=32), TrialOptions())
    idx = [5, 0, 17, 3, 90]
    stages.take()
    whole = ds.__getitems__(idx)
    books = stages.take()
    one = [ds[i] for i in idx]
    assert [s["y"] for s in whole] == [s["y"] for s in one] == [int(data.labels[i]) for i in idx]
    assert [s["nbytes"] for s in whole] == [s["nbytes"] for s in one]
    if decode:
        assert all(torch.equal(a["x"], b["x"]) for a, b in zip(whole, one, strict=True))
        assert set(books) == {"read", "decode", "transform"}
    else:
        assert [s["payload"] for s in whole] == [s["payload"] for s in one]
        assert set(books) == {"read"}
    assert books["read"] > 0


def test_simulated_costs_go_sample_by_sample(datasets):
    """A simulated seek is paid per sample out of storage order, so a batch is not read as one loop."""
    data = resolve(str(datasets["image-files"]))
    ds = FilesDataset(data, LoaderConfig(backend="files", decode=False), TrialOptions(seek_s=0.001))
    ds.__getitems__([4, 9])
    assert ds.next_i == 10  # the seek bookkeeping ran for each sample
