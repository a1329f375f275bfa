"""Shared checks for the optional backends: the same samples as the DataLoader, through bench and sweep."""

from pathlib import Path

from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.formats import backends
from dataperf.formats.dataset_dir import read_manifest
from dataperf.records import LoaderConfig, load
from dataperf.runner import TrialOptions, run_trial
from dataperf.sources import resolve

FAST = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False, repeat_seconds=None)  # whole epochs


def same_samples(data: Path, fmt: str, worker_type: str | None = None) -> None:
    m = read_manifest(data)
    d = resolve(str(data))
    cfg = LoaderConfig(format=fmt, batch_size=8, num_workers=2, prefetch_factor=2, decode=True, image_size=32,
                       worker_type=worker_type)
    batches, _ = backends.get(fmt).make(d, cfg, FAST)
    mine = list(batches)
    ref, _ = backends.get(m.format).make(d, LoaderConfig(format=m.format, batch_size=8, decode=True,
                                                         image_size=32), FAST)
    theirs = list(ref)
    assert sum(b["n"] for b in mine) == m.count
    assert sum(b["nbytes"] for b in mine) == sum(b["nbytes"] for b in theirs)
    assert sorted(y for b in mine for y in b["y"].tolist()) == sorted(y for b in theirs for y in b["y"].tolist())
    assert tuple(mine[0]["x"].shape[1:]) == tuple(theirs[0]["x"].shape[1:])


def trial_ok(data: Path, fmt: str, worker_type: str | None = None):
    cfg = LoaderConfig(format=fmt, batch_size=8, num_workers=2, decode=True, image_size=32, worker_type=worker_type)
    r = run_trial(data, cfg, FAST)
    assert r.status == "ok", r.error
    assert r.samples_per_repeat == read_manifest(data).count
    assert r.backend["backend"] == fmt and r.pss_mib_peak > 0 and r.samples_per_s_per_gib_pss > 0
    return r


def bench_and_sweep(data: Path, fmt: str, tmp_path: Path) -> None:
    out = tmp_path / f"{fmt}.jsonl"
    args = ["--batch-size", "8", "--decode", "--image-size", "32", "--min-batches", "3", "--no-collect",
            "--warmup-batches", "1"]
    r = CliRunner().invoke(cli, ["bench", str(data), "--format", fmt, "--num-workers", "1", "--out", str(out),
                                 *args])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["sweep", str(data), "--format", f"auto,{fmt}", "--num-workers", "1",
                                 "--prefetch-factor", "2", "--out", str(tmp_path / "s.jsonl"), *args])
    assert r.exit_code == 0, r.output
    assert "recommended:" in r.output and "(backend " in r.output and fmt in r.output
    recs = load(tmp_path / "s.jsonl")
    assert {x.config["format"] for x in recs} == {read_manifest(data).format, fmt}
    assert all(x.status == "ok" for x in recs), [x.error for x in recs]
