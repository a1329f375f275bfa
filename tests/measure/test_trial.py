import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dataperf.backends import dataloader
from dataperf.data import resolve
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure import trial
from dataperf.measure.collectors.proc import device_of
from dataperf.measure.trial import TrialOptions, estimate_trial_s, fill, run_trial, timing
from dataperf.results import MIB, LoaderConfig, LoaderResult

FAST = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False, repeat_seconds=None)  # whole epochs


COST_S = 0.05


@pytest.mark.slow
@pytest.mark.parametrize("name,workers", [("image-files", 0), ("image-webdataset", 2), ("tokens-files", 2),
                                          ("tokens-webdataset", 0)])
def test_trial_counts_every_sample_and_reports_medians(datasets, name, workers):
    """Every sample costs COST_S (paced per worker): the steady rate is max(workers, 1) / COST_S, within 5%. The
    flow's window is only 5 batches a worker, so one batch reaching this process late by a scheduler slice moves it
    by that over the window: at 20 ms a sample (a window of 0.8 s) the flow read 94.8 for 100 once beside two busy
    loops; at 50 ms (2 s) a 40-ms-late last batch is 2%."""
    backend = name.split("-")[1]
    cfg = LoaderConfig(backend=backend, batch_size=8, num_workers=workers, decode=True, image_size=32)
    r = run_trial(datasets[name], cfg, replace(FAST, sample_cost_s=COST_S))
    assert r.status == "ok", r.error
    assert r.repeats == 3 and len(r.samples_per_s_repeats) == 3
    assert r.samples_per_repeat == 96
    assert r.batches_per_repeat >= 96 // 8  # iterable datasets: each worker ends on its own partial batch
    assert r.samples_per_s_median == pytest.approx(max(workers, 1) / COST_S, rel=0.05), r.samples_per_s_repeats
    # the flow (first batch to last, every worker's first batch left out): the same rate where repeats end on a
    # whole round of the workers, as 96 samples in batches of 8 on 1 or 2 workers do; none where the default
    # 1000-sample shuffle buffer holds the 96 shard samples (test_a_shuffle_buffer_holding_much_of_a_repeat...)
    if backend == "files":
        assert r.flow_samples_per_s_median == pytest.approx(max(workers, 1) / COST_S, rel=0.05)
    else:
        assert r.flow_samples_per_s_median != r.flow_samples_per_s_median
    assert r.payload_mib_s_median > 0
    assert r.active_workers == workers  # every worker got samples: 96 files, or one shard per worker here
    assert r.batch_wait_ms_p99 >= r.batch_wait_ms_p50 >= 0
    assert r.ttfb_s_median > 0
    assert r.config["prefetch_factor"] == (2 if workers else None)
    assert r.repeat_samples == [96] * 3 and len(r.repeat_s) == 3
    assert r.trial_s > sum(r.repeat_s)  # preparing, warm-up and the harness baseline come on top
    if name.startswith("image"):  # what a fed step copies: a 32 x 32 RGB uint8 image and its label (int64 at most)
        assert 3 * 32 * 32 < r.input_mib_per_sample * MIB <= 3 * 32 * 32 + 8
        assert r.tokens_per_sample is None
    else:
        assert r.input_mib_per_sample > 0
        # every sample once a repeat: the real tokens a sample are the manifest's mean length exactly (no padding)
        lengths = resolve(str(datasets[name])).manifest.token_lengths
        assert r.tokens_per_sample == pytest.approx(sum(lengths) / len(lengths))


@pytest.mark.parametrize("name", ["image-files", "image-webdataset"])
def test_cold_cache_is_verified_by_storage_reads_of_the_files_own_bytes(datasets, name):
    cfg = LoaderConfig(backend=name.split("-")[1], batch_size=8, num_workers=1, cache="cold")
    r = run_trial(datasets[name], cfg, FAST)
    assert r.status == "ok", r.error
    assert r.cache_mode == "cold"
    assert r.cache_verified is True, r.notes
    files_mib = sum(p.stat().st_size for p in datasets[name].iterdir()
                    if p.is_file() and p.name != "manifest.json") / 2**20
    assert r.file_mib_per_repeat == pytest.approx(files_mib)
    assert all(mib >= 0.9 * files_mib for mib in r.storage_read_mib_per_repeat)
    assert r.resident_after_evict_pct <= 10


