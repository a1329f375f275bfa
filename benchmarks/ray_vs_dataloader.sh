#!/usr/bin/env bash
# Issue 52's side by side: the DataLoader and Ray Data on the same data and model on one machine, each sweep
# picking its own config and feeding the model (--confirm: the fed loop); then the two picks fed again in ROUNDS
# (3) interleaved rounds of `dataperf e2e` (DataLoader, Ray, DataLoader, ...), so the machine's drift between the
# two sweeps lands on both alike and their ratio is read from the same rounds (benchmarks/ray_gpu_goal.py side).
#   flock /work/bench.lock bash benchmarks/ray_vs_dataloader.sh OUT [COUNT] [SIZE]
# Makes COUNT (1500) JPEGs of SIZE (96) px as files in OUT/data, then runs, with cnn-small on the CPU at batch 32:
#   dataloader: dataperf sweep OUT/data --num-workers 0,1,2 --model cnn-small
#   ray:        dataperf sweep OUT/data --backend ray --ray-concurrency 1,2 --model cnn-small
# Each sweep's output and records, the rounds' (e2e-dataloader.*, e2e-ray.*), side.txt and the machine's load
# before and after land in OUT.
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
mapfile -t dl < <($PY benchmarks/ray_gpu_goal.py args "$OUT/dataloader.jsonl" dataloader)
mapfile -t rp < <($PY benchmarks/ray_gpu_goal.py args "$OUT/ray.jsonl" pick)
E2E=(--model cnn-small --steps "${STEPS:-40}" --repeats 1 --warmup 5 --no-predict)
for i in $(seq "${ROUNDS:-3}"); do
  $PY -m dataperf e2e "$OUT/data" "${dl[@]}" "${E2E[@]}" --out "$OUT/e2e-dataloader.jsonl" \
    >> "$OUT/e2e-dataloader.txt" 2>&1 || echo "round $i dataloader exit $?" >> "$OUT/e2e-dataloader.txt"
  $PY -m dataperf e2e "$OUT/data" --backend ray "${rp[@]}" "${E2E[@]}" --out "$OUT/e2e-ray.jsonl" \
    >> "$OUT/e2e-ray.txt" 2>&1 || echo "round $i ray exit $?" >> "$OUT/e2e-ray.txt"
done
uptime >> "$OUT/machine.txt"
grep -hE "^(answer|expect|verdict|pick)" "$OUT/dataloader.txt" "$OUT/ray.txt" || true
$PY benchmarks/ray_gpu_goal.py side "$OUT/ray.jsonl" "$OUT/e2e-ray.jsonl" "$OUT/dataloader.jsonl" \
  "$OUT/e2e-dataloader.jsonl" | tee "$OUT/side.txt"
