#!/usr/bin/env bash
# H200: torchvision's ResNet-50 fed from a user-layout ImageFolder tree (no manifest) with the imagenet-train
# transform; sweep with the model's verdict, then e2e at the recommended workers. Needs torchvision matching the
# host's torch (torch 2.11 -> torchvision 0.26.0) and webdataset/braceexpand carried onto the machine.
# `shards make --like imagenet` is not built yet (issue 12): DATA here is made with --format files at 384 px.
set -euo pipefail
OUT=${OUT:-results/resnet50}
mkdir -p "$OUT"
python -m dataperf shards make --kind image --format files --count 4096 --image-size 384 --out /tmp/user-images \
    --overwrite
# re-lay the generated files as a user's ImageFolder (class sub-folders, no manifest.json)
python - <<'PY'
import json, os, pathlib
src = pathlib.Path("/tmp/user-images"); dst = pathlib.Path("/tmp/imagefolder")
m = json.loads((src / "manifest.json").read_text())
for f, y in zip(m["files"], m["labels"] or [0] * len(m["files"])):
    d = dst / f"class{y % 10:02d}"; d.mkdir(parents=True, exist_ok=True)
    t = d / pathlib.Path(f).name
    if not t.exists():
        os.link(src / f, t)
PY
python -m dataperf sweep /tmp/imagefolder --decode --transform imagenet-train --num-workers 4,8,16 \
    --prefetch-factor 2,4 --batch-size 128 --model torchvision.models:resnet50 --input image --amp bf16 \
    --device cuda --out "$OUT/sweep.jsonl" --overwrite --max-batches 30
python -m dataperf e2e /tmp/imagefolder --transform imagenet-train --num-workers 16 --batch-size 128 \
    --model torchvision.models:resnet50 --input image --amp bf16 --device cuda --steps 30 --out "$OUT/e2e.jsonl"
