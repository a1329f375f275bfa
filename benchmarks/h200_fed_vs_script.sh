#!/usr/bin/env bash
# Issue 26's open question on the H200: dataperf's fed loop read 1,236-1,456 samples/s at 16 workers where a
# plain training script read 2,004 on the same kind of data and model (benchmarks/RESULTS.md, 2026-12-04).
# Both sides in one lease, interleaved (A B, then B A), same data, same config (ResNet-50 fp32, batch 256,
# 16 workers, prefetch 2, pinned, non-persistent, imagenet-train transform, warm cache):
#   A: the plain script (torchvision's own transforms, 80 steps: one 62-batch epoch and part of the next),
#      read by `dataperf watch` (which read such a script within 1% of its own rate, 2026-12-03);
#   B: `dataperf e2e --no-predict` (the fed loop that sweep --confirm and tune run), 62 steps x 2 repeats.
# Small enough for the few minutes of device time left: data (16,000 `--like imagenet` JPEGs laid out as an
# ImageFolder, ~50 s on 16 cores), then each run capped. Everything lands in $OUT/log and $OUT/*.jsonl.
set -uo pipefail
OUT=${OUT:-/tmp/fvs}
mkdir -p "$OUT/log"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
t0=$SECONDS
phase() { echo "[fed_vs_script] $1 at $((SECONDS - t0)) s ($(date -u +%H:%M:%S))" | tee -a "$OUT/log/phases.txt"; }
phase start
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/log/phases.txt"
timeout 120 python3 -m dataperf shards make --like imagenet --format files --count 16000 --out /tmp/made \
  > "$OUT/log/make.log" 2>&1
phase "made (exit $?)"
python3 - <<'EOF'
import json, os
from pathlib import Path
made, root = Path("/tmp/made"), Path("/tmp/if")
m = json.loads((made / "manifest.json").read_text())
for f, y in zip(m["files"], m["labels"], strict=True):  # a user's ImageFolder: class folders, hard links
    d = root / f"n{y:08d}"
    d.mkdir(parents=True, exist_ok=True)
    os.link(made / f, d / Path(f).name)
EOF
cat > /tmp/train16.py <<'EOF'
"""A plain training loop: torchvision ImageFolder + transforms, DataLoader(16 workers, pinned), ResNet-50."""
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from dataperf.measure.models import load_model, loss_of

t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
loader = DataLoader(datasets.ImageFolder("/tmp/if", t), batch_size=256, num_workers=16, shuffle=True,
                    pin_memory=True)
device = torch.device("cuda")
model = load_model("torchvision.models:resnet50").to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
steps = 0
while steps < 80:
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = loss_of(model(x), x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
        if steps == 80:
            break
EOF
phase "imagefolder laid out"
script() {
  timeout 100 python3 -m dataperf watch --out "$OUT/watch.jsonl" -- python3 /tmp/train16.py > "$OUT/log/script$1.log" 2>&1
  phase "script round $1 (exit $?)"
}
fed() {
  timeout 100 python3 -m dataperf e2e /tmp/if --transform imagenet-train --model torchvision.models:resnet50 \
    --input image --device cuda --batch-size 256 --num-workers 16 --pin-memory --steps 62 --repeats 2 \
    --no-predict --out "$OUT/e2e.jsonl" > "$OUT/log/fed$1.log" 2>&1
  phase "fed round $1 (exit $?)"
}
script 1; fed 1; fed 2; script 2
phase done
