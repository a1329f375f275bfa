"""The one page-cache policy: what prepare leaves, and how verify judges repeats (bytes, never time)."""

import os

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


def test_verify_warm_small_data_reads_its_processes_page_ins_beside_a_resident_dataset():
    """Run 7 of the 2026-12-05 loaded series: a warm e2e on 0.06 MiB of files read [0.0, 0.0, 0.01] MiB, a
    worker's own page-ins (/proc read_bytes counts them with the data), over 10% of the files. Where the files
    were resident when each such repeat started, the data came from page cache: verified, and a note says how;
    where mincore was not asked, or found them mostly out, not verified."""
    kib = 1024
    exp = [0.06 * MIB] * 3
    reads = [0, 0, 10 * kib]
    v = cache.verify("warm", reads, exp, [int(0.06 * MIB)] * 3, int(0.06 * MIB))
    assert v.verified and "verified by residency" in v.note and "[0.0, 0.0, 0.01] MiB" in v.note
    assert not cache.verify("warm", reads, exp, [None] * 3, int(0.06 * MIB)).verified
    half = cache.verify("warm", reads, exp, [int(0.06 * MIB)] * 2 + [int(0.03 * MIB)], int(0.06 * MIB))
    assert not half.verified and "NOT verified" in half.note
    assert cache.verify("warm", [0, 0, 0], exp, [None] * 3, int(0.06 * MIB)) == cache.Verification(True)


def test_warm_residency_is_asked_only_of_small_data(tmp_path, monkeypatch):
    f = tmp_path / "a.bin"
    f.write_bytes(b"x" * 3 * 4096)
    cache.preread([f])
    assert cache.warm_resident([f]) in (3 * 4096, None)  # None: no mincore on this system
    monkeypatch.setattr(cache, "WARM_RESIDENT_MAX_BYTES", 3 * 4096 - 1)  # the same file, now past the size asked
    assert cache.warm_resident([f]) is None


def test_residency_is_the_same_asked_by_cachestat_or_by_mincore(tmp_path, monkeypatch):
    """cachestat(2) counts a file's cached pages with no mapping; where the kernel refuses it, mincore answers.
    Known answers: a file read whole is resident to its last byte (4 pages), and after its pages are dropped
    (fadvise; tmpfs keeps them) each way reads the same."""
    f = tmp_path / "a.bin"
    f.write_bytes(b"x" * (3 * cache.PAGE + 100))
    cache.preread([f])
    if cache.resident_bytes([f]) is None:
        pytest.skip("neither cachestat nor mincore on this system")
    fd = os.open(f, os.O_RDONLY)
    try:
        os.fsync(fd)  # written back, so that the pages can be dropped
        by_cachestat = cache._cachestat_pages(cache._libc(), fd)
        by_mincore = cache._mincore_pages(cache._libc(), fd, f.stat().st_size)
    finally:
        os.close(fd)
    assert by_mincore == 4 and by_cachestat in (4, None)  # None: this kernel has no cachestat
    assert cache.resident_bytes([f]) == f.stat().st_size
    cache.evict([f])
    dropped = cache.resident_bytes([f])
    monkeypatch.setattr(cache, "_cachestat_ok", False)  # a kernel that refuses cachestat: mincore, same answer
    assert cache.resident_bytes([f]) == dropped <= f.stat().st_size  # tmpfs keeps its pages: equal, not less
    monkeypatch.setattr(cache, "_cachestat_ok", None)
    monkeypatch.setattr(cache, "_CACHESTAT_NR", 100_000)  # a call no kernel has: refused once, then mincore
    assert cache.resident_bytes([f]) == dropped and cache._cachestat_ok is False


def test_prepare_warm_reads_and_cold_evicts(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(bytes(4 * MIB))
    assert cache.prepare([p], "warm").resident_bytes is None
    cold = cache.prepare([p], "cold")
    assert cold.notes == [] and cold.resident_bytes is not None and cold.resident_bytes <= 4 * MIB


def test_a_warm_trial_of_small_data_whose_processes_page_in_is_verified_by_residency(datasets, monkeypatch):
    """Every repeat's process tree reads 20 KiB from storage that is not the data (read_bytes counted as a worker
    paging in code would be): the tiny dataset's files are resident, so the trial is warm, and says why."""
    from dataperf.measure.trial import TrialOptions, run_trial
    from dataperf.results import LoaderConfig

    if cache.resident_bytes([next(datasets["image-files"].rglob("*.jpg"))]) is None:
        pytest.skip("no mincore on this system")
    calls = iter(range(10_000))
    monkeypatch.setattr(cache, "tree_read_bytes", lambda proc=None: next(calls) * 20 * 1024)  # +20 KiB a call
    cfg = LoaderConfig(backend="files", batch_size=8, num_workers=0, decode=False, cache="warm")
    r = run_trial(datasets["image-files"], cfg, TrialOptions(repeats=2, collect=False, repeat_seconds=None))
    assert r.status == "ok", r.error
    assert r.cache_verified is True and any("verified by residency" in n for n in r.notes), r.notes


def test_the_process_tree_is_every_live_descendant_as_psutil_sees_it(monkeypatch):
    """tree_pids reads each thread's /proc children file (not every process's stat): a child and its own child
    (a worker's helper) are both found, as psutil's full scan finds them, and the tree's read_bytes is the sum
    of each one's /proc/PID/io, whichever way the tree was found."""
    import os
    import subprocess
    import sys

    import psutil

    # both live until the test closes their stdin (or kills them): no lifetime to outlast on a slow machine
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; "
                              "subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()']); "
                              "print('up', flush=True); sys.stdin.read()"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "up"
        grandchild = {c.pid for c in psutil.Process(child.pid).children()}
        tree = [child.pid, *grandchild]  # a tree this test alone controls: the suite's servers are children too

        def found(pid: int) -> set[int]:
            return set(cache.tree_pids(pid))

        assert len(grandchild) == 1 and found(child.pid) == grandchild and set(tree) <= found(os.getpid())

        def total() -> int:
            return sum(psutil.Process(p).io_counters().read_bytes for p in tree)

        before, got, after = total(), cache.tree_read_bytes(child.pid), total()  # counts only grow: bracketed
        assert before <= got <= after
        monkeypatch.setattr(cache, "_HAS_CHILDREN_FILE", False)  # a kernel without the children file
        assert found(child.pid) == grandchild and set(tree) <= found(os.getpid())
    finally:
        for c in psutil.Process(child.pid).children(recursive=True):
            c.kill()
        child.kill()
        child.wait()
        child.stdin.close()
