#!/usr/bin/env bash
# Install dataperf into .venv, generate a small photo-like dataset (ImageNet's image sizes and JPEG bytes) under
# shards/, sweep loader configs cold and warm with the ImageNet training transform, measure a small CNN's
# train step, and print the table and the verdict. A few minutes on 2 cores after the install.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[dev]'
dataperf shards make --like imagenet --format webdataset --count 256 --shards 4 \
  --out shards/quickstart-imagenet --overwrite
# batch 16 for loader and model alike: a CPU train step at 224 px is the slow part of this script; 6 batches
# a repeat give each of 2 workers the 3 a steady rate needs, and a 32-sample shuffle buffer keeps the reads
# inside the timed window on 256 samples (webdataset's 1000 would read every shard in its fill)
dataperf sweep shards/quickstart-imagenet --decode --transform imagenet-train --num-workers 0,1,2 \
  --prefetch-factor 2 --batch-size 16 --max-batches 6 --shuffle-buffer 32 --cache both \
  --out results/quickstart.jsonl --overwrite --model cnn-small