@pytest.mark.slow
@pytest.mark.parametrize("name", ["image-files", "image-webdataset"])
def test_cold_cache_is_verified_when_each_repeat_reads_a_random_part(datasets, name):
    """Budgeted shuffled repeats read a random part of the data: verified against the files' bytes scaled to
    the share of the data each repeat read."""
    cfg = LoaderConfig(backend=name.split("-")[1], batch_size=4, num_workers=1, cache="cold")
    r = run_trial(datasets[name], cfg, replace(FAST, sample_cost_s=0.02, repeat_seconds=0.3))
    assert r.status == "ok", r.error
    assert all(n < 96 for n in r.repeat_samples), r.repeat_samples  # a part of the data each repeat
    assert r.cache_verified is True, r.notes
    files_mib = sum(p.stat().st_size for p in datasets[name].iterdir()
                    if p.is_file() and p.name != "manifest.json") / 2**20
    assert r.file_mib_per_repeat < files_mib


def test_trial_duration_estimate_for_planning():
    """Repeats at their budget plus what finished trials spent outside their repeats (median)."""
    opts = TrialOptions(repeats=3, repeat_seconds=5.0)
    assert estimate_trial_s(opts) == 15.0
    done = [LoaderResult(trial_s=20.0, repeat_s=[5.1, 5.2, 5.0]), LoaderResult(trial_s=18.0, repeat_s=[5.0] * 3),
            LoaderResult(status="failed", trial_s=1.0)]
    assert estimate_trial_s(opts, done) == pytest.approx(15.0 + (4.7 + 3.0) / 2)
    whole = replace(opts, repeat_seconds=None)
    assert estimate_trial_s(whole) is None  # an epoch's length is not known before one is read
    assert estimate_trial_s(whole, done) == pytest.approx(3 * 5.0 + (4.7 + 3.0) / 2)
    slow = [LoaderResult(trial_s=12.0, repeat_s=[3.5] * 3)]  # 2 s budgets that ran 3.5 s (3 batches a worker)
    assert estimate_trial_s(replace(opts, repeat_seconds=2.0), slow) == pytest.approx(3 * 3.5 + 1.5)


def test_trial_estimate_for_a_config_counts_the_batches_each_worker_must_deliver():
    """A repeat runs on until every worker delivered STEADY_BATCHES, so its length grows with workers x batch
    size once the rate stops growing: a trial of 4 workers at 20 samples/s a worker (80/s, 0.5 s start-up)
    costs 16 workers of batch 8 3 x 16 x 8 / 80 + 0.5 = 5.3 s a repeat (the rate held at the best seen), where
    the config-blind estimate says the 2 s its repeats took (the H200: 11 s planned, 27-43 s measured)."""
    opts = TrialOptions(repeats=3, repeat_seconds=1.0, min_batches=8)
    done = [LoaderResult(config={"num_workers": 4}, active_workers=4, samples_per_s_median=80.0, startup_s_median=0.5,
                         trial_s=10.0, repeat_s=[2.0] * 3, repeat_samples=[160] * 3)]
    assert estimate_trial_s(opts, done) == pytest.approx(3 * 2.0 + 4.0)
    wide = LoaderConfig(backend="files", batch_size=8, num_workers=16)
    assert estimate_trial_s(opts, done, wide) == pytest.approx(3 * (0.5 + 3 * 16 * 8 / 80) + 4.0)
    # 2 workers scale with the per-worker rate (40/s) and need min_batches (8 > 3 x 2) batches of 8: 2.1 s, over
    # the 1-s budget; one worker's 8 batches of 4 (2.1 s) fit inside a 3-s budget, so the budget decides
    assert estimate_trial_s(opts, done, replace(wide, num_workers=2)) == pytest.approx(3 * (0.5 + 64 / 40) + 4.0)
    longer, one = replace(opts, repeat_seconds=3.0), replace(wide, num_workers=1, batch_size=4)
    assert estimate_trial_s(longer, done, one) == pytest.approx(3 * 3.0 + 4.0)
    # whole-epoch repeats: the epoch's samples (160) at the config's rate, start-up added
    whole = replace(opts, repeat_seconds=None)
    assert estimate_trial_s(whole, done, replace(wide, num_workers=1)) == pytest.approx(3 * (0.5 + 160 / 20) + 4.0)


