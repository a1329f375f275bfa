"""Shared checks for the optional backends: the same samples as the DataLoader, a known rate, through bench and
sweep."""

from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from dataperf import backends
from dataperf.cli import cli
from dataperf.data import resolve
from dataperf.data.manifest import read_manifest
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig, load

FAST = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False, repeat_seconds=None)  # whole epochs


def same_samples(data: Path, backend: str, worker_type: str | None = None) -> None:
    m = read_manifest(data)
    d = resolve(str(data))
    cfg = LoaderConfig(backend=backend, batch_size=8, num_workers=2, prefetch_factor=2, decode=True, image_size=32,
                       worker_type=worker_type)
    batches, _ = backends.get(backend).make(d, cfg, FAST)
    mine = list(batches)
    ref, _ = backends.get(m.format).make(d, LoaderConfig(backend=m.format, batch_size=8, decode=True,
                                                         image_size=32), FAST)
    theirs = list(ref)
    assert sum(b["n"] for b in mine) == m.count
    assert sum(b["nbytes"] for b in mine) == sum(b["nbytes"] for b in theirs)
    assert sorted(y for b in mine for y in b["y"].tolist()) == sorted(y for b in theirs for y in b["y"].tolist())
    assert sorted(unpadded(mine)) == sorted(unpadded(theirs))


def unpadded(batches: list[dict]) -> list[tuple]:
    """Each decoded sample as it was before collate: a token sequence without its padding, or an image's
    shape. A backend that reads in its own order (Mosaic Streaming shuffles itself) batches other samples
    together, so a batch's padded width is no sample's property; the samples themselves must match."""
    if "lengths" in batches[0]:
        return [tuple(x[:n].tolist()) for b in batches for x, n in zip(b["x"], b["lengths"].tolist(), strict=True)]
    return [tuple(x.shape) for b in batches for x in b["x"]]


SAMPLE_COST_S = 0.05  # paced per sample (TrialOptions.sample_cost_s): 2 workers give exactly 40 samples/s


def trial_ok(data: Path, backend: str, worker_type: str | None = None):
    """Every sample costs SAMPLE_COST_S in its worker (thread or process), so the known steady rate is
    workers / cost (5%: the cost is paced, so load on the machine does not shift it). A pool of processes
    (worker_type process) hands each sample back to this process and gets the next one, a round trip between a
    worker's samples that load stretches past the cost (SPDL's read 81-101 for 100 at 20 ms a sample, with both
    cores busy and other jobs at a load of 13): there the pace caps the rate and the floor is 70%. The tree's PSS
    peak holds at least this process's own PSS."""
    cfg = LoaderConfig(backend=backend, batch_size=8, num_workers=2, decode=True, image_size=32,
                       worker_type=worker_type)
    own_mib = psutil.Process().memory_full_info().pss / 2**20
    r = run_trial(data, cfg, replace(FAST, sample_cost_s=SAMPLE_COST_S))
    assert r.status == "ok", r.error
    assert r.samples_per_repeat == read_manifest(data).count
    assert r.backend["backend"] == backend
    known = cfg.num_workers / SAMPLE_COST_S
    if worker_type == "process":
        assert 0.7 * known <= r.samples_per_s_median <= 1.05 * known, r.samples_per_s_repeats
    else:
        assert r.samples_per_s_median == pytest.approx(known, rel=0.05), r.samples_per_s_repeats
    assert r.pss_mib_peak >= 0.9 * own_mib, (r.pss_mib_peak, own_mib)
    return r


def bench_and_sweep(data: Path, backend: str, tmp_path: Path) -> None:
    out = tmp_path / f"{backend}.jsonl"
    args = ["--batch-size", "8", "--decode", "--image-size", "32", "--min-batches", "3", "--no-collect",
            "--warmup-batches", "1"]
    r = CliRunner().invoke(cli, ["bench", str(data), "--backend", backend, "--num-workers", "1", "--out", str(out),
                                 *args])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["sweep", str(data), "--backend", f"auto,{backend}", "--num-workers", "1",
                                 "--prefetch-factor", "2", "--out", str(tmp_path / "s.jsonl"), *args])
    assert r.exit_code == 0, r.output
    assert "recommended:" in r.output and "(backend " in r.output and backend in r.output
    recs = load(tmp_path / "s.jsonl")
    assert {x.config["backend"] for x in recs} == {read_manifest(data).format, backend}
    assert all(x.status == "ok" for x in recs), [x.error for x in recs]
