"""Real torch.distributed runs: 2 CPU processes on gloo, launched through torchrun (torch.distributed.run)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataperf import results
from dataperf.measure.distributed import strip_nproc
from tests.conftest import held_elsewhere
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


def one_error_line(err: str) -> str:
    """The stderr of a --nproc command that failed: exactly one `error:` line, no traceback; that line."""
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err and "ChildFailedError" not in err, err
    return lines[0]


@pytest.mark.slow
def test_a_trial_failing_on_one_rank_only_fails_on_every_rank_instead_of_hanging(tmp_path, datasets):
    """A truncated shard is in one rank's share of a repeat: that rank's trial fails while the other's goes on. The
    ranks agree on the failure at the next repeat's start, so both trials are recorded as failed, naming the rank
    and the shard, and the sweep ends (2: every trial failed, one `error:` line) instead of hanging in two
    different collectives. The timeout is a hang guard only."""
    import shutil

    data = tmp_path / "trunc"
    shutil.copytree(datasets["image-webdataset"], data)
    os.truncate(data / "shard-000002.tar", 2000)
    out = tmp_path / "x1.jsonl"
    p = run_grid(data, out, "--nproc", "2", "--decode", "--stall-timeout", "10")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "every trial failed (2)" in one_error_line(p.stderr)
    recs = [r for r in results.load(out) if r.kind == "loader"]
    assert [r.status for r in recs] == ["failed", "failed"]
    for r in recs:  # the failing rank's reason, not the other's "another rank's trial failed"
        assert r.error.startswith(("rank 0: ", "rank 1: ")) and "another rank" not in r.error, r.error
        assert "corrupt" in r.error or "tar" in r.error, r.error


@pytest.mark.slow
def test_a_dataloader_worker_killed_on_one_rank_fails_its_trial_and_the_sweep_goes_on(tmp_path):
    """One rank's DataLoader worker is SIGKILLed (as the OOM killer would) mid-trial: the trial fails on every rank,
    with rank 1's reason, and the next trial (no workers) runs and is recommended: exit 0 (it hung forever)."""
    (tmp_path / "dies.py").write_text(
        "import os, signal, torch\nfrom torch.utils.data import Dataset, get_worker_info\n"
        "class D(Dataset):\n"
        "    def __len__(self): return 400\n"
        "    def __getitem__(self, i):\n"
        "        if get_worker_info() is not None and os.environ.get('RANK') == '1' and i % 50 == 7:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "        return torch.zeros(3, 16, 16), 0\n"
        "def build(): return D()\n")
    out = tmp_path / "kw.jsonl"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(tmp_path),
                                                                              os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-m", "dataperf", "sweep", "--dataset", "dies:build", "--nproc", "2",
                        "--num-workers", "1,0", "--prefetch-factor", "2", "--batch-size", "4", "--repeats", "3",
                        "--min-batches", "3", "--warmup-batches", "1", "--no-collect", "--stall-timeout", "10",
                        "--out", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = {r.config["num_workers"]: r for r in results.load(out) if r.kind == "loader"}
    # rank 1's own reason (torch says it as "worker ... killed by signal" or, when the worker dies mid-hand-over,
    # as the connection it reset), not the other rank's "another rank's trial failed"
    assert recs[1].status == "failed" and recs[1].error.startswith("rank 1: ") and "another rank" not in recs[1].error
    assert recs[0].status == "ok" and "recommended:" in p.stdout


@pytest.mark.slow
def test_a_locked_out_under_nproc_is_refused_before_the_ranks_start(tmp_path, datasets):
    """--out held by another run: one `error:` line naming the holder's pid and exit 2, from the launcher (the ranks
    once ended with torchrun's traceback, exit 1, and a second rank's line calling its peer's exit a bug)."""
    out = tmp_path / "x5.jsonl"
    with held_elsewhere(out) as holder_pid:
        p = run_grid(datasets["image-files"], out, "--nproc", "2")
        assert p.returncode == 2 and f"pid {holder_pid}" in one_error_line(p.stderr), p.stderr


