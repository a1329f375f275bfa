#!/usr/bin/env bash
# The H200 goals of issues 20 and 13 in one unattended run, one after the other on an otherwise idle machine:
#   1. issue 20: budget_vs_full.py on 200,000 `--like imagenet` files with ResNet-50 (bf16, CUDA): `sweep
#      --budget 5m` against the same sweep unbudgeted, their picks fed to the model in interleaved rounds. Both
#      sweeps get `--batch-size 128` (a training batch on this GPU: at the default 32 the model, not the
#      loader, binds), `--repeats 3` and `--confirm 2` (the picks confirmed fed, which is also issue 13's
#      `--confirm` on CUDA).
#   2. issue 13: tune_vs_grid.py on 48,000 160-px JPEGs in WebDataset shards (enough that 32 workers each read
#      several shards), grid = the worker ladder to 32 x batch 32-256 x prefetch 2 and 8, `--max-batches 100`
#      (>= 3 batches a worker at 32 workers) so the grid fits the lease.
# Start it under setsid so it outlives the device call that starts it; later calls poll OUT/job.log and
# OUT/DONE. Run from the repo root; .whlcore (webdataset, braceexpand wheels) is carried for step 2.
#     mkdir -p /tmp/goals; setsid nohup bash benchmarks/gpu/h200_goals.sh >/tmp/goals/job.log 2>&1 </dev/null &
# A poll call must not `pkill -f` a name its own command line holds: it ends that call (2026-12-03).
# STEPS="20 13" (the default) runs both, STEPS=13 tune_vs_grid alone (2026-12-03: step 1 took 26 min of a
# 30-minute lease, 8.5 of them generating 200,000 images). Env overrides for a dry run elsewhere: OUT, DATA20,
# COUNT20, MODEL, DEVICE, AMP, BUDGET, BS20, EXTRA20, DATA13, COUNT13, MAXB13, BS13, PF13, GRID13 (an earlier
# run's tune_vs_grid folder: its grid is reused, tune and the re-measure run again).
set -uo pipefail
OUT=${OUT:-/tmp/goals}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# a copy of the tree: later device calls re-send the working tree under the running job
rm -rf /tmp/repo && mkdir /tmp/repo && tar -c --exclude=./.venv --exclude=./.dali --exclude=./.whl --exclude=./shards . |
  tar -x -C /tmp/repo && cd /tmp/repo || exit 1
site=/tmp/site
if compgen -G ".whlcore/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whlcore/*.whl
fi
export PYTHONPATH=$site:$PWD
t0=$SECONDS
phase() { echo "[h200_goals] $1 at $((SECONDS - t0)) s ($(date -u +%H:%M:%S))"; }
phase start
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
steps=" ${STEPS:-20 13} "  # which steps: 20 (budget_vs_full), 13 (tune_vs_grid)
if [[ $steps == *" 20 "* ]]; then
python3 benchmarks/budget_vs_full.py "${DATA20:-/tmp/in200k}" --make "${COUNT20:-200000}" --out "$OUT/budget_vs_full" \
  --model "${MODEL:-torchvision.models:resnet50}" --input image --device "${DEVICE:-cuda}" --amp "${AMP:-bf16}" \
  --budget "${BUDGET:-5m}" -- --batch-size "${BS20:-128}" --repeats 3 --confirm 2 ${EXTRA20:-}
phase "budget_vs_full exit $?"
fi
if [[ $steps == *" 13 "* ]]; then
# a poll call may shrink step 2 to what is left of the lease: it writes COUNT13/MAXB13/BS13/PF13 here
[ -f /tmp/goals13.env ] && . /tmp/goals13.env && echo "step 2 overrides: $(cat /tmp/goals13.env)"
python3 benchmarks/tune_vs_grid.py "${DATA13:-/tmp/tvg}" --samples "${COUNT13:-48000}" --prefetch "${PF13:-2,8}" \
  --batch-sizes "${BS13:-32,64,128,256}" \
  --max-batches "${MAXB13:-100}" --out "$OUT/tune_vs_grid" ${GRID13:+--grid-from "$GRID13"}
phase "tune_vs_grid exit $?"
fi
touch "$OUT/DONE"
