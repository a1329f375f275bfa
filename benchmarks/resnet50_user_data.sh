#!/usr/bin/env bash
# H200 (issue 12): torchvision's ResNet-50 fed from a user-layout ImageFolder tree (class sub-folders, no
# manifest.json) of photo-like JPEGs with ImageNet-1k's sizes and bytes (`shards make --like imagenet`), through
# `sweep` with the imagenet-train transform and the model's verdict, then `e2e` at the workers the sweep found.
# Run from the repo root with PYTHONPATH set to it; needs torchvision matching the host's torch (the H200 has
# torch 2.11 + torchvision 0.26) and no webdataset (files format). Expected to take about 5 minutes on 16 cores
# (the budget is 8); phases are timed. WORKERS, PREFETCH, REPEATS, MAX_BATCHES, STEPS shrink it for a short lease.
set -euo pipefail
OUT=${OUT:-results/resnet50}
DATA=${DATA:-/tmp/resnet50-data}
COUNT=${COUNT:-8192}
WORKERS=${WORKERS:-4,8,16}
PREFETCH=${PREFETCH:-2,4}
REPEATS=${REPEATS:-5}
MAX_BATCHES=${MAX_BATCHES:-30}
STEPS=${STEPS:-30}
PY=${PY:-python3}
mkdir -p "$OUT"
t0=$SECONDS
phase() { echo "[resnet50_user_data] $1 done at $((SECONDS - t0)) s"; }
$PY -m dataperf shards make --like imagenet --format files --count "$COUNT" --out "$DATA/made" --overwrite \
    | tee "$OUT/generate.log"
phase "generate $COUNT images"
# re-lay the generated files as a user's ImageFolder (1000 class folders, as ImageNet's train/), by hard links
$PY - "$DATA" <<'PY'
import json, os, pathlib, sys
root = pathlib.Path(sys.argv[1]); src = root / "made"; dst = root / "imagefolder"
m = json.loads((src / "manifest.json").read_text())
for f, y in zip(m["files"], m["labels"], strict=True):
    d = dst / f"n{y:08d}"; d.mkdir(parents=True, exist_ok=True)
    t = d / pathlib.Path(f).name
    if not t.exists():
        os.link(src / f, t)
PY
phase "ImageFolder layout"
$PY -m dataperf sweep "$DATA/imagefolder" --decode --transform imagenet-train --num-workers "$WORKERS" \
    --prefetch-factor "$PREFETCH" --batch-size 128 --max-batches "$MAX_BATCHES" --repeats "$REPEATS" --model torchvision.models:resnet50 --input image \
    --amp bf16 --device cuda --out "$OUT/sweep.jsonl" --overwrite 2>&1 | tee "$OUT/sweep.log"
phase "sweep"
# e2e: the loader feeding the real step, at the sweep's recommended workers (16 if it recommended none)
W=$(sed -n 's/^recommended: .* w=\([0-9]*\) .*/\1/p' "$OUT/sweep.log" | head -1)
rm -f "$OUT/e2e.jsonl"
$PY -m dataperf e2e "$DATA/imagefolder" --transform imagenet-train --num-workers "${W:-16}" --batch-size 128 \
    --model torchvision.models:resnet50 --input image --amp bf16 --device cuda --steps "$STEPS" --repeats "$REPEATS" \
    --out "$OUT/e2e.jsonl" 2>&1 | tee "$OUT/e2e.log"
phase "e2e"
