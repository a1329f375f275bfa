"""What a storage format tells a trial, as properties of Data: whether it is a user's Dataset, whether it is
stored in tar shards (and how many), whether it is a token stream read in windows, and how a DataLoader's
workers are dealt it."""

import pytest

from dataperf.data import DEALT_BY, Data, DataFile
from dataperf.data.tokens import windowed


def data_of(fmt: str, files: int = 3) -> Data:
    return Data(spec="x", location="/nowhere", kind="unknown", format=fmt,
                files=[DataFile(f"/nowhere/{i}") for i in range(files)])


# format: (is_user, sharded, windowed, dealt_by)
FORMATS = {
    "files": (False, False, False, "batch"),
    "webdataset": (False, True, False, "shard"),
    "tokens-bin": (False, False, True, "batch"),
    "npy": (False, False, True, "batch"),
    "jsonl": (False, False, False, None),
    "parquet": (False, False, False, None),
    "hf-parquet": (False, False, False, None),
    "user-dataset": (True, False, False, None),
}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_formats_properties(fmt):
    d = data_of(fmt)
    assert (d.is_user, d.sharded, d.windowed, d.dealt_by) == FORMATS[fmt]
    assert d.shards == (3 if d.sharded else None)
    assert windowed(d) == d.windowed  # dataperf.data.tokens asks the same question of Data
    assert d.cache_managed == (not d.is_user)  # a user's Dataset reads files dataperf does not know


def test_every_dealt_format_is_a_format_and_shards_are_dealt_whole():
    """DEALT_BY names formats Data knows; only sharded data is dealt by the shard."""
    assert set(DEALT_BY) <= set(FORMATS)
    assert [f for f in FORMATS if data_of(f).dealt_by == "shard"] == [f for f in FORMATS if data_of(f).sharded]


def test_remote_shards_are_still_shards():
    d = data_of("webdataset", 5)
    d.remote = True
    assert d.sharded and d.shards == 5 and d.dealt_by == "shard" and not d.cache_managed
