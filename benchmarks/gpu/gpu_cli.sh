#!/usr/bin/env bash
# The CLI on a CUDA machine, end to end (what RESULTS.md records): e2e with pinned/pageable memory and
# persistent workers, DALI GPU decode feeding the model, profile, diagnose, and a sweep with the verdict.
#   benchmarks/gpu/gpu_cli.sh DATA OUTDIR
# DATA is made if missing, with 32 shards: at least the 16 workers used below, so no worker sits idle (H2).
set -uo pipefail
D=$1
OUT=$2
mkdir -p "$OUT"
if [ ! -f "$D/manifest.json" ]; then
  python3 -m dataperf shards make --count 4000 --image-size 512 --quality 90 --shards 32 --out "$D"
fi
quiet() { grep -v -iE "nvjpeg2k|nvtiff|nvJPEG2000|If using nvImageCodec"; }
run() { echo "\$ dataperf $*"; python3 -m dataperf "$@" 2>&1 | quiet; echo; }
common=(--batch-size 128 --image-size 224 --model cnn-small --device cuda)
{
  run e2e "$D" --num-workers 16 --prefetch-factor 4 --no-pin-memory "${common[@]}" --steps 30
  run e2e "$D" --num-workers 16 --prefetch-factor 4 --pin-memory "${common[@]}" --steps 30
  run e2e "$D" --num-workers 16 --prefetch-factor 4 --pin-memory --persistent-workers "${common[@]}" --steps 30
  run e2e "$D" --backend dali --dali-decode mixed --dali-threads 8 "${common[@]}" --steps 30
  run profile "$D" --num-workers 16 --prefetch-factor 4 "${common[@]}" --out-dir /tmp/dataperf-profile --top 8
  run diagnose "$D" --num-workers 16 --prefetch-factor 4 "${common[@]}" --no-collect
  run sweep "$D" --backend auto,dali --num-workers 8,16 --prefetch-factor 4 --batch-size 128 --decode \
    --image-size 224 --dali-threads 8 --dali-decode cpu,mixed --no-collect --out "$OUT/sweep.jsonl" --overwrite \
    --model cnn-small --device cuda --plot "$OUT/sweep.png"
} 2>&1 | tee "$OUT/gpu_cli.log"
