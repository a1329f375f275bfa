"""Real torch.distributed runs: 2 CPU processes on gloo, launched through torchrun (torch.distributed.run)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataperf import results
from dataperf.measure.distributed import strip_nproc
from tests.sigint import default_sigint


def test_strip_nproc():
    assert strip_nproc(["sweep", "d", "--nproc", "2", "--out", "x"]) == ["sweep", "d", "--out", "x"]
    assert strip_nproc(["sweep", "--nproc=4", "d"]) == ["sweep", "d"]


def run_grid(data, out, *extra):
    tests = str(Path(__file__).resolve().parents[1])  # tiny_models, for --model
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    where = [str(data)] if data is not None else []  # None: a --dataset factory in `extra` stands in for DATA
    cmd = [sys.executable, "-m", "dataperf", "sweep", *where, "--num-workers", "0,1", "--prefetch-factor", "2",
           "--batch-size", "4", "--repeats", "3", "--min-batches", "3", "--warmup-batches", "1", "--no-collect",
           "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_two_ranks_split_data_and_gather_to_rank0(tmp_path, datasets, monkeypatch):
    """Files and shards: each rank reads its own split. Paced samples (20 ms each, 96 in all): each rank reads
    48 at one stream's 50 samples/s, with 0 workers or 1, so the global rate is the analytic 100 samples/s."""
    monkeypatch.setenv("PACED_T", "0.02")
    monkeypatch.setenv("PACED_N", "96")
    for name in ("image-files", "image-webdataset", "paced"):
        out = tmp_path / f"{name}.jsonl"
        if name == "paced":
            p = run_grid(None, out, "--nproc", "2", "--dataset", "paced:sleep_map")
        else:
            p = run_grid(datasets[name], out, "--nproc", "2")
        assert p.returncode == 0, p.stdout + p.stderr
        recs = [r for r in results.load(out) if r.kind == "loader"]
        assert len(recs) == 2, "only rank 0 writes, one record per trial"
        for r in recs:
            assert r.status == "ok", r.error
            assert r.world_size == 2 and len(r.per_rank_samples_per_s) == 2
            assert r.slowest_rank in (0, 1)
            assert r.per_rank_samples_per_s[r.slowest_rank] == min(r.per_rank_samples_per_s)
            # each rank read its own split (files: half each; shards: whole shards each, in a shard order every
            # rank agrees on, new each repeat), together all 96 in every repeat
            assert r.repeat_samples == [96] * r.repeats
            assert all(0 < n < 96 for n in r.per_rank_samples_per_repeat)
            if name != "image-webdataset":
                assert r.per_rank_samples_per_repeat == [48, 48] and r.samples_per_repeat == 96
            # global rate per repeat: both ranks' samples over the slowest rank's time
            assert len(r.samples_per_s_repeats) == r.repeats
            if name == "paced":  # pacing is a ceiling load cannot lift; a rank starved at a repeat's end lowers
                # that repeat (one of 3 read 42 beside two other suites and two busy loops), so its median is held
                assert r.per_rank_samples_per_s == pytest.approx([50, 50], rel=0.05), r.per_rank_samples_per_s
                assert max(r.samples_per_s_repeats) <= 100 * 1.05, r.samples_per_s_repeats
                assert r.samples_per_s_median == pytest.approx(100, rel=0.05), r.samples_per_s_repeats
        assert "recommended:" in p.stdout


@pytest.mark.slow
def test_under_torchrun_the_step_follows_the_grid_and_a_budget_reaches_every_rank(tmp_path, datasets):
    """Under torchrun rank 0 measures the model's step after the grid: before it, the other ranks would load its
    cores and wait for it at a barrier. With --budget every rank has a deadline, so every rank joins the gather
    that decides each trial's start (a rank without one would hang the others); 10 minutes fit both trials."""
    out = tmp_path / "s.jsonl"
    p = run_grid(datasets["image-files"], out, "--nproc", "2", "--model", "tiny_models:tiny", "--image-size", "16",
                  "--budget", "10m")
    assert p.returncode == 0, p.stdout + p.stderr
    kinds = [r.kind for r in results.load(out)]  # then --confirm's fed runs (2 by default with a model)
    assert kinds[:3] == ["loader", "loader", "step"] and kinds[-2:] == ["limits", "decision"], kinds
    assert "plan: 2 trials" in p.stdout and "binding limit:" in p.stdout and "took " in p.stdout


@pytest.mark.slow
def test_ctrl_c_under_nproc_is_130_with_one_hint_and_nothing_from_the_agent(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) in the middle of a --nproc sweep: torchrun's
    agent printed its SignalException traceback and "Received 2 death signal" warnings (it got the signal twice:
    from the terminal and passed on by dataperf). Now: exit 130, the resume hint once, nothing else on stderr,
    and every process the command started is gone. Paced samples (20 ms each) make two trials of 5 x 1 s
    repeats: the signal comes as the first starts."""
    import signal

    import psutil

    out = tmp_path / "n.jsonl"
    tests = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-m", "dataperf", "sweep", "--dataset", "paced:sleep_map", "--nproc", "2",
                          "--num-workers", "0,1", "--prefetch-factor", "2", "--batch-size", "4", "--repeats", "5",
                          "--repeat-seconds", "1", "--min-batches", "3", "--warmup-batches", "1", "--no-collect",
                          "--out", str(out)], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=default_sigint)
    assert p.stdout is not None
    for line in p.stdout:  # rank 0's plan: the ranks are running
        if line.startswith("plan:"):
            break
    started = psutil.Process(p.pid).children(recursive=True)  # the agent, the ranks and their workers
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 130, err
    assert [ln for ln in err.splitlines() if ln.strip()] == [
        f"interrupted: {len(results.load(out)) if out.exists() else 0} finished trials are kept in {out}; run the "
        "same command with --resume to skip them"], err
    _, alive = psutil.wait_procs(started, timeout=60)
    assert alive == []