def test_cold_cache_with_the_files_mapped_elsewhere_is_not_verified(tmp_path, datasets):
    """Another process's mmap keeps pages resident through POSIX_FADV_DONTNEED: the trial is not cold."""
    d = tmp_path / "mapped"
    shutil.copytree(datasets["image-webdataset"], d)
    code = ("import mmap, sys, time, pathlib\n"
            "maps = []\n"
            "for p in sorted(pathlib.Path(sys.argv[1]).glob('*.tar')):\n"
            "    f = open(p, 'rb'); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n"
            "    sum(m[i] for i in range(0, len(m), mmap.PAGESIZE)); maps.append((f, m))\n"
            "print('mapped', flush=True)\n"
            "sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(d)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "mapped"
        r = run_trial(d, LoaderConfig(backend="webdataset", batch_size=8, cache="cold"), FAST)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert r.status == "ok", r.error
    assert r.cache_verified is False
    assert r.resident_after_evict_pct > 90
    assert any("cold cache NOT verified" in n and "page cache after eviction" in n for n in r.notes), r.notes


def test_cold_cache_on_tmpfs_is_not_verified(datasets):
    shm = Path("/dev/shm")
    if not any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in Path("/proc/mounts").read_text().splitlines()):
        pytest.skip("no tmpfs at /dev/shm")
    d = Path(tempfile.mkdtemp(dir=shm, prefix="dataperf-test-"))
    try:
        shutil.copytree(datasets["image-files"], d / "img", )
        r = run_trial(d / "img", LoaderConfig(backend="files", batch_size=8, cache="cold"), FAST)
    finally:
        shutil.rmtree(d)
    assert r.status == "ok", r.error
    assert r.cache_verified is False
    assert max(r.storage_read_mib_per_repeat) < 0.9 * r.file_mib_per_repeat  # RAM is the storage: nothing read
    assert any("cold cache NOT verified" in n for n in r.notes)


def test_warm_cache_reads_no_storage(datasets):
    r = run_trial(datasets["image-webdataset"], LoaderConfig(backend="webdataset", batch_size=8, num_workers=1),
                  FAST)
    assert r.status == "ok" and r.cache_verified is True, r.notes
    assert max(r.storage_read_mib_per_repeat) <= 0.1 * r.file_mib_per_repeat


def test_impossible_config_is_a_failed_record_with_the_reason(datasets):
    r = run_trial(datasets["image-files"], LoaderConfig(backend="files", num_workers=0, prefetch_factor=4), FAST)
    assert r.status == "failed" and "prefetch_factor needs num_workers > 0" in r.error


def test_wrong_format_for_dataset(datasets):
    r = run_trial(datasets["image-files"], LoaderConfig(backend="webdataset"), FAST)
    assert r.status == "failed" and "use --backend files" in r.error


def test_too_few_batches_refused(datasets):
    r = run_trial(datasets["image-files"], LoaderConfig(backend="files", batch_size=48),
                  TrialOptions(repeats=3, min_batches=5, collect=False))
    assert r.status == "failed" and "fewer than the minimum 5" in r.error


