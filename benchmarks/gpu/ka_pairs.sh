#!/usr/bin/env bash
# Issue 49's known answers (benchmarks/pick_quality.py --scenario S1a ... S6) on a lent machine's CPUs, each
# scenario pinned to its own 2 cores (taskset) and run side by side: seven quiet 2-core boxes at once, where the
# project's own 2-core box runs them one after another (about 2.5 hours). No GPU is used. One call a phase:
#   PHASE=truth PATHS=budget            each scenario's truth grid (fed loop and plain loop), then --budget 2m
#   PHASE=paths PATHS=sweep FROM=DIR    the default sweep against the truth in DIR (a folder of the tree)
#   PHASE=paths PATHS=tune  FROM=DIR    tune --model, likewise
#   PHASE=rerun PATHS=sweep,budget,tune FROM=DIR   every path against the truth in DIR (about 8 min)
# carry: .whl (webdataset, braceexpand). Writes $OUT/ka-$PHASE-$S.tar.gz for each scenario as it ends (its folder:
# log.txt, truth and plain JSONL, each path's JSONL and output, summary.json) and $OUT/machine.txt.
set -u
OUT=${OUT:?}
PHASE=${PHASE:-truth}
PATHS=${PATHS:-budget}
SCENARIOS=${SCENARIOS:-S1a S1b S2 S3 S4 S5 S6}
mkdir -p "$OUT"
pip install -q --no-deps .whl/*.whl 2>&1 | tail -1
{ nproc; python -c "import torch, sys; print(torch.__version__, sys.version.split()[0])"
  git rev-parse HEAD 2>/dev/null; lscpu | grep -E "Model name|^CPU\(s\)|Thread"; } > "$OUT/machine.txt" 2>&1
export PYTHONPATH=$PWD:$PWD/tests:$PWD/benchmarks PYTHONUNBUFFERED=1 COLUMNS=200
work=/tmp/ka
mkdir -p "$work"
core=0
for s in $SCENARIOS; do
  args=(--scenario "$s" --out "$work/$s" --paths "$PATHS")
  [ -n "${FROM:-}" ] && args+=(--truth-from "$FROM/$s")
  [ -n "${EXTRA:-}" ] && read -ra more <<< "$EXTRA" && args+=("${more[@]}")
  # each scenario's archive lands in $OUT as it ends: a call cut at its limit still brings back the finished ones
  ( KA_LOCK_FILE="$work/$s.lock" taskset -c "$core,$((core + 1))" \
      python benchmarks/pick_quality.py "${args[@]}" > "$work/$s.out" 2>&1
    tar czf "$OUT/ka-$PHASE-$s.tar.gz" -C "$work" --exclude='*.lock' "$s" "$s.out" ) &
  core=$((core + 2))
done
wait
ls -la "$OUT"
