#!/usr/bin/env bash
# Issue 30's harness cost on a quiet many-core machine standing in for the quiet 2-core box: every timing pinned
# to two cores (taskset; 0-worker fresh-process timings to one), so that where a process lands no longer moves a
# sample's time by a third (the H100's unpinned rounds, 2026-12-06: 0.86-1.44).
#   OUT=DIR [PRE=folder holding an older dataperf package] bash benchmarks/harness_pinned.sh
# 1. harness_vs_plain.py, every mode (decode on/off x 0, 1, 2 workers), 5 interleaved rounds, on cores 2,3.
# 2. harness_fresh.py, raw bytes at 0 workers, each timing a fresh process on core 2, 10 rounds of 50 epochs,
#    this tree against PRE if given. .whlcore (webdataset, braceexpand wheels) is installed if present.
. benchmarks/harness_setup.sh
export PYTHONPATH="$PWD:$site"
taskset -c 2,3 python3 benchmarks/harness_vs_plain.py --out "$OUT/inproc" --rounds 5 > "$OUT/inproc.log" 2>&1
trees="main=."
[ -n "${PRE:-}" ] && trees="$trees,pre=$PRE"
python3 benchmarks/harness_fresh.py --out "$OUT/fresh" --rounds 10 --epochs 50 --cpus 2 \
  --trees "$trees" > "$OUT/fresh.log" 2>&1
rm -rf "$OUT/inproc/data" "$OUT/fresh/data"