@pytest.mark.slow
def test_workers_with_too_few_batches_in_a_repeat_are_refused(datasets):
    """5 batches from 4 workers: three of them deliver one batch each, with no window of their own. The steady
    rate (a sum of per-worker windows) would count one worker's work and read about a quarter of the truth, as
    it did on the H200 (322 steady vs 678 repeat samples/s at 8 workers and 10 batches). With two batches each
    a worker's window is one batch interval, shifted by the order batches are taken in, and the sum read high
    on the 2-core box. Both refused, naming the fix; three batches each are measured."""
    cfg = LoaderConfig(backend="files", batch_size=8, num_workers=4)
    for max_batches in (5, 8):
        r = run_trial(datasets["image-files"], cfg, replace(FAST, max_batches=max_batches))
        assert r.status == "failed" and "active workers delivered fewer than 3 batches" in r.error, r.error
        assert "--max-batches 12 or more" in r.error
    assert run_trial(datasets["image-files"], cfg, replace(FAST, max_batches=12)).status == "ok"


@pytest.mark.slow
def test_many_workers_with_few_batches_each_are_measured_with_a_note(tmp_path):
    """16 workers (a shard each) at 3 batches a worker: measured, and noted (the steady rate reads high there,
    benchmarks/steady_few_batches.py); at 6 a worker, no note."""
    d = tmp_path / "sixteen"
    write_dataset(d, "image", "webdataset", 256, seed=2, image=ImageSpec(16, 16, 80), shards=16)
    cfg = LoaderConfig(backend="webdataset", batch_size=2, num_workers=16, shuffle=False)
    opts = replace(FAST, repeats=1, warmup_batches=0)
    noted = run_trial(d, cfg, replace(opts, max_batches=48))
    assert noted.status == "ok", noted.error
    assert any(n.startswith("few batches a worker: 16 workers, the fewest delivered 3") and "--max-batches 96"
               in n for n in noted.notes), noted.notes
    quiet = run_trial(d, cfg, replace(opts, max_batches=96))
    assert quiet.status == "ok" and not any(n.startswith("few batches") for n in quiet.notes), quiet.notes


@pytest.mark.slow
def test_a_worker_whose_data_ran_out_is_refused_without_asking_for_more_batches(tmp_path):
    """6 shards of 16 over 4 workers: two read 32 samples, two read 16, so at batch 8 a whole epoch is 12
    batches (3 a worker on average) and two workers deliver 2. --max-batches cannot fix that (the epoch is
    already whole): the error asks for more samples instead."""
    d = tmp_path / "uneven"
    write_dataset(d, "image", "webdataset", 96, seed=2, image=ImageSpec(32, 32, 80), shards=6)
    r = run_trial(d, LoaderConfig(backend="webdataset", batch_size=8, num_workers=4, shuffle=False),
                  FAST)
    assert r.status == "failed" and "active workers delivered fewer than 3 batches" in r.error, r.error
    assert "(12 batches in all)" in r.error and "96 or more samples" in r.error and "--max-batches" not in r.error


def test_corrupt_shard_mid_epoch_fails_that_trial(tmp_path, datasets):
    d = tmp_path / "bad"
    shutil.copytree(datasets["image-webdataset"], d)
    shard = sorted(d.glob("*.tar"))[-1]
    shard.write_bytes(shard.read_bytes()[:1500] + b"\x17" * 700)
    r = run_trial(d, LoaderConfig(backend="webdataset", batch_size=4, num_workers=2), FAST)
    assert r.status == "failed"
    assert "corrupt tar shard" in r.error or "ReadError" in r.error, r.error


def test_worker_crash_fails_that_trial(datasets, monkeypatch):
    def die(self, i):
        os._exit(3)

    monkeypatch.setattr(dataloader.FilesDataset, "__getitem__", die)
    monkeypatch.setattr(dataloader.FilesDataset, "__getitems__", die)  # a batch is fetched whole
    r = run_trial(datasets["image-files"], LoaderConfig(backend="files", batch_size=8, num_workers=1), FAST)
    assert r.status == "failed"
    assert "worker" in r.error.lower(), r.error


