"""The answer `sweep` prints after its trials and `report` prints from the results file are one block from one
function (commands/_answer.print_answer), which formats what the records and the verdict over them hold and
judges nothing itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from dataperf import verdict
from dataperf.cli import cli
from dataperf.commands import _answer, _render
from dataperf.results import LimitsResult, LoaderConfig, LoaderResult, StepResult

COMMANDS = Path(__file__).resolve().parents[2] / "dataperf" / "commands"
PICTURES = ("plot: ", "stage waterfall of ")  # the lines naming the PNGs sweep draws (report: with --plot only)


def answer_block(output: str, end: str | None = None) -> list[str]:
    """The answer's lines: from the loader table's title to `end` (the first line starting so), else the end."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "loader trials")
    stop = next((i for i, line in enumerate(lines) if i > start and end and line.startswith(end)), len(lines))
    return lines[start:stop]


def test_sweep_and_report_print_the_same_answer(tmp_path, datasets, one_thread):
    """A real small sweep with a model (the step, the fed runs of --confirm, the limits of the pick: every part
    of the answer), then `report` on its --out: the same block, line for line. Sweep's own lines stand around it
    (the plan before; the duration and `results:` after), and the lines naming the PNGs it drew sit where
    `report --plot` names its plot."""
    out = tmp_path / "s.jsonl"
    sweep = CliRunner().invoke(cli, [
        "sweep", str(datasets["image-webdataset"]), "--num-workers", "0,1", "--prefetch-factor", "2",
        "--batch-size", "8", "--image-size", "32", "--no-collect", "--model", "cnn-small", "--repeats", "3",
        "--min-batches", "3", "--warmup-batches", "1", "--confirm-steps", "3", "--budget", "none", "--out", str(out)])
    assert sweep.exit_code == 0, sweep.output
    report = CliRunner().invoke(cli, ["report", str(out)])
    assert report.exit_code == 0, report.output
    swept = answer_block(sweep.output, end="took ")
    reported = answer_block(report.output)
    assert [line for line in swept if not line.startswith(PICTURES)] == reported
    assert any(line.startswith("plot: ") for line in swept)
    # every part of the answer is in the block compared
    text = "\n".join(reported)
    for part in ("vs model (", "step cnn-small on", "confirmed end to end", "limits of ", "answer: DataLoader("):
        assert part in text, part
    assert sweep.output.rstrip().splitlines()[-1].startswith(f"results: {out}")


def loader(sps: float, workers: int) -> LoaderResult:
    cfg = LoaderConfig(backend="files", num_workers=workers, prefetch_factor=2 if workers else None, decode=True)
    return LoaderResult(config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=sps, samples_per_s_min=sps,
                        samples_per_s_max=sps, cache_mode="warm", cache_verified=True)


JUDGEMENT = ("predicted_fed", "model_rate", "feeds", "fit", "idle_warning", "verdict_caveats", "recommend",
             "trial_fit", "trial_fits", "table_findings", "exposed", "cpu_cap")


def test_the_answer_formats_the_verdict_and_judges_nothing(monkeypatch, capsys):
    """The verdict judged once (verdict.recommend: each row's TrialFit, the findings), then every judging
    function of verdict/ made to fail: the answer still prints, from the Recommendation alone."""
    recs = [loader(90.0, 0), loader(400.0, 4), StepResult(samples_per_s=1000.0, batch_size=32, device="cpu")]
    rec = verdict.recommend(recs, recs[-1], 1.2)

    def judged_again(*a, **k):
        raise AssertionError("the renderer judged")

    import dataperf.verdict as pkg
    from dataperf.verdict import attack, findings, fits, rates, recommend

    for mod in (pkg, rates, fits, findings, recommend, attack):
        for name in JUDGEMENT:
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, judged_again)
    monkeypatch.setattr(_render, "console", Console(width=240))
    _answer.print_answer(recs, rec)
    out = capsys.readouterr().out
    assert "fed ~400 (idle 60%)" in out and "INPUT-BOUND" in out and "loader and model step were measured apart" in out


