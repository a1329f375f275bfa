"""The limits table: each binding limit from a constructed case whose answer is known in advance, with the
binding ceiling made far (5x or more) below the others so load cannot flip it. Costs are sleeps (no CPU) or
thread CPU time (which does not stretch when the cores are shared), so the known answers hold on a loaded
2-core machine; rate tolerances are stated at each check (a sleep can only overrun, so the upper ones are tight)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import limits_cases
import pytest
import torch

from dataperf import results
from dataperf.commands._render import describe_limits, limit_rows
from dataperf.data import as_data, resolve, user_dataset
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure import limits
from dataperf.measure.limits import LimitsOptions, measure_limits
from dataperf.measure.step import StepOptions, measure_step
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LimitsResult, LoaderConfig, StepResult
from tests.data.servers import HttpServer

SAMPLE_S = 0.05
FAST = LimitsOptions(probe_batches=4, probe_samples=0, main_probe_s=1.0)


def check_binding(res: LimitsResult, limit: str) -> None:
    """The expected limit binds, its row says so, and the record names how every ceiling was measured."""
    assert res.binding_limit == limit, limit_rows(res)
    assert res.binding_samples_per_s == getattr(res, f"{limit}_samples_per_s")
    rows = limit_rows(res)
    assert [r.limit for r in rows] == list(limits.LIMITS)
    assert [r.limit for r in rows if r.binding] == [limit]
    assert all(r.how for r in rows)
    assert describe_limits(res).startswith(f"lowest ceiling: {limit} at ")


@pytest.mark.slow
def test_throttled_storage_binds_and_reads_at_readers_times_the_cap(tmp_path):
    """Shards over HTTP capped at CAP MiB/s a request, fetched by 4 readers at once: 4 x CAP MiB/s."""
    cap = 0.1
    root = tmp_path / "shards"
    m = write_dataset(root, "image", "webdataset", 96, seed=1, image=ImageSpec(64, 64, 85), shard_mb=0.05)
    assert len(m.shards) == 4
    with HttpServer(root, bandwidth_mib_s=cap) as srv:
        data = resolve(f"{srv.url}/shard-{{000000..{len(m.shards) - 1:06d}}}.tar")
        cfg = LoaderConfig(backend="webdataset", batch_size=8, num_workers=4, decode=True, image_size=32)
        res = measure_limits(data, cfg, TrialOptions(), lopts=FAST)
    check_binding(res, "storage")
    assert res.readers == 4
    assert 0.6 * 4 * cap <= res.storage_mib_s <= 1.05 * 4 * cap, res.storage_how
    total = sum((root / s).stat().st_size for s in m.shards)
    assert res.file_bytes_per_sample == pytest.approx(total / 96)  # every shard fetched, every sample counted
    assert res.storage_samples_per_s == pytest.approx(res.storage_mib_s * 2**20 / res.file_bytes_per_sample)
    assert "GETs" in res.storage_how and res.probe_samples > 0  # the probes read the fetched copy


@pytest.mark.parametrize("readers", [1, 3])
def test_simulated_throttle_reads_at_readers_times_the_cap(tmp_path, readers):
    """6 files of 64 KiB, each read sleeping 64 KiB / 0.5 MiB/s = 125 ms: readers x 0.5 MiB/s."""
    paths = []
    for i in range(6):
        paths.append(tmp_path / f"f{i}")
        paths[-1].write_bytes(b"x" * 65536)
    tasks = limits.split_tasks(limits.read_plan(paths, 2**30), readers)
    got = limits.python_read(tasks, readers, throttle_mib_s=0.5)
    assert got.nbytes >= 6 * 65536 and got.nbytes % (6 * 65536) == 0  # whole passes
    assert 0.7 * readers * 0.5 <= got.mib_s <= 1.02 * readers * 0.5, got
    assert "throttled to 0.5 MiB/s per reader" in got.method


@pytest.mark.slow
def test_slow_decode_binds_at_cores_over_cpu_per_sample(tmp_path):
    """A transform burning SPIN_CPU_S of CPU a sample: decode = usable cores / SPIN_CPU_S; 96 workers, each
    with a batch of its own, make the workers' ceiling far higher, however long the loaded cores stretch a
    sample's wall time."""
    root = tmp_path / "files"
    write_dataset(root, "image", "files", 384, seed=3, image=ImageSpec(16, 16, 80))
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=96, decode=True, transform="limits_cases:spin")
    res = measure_limits(root, cfg, TrialOptions(), lopts=FAST)
    check_binding(res, "decode")
    spin_ms = limits_cases.SPIN_CPU_S * 1000
    assert spin_ms <= res.decode_cpu_ms_per_sample <= 1.3 * spin_ms, res.decode_how
    assert res.decode_wall_ms_per_sample >= res.decode_cpu_ms_per_sample * 0.99
    assert res.decode_samples_per_s == pytest.approx(res.usable_cores * 1000 / res.decode_cpu_ms_per_sample)
    assert res.active_workers == 96 and "96 of 96 workers active" in res.workers_how


