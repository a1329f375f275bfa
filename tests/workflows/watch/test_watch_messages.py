"""What `dataperf watch` says when it has nothing to time (issue 53): a job that fails at once is named as the
cause (not the hook), `--pid` says it ran collectors only instead of printing a table of dashes, and a loop fed by
a Python generator reads 'unknown', never 0.0, with a pointer to `--dataset`."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from dataperf.cli import cli


def test_a_job_that_fails_at_once_is_its_own_error_not_the_hooks(tmp_path):
    r = CliRunner().invoke(cli, ["watch", "--out", str(tmp_path / "w.jsonl"), "--", sys.executable,
                                 str(tmp_path / "no_such_train.py")])
    assert r.exit_code == 2, r.output  # the job's own code
    text = " ".join(r.output.split())
    assert "the job exited 2 after" in text and "before it imported torch (its own error is above)" in text
    assert "did not load" not in text and "steps (measured / total)" not in text
    assert "per-step hook lines" in text


def test_watch_by_pid_says_it_ran_collectors_only(tmp_path):
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    try:
        r = CliRunner().invoke(cli, ["watch", "--pid", str(job.pid), "--out", str(tmp_path / "w.jsonl")])
    finally:
        job.wait()
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert f"pid {job.pid}: collectors only" in text and "dataperf watch -- python train.py" in text
    assert "steps (measured / total)" not in text and "None" not in text


@pytest.mark.slow
def test_a_generator_loop_reads_unknown_and_points_to_dataset(tmp_path):
    """The review's 3-line script: batches from a Python generator, no DataLoader."""
    job = tmp_path / "gen3.py"
    job.write_text("import torch\nmodel = torch.nn.Linear(64, 1)\nopt = torch.optim.SGD(model.parameters(), 0.1)\n"
                   "gen = (torch.randn(32, 64) for _ in range(40))\nfor x in gen:\n    opt.zero_grad()\n"
                   "    model(x).sum().backward()\n    opt.step()\n")
    r = CliRunner().invoke(cli, ["watch", "--out", str(tmp_path / "w.jsonl"), "--", sys.executable, str(job)])
    assert r.exit_code == 0, r.output
    rows = {ln.split("│")[1].strip(): ln.split("│")[2].strip() for ln in r.output.splitlines() if ln.count("│") == 3}
    assert rows["samples_per_s (steady / whole run)"] == "unknown"
    assert rows["data_stall_fraction"] == "unknown" and rows["data_wait_ms median / p99"] == "unknown"
    assert "dataperf bench --dataset yourpkg.data:build_dataset" in " ".join(r.output.split())