def test_collectors_see_main_and_workers(datasets, tmp_path):
    """A cold trial reads every file from storage in the warm-up and each of 3 repeats: the workers' storage reads
    and the dataset's device hold at least that. Each collector reports what this machine has (the dataset's block
    device, sysstat's tools), or its documented fallback where the machine lacks it."""
    data = datasets["image-files"]
    opts = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, raw_dir=tmp_path)
    r = run_trial(data, LoaderConfig(backend="files", batch_size=8, num_workers=2, cache="cold"), opts)
    assert r.status == "ok", r.error
    files_mib = sum(p.stat().st_size for p in data.iterdir() if p.is_file() and p.name != "manifest.json") / 2**20
    procs = r.collectors["processes"]
    roles = [p["role"] for p in procs["per_process"]]
    assert roles.count("main") == 1
    assert procs["workers_seen"] >= 2
    assert procs["read_syscalls_total"] >= 96 * 3  # at least one read() per sample per repeat
    assert procs["storage_read_mib_total"] >= 0.9 * 3 * files_mib, (procs["storage_read_mib_total"], files_mib)
    dev = device_of(data)
    if dev is None:
        assert r.collectors["disk"] == {"available": False, "why": "no block device found for the dataset (device "
                                                                   "None)"}
    else:
        assert r.collectors["disk"]["device"] == dev and r.collectors["disk"]["read_mib"] >= 0.9 * 3 * files_mib
    iostat, pidstat = r.collectors["iostat"], r.collectors["pidstat"]
    if shutil.which("iostat") is None:
        assert iostat == {"available": False, "why": "iostat not installed (apt-get install sysstat)"}
    elif dev is None:
        assert iostat == {"available": False, "why": "no block device for the dataset"}
    else:
        assert iostat["device"] == dev and iostat["intervals"] >= 1 and iostat["read_mib_s_mean"] > 0, iostat
        log = (tmp_path / os.path.basename(iostat["raw_log"])).read_text()
        assert re.search(rf"^{re.escape(dev)}\s", log, re.MULTILINE), log  # iostat -dx: a row starts with the device
    if shutil.which("pidstat") is None:
        assert pidstat == {"available": False, "why": "pidstat not installed (apt-get install sysstat)"}
    else:
        assert os.getpid() in {p["pid"] for p in pidstat["processes"] if p["ours"]}, pidstat
        assert (tmp_path / os.path.basename(pidstat["raw_log"])).is_file()


