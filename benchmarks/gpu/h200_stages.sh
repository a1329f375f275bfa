#!/usr/bin/env bash
# Issue 30 on the H200: where a sample's time goes in the ImageNet-like ResNet-50 scenario, and the harness's own
# cost there. 16,000 `--like imagenet` JPEGs (a files dataset; the same seed as pick_quality's imagenet data), warm:
#   1. `dataperf bench` at 12 and 16 workers, batch 256, --transform imagenet-train, decode, pinned, persistent,
#      with the stage waterfall (--plot) and the records (--out);
#   2. `dataperf e2e` of the same config feeding torchvision's ResNet-50 (fp32, batch 256): the fed breakdown with
#      h2d from CUDA events;
#   3. benchmarks/harness_vs_plain.py on 2,000 small JPEGs, workers 0, 4, 16 (16 cores): dataperf against a plain
#      DataLoader loop, and the stage clock's own cost.
# Everything lands in $OUT/stages.tar.gz (the device returns few files). About 12 minutes on the H200; start it
# under setsid and poll, as h200_pick_quality.sh says (carry .whlcore only if shards are wanted; this reads files):
#   mkdir -p /tmp/st; OUT=/tmp/st setsid nohup bash benchmarks/gpu/h200_stages.sh >/tmp/st/job.log 2>&1 </dev/null &
#   sleep 560; tail -c 3000 /tmp/st/job.log
#   then: for i in $(seq 57); do [ -f /tmp/st/DONE ] && break; sleep 10; done; cp /tmp/st/stages.tar.gz $OUT/
# Env overrides: OUT (/tmp/st), COUNT (16000), WORKERS ("12 16"), HARNESS_WORKERS (0,4,16), HARNESS_ROUNDS (5),
# HARNESS_COUNT (4000: 62 batches of 64, so 16 workers get the 3 batches each a repeat needs; 2,000 failed so).
OUT=${OUT:-/tmp/st} NAME=h200_stages
. "$(dirname "$0")/device_prologue.sh"
mkdir -p "$OUT/run"
copy_tree /tmp/repo || exit 1
export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/run/machine.txt"
git log --oneline -1 >> "$OUT/run/machine.txt" 2>/dev/null
DATA=/tmp/stages-data
[ -f "$DATA/manifest.json" ] || timeout 200 python3 -m dataperf shards make --like imagenet --format files \
  --count "${COUNT:-16000}" --out "$DATA" > "$OUT/run/make.log" 2>&1
phase "data made"
for w in ${WORKERS:-12 16}; do
  timeout 240 python3 -m dataperf bench "$DATA" --transform imagenet-train --num-workers "$w" --batch-size 256 \
    --decode --pin-memory --persistent-workers --repeats 3 --plot "$OUT/run/stages-w$w.png" \
    --out "$OUT/run/bench.jsonl" > "$OUT/run/bench-w$w.log" 2>&1
  phase "bench w=$w exit $?"
done
timeout 300 python3 -m dataperf e2e "$DATA" --transform imagenet-train --num-workers 12 --batch-size 256 \
  --pin-memory --persistent-workers --model torchvision.models:resnet50 --input image --device cuda --steps 20 \
  --repeats 3 --out "$OUT/run/e2e.jsonl" > "$OUT/run/e2e.log" 2>&1
phase "e2e exit $?"
(cd benchmarks && timeout 300 python3 harness_vs_plain.py --out "$OUT/run/harness" --workers "${HARNESS_WORKERS:-0,4,16}" \
  --count "${HARNESS_COUNT:-4000}" \
  --rounds "${HARNESS_ROUNDS:-5}") \
  > "$OUT/run/harness.log" 2>&1
phase "harness_vs_plain exit $?"
rm -rf "$OUT/run/harness/data"
tar czf "$OUT/stages.tar.gz" -C "$OUT" run
touch "$OUT/DONE"
phase done
