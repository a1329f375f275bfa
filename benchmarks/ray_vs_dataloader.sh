#!/usr/bin/env bash
# Issue 52's side by side: the DataLoader and Ray Data on the same data and model on one machine, each sweep
# picking its own config and feeding the model (--confirm: the fed loop), so each one's pick is read fed.
#   flock /work/bench.lock bash benchmarks/ray_vs_dataloader.sh OUT [COUNT] [SIZE]
# Makes COUNT (1500) JPEGs of SIZE (96) px as files in OUT/data, then runs, with cnn-small on the CPU at batch 32:
#   dataloader: dataperf sweep OUT/data --num-workers 0,1,2 --model cnn-small
#   ray:        dataperf sweep OUT/data --backend ray --ray-concurrency 1,2 --model cnn-small
# Each sweep's output, records and the machine's load before and after land in OUT.
set -euo pipefail
OUT=${1:?OUT}; COUNT=${2:-1500}; SIZE=${3:-96}
PY=${PYTHON:-python}
mkdir -p "$OUT"
{ date -u +%FT%TZ; echo "commit $(git rev-parse --short HEAD)"; nproc; uptime; } > "$OUT/machine.txt"
[ -e "$OUT/data/manifest.json" ] || $PY -m dataperf shards make --kind image --format files --count "$COUNT" \
  --image-size "$SIZE" --out "$OUT/data" > /dev/null
COMMON=(--model cnn-small --batch-size 32 --image-size 64 --repeats 3 --repeat-seconds 4 --budget none --confirm 2)
$PY -m dataperf sweep "$OUT/data" --num-workers 0,1,2 --prefetch-factor 2 "${COMMON[@]}" \
  --out "$OUT/dataloader.jsonl" > "$OUT/dataloader.txt" 2>&1 || echo "dataloader sweep exit $?" >> "$OUT/dataloader.txt"
$PY -m dataperf sweep "$OUT/data" --backend ray --ray-concurrency 1,2 --ray-map-batch 32 "${COMMON[@]}" \
  --out "$OUT/ray.jsonl" > "$OUT/ray.txt" 2>&1 || echo "ray sweep exit $?" >> "$OUT/ray.txt"
uptime >> "$OUT/machine.txt"
grep -hE "^(answer|expect|verdict|pick)" "$OUT/dataloader.txt" "$OUT/ray.txt" || true
