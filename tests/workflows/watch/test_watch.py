"""`dataperf watch` on real, unmodified training scripts (written here, no dataperf import) with known answers.

The dataset sleeps SAMPLE_S per sample and the model sleeps STEP_S per forward: with W workers and batch B
the loader delivers a batch every P = B * SAMPLE_S / W, the step needs T = STEP_S, so the steady data stall is
1 - T / P = 1 - 0.1 / 0.3 = 66.7%. Sleeps, not CPU work, so the answer holds on a loaded 2-core box; the
sensitivity to an overhead d in the main process is d / P (5 points needs d = 15 ms per step). The two
workers deliver in pairs, so the steady window (steps after the first) holds an even number of steps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dataperf import results
from dataperf.results import WatchResult
from tests.sigint import default_sigint

pytestmark = pytest.mark.slow  # the slow tier: each test runs a training job under `dataperf watch`

SAMPLE_S, STEP_S, BS, W, STEPS = 0.2, 0.1, 3, 2, 9
ANALYTIC_STALL = 1 - STEP_S / (BS * SAMPLE_S / W)
# the model of every script here: a forward that sleeps STEP_S
SLOW = f'''class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)
    def forward(self, x):
        time.sleep({STEP_S})
        return self.lin(x)
'''

TRAIN = f'''
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Sleepy(Dataset):
    def __init__(self, root):
        self.root = root
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        time.sleep({SAMPLE_S})
        return torch.zeros(3), i

{SLOW}
dist = int(os.environ.get("WORLD_SIZE", "1")) > 1
model = Slow()
sampler = None
if dist:  # no DDP: an all-reduce would charge one rank's data wait to the other's step (see docs/watch.md)
    torch.distributed.init_process_group("gloo")
    sampler = torch.utils.data.distributed.DistributedSampler(Sleepy(os.getcwd()), shuffle=False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Sleepy(os.getcwd()), batch_size={BS}, num_workers={W}, sampler=sampler)
for step, (x, _) in enumerate(loader):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    if step + 1 == {STEPS}:
        break
print("trained", {STEPS}, "steps \\u2713", os.environ.get("USER_SITE_RAN", ""))
print("to stderr", file=sys.stderr)
if dist:
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
'''


def env(**extra) -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", **extra)


def watch(tmp_path: Path, *cmd: str, extra_env: dict | None = None, args=()) -> subprocess.CompletedProcess:
    out = tmp_path / "watch.jsonl"
    return subprocess.run([sys.executable, "-m", "dataperf", "watch", "--out", str(out), *args, "--", *cmd],
                          capture_output=True, text=True, env=env(**(extra_env or {})), cwd=tmp_path, timeout=300)


@pytest.fixture
def script(tmp_path) -> Path:
    p = tmp_path / "train.py"
    p.write_text(TRAIN)
    return p


def check_rank(r: WatchResult) -> None:
    assert r.hook_loaded and r.steps_total == STEPS and r.steps_measured == STEPS - 1
    assert abs(r.data_stall_fraction - ANALYTIC_STALL) < 0.05, (r.data_stall_fraction, ANALYTIC_STALL)
    (ld,) = r.loaders
    assert ld["num_workers"] == W and ld["batch_size"] == BS and ld["prefetch_factor"] == 2
    assert ld["dataset_type"] == "__main__.Sleepy" and ld["iterable"] is False and ld["pin_memory"] is False
    assert ld["batches"] == STEPS and ld["iterators"] == 1
    assert len(r.worker_pids) == W
    assert r.hook_overhead_pct < 1, r.hook_overhead_pct
    # the steady window is 4 pairs of batches, 2.4 s: the loader's W / SAMPLE_S = 10 samples/s; the model, fed,
    # is busy STEP_S a step (a plain sleep, plus backward and the optimizer, which load stretches): BS / STEP_S
    # each block after the first reads it; the first may read high, never low: the workers deliver on their own
    # schedule from start-up, the window starts as step 0 ends, and a late end of step 0 on a loaded box shortens
    # the first block (torchrun beside two busy loops, 2026-12-04: 15.4, then 10.0, 9.97, 9.97)
    first, *rest = r.samples_per_s_repeats
    assert first >= W / SAMPLE_S * 0.95 and all(x == pytest.approx(W / SAMPLE_S, rel=0.05) for x in rest), \
        r.samples_per_s_repeats
    assert r.model_samples_per_s == pytest.approx(BS / STEP_S, rel=0.1)
    assert len(r.samples_per_s_repeats) == len(r.step_ms_repeats) == len(r.data_stall_fraction_repeats) > 1
    # where a batch is made (issue 30): each worker's Dataset sleeps SAMPLE_S a sample (booked as transform: the
    # user's own code), torch's default collate of 3 tiny tensors is far under a millisecond a sample; the loop
    # waits P - T a step of BS samples
    assert r.stage_ms_per_sample["transform"] == pytest.approx(SAMPLE_S * 1000, rel=0.1), r.stage_ms_per_sample
    assert r.stage_ms_per_sample["collate"] < 5, r.stage_ms_per_sample
    assert r.main_wait_ms_per_sample == pytest.approx((BS * SAMPLE_S / W - STEP_S) / BS * 1000, abs=10)


def test_known_stall_workers_exit_code_and_passthrough(tmp_path, script):
    plain = subprocess.run([sys.executable, str(script), "3"], capture_output=True, text=True, env=env(),
                           cwd=tmp_path, timeout=300)
    p = watch(tmp_path, sys.executable, str(script), "3")
    assert p.returncode == 3 == plain.returncode, p.stderr
    assert p.stdout == plain.stdout, "the job's stdout passes through untouched (dataperf prints on stderr)"
    assert p.stderr.startswith(plain.stderr), "the job's stderr comes first, unchanged"
    out = tmp_path / "watch.jsonl"
    (r,) = results.load(out)
    check_rank(r)
    assert r.exit_code == 3 and r.rank is None
    assert r.data_path == str(tmp_path)
    # the job's dataset keeps its working folder as its root, which sweep cannot read: no command, a note
    assert r.next_step == ""
    (none,) = [n for n in r.next_notes if n.startswith("no next command")]
    assert f"--batch-size {BS} --prefetch-factor " in none
    procs = r.collectors["processes"]
    roles = {row["role"].replace(" (exited)", "") for row in procs["per_process"]}
    assert {"job main", "job worker"} <= roles
    assert procs["workers_seen"] >= W
    assert "available" in r.collectors["nvml"]
    assert "input-bound" in p.stderr and "dataperf sweep" in p.stderr
    rep = subprocess.run([sys.executable, "-m", "dataperf", "report", str(out)], capture_output=True, text=True,
                         env=env(), timeout=120)
    assert rep.returncode == 0 and "data_stall_fraction" in rep.stdout, rep.stderr
    cmp = subprocess.run([sys.executable, "-m", "dataperf", "compare", str(out), str(out), "--metrics",
                          "step_ms,data_stall_fraction,samples_per_s"], capture_output=True, text=True, env=env(),
                         timeout=120)
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    assert cmp.stdout.count("watch") >= 3 and "no regression" in cmp.stdout


def test_torchrun_two_gloo_ranks(tmp_path, script):
    p = watch(tmp_path, sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
              str(script))
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("trained") == 2
    recs = results.load(tmp_path / "watch.jsonl")
    assert sorted(r.rank for r in recs) == [0, 1]
    for r in recs:
        check_rank(r)
        assert r.world_size == 2
    assert len({r.config_key for r in recs}) == 2, "each rank is its own config for compare"
    roles = {row["role"].replace(" (exited)", "") for row in recs[0].collectors["processes"]["per_process"]}
    assert {"rank 0 main", "rank 1 main", "rank 0 worker", "rank 1 worker"} <= roles


def test_hook_that_cannot_load_leaves_the_job_running(tmp_path, script):
    p = watch(tmp_path, sys.executable, "-I", str(script), "5")  # -I ignores PYTHONPATH: no hook
    assert p.returncode == 5 and "trained" in p.stdout, p.stderr
    (r,) = results.load(tmp_path / "watch.jsonl")
    assert not r.hook_loaded and r.steps_measured == 0
    assert any("did not load" in n for n in r.notes)
    assert "did not load" in p.stderr and "processes" in r.collectors


def test_user_sitecustomize_is_chained(tmp_path, script):
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'user-site-ran'\n")
    p = watch(tmp_path, sys.executable, str(script),
              extra_env={"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])})
    assert p.returncode == 0, p.stderr
    assert "user-site-ran" in p.stdout
    (r,) = results.load(tmp_path / "watch.jsonl")
    assert r.hook_loaded and r.steps_total == STEPS


def test_ctrl_c_reaches_the_job_and_its_exit_code_comes_back(tmp_path):
    job = tmp_path / "job.py"
    # 'ready' is printed inside the try, so the SIGINT sent after reading it always lands where it is caught
    job.write_text("import sys, time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n"
                   "except KeyboardInterrupt:\n    print('job got SIGINT', flush=True)\n    sys.exit(7)\n")
    proc = subprocess.Popen([sys.executable, "-m", "dataperf", "watch", "--out", str(tmp_path / "w.jsonl"), "--",
                             sys.executable, str(job)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(), cwd=tmp_path, preexec_fn=default_sigint)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "job got SIGINT" in out
    assert proc.returncode == 7, err


def test_attach_by_pid_follows_the_process_tree(tmp_path):
    data = tmp_path / "blob"
    data.write_bytes(os.urandom(64 * 1024))
    go = tmp_path / "go"
    reads = 300
    body = (f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
            f"def read():\n    fd = os.open({str(data)!r}, os.O_RDONLY)\n"
            f"    for _ in range({reads}):\n        os.pread(fd, 4096, 0)\n    os.close(fd)\n")
    job = tmp_path / "job.py"
    # the child starts before the watch (and waits for it), so it is seen alive; the job stays unreaped (a
    # zombie) until the watch ends, so its final counters, holding the child's, are read
    job.write_text("import os, subprocess, sys, time\n"
                   "child = None if len(sys.argv) > 1 else subprocess.Popen([sys.executable, __file__, 'child'])\n"
                   + body + "read()\nif child:\n    child.wait()\n    print(child.pid, flush=True)\n")
    target = subprocess.Popen([sys.executable, str(job)], stdout=subprocess.PIPE, text=True, env=env())
    while not psutil.Process(target.pid).children():  # the child exists before the watch starts
        time.sleep(0.02)
    out = tmp_path / "w.jsonl"
    w = subprocess.Popen([sys.executable, "-m", "dataperf", "watch", "--pid", str(target.pid), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    deadline = time.monotonic() + 120
    line = ""
    while "watching pid" not in line and time.monotonic() < deadline:
        line = w.stderr.readline()
    go.touch()
    child_pid = int(target.stdout.readline())
    _, err = w.communicate(timeout=120)
    target.wait(timeout=120)
    assert w.returncode == 0, err
    (r,) = results.load(out)
    assert not r.hook_loaded and any("attached by pid" in n for n in r.notes)
    procs = r.collectors["processes"]
    rows = {row["pid"]: row for row in procs["per_process"]}
    assert target.pid in rows and child_pid in rows, "the child was followed"
    assert procs["read_syscalls_total"] >= 2 * reads, "the job's and its child's reads"


def test_nsys_absent_is_a_note_and_no_command_is_a_user_error(tmp_path):
    import shutil

    p = watch(tmp_path, sys.executable, "-c", "print('plain job')", args=("--nsys",))
    assert p.returncode == 0 and p.stdout == "plain job\n", p.stderr
    if shutil.which("nsys") is None:
        assert "nsys not installed" in p.stderr
    (r,) = results.load(tmp_path / "watch.jsonl")
    assert not r.hook_loaded, "a job that never imports torch gives no hook data, and says so"
    bad = subprocess.run([sys.executable, "-m", "dataperf", "watch"], capture_output=True, text=True, env=env())
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and len(bad.stderr.splitlines()) == 1


GET_BATCH = '''
import os, sys
import numpy as np
import torch

data_dir = sys.argv[1]

def get_batch(split):  # nanoGPT's: a fresh memmap every batch, no DataLoader
    data = np.memmap(os.path.join(data_dir, f"{split}.bin"), dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - 16, (4,))
    return torch.stack([torch.from_numpy(data[i:i + 16].astype(np.int64)) for i in ix])

model = torch.nn.Embedding(4096, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with open(os.path.join(data_dir, "notes.txt"), "w") as f:
    f.write("written, not read")
for step in range(6):
    x = get_batch("train")
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    if step % 3 == 0:
        get_batch("val")
'''


def test_a_loop_without_a_dataloader_gets_no_verdict_and_names_the_files_it_read(tmp_path):
    """Before: nanoGPT under watch read "not input-bound 0.0%" and "nothing to sweep". Without a
    DataLoader the wait is not measured: the verdict is unknown, and the data files the job opened (counted by the
    hook's audit hook: 6 train.bin memmaps, 2 val.bin; a file written is not read) make the next command."""
    import numpy as np

    data = tmp_path / "data"
    data.mkdir()
    np.arange(4096, dtype=np.uint16).tofile(data / "train.bin")
    np.arange(1024, dtype=np.uint16).tofile(data / "val.bin")
    (tmp_path / "gpt.py").write_text(GET_BATCH)
    p = watch(tmp_path, sys.executable, str(tmp_path / "gpt.py"), str(data))
    assert p.returncode == 0, p.stderr
    (r,) = results.load(tmp_path / "watch.jsonl")
    assert r.steps_total == 6 and r.loaders == []
    assert [(Path(f["path"]).name, f["opens"], f["bytes"]) for f in r.files_read] == [("train.bin", 6, 8192),
                                                                                        ("val.bin", 2, 2048)]
    assert "unknown: no DataLoader batch was timed" in p.stderr and "(it read train.bin)" in p.stderr
    assert "not input-bound" not in p.stderr
    assert r.next_step == f"dataperf bench {data / 'train.bin'}"
    assert f"next: dataperf bench {data / 'train.bin'}" in p.stderr
    assert any("opened train.bin (6x" in n for n in r.next_notes)


EVAL_TRAIN_S, EVAL_SAMPLE_S, EVAL_BATCHES, EVAL_STEPS = 0.05, 0.2, 2, 6
WITH_EVAL = f'''
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Sleepy(Dataset):
    """Samples of s seconds, paced on deadlines: a batch's samples back to back take s each, late wake-ups
    absorbed (after a gap longer than s, a new schedule)."""
    def __init__(self, s, n):
        self.s, self.n, self.d = s, n, None
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        now = time.perf_counter()
        self.d = (now if self.d is None or now > self.d + self.s else self.d) + self.s
        time.sleep(max(0.0, self.d - time.perf_counter()))
        return torch.zeros(3), i

{SLOW}
model = Slow()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(Sleepy({EVAL_TRAIN_S}, 1000), batch_size={BS})
val = DataLoader(Sleepy({EVAL_SAMPLE_S}, {EVAL_BATCHES * BS}), batch_size={BS})
for step, (x, _) in enumerate(train):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        for vx, _ in val:
            model(vx)
    model.train()
    if step + 1 == {EVAL_STEPS}:
        break
'''


def test_an_evaluation_loop_is_not_training_stall(tmp_path):
    """Before: validation batches were counted as training wait. Training here waits 3 x 50 ms a step
    (no workers: nothing is prefetched while the evaluation runs) for a 100 ms step: a 60% stall; after each step
    an evaluation under no_grad waits 2 x 3 x 200 ms for its own loader. Counted together they read (0.15 + 1.2) /
    (0.25 + 1.4) = 82%. The evaluation batches (2 after each of the 5 steady steps' predecessors) are counted
    apart, with their 1.2 s of waiting each."""
    (tmp_path / "ev.py").write_text(WITH_EVAL)
    p = watch(tmp_path, sys.executable, str(tmp_path / "ev.py"))
    assert p.returncode == 0, p.stderr
    (r,) = results.load(tmp_path / "watch.jsonl")
    analytic = BS * EVAL_TRAIN_S / (BS * EVAL_TRAIN_S + STEP_S)
    assert r.data_stall_fraction == pytest.approx(analytic, abs=0.05), r.data_stall_fraction
    assert r.samples_per_s == pytest.approx(BS / (BS * EVAL_TRAIN_S + STEP_S), rel=0.1)
    evals = EVAL_STEPS - 1  # an evaluation falls in every step after the first; the last one after every step
    assert r.eval_batches == EVAL_BATCHES * evals
    assert r.eval_wait_s == pytest.approx(evals * EVAL_BATCHES * BS * EVAL_SAMPLE_S, rel=0.1)
    assert r.eval_s > r.eval_wait_s
    assert any(n.startswith(f"evaluation: {EVAL_BATCHES * evals} batches") for n in r.notes)
    # no workers: the training batches are made in the main process, 50 ms a sample of the Dataset's own sleep;
    # the evaluation loader's slower samples are not the training loader's
    assert r.stage_ms_per_sample["transform"] == pytest.approx(EVAL_TRAIN_S * 1000, rel=0.1), r.stage_ms_per_sample
