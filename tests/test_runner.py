import os
import shutil

import pytest

from dataperf.formats import loaders
from dataperf.records import LoaderConfig
from dataperf.runner import TrialOptions, harness_overhead_ms, run_trial

FAST = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False)


@pytest.mark.parametrize("name,workers", [("image-files", 0), ("image-webdataset", 2), ("tokens-files", 2),
                                          ("tokens-webdataset", 0)])
def test_trial_counts_every_sample_and_reports_medians(datasets, name, workers):
    fmt = name.split("-")[1]
    cfg = LoaderConfig(format=fmt, batch_size=8, num_workers=workers, decode=True, image_size=32)
    r = run_trial(datasets[name], cfg, FAST)
    assert r.status == "ok", r.error
    assert r.repeats == 3 and len(r.samples_per_s_repeats) == 3
    assert r.samples_per_repeat == 96
    assert r.batches_per_repeat >= 96 // 8  # iterable datasets: each worker ends on its own partial batch
    assert r.samples_per_s_min <= r.samples_per_s_median <= r.samples_per_s_max
    assert r.samples_per_s_median > 0 and r.read_mib_s_median > 0
    assert r.batch_wait_ms_p99 >= r.batch_wait_ms_p50 >= 0
    assert r.ttfb_s_median > 0
    assert r.config["prefetch_factor"] == (2 if workers else None)


def test_cold_cache_is_verified_by_storage_reads(datasets):
    r = run_trial(datasets["image-files"], LoaderConfig(format="files", batch_size=8, cache="cold"), FAST)
    assert r.status == "ok", r.error
    assert r.cache_mode == "cold"
    assert r.cache_verified is True, r.notes
    assert all(mib >= 0.5 * r.dataset_mib_read_per_repeat for mib in r.storage_read_mib_per_repeat)


def test_warm_cache_reads_no_storage(datasets):
    r = run_trial(datasets["image-webdataset"], LoaderConfig(format="webdataset", batch_size=8, num_workers=1),
                  FAST)
    assert r.status == "ok" and r.cache_verified is True, r.notes
    assert max(r.storage_read_mib_per_repeat) < 0.5 * r.dataset_mib_read_per_repeat


def test_impossible_config_is_a_failed_record_with_the_reason(datasets):
    r = run_trial(datasets["image-files"], LoaderConfig(format="files", num_workers=0, prefetch_factor=4), FAST)
    assert r.status == "failed" and "prefetch_factor needs num_workers > 0" in r.error


def test_wrong_format_for_dataset(datasets):
    r = run_trial(datasets["image-files"], LoaderConfig(format="webdataset"), FAST)
    assert r.status == "failed" and "use --format files" in r.error


def test_too_few_batches_refused(datasets):
    r = run_trial(datasets["image-files"], LoaderConfig(format="files", batch_size=48),
                  TrialOptions(repeats=3, min_batches=5, collect=False))
    assert r.status == "failed" and "fewer than the minimum 5" in r.error


def test_corrupt_shard_mid_epoch_fails_that_trial(tmp_path, datasets):
    d = tmp_path / "bad"
    shutil.copytree(datasets["image-webdataset"], d)
    shard = sorted(d.glob("*.tar"))[-1]
    shard.write_bytes(shard.read_bytes()[:1500] + b"\x17" * 700)
    r = run_trial(d, LoaderConfig(format="webdataset", batch_size=4, num_workers=2), FAST)
    assert r.status == "failed"
    assert "corrupt tar shard" in r.error or "ReadError" in r.error, r.error


def test_worker_crash_fails_that_trial(datasets, monkeypatch):
    def die(self, i):
        os._exit(3)

    monkeypatch.setattr(loaders.FilesDataset, "__getitem__", die)
    r = run_trial(datasets["image-files"], LoaderConfig(format="files", batch_size=8, num_workers=1), FAST)
    assert r.status == "failed"
    assert "worker" in r.error.lower(), r.error


def test_collectors_see_main_and_workers(datasets, tmp_path):
    opts = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, raw_dir=tmp_path)
    r = run_trial(datasets["image-files"], LoaderConfig(format="files", batch_size=8, num_workers=2,
                                                         cache="cold"), opts)
    assert r.status == "ok", r.error
    procs = r.collectors["processes"]
    roles = [p["role"] for p in procs["per_process"]]
    assert roles.count("main") == 1
    assert procs["workers_seen"] >= 2
    assert procs["read_syscalls_total"] >= 96 * 3  # at least one read() per sample per repeat
    assert procs["storage_read_mib_total"] > 0
    disk = r.collectors["disk"]
    assert disk["available"] is False or disk["read_mib"] > 0
    for tool in ("iostat", "pidstat"):
        c = r.collectors[tool]
        if shutil.which(tool):
            assert c["available"] is True
            assert (tmp_path / os.path.basename(c["raw_log"])).is_file()
        else:
            assert c == {"available": False, "why": f"{tool} not installed (apt-get install sysstat)"}


def test_harness_overhead_is_small_and_positive():
    ms = harness_overhead_ms()
    assert 0 < ms < 1.0


def test_dali_missing_is_a_clear_trial_error(datasets, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nvidia.dali", None)
    r = run_trial(datasets["image-files"], LoaderConfig(format="dali", batch_size=8, dali_num_threads=1), FAST)
    assert r.status == "failed" and "DALI is not installed" in r.error and "dataperf[dali]" in r.error