def test_failed_ranks_end_with_one_line_and_the_documented_code():
    """What the agent makes of its ranks' exit codes: a rank's own exit (2: it printed its line) is passed on
    quietly, a rank that only lost its peers (3) is not counted, a rank killed by a signal is named."""
    from dataperf.measure.distributed import failed_ranks

    assert failed_ranks({0: 2, 1: 3}) == (None, 2)
    line, code = failed_ranks({0: 3, 1: -9})
    assert code == 2 and line.startswith("rank 1 was killed by SIGKILL")
    line, code = failed_ranks({1: 3})
    assert code == 2 and "lost each other" in line
    # the agent SIGTERMs the other ranks once one exits with its own error: one line, that rank's
    assert failed_ranks({0: 2, 1: -15}) == (None, 2)
    line, code = failed_ranks({0: 3, 1: -15})
    assert code == 2 and line.startswith("rank 1 was killed by SIGTERM")


@pytest.mark.slow
def test_a_killed_launcher_stops_its_ranks_and_frees_the_out_lock(tmp_path):
    """SIGKILL of `sweep --nproc 2` itself (the OOM killer picks one process): torchrun's agent and the ranks went
    on, rank 0 holding --out's lock for a command nobody waited for. Now the agent is told of its parent's death
    and stops the ranks, and the next run takes the lock. The waits are hang guards."""
    import contextlib
    import signal

    import psutil

    out = tmp_path / "k.jsonl"
    tests = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-m", "dataperf", "sweep", "--dataset", "paced:sleep_map", "--nproc", "2",
                          "--num-workers", "0,1", "--prefetch-factor", "2", "--batch-size", "4", "--repeats", "300",
                          "--repeat-seconds", "1", "--min-batches", "3", "--warmup-batches", "1", "--no-collect",
                          "--out", str(out)], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)  # 10 minutes of repeats: left alone, the ranks outlast the guard
    try:
        assert p.stdout is not None
        for line in p.stdout:  # rank 0's plan: the ranks are running, rank 0 holds the lock
            if line.startswith("plan:"):
                break
        started = psutil.Process(p.pid).children(recursive=True)
        p.kill()
        p.wait()
        _, alive = psutil.wait_procs(started, timeout=120)
        assert alive == [], alive
        with results.exclusive(out):
            pass
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left of the session it started
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_the_agent_starts_with_ctrl_c_ignored_until_its_own_handler():
    """A Ctrl-C reaches the agent too, and while it imported torch (a second or two, before agent() set its
    handler) it printed a KeyboardInterrupt traceback (issue 54's kill loop). It now starts with SIGINT ignored;
    agent() sets a handler (a function: exec'd ranks get the default back) before any import."""
    from dataperf.measure.distributed import _agent_start

    code = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=_agent_start,
                          check=True).stdout
    assert seen.strip() == "True"


def test_a_ctrl_c_while_python_m_dataperf_imports_is_130_without_a_traceback():
    """Every rank of --nproc starts through `python -m dataperf`: a Ctrl-C during its imports (torch: a second or
    two) is the command's `interrupted` and 130, not a traceback; a rank says nothing (its launcher says it once
    for all). The Ctrl-C is raised where the import of the commands begins, as the signal's handler would."""
    code = ("import runpy, sys\n"
            "class CtrlC:\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'dataperf.commands':\n"
            "            raise KeyboardInterrupt\n"
            "sys.meta_path.insert(0, CtrlC())\n"
            "sys.argv = ['dataperf', '--version']\n"
            "runpy.run_module('dataperf', run_name='__main__', alter_sys=True)\n")
    plain = {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=plain)
    assert (p.returncode, p.stderr) == (130, "interrupted\n"), p.stderr
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**plain, "LOCAL_RANK": "1"})
    assert (p.returncode, p.stderr) == (130, ""), p.stderr
