"""Output piped into a log or `| tee` fits COLUMNS (issue 53: with COLUMNS=100 tables were 126-217 columns and
notes 310 characters): notes wrap with their continuation indented, a command to paste wraps with ` \\` line
ends (its lines still run as one command), tables shrink to the width."""

from __future__ import annotations

import io
import subprocess

import pytest
from click.testing import CliRunner
from rich.console import Console

from dataperf.cli import cli
from dataperf.commands import _render


@pytest.fixture
def width100(monkeypatch):
    """The console a pipe gets under COLUMNS=100, writing into a buffer."""
    monkeypatch.setenv("COLUMNS", "100")
    buf = io.StringIO()
    monkeypatch.setattr(_render, "console", Console(file=buf, width=_render.piped_width()))
    return buf


def test_columns_sets_the_piped_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert _render.piped_width() == 100
    monkeypatch.delenv("COLUMNS")
    assert _render.piped_width() == _render.PIPE_WIDTH


def test_a_pasteable_command_wraps_into_lines_a_shell_runs_as_one(width100):
    words = [f"--option-{i} 'value {i}'" for i in range(20)]
    _render.say("next: echo " + " ".join(words), shell=True, markup=False)
    out = width100.getvalue()
    assert all(len(ln) <= 100 for ln in out.splitlines()) and len(out.splitlines()) > 2
    ran = subprocess.run(["bash", "-c", out.removeprefix("next: ")], capture_output=True, text=True, check=True)
    assert ran.stdout.split() == " ".join(words).replace("'", "").split()


def test_a_sweep_piped_at_100_columns_fits_them(width100, tmp_path, datasets):
    """A sweep's table, notes and verdict as a CI log gets them."""
    r = CliRunner().invoke(cli, ["sweep", str(datasets["image-webdataset"]), "--num-workers", "0,1",
                                 "--batch-size", "8", "--prefetch-factor", "2", "--image-size", "16", "--repeats",
                                 "1", "--warmup-batches", "0", "--no-collect", "--out", str(tmp_path / "s.jsonl")])
    assert r.exit_code == 0, r.output
    out = width100.getvalue()
    assert "note" in out and "recommended:" in out
    wide = [ln for ln in out.splitlines() if len(ln) > 100]
    assert not wide, wide