def test_the_decode_probe_measures_its_batches_and_at_least_its_samples(tmp_path):
    """8 batches of 32 were too few on the H200 (1.5 ms CPU a sample against 1.0 over 8 batches of 128): the
    probe reads blocks of max(probe_batches, probe_samples / batch) batches after its warm-up batch, until two
    agree (one block read 172 samples/s a core on the H200 in one run and 257 in another)."""
    root = tmp_path / "files"
    write_dataset(root, "image", "files", 96, seed=3, image=ImageSpec(16, 16, 80))
    data, cfg = as_data(root), LoaderConfig(backend="files", batch_size=4, decode=True).explicit()
    probe = limits.probe_worker(data, cfg, TrialOptions(), LimitsOptions(probe_batches=2, probe_samples=40))
    # half-blocks of 5 batches until the last two agree: the figures are those two
    assert probe.error is None and (probe.batches, probe.samples) == (10, 40), probe.notes
    assert any(n.startswith("decode probe: ") and "block(s) of 5 batches" in n for n in probe.notes)
    probe = limits.probe_worker(data, cfg, TrialOptions(), LimitsOptions(probe_batches=2, probe_samples=0))
    assert (probe.batches, probe.samples) == (2, 8)


@pytest.mark.slow
def test_starved_workers_bind_at_active_workers_times_the_per_worker_rate(tmp_path):
    """One shard, 4 workers: 1 active. Samples sleep SAMPLE_S, so one worker makes 1/SAMPLE_S samples/s;
    the trial of the same config reaches about all of it."""
    root = tmp_path / "one-shard"
    write_dataset(root, "image", "webdataset", 48, seed=2, image=ImageSpec(32, 32, 85), shard_mb=100)
    cfg = LoaderConfig(backend="webdataset", batch_size=4, num_workers=4)
    opts = TrialOptions(repeats=3, max_batches=5, sample_cost_s=SAMPLE_S, collect=False, footprint=False)
    res = measure_limits(root, cfg, opts, lopts=FAST)
    check_binding(res, "workers")
    assert res.active_workers == 1
    assert "1 of 4 workers active (1 shard per rank" in res.workers_how and "3 idle" in res.workers_how
    assert 0.6 / SAMPLE_S <= res.per_worker_samples_per_s <= 1.02 / SAMPLE_S, res.workers_how
    assert res.workers_samples_per_s == res.per_worker_samples_per_s
    best = run_trial(root, cfg, opts)
    assert best.status == "ok" and best.active_workers == 1
    limits.bind(res, best)
    assert res.best_config_key == cfg.explicit().key()
    assert 60 <= res.best_of_binding_pct <= 140, (best.samples_per_s_median, res.workers_samples_per_s)
    assert "reaches" in describe_limits(res)


