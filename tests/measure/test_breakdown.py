"""Where a sample's time goes (dataperf.measure.breakdown, dataperf.stages, verdict.stages): known delays put in
one stage are found there, by share, through a real DataLoader with real workers."""

from __future__ import annotations

import time

import pytest
import torch
from click.testing import CliRunner
from paced import pace
from torch.utils.data import Dataset

from dataperf.cli import cli
from dataperf.data import resolve, user_dataset
from dataperf.data.make.generate import ImageSpec, write_dataset
from dataperf.measure.breakdown import repeat_stages, steady
from dataperf.measure.trial import Arrival, TrialOptions, run_trial
from dataperf.results import MIB, LoaderConfig, LoaderResult
from dataperf.verdict.attack import exposed

DELAY_S = 0.02
SHARE_POINTS = 0.05  # the bound: a planted delay's share within 5 points of its known share


class SleepyTransform:
    """A transform that sleeps DELAY_S (a sleep never ends early; a late wake-up lengthens it a little)."""

    def __call__(self, img) -> torch.Tensor:
        time.sleep(DELAY_S)
        return torch.zeros(3, 8, 8, dtype=torch.uint8)


def sleepy_transform() -> SleepyTransform:
    return SleepyTransform()


class SleepySamples(Dataset):
    """A user's Dataset: each sample takes DELAY_S / 2 (paced: a batch's 4 back to back take 2 x DELAY_S, one
    late wake-up in all, not four), and its collate_fn sleeps DELAY_S a batch (of 4: DELAY_S / 4 a sample)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        pace(DELAY_S / 2)
        return torch.zeros(3, 8, 8)

    @staticmethod
    def collate_fn(samples: list[torch.Tensor]) -> torch.Tensor:
        time.sleep(DELAY_S)
        return torch.stack(samples)


def sleepy_samples() -> SleepySamples:
    return SleepySamples()


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    p = tmp_path_factory.mktemp("stages") / "files"
    write_dataset(p, "image", "files", 48, seed=3, image=ImageSpec(16, 16, 80))
    return p


OPTS = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, max_batches=10, collect=False, footprint=False)


def shares(r: LoaderResult) -> dict[str, float]:
    worker = {k: v for k, v in r.stage_ms_per_sample.items() if k in ("read", "decode", "transform", "collate")}
    total = sum(worker.values())
    return {k: v / total for k, v in worker.items()}


@pytest.mark.slow
def test_a_slow_read_and_a_slow_transform_are_found_where_they_were_put(small_files):
    """Every read sleeps 20 ms (--throttle-mib-s set from the files' mean size) and the transform sleeps 20 ms,
    decode of a 16-px JPEG and collate cost a fraction of a ms: half a worker's time is read, half transform.
    Each sleep is at least its length, so each stage reads at least 20 ms a sample; a late wake-up lengthens
    both alike, so the shares hold within 5 points however loaded the box."""
    data = resolve(str(small_files))
    mean_bytes = data.total_bytes / data.count
    opts = TrialOptions(**{**OPTS.__dict__, "throttle_mib_s": mean_bytes / (DELAY_S * MIB)})
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=2, persistent_workers=True, image_size=8,
                       decode=True, transform=f"{__name__}:sleepy_transform")
    r = run_trial(data, cfg, opts)
    assert r.status == "ok", r.error
    ms = r.stage_ms_per_sample
    assert set(ms) == {"read", "decode", "transform", "collate", "transfer"}, ms
    assert ms["read"] >= DELAY_S * 1000 * 0.99 and ms["transform"] >= DELAY_S * 1000, ms
    sh = shares(r)
    assert sh["read"] == pytest.approx(0.5, abs=SHARE_POINTS), sh
    assert sh["transform"] == pytest.approx(0.5, abs=SHARE_POINTS), sh
    note = next(n for n in r.notes if n.startswith("stage breakdown leaves out"))
    assert "h2d" in note and "pin (off)" in note, note
    e = exposed(r)  # the consumer waits on two workers: a worker stage is the path, the larger of two equals
    assert e is not None and e.stage in ("read", "transform"), e


def test_a_users_dataset_is_one_stage_and_its_collate_another(small_files):
    """A user's Dataset sleeping 10 ms a sample with a collate_fn sleeping 20 ms a batch of 4: 10 ms a sample
    booked as transform (its whole fetch), 5 ms a sample as collate: 2/3 and 1/3."""
    data = user_dataset(f"{__name__}:sleepy_samples")
    cfg = LoaderConfig(backend="user-dataset", batch_size=4, num_workers=2, persistent_workers=True, image_size=8)
    r = run_trial(data, cfg, OPTS)
    assert r.status == "ok", r.error
    assert "read" not in r.stage_ms_per_sample and "decode" not in r.stage_ms_per_sample, r.stage_ms_per_sample
    sh = shares(r)
    assert sh["transform"] == pytest.approx(2 / 3, abs=SHARE_POINTS), sh
    assert sh["collate"] == pytest.approx(1 / 3, abs=SHARE_POINTS), sh
    assert any("a user's Dataset fetches a sample in its own code" in n for n in r.notes), r.notes
    assert exposed(r).stage == "transform"


def test_webdataset_books_the_tar_read_and_every_stage(datasets):
    """WebDataset shards, decode on, no planted delay: the tar's own read (timed around the pipeline's upstream
    stages), decode, the plain resize as transform, collate and the hand-over are all booked."""
    data = resolve(str(datasets["image-webdataset"]))
    cfg = LoaderConfig(backend="webdataset", batch_size=4, num_workers=2, image_size=16, decode=True)
    r = run_trial(data, cfg, OPTS)
    assert r.status == "ok", r.error
    assert set(r.stage_ms_per_sample) == {"read", "decode", "transform", "collate", "transfer"}, r.stage_ms_per_sample
    assert all(v > 0 for v in r.stage_ms_per_sample.values()), r.stage_ms_per_sample


def test_decode_off_books_no_decode_and_says_so(small_files):
    data = resolve(str(small_files))
    cfg = LoaderConfig(backend="files", batch_size=4, num_workers=0, image_size=8, decode=False)
    r = run_trial(data, cfg, OPTS)
    assert r.status == "ok", r.error
    assert set(r.stage_ms_per_sample) == {"read", "collate", "transfer"}, r.stage_ms_per_sample
    assert any("decode (off: raw bytes)" in n for n in r.notes), r.notes


def arrival(worker: int, t: float, stage_s: dict[str, float], handover: float, wait: float) -> Arrival:
    return Arrival(t, worker, 4, 400, stage_s, handover, wait)


def test_steady_window_leaves_each_streams_first_batch_out():
    """Two workers, three batches each: their first batches (start-up) carry 1 s of read that must not count;
    the four steady batches carry 8 ms of read and 4 ms of decode each, a 0.4 ms hand-over, a 2 ms wait:
    over 16 samples, read 2 ms, decode 1 ms, transfer 0.1 ms, waiting 0.5 ms a sample."""
    first = {"read": 1.0}
    rest = {"read": 0.008, "decode": 0.004}
    arrivals = [arrival(0, 0.1, first, 0.5, 0.5), arrival(1, 0.2, first, 0.5, 0.5)]
    arrivals += [arrival(w, 0.3 + i / 10, rest, 0.0004, 0.002) for i in range(2) for w in (0, 1)]
    assert len(steady(arrivals)) == 4
    ms, wait = repeat_stages(arrivals)
    assert ms == pytest.approx({"read": 2.0, "decode": 1.0, "transfer": 0.1})
    assert wait == pytest.approx(0.5)


def test_no_books_no_breakdown():
    assert repeat_stages([Arrival(0.1, -1, 4, 400), Arrival(0.2, -1, 4, 400)]) is None


def record(stages: dict[str, float], rate: float, wait: float) -> LoaderResult:
    return LoaderResult(stage_ms_per_sample=stages, samples_per_s_median=rate, main_wait_ms_per_sample=wait)


def test_the_stage_to_attack_follows_where_the_consumer_waits():
    """At 100 samples/s a sample's period is 10 ms. Blocked 9 ms of it beyond the hand-over: the workers are
    the path, and decode (30 of 40 ms a worker) is the stage to attack. Blocked 1 ms: the consumer is busy
    unpacking, and the 8 ms hand-over is the path."""
    s = {"read": 5.0, "decode": 30.0, "transform": 4.0, "collate": 1.0, "transfer": 0.5}
    e = exposed(record(s, 100.0, 9.5))
    assert (e.stage, e.share, e.of_ms) == ("decode", pytest.approx(0.75), pytest.approx(40.0))
    assert e.sentence().startswith("decode is 75% of a sample's worker time (30.00 of 40.00 ms): decode on the GPU")
    e = exposed(record({**s, "transfer": 8.0}, 100.0, 9.0))
    assert (e.stage, e.share) == ("transfer", pytest.approx(0.8))
    assert exposed(record({}, 100.0, 1.0)) is None


@pytest.mark.slow
def test_bench_prints_the_breakdown_and_draws_the_waterfall(small_files, tmp_path):
    png = tmp_path / "stages.png"
    res = CliRunner().invoke(cli, ["bench", str(small_files), "--num-workers", "1", "--batch-size", "4",
                                   "--image-size", "8", "--transform", f"{__name__}:sleepy_transform",
                                   "--repeats", "2", "--max-batches", "6", "--decode", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert "stages, ms a sample: read" in res.output and "transform" in res.output, res.output
    assert "on the critical path: transform is" in res.output, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_receive_cost_is_the_hand_over_of_batches_that_were_ready():
    """measure.breakdown.ready_receive: a batch done before the consumer asked hands over in what receiving it
    costs (its wait is all hand-over); one it waited for also holds the wake-up. Two workers' steady batches of
    8: three ready at 0.8 ms each, two waited for with hand-overs of 6 ms: 0.1 ms a sample, not the 0.54 of
    every hand-over; fewer than three ready: not measured."""
    from types import SimpleNamespace

    from dataperf.measure.breakdown import ready_receive
    from dataperf.measure.trial.timing import Arrival

    def batch(worker: int, t: float, handover: float, wait: float) -> Arrival:
        return Arrival(t, worker, 8, 0, {}, handover, wait)

    first = [batch(0, 0.1, 0.001, 0.1), batch(1, 0.11, 0.001, 0.01)]  # each stream's first: out of the window
    ready = [batch(w, 0.2 + i / 10, 0.0008, 0.0008) for i, w in enumerate((0, 1, 0))]
    waited = [batch(1, 0.6, 0.006, 0.02), batch(0, 0.7, 0.006, 0.03)]
    assert ready_receive([SimpleNamespace(arrivals=first + ready + waited)]) == pytest.approx(0.1)
    assert ready_receive([SimpleNamespace(arrivals=first + ready[:2] + waited)]) != \
        ready_receive([SimpleNamespace(arrivals=first + ready[:2] + waited)])  # NaN: two ready are too few
