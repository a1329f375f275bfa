"""The one page-cache policy: what prepare leaves, and how verify judges repeats (bytes, never time)."""

import pytest

from dataperf.measure import cache
from dataperf.results import MIB


def test_expected_bytes_are_the_share_of_the_epoch_read(tmp_path):
    files = []
    for i in range(4):
        (p := tmp_path / f"{i}.bin").write_bytes(bytes(MIB))
        files.append(p)
    assert cache.expected_read_bytes(files, 100, [50, 100, 400]) == [2 * MIB, 4 * MIB, 4 * MIB]
    assert cache.expected_read_bytes(files, 100, [50], world_size=2) == [2 * MIB]  # a rank reads half the files
    assert cache.expected_read_bytes(files, None, [1]) == [4 * MIB]  # count unknown: the whole files


def test_verify_cold_needs_both_storage_reads_and_eviction():
    mb = [10 * MIB, 10 * MIB]
    ok = cache.verify("cold", [10 * MIB, 9 * MIB], mb, [0, MIB], 100 * MIB)
    assert ok.verified and ok.note is None and ok.resident_after_evict_pct == pytest.approx(1)
    short = cache.verify("cold", [10 * MIB, 8 * MIB], mb, [0, 0], 100 * MIB)
    assert not short.verified and "under 90%" in short.note
    resident = cache.verify("cold", mb, mb, [0, 20 * MIB], 100 * MIB)
    assert not resident.verified and "20% of the files stayed" in resident.note
    assert "mincore unavailable" in cache.verify("cold", mb, mb, [None, None], 100 * MIB).note


def test_verify_warm_reads_almost_nothing():
    assert cache.verify("warm", [0, MIB], [10 * MIB, 10 * MIB], [None, None], 100 * MIB).verified
    v = cache.verify("warm", [0, 2 * MIB], [10 * MIB, 10 * MIB], [None, None], 100 * MIB)
    assert not v.verified and v.note.startswith("warm cache NOT verified")


def test_prepare_warm_reads_and_cold_evicts(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(bytes(4 * MIB))
    assert cache.prepare([p], "warm").resident_bytes is None
    cold = cache.prepare([p], "cold")
    assert cold.notes == [] and cold.resident_bytes is not None and cold.resident_bytes <= 4 * MIB
