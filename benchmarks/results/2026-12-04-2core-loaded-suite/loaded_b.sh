#!/usr/bin/env bash
# Second stream of suite runs at the same commit, beside stream A (its 2 busy loops and its own suite run)
cd /tmp/loadtest2 && . .venv/bin/activate
for i in $(seq ${FIRST:-11} ${LAST:-14}); do
  t0=$(date +%s)
  python -m pytest -p no:cacheprovider -q --durations=60 --basetemp=/tmp/lt2-base tests > /tmp/loaded/run$i.log 2>&1; rc=$?
  echo "run $i rc=$rc $(( $(date +%s) - t0 ))s $(grep -E "[0-9]+ (passed|failed)" /tmp/loaded/run$i.log | tail -1) $(git rev-parse --short HEAD) $(date -u +%H:%M) stream B" >> /tmp/loaded/summary.txt
done
