"""On a CUDA machine: `dataperf watch` on an unmodified CUDA training script with known answers.

The dataset sleeps SAMPLE_S per sample (W workers, batch B: a batch every P = B * SAMPLE_S / W); the model is
real CUDA work (matmuls) plus nothing else. Checks, for one plain run and one under torchrun (2 ranks, NCCL,
when 2 GPUs exist, else gloo on one GPU is skipped):
- host data_stall_fraction vs 1 - compute / P, with compute measured by the same script without a loader;
- gpu_idle_fraction >= data_stall_fraction - 0.05 (the GPU cannot be busier than the host lets it);
- the hook's cost per step as a % of step time (< 1%), and NVML peak memory per GPU.
Prints one JSON line per run. Usage: python benchmarks/watch_gpu.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SAMPLE_S, BS, W, STEPS = 0.01, 32, 4, 60

TRAIN = f'''
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Sleepy(Dataset):
    root = os.getcwd()
    def __len__(self): return 100_000
    def __getitem__(self, i):
        time.sleep({SAMPLE_S})
        return torch.randn(1024), i % 10

dist = int(os.environ.get("WORLD_SIZE", "1")) > 1
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
torch.cuda.set_device(dev)
model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(24)], torch.nn.Linear(1024, 10)).to(dev)
if dist:
    torch.distributed.init_process_group("nccl")
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
opt = torch.optim.AdamW(model.parameters())
x0 = torch.randn({BS}, 1024, device=dev); y0 = torch.randint(0, 10, ({BS},), device=dev)
if "--compute-only" in sys.argv:  # the step alone, for the analytic stall
    for _ in range(10):
        opt.zero_grad(); torch.nn.functional.cross_entropy(model(x0), y0).backward(); opt.step()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(30):
        opt.zero_grad(); torch.nn.functional.cross_entropy(model(x0), y0).backward(); opt.step()
    torch.cuda.synchronize(); print((time.perf_counter() - t) / 30 * 1000); sys.exit(0)
loader = DataLoader(Sleepy(), batch_size={BS}, num_workers={W}, pin_memory=True)
for step, (x, y) in enumerate(loader):
    x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
    opt.zero_grad(); torch.nn.functional.cross_entropy(model(x), y).backward(); opt.step()
    if step + 1 == {STEPS}: break
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/watch_gpu"))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    script = a.out / "train_cuda.py"
    script.write_text(TRAIN)
    compute_ms = float(subprocess.run([sys.executable, str(script), "--compute-only"], capture_output=True,
                                      text=True, check=True).stdout.split()[-1])
    period_ms = BS * SAMPLE_S / W * 1000
    import torch

    runs = {"plain": [sys.executable, str(script)]}
    if torch.cuda.device_count() >= 2:
        runs["torchrun2"] = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                             str(script)]
    for name, cmd in runs.items():
        out = a.out / f"{name}.jsonl"
        out.unlink(missing_ok=True)
        p = subprocess.run([sys.executable, "-m", "dataperf", "watch", "--out", str(out), "--", *cmd],
                           capture_output=True, text=True)
        recs = [json.loads(line) for line in out.read_text().splitlines()]
        for r in recs:
            nv = (recs[0].get("collectors") or {}).get("nvml", {})
            print(json.dumps({
                "run": name, "rank": r["rank"], "exit_code": p.returncode, "compute_ms_alone": compute_ms,
                "loader_period_ms": period_ms, "analytic_stall": max(0.0, 1 - compute_ms / period_ms),
                "data_stall_fraction": r["data_stall_fraction"], "gpu_idle_fraction": r["gpu_idle_fraction"],
                "step_ms_median": r["step_ms_median"], "hook_us_per_step": r["hook_us_per_step_median"],
                "hook_overhead_pct": r["hook_overhead_pct"],
                "nvml_peak_used_mib": [g["peak_used_mib"] for g in nv.get("gpus", [])] or nv.get("why"),
                "num_workers_detected": [ld["num_workers"] for ld in r["loaders"]]}))


if __name__ == "__main__":
    main()
