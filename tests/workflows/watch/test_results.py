"""dataperf/watch/results.py's figures from the hook's lines, on hand-made logs whose answer is set in advance
(nothing timed: the hook's own timing is tested on real jobs in test_watch.py)."""

from __future__ import annotations

import pytest

from dataperf.workflows.watch.launch import Watched
from dataperf.workflows.watch.results import ProcLog, _one

BS, STEPS = 256, 20
GPU_BUSY_MS, CPU_LAUNCH_MS, WAIT_MS = 120.0, 40.0, 300.0


def cuda_job_waiting_on_data() -> ProcLog:
    """A CUDA job as the H200 showed it: each step waits 300 ms for data, the CPU queues the step's kernels in
    40 ms, and the GPU runs them in 120 ms, inside the next wait (the CUDA events see it, step - wait does not)."""
    steps = [{"t": "step", "n": i + 1, "step_ms": WAIT_MS + CPU_LAUNCH_MS, "wait_ms": WAIT_MS, "samples": BS}
             for i in range(STEPS)]
    cuda = [{"t": "cuda", "n": i + 1, "busy_ms": GPU_BUSY_MS, **({"wall_ms": WAIT_MS + CPU_LAUNCH_MS} if i else {})}
            for i in range(STEPS)]
    return ProcLog(start={"pid": 1}, steps=steps, cuda=cuda)


def test_on_cuda_the_models_rate_is_the_gpus_busy_time_not_the_cpus_side():
    r = _one(cuda_job_waiting_on_data(), ["python", "train.py"], "train", Watched(exit_code=0, hook_dir=None), 16)
    assert r.samples_per_s == pytest.approx(BS / ((WAIT_MS + CPU_LAUNCH_MS) / 1000))
    assert r.model_samples_per_s == pytest.approx(BS / (GPU_BUSY_MS / 1000))  # 2,133, not the launch's 6,400
    assert r.gpu_idle_fraction == pytest.approx(1 - GPU_BUSY_MS / (WAIT_MS + CPU_LAUNCH_MS))


def test_without_cuda_events_the_models_rate_is_step_minus_wait():
    log = cuda_job_waiting_on_data()
    log.cuda = []
    r = _one(log, ["python", "train.py"], "train", Watched(exit_code=0, hook_dir=None), 16)
    assert r.model_samples_per_s == pytest.approx(BS / (CPU_LAUNCH_MS / 1000))
    assert r.gpu_idle_fraction is None


def test_uneven_steps_show_the_mean_beside_the_median():
    """With two kinds of step (18 of 100 ms and 2 of 1,000 ms, an evaluation every 10 steps) the median
    says 100 ms where the job's time is 190 ms a step; the mean is recorded and the unevenness noted. The first
    step is start-up, left out of the steady figures."""
    ms = [500.0] + [1000.0 if i % 10 == 9 else 100.0 for i in range(20)]
    log = ProcLog(start={"pid": 1}, steps=[{"t": "step", "n": i + 1, "step_ms": m, "wait_ms": 0.0, "samples": BS}
                                           for i, m in enumerate(ms)])
    r = _one(log, ["python", "train.py"], "train", Watched(exit_code=0, hook_dir=None), 16)
    assert r.step_ms_median == pytest.approx(100.0) and r.step_ms_mean == pytest.approx(190.0)
    assert any("steps are uneven: mean 190.0 ms against median 100.0 ms" in n for n in r.notes)
    even = _one(cuda_job_waiting_on_data(), ["python", "train.py"], "train", Watched(exit_code=0, hook_dir=None), 16)
    assert even.step_ms_mean == pytest.approx(WAIT_MS + CPU_LAUNCH_MS) and not any("uneven" in n for n in even.notes)


def test_a_loader_of_whole_batches_books_its_stages_per_sample():
    """WebDataset's `.batched(16)` under `WebLoader(batch_size=None)`: each item a worker fetches is a batch of
    16, so 10 items fetched in 1.6 s are 10 ms a sample, not 160 (issue 53: 149 ms "a sample" where an image took
    5.3)."""
    steps = [{"t": "step", "n": i + 1, "step_ms": 100.0, "wait_ms": 10.0, "samples": 16, "loader": 0}
             for i in range(10)]
    log = ProcLog(start={"pid": 1}, steps=steps,
                  loaders={0: {"t": "loader", "id": 0, "batch_size": None, "num_workers": 1}},
                  worker_pids=[2], worker_loader={2: 0},
                  worker_fetch={2: {"batches": 10, "samples": 10, "fetch_s": 1.6, "collate_s": 0.0}},
                  end={"loader_batch_max": {"0": 16}, "loader_steps": {"0": 10}, "loader_batches": {"0": 10}})
    r = _one(log, ["python", "train.py"], "train", Watched(exit_code=0, hook_dir=None), 16)
    assert r.stage_ms_per_sample["transform"] == pytest.approx(10.0)
    log.loaders[0]["batch_size"] = 16  # the DataLoader batches: each fetched index is one sample already
    log.worker_fetch[2]["samples"] = 160
    r = _one(log, ["python", "train.py"], "train", Watched(exit_code=0, hook_dir=None), 16)
    assert r.stage_ms_per_sample["transform"] == pytest.approx(10.0)
