#!/usr/bin/env bash
# Issue 51's goal on a lent machine (16 cores, one GPU), in ONE device call of at most 10 minutes:
#   1. 16,000 `--like imagenet` JPEGs as files (dataperf shards make; ~40 s on 16 cores);
#   2. ResNet-50's train step measured once on the GPU (`dataperf step`, bf16, batch $BS): the step rate a rank;
#   3. `sweep --ranks G --step-rate <that rate>` for G = 8, 4, 2, 1: G ranks reading at once, each its own split
#      through its own DataLoader (--transform imagenet-train, pinned, persistent workers), each fed by a consumer
#      paced at the GPU's step rate (one GPU stands for G: MLPerf Storage's accelerator emulation); each G's
#      worker ladder is the sweep's own per rank (1 .. 16 / G, the 2 and 4 of the rule of thumb, tf.data's
#      16 / G, past the top while not settled), its run capped at $PER_G_S seconds so the four fit;
#   4. benchmarks/ranks_goal.py scores it: each G's pick >= 0.95 of the best measured, the rule of thumb and
#      tf.data's default beside it, how many ranks the host's CPUs can feed.
# Everything lands in one archive, $OUT/ranks.tgz. The call (no carry needed):
#     bash benchmarks/gpu/ranks.sh
# A tiny dry run on a CPU box: COUNT=600 BS=8 STEP_RATE=400 GS="2 1" WINDOW=1 PER_G_S=120 OUT=/tmp/rk bash ...
# Env overrides: OUT, DATA, COUNT, BS, MODEL, DEVICE, AMP, STEP_RATE (skip the step: pace at this), GS, WINDOW
# (each count's timed window, s), PER_G_S, TRANSFORM.
NAME=ranks
OUT=${OUT:-/tmp/ranks-out}
source "$(dirname "$0")/device_prologue.sh"
copy_tree /tmp/ranks-repo || exit 1
export PYTHONPATH=$PWD
R=/tmp/ranks-run && rm -rf "$R" && mkdir -p "$R"
DATA=${DATA:-/tmp/ranks-data}
BS=${BS:-128}
phase start
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null;
  python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)";
  git rev-parse HEAD 2>/dev/null; uptime; } >"$R/machine.txt" 2>&1
cat "$R/machine.txt"
if [ ! -d "$DATA" ]; then
  python3 -m dataperf shards make --like imagenet --format files --count "${COUNT:-16000}" --out "$DATA" \
    >"$R/make.txt" 2>&1
  phase "data made exit $?"
fi
rate=${STEP_RATE:-}
if [ -z "$rate" ]; then
  python3 -m dataperf step --model "${MODEL:-torchvision.models:resnet50}" --input image --device "${DEVICE:-cuda}" \
    --amp "${AMP:-bf16}" --batch-size "$BS" --repeats 3 --out "$R/step.jsonl" >"$R/step.txt" 2>&1
  phase "step exit $?"
  rate=$(python3 -c "import sys; from dataperf import results; print(f'{results.load(sys.argv[1])[-1].samples_per_s:.1f}')" \
    "$R/step.jsonl")
fi
echo "step rate a rank: $rate samples/s" | tee -a "$R/machine.txt"
files=()
for g in ${GS:-8 4 2 1}; do
  timeout -s INT "${PER_G_S:-100}" python3 -m dataperf sweep "$DATA" --ranks "$g" --step-rate "$rate" \
    --batch-size "$BS" --transform "${TRANSFORM:-imagenet-train}" --pin-memory on --persistent-workers on \
    --repeat-seconds "${WINDOW:-3}" --out "$R/g$g.jsonl" --overwrite >"$R/g$g.txt" 2>&1
  phase "G=$g exit $? ($(grep -c '"kind": "ranks"' "$R/g$g.jsonl" 2>/dev/null || echo 0) counts)"
  files+=("$R/g$g.jsonl")
done
python3 benchmarks/ranks_goal.py --out "$R/goal" "${files[@]}"
phase "scored exit $?"
uptime >>"$R/machine.txt"
tar czf "$OUT/ranks.tgz" -C /tmp ranks-run
phase done
