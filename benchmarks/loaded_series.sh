#!/usr/bin/env bash
# Issue 27's bar: N sequential runs of the whole suite at one commit, each with 2 busy loops keeping both cores
# busy (the 2-core box). Runs in a clone with its own venv, so the working tree can move meanwhile:
#   git clone /work/main /tmp/loadtest && cd /tmp/loadtest && python3 -m venv .venv &&
#     .venv/bin/pip install -e '.[dev,dali,gpu,spdl,torchdata]' && . .venv/bin/activate &&
#     bash scripts/install_backends.sh litdata
#   mkdir -p /tmp/lsN && (COMMIT=<sha> FIRST=1 LAST=10 LOGDIR=/tmp/lsN setsid nohup \
#     bash benchmarks/loaded_series.sh > /tmp/lsN/driver.log 2>&1 &)
# Before each run it waits while /tmp/hold exists (other work between runs, never beside one); each run's
# log and a summary line (exit code, seconds, pytest's tally, commit, time) land in LOGDIR. Env: CLONE
# (/tmp/loadtest), REPO (/work/main).
cd "${CLONE:-/tmp/loadtest}" && . .venv/bin/activate
git fetch -q "${REPO:-/work/main}" main && git reset -q --hard ${COMMIT:?}
mkdir -p ${LOGDIR:?}
for i in $(seq ${FIRST:-1} ${LAST:-10}); do
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