class _Nothing(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 200

    def __getitem__(self, i: int) -> dict:
        return {"nbytes": 0, "y": 0, "payload": b""}


def no_op_batch_ms(workers: int) -> float:
    """A DataLoader of samples that cost nothing, with these workers, timed here: ms between batches."""
    dl = torch.utils.data.DataLoader(_Nothing(), batch_size=1, num_workers=workers, collate_fn=dataloader.collate)
    times = [time.perf_counter() for _ in dl]
    return (times[-1] - times[0]) / (len(times) - 1) * 1000


@pytest.mark.slow
def test_harness_overhead_is_a_share_of_this_trials_batch_time(datasets, monkeypatch):
    """The overhead is a no-op DataLoader's batch time with the trial's workers: timed by hand before and after
    the trial, 3 times each, it must lie within a factor of 2 of what they span (a wake-up-bound figure moves
    with bursts of load, so one timing a side is not its range; a list loop, or a per-sample figure, is 100x
    off). Its share is of the known batch time: 8 samples of 10 ms (paced) on 2 workers, 40 ms."""
    monkeypatch.setattr(timing, "_overhead", {})  # measured by this trial, not one before it in this process
    hand = [no_op_batch_ms(2) for _ in range(3)]
    r = run_trial(datasets["image-files"], LoaderConfig(backend="files", batch_size=8, num_workers=2),
                  replace(FAST, sample_cost_s=0.01))
    hand += [no_op_batch_ms(2) for _ in range(3)]
    assert r.status == "ok", r.error
    assert min(hand) / 2 <= r.harness_overhead_ms_per_batch <= 2 * max(hand), hand
    # the share is of a batch, 40 ms (of a sample it would read 8x, of a repeat a fraction): within 15%, as the
    # steady rate of a trial this short read 6% high beside two busy loops (a 37.6-ms batch, 2026-12-04)
    assert r.harness_overhead_pct == pytest.approx(r.harness_overhead_ms_per_batch / 40 * 100, rel=0.15)


def test_dali_missing_is_a_clear_trial_error(datasets, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nvidia.dali", None)
    r = run_trial(datasets["image-files"], LoaderConfig(backend="dali", batch_size=8, dali_num_threads=1), FAST)
    assert r.status == "failed" and "DALI is not installed" in r.error and "dataperf[dali]" in r.error


@pytest.mark.slow
def test_a_shuffle_buffer_holding_much_of_a_repeat_is_noted(datasets):
    """96 samples against webdataset's 1000-sample buffer: every read happens in the fill (start-up), so the
    steady rate is decode alone; a note says so and names the epoch rate, whether the repeat reads the whole
    epoch or is cut after 4 batches (the fill still read all 96). A buffer of 8 (88 samples read before the
    drain: 8 of 96 delivered unread, or none of 32) and storage order get none."""
    shards, note = datasets["image-webdataset"], "shuffle buffer: 1000 samples against 96"
    cfg = LoaderConfig(backend="webdataset", batch_size=8, num_workers=0, decode=True, image_size=32)
    for opts in (FAST, replace(FAST, max_batches=4)):
        r = run_trial(shards, cfg, opts)
        assert any(n.startswith(note) for n in r.notes)
        # the flow would count the buffer's unread samples as the steady window would: not given (the fed
        # prediction then takes the repeats' rate)
        assert not r.steady_valid and r.flow_samples_per_s_median != r.flow_samples_per_s_median
        for quiet in (replace(cfg, shuffle_buffer=8), replace(cfg, shuffle=False)):
            r = run_trial(shards, quiet, opts)
            assert not any(n.startswith("shuffle buffer") for n in r.notes) and r.flow_samples_per_s_median > 0


@pytest.mark.slow
def test_a_trial_failing_in_a_worker_leaves_nothing_to_the_next_trials_workers(tmp_path, datasets):
    """A shard cut short fails every trial of a sweep inside a worker. The failed iterator, kept alive by the
    exception, was finalized later inside a worker the next trial forked: 12 "AssertionError: can only test a
    child process" tracebacks in this sweep. Its workers are now shut down as the error passes, and the failed
    trial's traceback let go."""
    bad = tmp_path / "cut"
    shutil.copytree(datasets["image-webdataset"], bad)
    shards = sorted(bad.glob("*.tar"))
    os.truncate(shards[len(shards) // 2], 2000)
    p = subprocess.run([sys.executable, "-m", "dataperf", "sweep", str(bad), "--decode", "--num-workers", "1,2",
                        "--batch-size", "8", "--prefetch-factor", "2,4", "--no-collect", "--repeat-seconds", "1",
                        "--repeats", "3", "--out", str(tmp_path / "s.jsonl")], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 2 and "every trial failed (4)" in p.stderr and "corrupt tar shard" in p.stderr, p.stderr
    assert "can only test a child process" not in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_training_rate_from_the_repeats_rate_adds_the_tail_they_never_reached():
    """Where the steady rate is not valid the repeats' rate ranks a config; repeats cut inside the data never
    reach the tail of uneven work, so it is added at that rate: the F1 split (200, 100, 100, 100 samples of 500)
    at 400 samples/s is 1.25 s and a 0.75 s tail, 250 samples/s (the H100's 37 WebDataset shards on 16 workers
    ranked at 2,422, their note saying the tail was in it)."""
    r = LoaderResult(repeat_samples_per_s_median=400.0, epoch_worker_samples=[200.0, 100.0, 100.0, 100.0])
    fill._training_rate(r, 500, "too few batches a worker")
    assert r.training_samples_per_s == pytest.approx(250) and "the epoch's tail" in r.training_basis
    even = LoaderResult(repeat_samples_per_s_median=400.0, epoch_worker_samples=[125.0] * 4)
    fill._training_rate(even, 500, "too few batches a worker")
    assert even.training_samples_per_s == pytest.approx(400) and "tail" not in even.training_basis


@pytest.mark.slow
def test_uneven_shards_tail_is_predicted_and_kept_out_of_start_up(tmp_path, monkeypatch):
    """Audit F1, a known answer: 500 samples in 5 shards on 4 workers, each sample 10 ms (paced): the worker with
    two shards reads 200 samples, the others 100, so an epoch lasts 2.0 s against 1.25 s at the all-workers
    rate (400 samples/s), a 0.75 s tail. Time-budgeted repeats (inside an epoch) never see it; the estimate
    predicts it, and whole-epoch repeats measure it without booking it as start-up (it read 3.16 s of "start-up"
    for persistent workers). The training rate of both agrees with the whole epoch's: 250 samples/s."""
    monkeypatch.setenv("PACED_T", "0.01")
    root = tmp_path / "wds5"
    write_dataset(root, "image", "webdataset", 500, seed=2, image=ImageSpec(16, 16, 80), shards=5)
    cfg = LoaderConfig(backend="webdataset", batch_size=4, num_workers=4, persistent_workers=True, decode=True,
                       transform="paced:sleep_transform", image_size=8, shuffle_buffer=10)
    opts = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False, footprint=False)
    cut = run_trial(root, cfg, replace(opts, repeat_seconds=0.5))
    whole = run_trial(root, cfg, replace(opts, repeat_seconds=None))
    assert cut.status == whole.status == "ok", (cut.error, whole.error)
    assert not cut.whole_epochs and whole.whole_epochs
    for r in (cut, whole):
        assert r.samples_per_s_median == pytest.approx(400, rel=0.06)
        assert r.tail_s == pytest.approx(0.75, rel=0.1) and sorted(r.epoch_worker_samples) == [100, 100, 100, 200]
        assert r.epoch_estimate_s == pytest.approx(2.0 + r.startup_s_median, rel=0.1)
        assert r.training_samples_per_s == pytest.approx(250, rel=0.1), r.training_basis
        assert any(n.startswith("uneven work: 5 shards for 4 workers") for n in r.notes)
    assert whole.startup_s_median < 0.3 and whole.repeat_samples_per_s_median == pytest.approx(250, rel=0.1)


def test_a_repeats_books_leave_no_tracked_object_per_batch_in_its_window():
    """The books of a batch (its times, worker, sizes, stage books) outlive it only as numbers: an object the
    cyclic garbage collector tracks, kept per batch (an Arrival), triggered collections inside the timed window,
    one full collection 77 ms of a 3.4-s window (issue 30), where a plain loop triggers none. The batches here
    are one dict handed out again and again, so every tracked object counted between two of them is the
    books'. Counts, not times: the same on any machine."""
    import gc

    batch = {"n": 64, "nbytes": 1000, "worker": -1, "stage_s": {"read": 0.001, "collate": 0.0001}, "done_s": 1.0}
    counts: list[int] = []

    def batches(n: int):
        for _ in range(n):
            counts.append(gc.get_count()[0])
            yield batch

    trial.time_repeat(batches(5), None)  # first calls: anything cached on first use
    counts.clear()
    was = gc.isenabled()
    gc.disable()  # no collection resets the count while it is read
    try:
        rep = trial.time_repeat(batches(500), None)
    finally:
        if was:
            gc.enable()
    per_batch = [b - a for a, b in zip(counts[1:-1], counts[2:], strict=True)]
    assert set(per_batch) == {0}, sorted(set(per_batch))
    assert rep.batches == len(rep.arrivals) == 500 and rep.samples == 500 * 64
    assert rep.arrivals[-1].stage_s == batch["stage_s"] and rep.arrivals[-1].handover_s is not None


def test_a_trial_over_local_files_makes_no_tracked_object_per_file(tmp_path):
    """A trial's warm-cache preparation asks the Data for its files' paths; building 2 tracked objects a file
    anew each trial (a Path and its parts) pushed 2,000 files' worth through the young generation, 5 young
    collections a trial, and promoted them until a full collection fired: 68-90 ms, inside a 1-worker window when
    the forked worker inherited the counts (issue 30: those rounds read 0.88 of the plain loop). 3,000 files at 0
    workers; from the second trial on, what is left is per batch, not per file. Counts, not times."""
    import gc

    for i in range(3000):
        (tmp_path / f"{i:05d}.jpg").write_bytes(b"x" * 100)
    data = resolve(str(tmp_path))
    cfg = LoaderConfig(backend="files", batch_size=64, num_workers=0, decode=False, shuffle=False)
    opts = TrialOptions(repeats=1, warmup_batches=0, repeat_seconds=None, collect=False, footprint=False)
    young: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 0:
            young.append(1)

    run_trial(data, cfg, opts)  # first: whatever is built once a Data
    gc.callbacks.append(count)
    try:
        results = [run_trial(data, cfg, opts) for _ in range(2)]
    finally:
        gc.callbacks.remove(count)
    assert [r.repeat_samples for r in results] == [[3000], [3000]]
    assert len(young) <= 2, f"{len(young)} young collections in 2 trials (15 when every trial built its Paths)"


def test_a_local_trial_reads_no_network_counters_between_its_repeats(datasets, monkeypatch):
    """/proc/net/dev is read before each repeat only for remote data (its network bytes are all it is for): the
    reading took 26 us between windows, whose cache misses the next window's first batches paid (issue 30)."""
    import psutil

    def refuse() -> None:
        raise AssertionError("a local trial read the network counters")

    monkeypatch.setattr(psutil, "net_io_counters", refuse)
    cfg = LoaderConfig(backend="files", batch_size=8, num_workers=0, decode=False)
    r = run_trial(datasets["image-files"], cfg, TrialOptions(repeats=2, collect=False, repeat_seconds=None))
    assert r.status == "ok", r.error
    assert r.network_recv_mib_per_repeat == []


def test_a_start_up_longer_than_the_budget_still_leaves_half_the_budget_of_batches_after_the_first():
    """A loader whose first batch comes 1.2 s after iter() (Ray Data's executor starting), then a batch of 4 every
    10 ms on absolute deadlines (400 samples/s, whatever a wake-up's lateness), under a 2-s budget: the budget
    alone would end the repeat at its third batch, a steady window of 20 ms; the repeat now runs on until its first
    batch is STEADY_SHARE x 2 s behind. The rule's own bounds (it cannot end before them, and ends at the first
    batch past them), and the steady rate over that window: the known 400 within 10% (a batch late by 20 ms moves
    a 1-s window by 2%)."""
    def late_start():
        time.sleep(1.2)
        due = time.perf_counter()
        while True:
            due += 0.01
            time.sleep(max(due - time.perf_counter(), 0.0))
            yield {"n": 4, "nbytes": 0}

    seconds = 2.0
    rep = trial.time_repeat(late_start(), None, seconds=seconds, min_batches=1)
    first, last = rep.arrivals[0].t_s, rep.arrivals[-1].t_s
    assert first >= 1.2
    assert last - first >= timing.STEADY_SHARE * seconds  # not 3 batches of ramp-up
    assert rep.arrivals[-2].t_s - first < timing.STEADY_SHARE * seconds  # and not a batch past the rule
    assert rep.samples_per_s == pytest.approx(400, rel=0.1)


def test_a_quick_start_ends_the_repeat_on_its_budget_as_before():
    """First batch at once: the budget from iter() decides, as it did (the steady share is already behind it)."""
    def quick():
        while True:
            time.sleep(0.01)
            yield {"n": 4, "nbytes": 0}

    rep = trial.time_repeat(quick(), None, seconds=0.3, min_batches=1)
    assert rep.arrivals[-1].t_s >= 0.3 > rep.arrivals[-2].t_s
