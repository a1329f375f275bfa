#!/usr/bin/env bash
# Install dataperf into .venv, generate a small default dataset under shards/, run a short sweep, print the table.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[dev]'
dataperf shards make --kind image --format webdataset --count 512 --image-size 128 --shard-mb 2 \
  --out shards/quickstart-image-webdataset --overwrite
dataperf sweep shards/quickstart-image-webdataset --decode --num-workers 0,1,2 --prefetch-factor 2,4 \
  --batch-size 32 --cache both --out results/quickstart.jsonl --overwrite \
  --model cnn-small --model-batch-size 32 --image-size 128
