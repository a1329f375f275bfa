"""The commands as a person runs them: output, exit codes, and records on disk."""

import pytest
from click.testing import CliRunner

from dataperf import results, verdict
from dataperf.cli import cli
from dataperf.results import LoaderConfig

FAST = ["--repeats", "3", "--min-batches", "3", "--warmup-batches", "1"]


def test_bench_prints_figures_collectors_and_appends_a_record(tmp_path, datasets):
    out = tmp_path / "b.jsonl"
    r = CliRunner().invoke(cli, ["bench", str(datasets["image-files"]), "--num-workers", "1", "--batch-size", "8",
                                 "--cache", "cold", "--out", str(out), *FAST])
    assert r.exit_code == 0, r.output
    for text in ("steady samples/s", "training samples/s", "training rate:", "repeat (start-up included)",
                 "MiB/s payload/storage", "workers active/shards",
                 "processes (/proc/PID/io)", "harness overhead", "cold"):
        assert text in r.output
    (rec,) = results.load(out)
    assert rec.status == "ok" and rec.cache_verified is True and rec.collectors["processes"]["workers_seen"] >= 1


def test_bench_impossible_config_exits_2_with_one_error_line(datasets):
    """An impossible config is a user mistake: exit 2, one `error:` line with the reason."""
    r = CliRunner().invoke(cli, ["bench", str(datasets["image-files"]), "--prefetch-factor", "4", *FAST])
    assert r.exit_code == 2
    errs = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "prefetch_factor needs num_workers > 0" in errs[0] and "Traceback" not in r.output


def test_bench_missing_dataset_is_exit_2(tmp_path):
    r = CliRunner().invoke(cli, ["bench", str(tmp_path / "nope")])
    assert r.exit_code == 2 and r.output.startswith("error: dataset path does not exist")


@pytest.mark.slow
def test_report_gives_the_verdict_from_saved_results(tmp_path, datasets, one_thread):
    """One intra-op thread: with two beside two busy loops the step alone read 461 ms against 52 ms fed (the
    OpenMP threads spin against the loops) and the test took 130 s; what is tested is the report, not that."""
    out = tmp_path / "s.jsonl"
    # no --decode: a model implies decode, so the verdict compares decoded rates with the step
    r = CliRunner().invoke(cli, ["sweep", str(datasets["image-webdataset"]), "--num-workers", "0,1",
                                 "--prefetch-factor", "2", "--batch-size", "8", "--image-size", "32",
                                 "--no-collect", "--model", "cnn-small", "--out", str(out), *FAST])
    assert r.exit_code == 0, r.output
    recs = results.load(out)
    loaders = [x for x in recs if x.kind == "loader"]
    step = next(x for x in recs if x.kind == "step")
    assert loaders and all(x.config["decode"] for x in loaders)
    decision = recs[-1]  # the sweep's own verdict (fed, --confirm 2 by default with a model)
    assert decision.kind == "decision" and decision.step_samples_per_s == step.samples_per_s
    r = CliRunner().invoke(cli, ["report", str(out), "--plot", str(tmp_path / "h.png")])
    assert r.exit_code == 0, r.output
    # the saved file gives the verdict the sweep gave
    if decision.input_bound is None:  # w=0 and 1 of 2 cores fell short: a lower bound (CI's machine), never a verdict
        assert "NOT SETTLED" in r.output and "INPUT-BOUND" not in r.output and "recommended:" not in r.output, r.output
    else:
        assert ("INPUT-BOUND" in r.output) == decision.input_bound != ("recommended:" in r.output), r.output
    assert f"answer: {verdict.dataloader_args(LoaderConfig(**decision.config))}" in r.output
    assert (tmp_path / "h.png").is_file()
    assert "step cnn-small" in r.output


def test_an_eoferror_is_an_error_line_not_ctrl_c(tmp_path, monkeypatch):
    """click wraps every EOFError in Abort, as it does Ctrl-C: a file that ends early (here an empty pickle)
    is exit 2 with one `error:` line, not 130 "interrupted"."""
    import pickle

    from dataperf.workflows import inspect_data

    (tmp_path / "cut.pkl").write_bytes(b"")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jpg").write_bytes(b"\xff\xd8\xff")
    monkeypatch.setattr(inspect_data, "inspect_dataset", lambda *a: pickle.loads((tmp_path / "cut.pkl").read_bytes()))
    r = CliRunner().invoke(cli, ["shards", "inspect", str(tmp_path / "data")])
    assert r.exit_code == 2 and "interrupted" not in r.output, r.output
    errs = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "EOFError" in errs[0] and "dataperf bug" not in errs[0], r.output


def test_an_error_text_of_many_lines_and_object_reprs_is_one_plain_line(tmp_path, monkeypatch):
    """A user's factory failing with a library's multi-line text that holds an object's repr."""
    (tmp_path / "n15_factory.py").write_text(
        "import io\n\ndef build():\n    raise ValueError(f'cannot identify image file {io.BytesIO()}\\n"
        "Plugins found: []\\nversion: 1')\n")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["bench", "--dataset", "n15_factory:build", *FAST])
    assert r.exit_code == 2 and len(r.output.splitlines()) == 1, r.output
    assert r.output.startswith("error: ") and "cannot identify image file Plugins found: [] version: 1" in r.output
    assert "object at 0x" not in r.output


def test_a_failed_config_with_workers_shows_torchs_prefetch_factor_not_none(datasets, tmp_path):
    import os
    import shutil

    trunc = tmp_path / "trunc"  # a shard cut short fails the trial (too few batches is refused before it)
    shutil.copytree(datasets["image-webdataset"], trunc)
    os.truncate(sorted(trunc.glob("*.tar"))[-1], 2000)
    r = CliRunner().invoke(cli, ["bench", str(trunc), "--num-workers", "1", "--batch-size", "8", "--repeats", "1",
                                 "--warmup-batches", "0", "--no-collect"])
    assert r.exit_code == 2 and "w=1 pf=2 " in r.output and "pf=None" not in r.output, r.output


def test_a_negative_budget_is_told_to_be_positive(tmp_path, datasets):
    for text in ("-1", "-5m"):
        r = CliRunner().invoke(cli, ["sweep", str(datasets["image-webdataset"]), f"--budget={text}", "--out",
                                     str(tmp_path / "s.jsonl")])
        assert r.exit_code == 2 and r.output == f"error: --budget must be positive, got '{text}'\n", r.output
