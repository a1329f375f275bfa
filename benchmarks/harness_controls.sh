#!/usr/bin/env bash
# Issue 30: where the raw-bytes gap of the paired harness_vs_plain.py reading (0.909 at 0 workers, the H100,
# 2026-12-06) comes from. Raw bytes at 0 and 1 workers, pinned to cores 2,3, ROUNDS rounds each, three ways:
#   blk2: blocks of 2 epochs a side (the reading in question: every dataperf block is a fresh trial whose
#         warm-cache preparation runs right before its 30-ms windows);
#   prep: the same, each plain block preceded (untimed) by that preparation too (--prep-both, the control);
#   blk20: blocks of 20 epochs a side (a tenth as many preparations a timed second).
# TREES="name=dir,..." runs each tree's package (default: this one); .whlcore wheels are installed if present.
#   OUT=DIR [ROUNDS=5] [TREES=main=.,h31=../next] bash benchmarks/harness_controls.sh
. benchmarks/harness_setup.sh
bench=$PWD/benchmarks/harness_vs_plain.py
IFS=, read -ra trees <<< "${TREES:-this=.}"
for way in blk2 prep blk20; do
  case $way in
    blk2) extra="--block-epochs 2";;
    prep) extra="--block-epochs 2 --prep-both";;
    blk20) extra="--block-epochs 20";;
  esac
  for t in "${trees[@]}"; do
    name=${t%%=*}; dir=$(cd "${t#*=}" && pwd)
    PYTHONPATH="$dir:$site" taskset -c 2,3 python3 "$bench" --out "$OUT/$name-$way" --decode off --workers 0,1 \
      --rounds "${ROUNDS:-5}" --min-s 2 $extra > "$OUT/$name-$way.log" 2>&1
    rm -rf "$OUT/$name-$way/data"
    tail -n 3 "$OUT/$name-$way.log" | head -n 2
  done
done
