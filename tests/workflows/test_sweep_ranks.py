"""`sweep --ranks G` (issue 51): bad input refused before any rank starts, the paced consumer never faster than
its step rate, and real runs of G = 2 ranks under torchrun on samples that burn a fixed CPU time (tests/
ka_scenarios.py's BurnMap), whose answers are known: consumers slower than the cores are fed (the pick is one
worker a rank, the model binds); consumers faster than the cores share the cores' rate (2 cores / the burn,
split over 2 ranks) and the cores bind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataperf import results, verdict
from dataperf.cli import cli
from dataperf.measure.ranks import PacedConsumer
from dataperf.measure.trial import cores

TESTS = Path(__file__).resolve().parents[1]
BURN_S = 0.01  # CPU seconds a sample (a busy loop on the thread's CPU clock)


def refused(*args: str) -> str:
    r = CliRunner().invoke(cli, ["sweep", *args])
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and r.output.startswith("error: "), r.output
    return r.output


@pytest.fixture
def burn(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv("KA_BURN_S", str(BURN_S))
    monkeypatch.setenv("KA_N", "800")


def test_more_ranks_than_cores_is_refused_naming_the_largest_g(burn, tmp_path):
    g = cores() + 1
    out = refused("--dataset", "ka_scenarios:BurnMap", "--ranks", str(g), "--step-rate", "100", "--out",
                  str(tmp_path / "r.jsonl"))
    assert f"--ranks {g} is more ranks than this host's {cores()} cores can give one worker each" in out
    assert f"use --ranks {cores()} or fewer" in out
    assert not (tmp_path / "r.jsonl").exists()


def test_data_too_small_for_g_ranks_x_workers_x_2_batches_names_the_batch_size_and_the_largest_g(burn, tmp_path,
                                                                                                  monkeypatch):
    monkeypatch.setenv("KA_N", "30")  # 2 ranks x 1 worker x 2 batches of 8 = 32 > 30
    out = refused("--dataset", "ka_scenarios:BurnMap", "--ranks", "2", "--step-rate", "100", "--batch-size", "8",
                  "--out", str(tmp_path / "r.jsonl"))
    assert "holds 30 samples: too few for 2 ranks x 1 worker x 2 batches of 8" in out
    assert "use --batch-size 7 or smaller, or --ranks 1 or fewer" in out


@pytest.mark.parametrize("args, says", [
    (["--step-rate", "100"], "give --ranks G too"),
    (["--ranks", "1"], "give --step-rate N (samples/s a rank) or --model"),
    (["--ranks", "1", "--step-rate", "100", "--model", "cnn-small"], "one of the two"),
    (["--ranks", "1", "--step-rate", "100", "--nproc", "2"], "drop --nproc"),
    (["--ranks", "1", "--step-rate", "100", "--num-workers", "0,1"], "give counts of 1 or more"),
    (["--ranks", "1", "--step-rate", "100", "--batch-size", "8,16"],
     "--ranks answers one loader a rank: give one value of --batch-size, not 8, 16"),
])
def test_options_that_cannot_go_with_ranks_are_refused(burn, tmp_path, args, says):
    assert says in refused("--dataset", "ka_scenarios:BurnMap", *args, "--out", str(tmp_path / "r.jsonl"))


def test_a_paced_consumer_never_takes_batches_faster_than_its_step_rate():
    """Batches always ready: 20 of 4 samples at 400 samples/s take at least 20 x 10 ms (load can only delay a
    wake-up; the deadlines are absolute, so a late one is not added to the next)."""
    c = PacedConsumer(400.0)
    t0 = time.perf_counter()
    for _ in range(20):
        now = time.perf_counter()
        assert c.step({"n": 4}, now, now) == pytest.approx(0.01)
    assert time.perf_counter() - t0 >= 20 * 0.01


def test_a_paced_consumers_deadlines_absorb_a_late_wake_up_and_start_after_a_real_wait():
    """The deadlines themselves, not their timing: a batch that was ready starts at the last deadline however late
    the consumer asked (a wake-up delayed by load costs no step), and one that had to be waited for starts when
    it came."""
    c = PacedConsumer(1000.0)  # a batch of 5: 5 ms
    now = time.perf_counter()
    c.step({"n": 5}, now, now)
    first_end = c.end
    late = time.perf_counter() + 0.003  # asked 3 ms after the deadline, found ready
    c.step({"n": 5}, late, late)
    assert c.end == pytest.approx(first_end + 0.005, abs=1e-9)
    asked = time.perf_counter()
    c.step({"n": 5}, asked, asked + 0.05)  # waited 50 ms for it
    assert c.end == pytest.approx(asked + 0.05 + 0.005, abs=1e-9)


def ranks_run(tmp_path: Path, rate: float, *extra: str, burn_s: float = BURN_S
              ) -> tuple[subprocess.CompletedProcess, list]:
    out = tmp_path / "ranks.jsonl"
    env = dict(os.environ, KA_BURN_S=str(burn_s), KA_N="800", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "dataperf", "sweep", "--dataset", "ka_scenarios:BurnMap", "--ranks", "2",
           "--step-rate", str(rate), "--batch-size", "8", "--min-batches", "3", "--no-collect", "--out", str(out),
           *(extra if "--repeat-seconds" in extra else (*extra, "--repeat-seconds", "1"))]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p, results.load(out)


@pytest.mark.slow
def test_two_ranks_paced_below_the_cores_rate_are_fed_by_one_worker_each(tmp_path):
    """Each rank asks 10 samples/s; one worker burning 2 ms a sample gives up to 500, and two ranks' workers
    need 0.04 of the 2 cores (fed even where other processes leave a worker a tenth of a core): every count feeds
    every rank, so the pick is 1 worker a rank and the model binds. A paced consumer cannot go faster than its
    rate, and it is fed: each rank within 0.8-1.0 of it."""
    p, recs = ranks_run(tmp_path, 10, "--num-workers", "1,2", "--repeat-seconds", "3", "--persistent-workers", "on",
                        burn_s=0.002)
    ranks = [r for r in recs if r.kind == "ranks"]
    assert [r.config["num_workers"] for r in ranks] == [1, 2] and all(r.status == "ok" for r in ranks)
    for r in ranks:
        assert r.ranks == 2 and r.consumer == results.CONSUMER_GIVEN and r.demand_samples_per_s_per_rank == 10
        assert len(r.fed_samples_per_s_per_rank) == 2 and len(r.data_wait_fraction_per_rank) == 2
        assert r.fed_samples_per_s_total == pytest.approx(sum(r.fed_samples_per_s_per_rank))
        assert all(0.8 * 10 <= x <= 10 * 1.02 for x in r.fed_samples_per_s_per_rank), r.fed_samples_per_s_per_rank
    a = verdict.ranks_answer(recs)
    assert a.fed and a.binding == "model" and verdict.ranks.workers(a.pick) == 1
    assert "recommended: 1 worker per rank" in p.stdout
    assert "run: torchrun --nproc_per_node 2" in p.stdout
    assert "each rank: DataLoader(dataset, sampler=DistributedSampler(dataset), batch_size=8, num_workers=1" \
        in p.stdout
    assert all(r.config["persistent_workers"] for r in ranks) and "persistent_workers=True" in p.stdout


@pytest.mark.slow
def test_other_prefetch_and_persistence_values_are_tried_alone_at_the_picks_count_after_the_ladder(tmp_path):
    """--prefetch-factor 2,4 --persistent-workers both: the ladder (1, 2 workers) runs the first of each (prefetch 2,
    not persistent); then prefetch 4 and persistence on, each alone, at the pick's count. Every count feeds the
    10-samples/s consumers (as above), and a paced consumer cannot take more than its rate, so no setting can beat
    the ladder's by over 5%: the recommendation keeps the ladder's, and says what each other one fed."""
    p, recs = ranks_run(tmp_path, 10, "--num-workers", "1,2", "--prefetch-factor", "2,4", "--persistent-workers",
                        "both", "--repeat-seconds", "3", burn_s=0.002)
    ranks = [r for r in recs if r.kind == "ranks"]
    tried = [(r.config["num_workers"], r.config["prefetch_factor"], r.config["persistent_workers"]) for r in ranks]
    assert tried == [(1, 2, False), (2, 2, False), (1, 4, False), (1, 2, True)]
    a = verdict.ranks_answer(recs)
    assert [verdict.ranks.workers(t) for t in a.trials] == [1, 2] and len(a.variants) == 2
    assert a.choice is a.pick and a.fed
    assert "ranks: 1 workers a rank (prefetch 4, pin off, persistent off): " in p.stdout  # its progress line
    assert "at 1 worker a rank, prefetch 4, pin off, persistent off: fed" in p.stdout
    assert "at 1 worker a rank, prefetch 2, pin off, persistent on: fed" in p.stdout
    assert "recommended: 1 worker per rank (prefetch 2, pin off, persistent off)" in p.stdout


@pytest.mark.slow
def test_two_ranks_paced_above_the_cores_rate_share_the_cores_and_the_cores_bind(tmp_path):
    """Each rank asks 1000 samples/s; 2 cores burning 10 ms a sample give at most 200 in all, whatever else runs
    (CPU time does not shrink): the ranks' total is at most 1.1 x 200 and the slowest rank's at most 1.1 x 100 (the
    scheduler need not split the cores evenly: one count read 88 and 118); the workers keep the cores busy, so the
    cores bind, and the answer says the CPUs feed under one rank."""
    p, recs = ranks_run(tmp_path, 1000, "--num-workers", "1,2")
    a = verdict.ranks_answer(recs)
    assert len(a.trials) == 2 and not a.fed
    truth = cores() / BURN_S
    for r in a.trials:
        assert 0 < r.fed_samples_per_s_total <= 1.1 * truth, r.fed_samples_per_s_per_rank
        assert 0 < r.fed_samples_per_s_slowest <= 1.1 * truth / 2, r.fed_samples_per_s_per_rank
        assert r.cpu_ms_per_sample >= 0.9 * BURN_S * 1000  # every sample burned its 10 ms somewhere we counted
    assert a.binding == "cores"
    assert a.ranks_fed < 1
    assert "INPUT-BOUND" in p.stdout or "NOT SETTLED" in p.stdout
    assert "beside it: rule of thumb (2 workers per GPU): 2 a rank" in p.stdout
    assert "beside it: tf.data default" in p.stdout


@pytest.mark.slow
def test_with_a_model_its_step_is_measured_once_and_every_rank_is_paced_at_it(tmp_path, monkeypatch):
    """--model on a machine with fewer accelerators than ranks (here none): rank 0 measures the step once (a
    paced model of 50 ms a batch of 8: 160 samples/s, never faster), it is written to --out, and both ranks'
    consumers are paced at that rate; the records say so."""
    monkeypatch.setenv("PACED_STEP_S", "0.05")
    out = tmp_path / "ranks.jsonl"
    env = dict(os.environ, KA_BURN_S="0.002", KA_N="800", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-m", "dataperf", "sweep", "--dataset", "ka_scenarios:BurnMap", "--ranks",
                        "2", "--model", "paced:fixed_step_model", "--device", "cpu", "--batch-size", "8",
                        "--num-workers", "1", "--repeat-seconds", "1", "--no-collect", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = results.load(out)
    (step,) = [r for r in recs if r.kind == "step"]
    assert 0.8 * 160 <= step.samples_per_s <= 160 * 1.01
    (r,) = [r for r in recs if r.kind == "ranks"]
    assert r.consumer == results.CONSUMER_MEASURED and r.model == "paced:fixed_step_model" and r.device == "cpu"
    assert r.demand_samples_per_s_per_rank == step.samples_per_s
    assert "paced at the model's step rate, measured once on this machine" in p.stdout
