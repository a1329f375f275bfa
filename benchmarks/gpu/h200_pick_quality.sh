#!/usr/bin/env bash
# Issue 26 on the H200, unattended: benchmarks/pick_quality.py's `imagenet` scenario end to end (16,000
# `--like imagenet` JPEGs as a user's ImageFolder, torchvision's ResNet-50 at batch 256, bf16 unless AMP=none):
# the truth grid of fed runs, then every decision path (default sweep, sweep --budget, tune, watch's next
# step) scored against it. Everything lands in $OUT/run and one $OUT/run.tar.gz (the device returns few files).
#
# Time: the whole run must fit about 22 minutes of machine time. The plan and its estimate print first; then
# every phase has a cap, so a slow one cannot eat the rest: data ≤ MAKE_CAP_S, the truth grid ≤ GRID_CAP_S
# (the fed windows shrink to fit it), each path's command ≤ PATH_CAP_S (killed with its workers past it; the
# budgeted sweep gets BUDGET + 60 s), and the whole Python run ≤ DEADLINE_S: a path with less than a minute
# left is skipped, and the log says so. Paths run in PATHS order, most wanted first. What a lease cannot
# hold runs in the next one against the same truth: carry this run's folder back into the tree and give
# TRUTH_FROM=<it> PATHS=<the rest> (the data is regenerated from the same seed; the script checks it matches).
#
# Start it under setsid so it outlives the device call that starts it; later calls poll $OUT/job.log and
# $OUT/DONE (a poll must not `pkill -f` a word its own command line holds: that ends the call):
#   call 1 (carry .whlcore): mkdir -p /tmp/pq; OUT=/tmp/pq setsid nohup bash benchmarks/gpu/h200_pick_quality.sh \
#           >/tmp/pq/job.log 2>&1 </dev/null & sleep 570; tail -c 3000 /tmp/pq/job.log
#   call 2, 3: for i in $(seq 57); do [ -f /tmp/pq/DONE ] && break; sleep 10; done; tail -c 3000 /tmp/pq/job.log;
#           cp /tmp/pq/*.tar.gz $OUT/ 2>/dev/null
# Keep a call in flight from start to finish: between calls the machine is given back once idle (30 s), and the
# job with it (2026-12-04, 21:37: a run started at the first call was gone at the next, minutes later). Copy only
# the archive into $OUT: the device returns a limited number of files.
# .whlcore (git-ignored) holds the webdataset, braceexpand and pyyaml wheels the H200 lacks (pyyaml one per
# Python version; webdataset imports yaml), installed by name from it (--no-index --no-deps --target); the files
# scenario does not read shards, so without them it still runs, and says so.
# Env overrides: OUT, SCENARIO (imagenet), DATA (/tmp/pick_quality), COUNT (16000), AMP (bf16|none), PREFETCH
# (2), PERSISTENT (both|off), PIN (both|on), MIN_WORKERS (0), MAX_WORKERS (the cores), BUDGET (3m), PATHS (sweep,budget,tune,watch), CONFIRM (unset: the sweeps' own default), RUN_S (8),
# MAKE_CAP_S (150), GRID_CAP_S (360), PATH_CAP_S (330), DEADLINE_S (1230), TRUTH_FROM.
OUT=${OUT:-/tmp/pq} NAME=h200_pick_quality
. "$(dirname "$0")/device_prologue.sh"
phase start
copy_tree /tmp/repo || exit 1
site=/tmp/site
if compgen -G ".whlcore/*.whl" >/dev/null; then
  # by name from the folder: pip takes the one pyyaml wheel built for this Python (webdataset imports yaml)
  python3 -m pip install -q --no-index --find-links .whlcore --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" webdataset braceexpand $(python3 -c 'import yaml' 2>/dev/null || echo pyyaml)
else
  echo "no .whlcore wheels carried: webdataset and braceexpand are missing (the wds-uneven scenario needs them)"
fi
export PYTHONPATH=$site:$PWD
phase "tree copied, wheels installed"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
args=(--scenario "${SCENARIO:-imagenet}" --data "${DATA:-/tmp/pick_quality}" --count "${COUNT:-16000}"
      --amp "${AMP:-bf16}" --prefetch "${PREFETCH:-2}" --persistent "${PERSISTENT:-both}" --budget "${BUDGET:-3m}"
      --pin "${PIN:-both}" --min-workers "${MIN_WORKERS:-0}" ${MAX_WORKERS:+--max-workers "$MAX_WORKERS"}
      --paths "${PATHS:-sweep,budget,tune,watch}" --run-s "${RUN_S:-8}" --make-cap-s "${MAKE_CAP_S:-150}"
      --grid-cap-s "${GRID_CAP_S:-360}" --path-cap-s "${PATH_CAP_S:-330}" --deadline-s "${DEADLINE_S:-1230}"
      ${CONFIRM:+--confirm "$CONFIRM"} ${TRUTH_FROM:+--truth-from "$TRUTH_FROM"})
timeout 60 python3 benchmarks/pick_quality.py "${args[@]}" --out "$OUT/run" --dry-run
phase "plan printed"
# the Python run keeps its own deadline; this cap is the backstop (TERM, then KILL 30 s later)
timeout -k 30 $(( ${DEADLINE_S:-1230} + 60 )) python3 benchmarks/pick_quality.py "${args[@]}" --out "$OUT/run"
phase "pick_quality exit $?"
[ -f "$OUT/run.tar.gz" ] || tar czf "$OUT/run.tar.gz" -C "$OUT" run
ls -la "$OUT"
touch "$OUT/DONE"
