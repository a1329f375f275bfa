#!/usr/bin/env bash
# after run 7 is recorded and run 8 has started: hold the series (run 9 could not end in the session), wait for run 8,
# then on the quiet box: the paced pick_quality (sweep and tune paths, the same truth grid) and harness_vs_plain
until grep -q "^run 7 " /tmp/ls8/summary.txt 2>/dev/null && [ -e /tmp/loaded-running ]; do sleep 5; done
touch /tmp/hold
while [ -e /tmp/loaded-running ]; do sleep 5; done
echo "final gap start $(date -u +%H:%M:%S)"
cd /work/main && . .venv/bin/activate
t0=$(date +%s)
PYTHONPATH=.:tests:benchmarks python benchmarks/pick_quality.py --scenario paced --truth-from benchmarks/results/2026-12-04-2core-pick_quality-paced --paths sweep,tune --out /tmp/pqp7/run > /tmp/pqp7.log 2>&1
echo "pick_quality rc=$? $(( $(date +%s) - t0 ))s"
t0=$(date +%s)
PYTHONPATH=/work/main:/work/main/benchmarks python benchmarks/harness_vs_plain.py --out /tmp/hv/m-order-1 --count 2000 --rounds 3 --epochs 5 --min-s 1.0 --workers 0,1,2 > /tmp/hv/m-order-1.log 2>&1
echo "harness rc=$? $(( $(date +%s) - t0 ))s"
echo "final gap end $(date -u +%H:%M:%S)"