def test_main_process_binds_at_batch_over_its_per_batch_cost():
    """Batches free to make whose unpickling sleeps UNPICKLE_S: the main process takes B / UNPICKLE_S samples/s,
    whatever the workers. A user's Dataset: storage is not measurable, and says so."""
    b = 8
    data = user_dataset("limits_cases:cheap")
    cfg = LoaderConfig(backend="user-dataset", batch_size=b, num_workers=4)
    res = measure_limits(data, cfg, TrialOptions(), lopts=FAST)
    check_binding(res, "main_process")
    expect = b / limits_cases.UNPICKLE_S
    assert 0.6 * expect <= res.main_process_samples_per_s <= 1.05 * expect, res.main_process_how
    assert math.isnan(res.storage_samples_per_s) and "not measurable" in res.storage_how
    assert res.decoded_bytes_per_sample == pytest.approx((4 * 4 + 8) * 1.0)  # float32 x 4 + int64 label


def test_slow_model_binds_at_the_step_rate(datasets, one_thread):
    """A step of one sample that sleeps STEP_S: the model takes 1 / STEP_S samples/s."""
    from tiny_models import Sleepy

    b = 1
    step = measure_step(StepOptions(model="tiny_models:sleepy", batch_size=b, image_size=16, steps=3, repeats=3,
                                    warmup=1))
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=2, decode=True, image_size=16)
    res = measure_limits(datasets["image-files"], cfg, TrialOptions(), step=step, lopts=FAST)
    check_binding(res, "model")
    assert 0.6 * b / Sleepy.STEP_S <= res.model_samples_per_s <= 1.02 * b / Sleepy.STEP_S, res.model_how
    assert "tiny_models:sleepy" in res.model_how and res.device == "cpu"


def test_h2d_arithmetic_and_no_cuda():
    # 1 GiB/s moving batches of 64 samples x 1 MiB: 1024 samples/s
    assert limits.h2d_samples_per_s(2**30, 64 * 2**20, 64) == pytest.approx(1024)
    assert limits.h2d_samples_per_s(10e9, 3 * 224 * 224 * 4 * 256, 256) == pytest.approx(10e9 / (3 * 224 * 224 * 4))
    assert math.isnan(limits.h2d_samples_per_s(1e9, 0, 8))
    batch = {"n": 4, "x": torch.zeros(4, 3, 8, 8), "y": torch.zeros(4, dtype=torch.long)}
    assert limits.batch_tensor_bytes(batch) == 4 * 3 * 8 * 8 * 4 + 4 * 8
    if not torch.cuda.is_available():
        c = limits.h2d_ceiling(batch, "cuda", LoaderConfig())
        assert math.isnan(c.samples_per_s) and c.how == "n/a (no CUDA)"
    assert limits.h2d_ceiling(batch, "cpu", LoaderConfig()).how == "n/a (no CUDA)"


def test_binding_is_the_lowest_measured_ceiling():
    cs = [limits.Ceiling("storage", 500.0), limits.Ceiling("decode", float("nan"), "not measured"),
          limits.Ceiling("workers", 120.0), limits.Ceiling("model", 300.0)]
    assert limits.binding(cs).limit == "workers"
    assert limits.binding([limits.Ceiling("h2d", how="n/a (no CUDA)")]) is None
    res = LimitsResult()
    limits.bind(res)
    assert res.binding_limit == "" and describe_limits(res) == "no ceiling could be measured"


def test_read_plan_spreads_whole_files_and_cuts_one_big_file(tmp_path):
    files = []
    for i in range(10):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x" * 1000)
        files.append(p)
    assert len(limits.read_plan(files, 10_000)) == 10
    plan = limits.read_plan(files, 3_000)
    assert [p.name for p, _, _ in plan] == ["f0", "f4", "f8"] and all(n == 1000 for _, _, n in plan)
    big = tmp_path / "big"
    big.write_bytes(b"\0" * (5 * limits.BLOCK + 7))
    (p, off, n), = limits.read_plan([big], 2.5 * limits.BLOCK)
    assert (p, off, n) == (big, 0, 2 * limits.BLOCK)
    pieces = limits.split_tasks([(big, 0, big.stat().st_size)], 3)
    assert sum(n for _, _, n in pieces) == big.stat().st_size and len(pieces) == 3
    assert all(off % limits.BLOCK == 0 for _, off, _ in pieces)


