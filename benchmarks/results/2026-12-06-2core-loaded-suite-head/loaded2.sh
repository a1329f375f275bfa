#!/usr/bin/env bash
# N sequential runs of the suite at one commit, each with 2 busy loops keeping both cores busy;
# before each run, waits while /tmp/hold exists (so other work can run between runs, never beside one)
cd /tmp/loadtest && . .venv/bin/activate
git fetch -q /work/main main && git reset -q --hard ${COMMIT:?}
mkdir -p ${LOGDIR:?}
for i in $(seq ${FIRST:-5} ${LAST:-10}); do
  while [ -e /tmp/hold ]; do sleep 5; done
  echo running > /tmp/loaded-running
  python3 -c 'while True: pass' & b1=$!
  python3 -c 'while True: pass' & b2=$!
  t0=$(date +%s)
  python -m pytest -p no:cacheprovider -o addopts= -q --durations=60 tests > ${LOGDIR:?}/run$i.log 2>&1; rc=$?
  kill $b1 $b2
  echo "run $i rc=$rc $(( $(date +%s) - t0 ))s $(grep -E "[0-9]+ (passed|failed)" ${LOGDIR:?}/run$i.log | tail -1) $(git rev-parse --short HEAD) $(date -u +%H:%M)" >> ${LOGDIR:?}/summary.txt
  rm -f /tmp/loaded-running
done
