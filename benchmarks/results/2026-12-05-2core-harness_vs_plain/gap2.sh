#!/usr/bin/env bash
# loaded series' gap: harness_vs_plain (min 1 s a timing) after/before the RawSamples change, quiet 2 cores
touch /tmp/hold
while [ -e /tmp/loaded-running ]; do sleep 5; done
echo "gap start $(date -u +%H:%M:%S)"
cd /work/main && . .venv/bin/activate
for k in 1 2; do
  for who in after before; do
    src=/work/main; [ $who = before ] && src=/tmp/before
    t0=$(date +%s)
    PYTHONPATH=$src:/work/main/benchmarks python /work/main/benchmarks/harness_vs_plain.py --out /tmp/hv/m-$who-$k --count 2000 --rounds 3 --epochs 5 --min-s 1.0 --workers 0,1,2 > /tmp/hv/m-$who-$k.log 2>&1
    echo "$who-$k rc=$? $(( $(date +%s) - t0 ))s"
  done
done
echo "gap end $(date -u +%H:%M:%S)"
rm -f /tmp/hold