def test_fio_reads_every_whole_block_or_says_why_not(tmp_path):
    small = tmp_path / "small"
    small.write_bytes(b"x" * 5000)
    got, why = limits.fio_read([(small, 0, 5000)], 1)
    assert got is None and why in ("fio not installed", "files under 1 MiB (fio reads whole 1 MiB blocks only)")
    if why == "fio not installed":
        return
    big = tmp_path / "big"
    big.write_bytes(b"\1" * (3 * limits.BLOCK + 100))
    got, why = limits.fio_read([(big, 0, big.stat().st_size)], 2)
    assert got is not None, why
    assert got.nbytes % (3 * limits.BLOCK) == 0 and got.mib_s > 0 and got.method.startswith("fio --readonly")
    assert big.read_bytes()[:1] == b"\1"  # --readonly: fio did not lay the file out again


def test_a_limits_record_round_trips_through_a_results_file(tmp_path, datasets):
    cfg = LoaderConfig(backend="webdataset", batch_size=8, num_workers=2, decode=True, image_size=16)
    res = measure_limits(datasets["image-webdataset"], cfg, TrialOptions(), lopts=FAST)
    assert res.kind == "limits" and res.binding_limit in limits.LIMITS
    out = tmp_path / "limits.jsonl"
    results.append(out, res)
    back, = results.load(out)
    assert isinstance(back, LimitsResult) and back.config_key == cfg.explicit().key()
    for a, b in zip(limit_rows(back), limit_rows(res), strict=True):
        assert (a.limit, a.how, a.binding) == (b.limit, b.how, b.binding)
        assert a.samples_per_s == b.samples_per_s or math.isnan(a.samples_per_s) and math.isnan(b.samples_per_s)
    assert Path(back.data) == Path(res.data) and back.env


def test_usable_cores_are_every_core_with_or_without_a_model(monkeypatch):
    """The decode ceiling's cores are those the loader trial it bounds ran on: every one (audit F2)."""
    for cores in ({0, 1}, {0}, set(range(16))):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, c=cores: c)
        assert limits.usable_cores() == len(cores)


@pytest.mark.slow
def test_the_decode_ceiling_bounds_the_rate_measured_beside_a_model(tmp_path):
    """A transform that burns 20 ms of CPU a sample, 2 workers on the 2 cores: the loader cannot beat 2 / 20 ms =
    100 samples/s, whatever else runs (load only lowers it), and the ceiling measured with a model's step given
    must not sit below it (it read 50 with a core taken off for the model: the trial near twice its ceiling).

    The ceiling is CPU time, which load does not stretch: cores / (20 ms + read and decode) is known to within the
    decode's share (at most 100, at least 75 here; the defect gave at most 50). The trial's steady rate is
    wall-clock arrivals seen by a main process that load can delay, and over 1-s repeats it has read 4% above the
    physical 100 (CI, 2026-12-04: 104 beside a ceiling of 96); it must stay below 1.3x the ceiling, where the
    defect put it near 2x."""
    import os
    import random

    from PIL import Image


    root = tmp_path / "img"
    root.mkdir()
    for i in range(64):
        Image.new("RGB", (16, 16), (random.randrange(256), 0, 0)).save(root / f"{i:03d}.jpg")
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=2, decode=True, transform="limits_cases:spin",
                       image_size=8)
    opts = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, repeat_seconds=1, collect=False)
    best = run_trial(root, cfg, opts)
    assert best.status == "ok", best.error
    step = StepResult(model="paced", samples_per_s=1000.0, batch_size=4, step_ms_median=4.0)
    res = limits.measure_limits(root, cfg, opts, step=step, best=best, lopts=FAST)
    assert res.usable_cores == len(os.sched_getaffinity(0))
    cores_over_spin = res.usable_cores / limits_cases.SPIN_CPU_S
    assert 0.75 * cores_over_spin <= res.decode_samples_per_s <= cores_over_spin * (1 + 1e-9), res.decode_how
    assert best.samples_per_s_median <= 1.3 * res.decode_samples_per_s, (best.samples_per_s_median, res.decode_how)