def test_a_row_shows_the_figures_its_trial_fit_carries():
    """The "vs model" cell is the TrialFit's figures, formatted: whatever they say, the cell says."""
    r = loader(500.0, 2)
    f = verdict.TrialFit(r, fed_samples_per_s=1234.0, idle_fraction=0.5, feeds=False, stalls=True, headroom=1.2)
    assert _render.fed_short(f) == "fed ~1,234 [red](idle 50%)[/red]"
    assert _render.fed_short(verdict.TrialFit(r, 1234.0, 0.01, False, False, 1.5)) == "fed ~1,234 (< 1.5x)"
    assert _render.fed_short(verdict.TrialFit(r, 1234.0, 0.0, True, False, 1.2)) == "fed ~1,234 (feeds)"
    assert _render.fed_short(verdict.TrialFit(r, float("nan"), float("nan"), False, False, 1.2)) == "-"
    assert _render.fed_short(None) == "-"
    rec = verdict.Recommendation("feeds", step=StepResult(samples_per_s=100.0), fits=[f])
    assert rec.fit_of(r) is f and rec.fit_of(loader(500.0, 2)) is None


def test_a_trial_fit_holds_the_verdicts_figures():
    """verdict.trial_fit: the predicted fed rate, the model's idle share at it, feeds, as the verdict decides."""
    step = StepResult(samples_per_s=1000.0, batch_size=32, device="cpu")
    r = loader(400.0, 4)
    f = verdict.trial_fit(r, step, 1.2)
    assert f.fed_samples_per_s == verdict.predicted_fed(r, step) == 400.0
    assert f.idle_fraction == pytest.approx(0.6) and f.stalls and not f.feeds
    ok = verdict.trial_fit(loader(2000.0, 4), step, 1.2)
    assert ok.feeds == verdict.feeds(loader(2000.0, 4), step, 1.2) is True and not ok.stalls
    assert [x.trial for x in verdict.recommend([r], step).fits] == [r]
    assert verdict.recommend([r]).fits == []  # no model: no column to fill


def test_the_limits_rows_read_the_record_in_the_measuring_layers_order():
    """verdict.limits reads a limits record as measure.limits wrote it: its six ceilings, in LIMITS order."""
    from dataperf.measure import limits

    assert verdict.limits.LIMITS == limits.LIMITS
    res = LimitsResult(storage_samples_per_s=10.0, storage_how="fio", decode_samples_per_s=5.0, decode_how="cores",
                       binding_limit="decode")
    rows = verdict.limit_rows(res)
    cs = limits.ceilings(res)
    assert [(r.limit, r.how) for r in rows] == [(c.limit, c.how) for c in cs]
    assert [r.limit for r in rows if r.binding] == ["decode"]


@pytest.mark.parametrize("module", ["_render.py", "_answer.py", "_plots.py"])
def test_the_renderers_import_nothing_of_the_measuring_layer(module):
    """The answer is printed from records and the verdict: the renderers import nothing of dataperf.measure
    (nor of workflows), inside functions included."""
    tree = ast.parse((COMMANDS / module).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names]
    assert not [m for m in names if m.startswith(("dataperf.measure", "dataperf.workflows"))]


def test_report_shows_a_fed_run_the_verdicts_fed_table_does_not_hold(tmp_path):
    """An e2e record of --confirm whose config no loader trial of the file holds is not in the verdict's fed
    table: report shows it on its own (the usability review: "an e2e record the file holds is never shown")."""
    from click.testing import CliRunner

    from dataperf import results
    from dataperf.cli import cli
    from dataperf.results import E2EResult, LoaderConfig, LoaderResult, StepResult

    cfg = LoaderConfig(backend="files", batch_size=8, num_workers=2, prefetch_factor=2, decode=True).explicit()
    other = LoaderConfig(backend="files", batch_size=8, num_workers=6, prefetch_factor=2, decode=True).explicit()
    out = tmp_path / "r.jsonl"
    results.append(out, LoaderResult(data="d", config=cfg.__dict__, config_key=cfg.key(), samples_per_s_median=90.0,
                                     samples_per_s_min=90.0, samples_per_s_max=90.0))
    results.append(out, StepResult(samples_per_s=100.0, batch_size=8))
    results.append(out, E2EResult(data="d", config=other.__dict__, config_key=other.key(), samples_per_s=77.0,
                                  batch_size=8, steps_repeats=[20], confirm_round=1, data_stall_fraction=0.2,
                                  steady_samples_per_s=80.0, steady_stall_fraction=0.18, epoch_starts_timed=0))
    r = CliRunner().invoke(cli, ["report", str(out)])
    assert r.exit_code == 0, r.output
    assert "end to end: files bs=8 w=6" in r.output and "samples_per_s mid-epoch" in r.output, r.output
