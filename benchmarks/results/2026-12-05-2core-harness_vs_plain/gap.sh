#!/usr/bin/env bash
# in the loaded series' gap: harness_vs_plain before/after the RawSamples change on the quiet 2 cores, then tests/backends
touch /tmp/hold
while [ -e /tmp/loaded-running ]; do sleep 5; done
echo "gap start $(date -u +%H:%M:%S)"
cd /work/main && . .venv/bin/activate
for k in 1 2; do
  for who in after before; do
    src=/work/main; [ $who = before ] && src=/tmp/before
    t0=$(date +%s)
    (cd $src && PYTHONPATH=$src:$src/benchmarks python benchmarks/harness_vs_plain.py --out /tmp/hv/$who-$k --count 2000 --rounds 3 --epochs 5 --workers 0,1,2 > /tmp/hv/$who-$k.log 2>&1)
    echo "$who-$k rc=$? $(( $(date +%s) - t0 ))s"
  done
done
t0=$(date +%s)
python -m pytest -p no:cacheprovider -o addopts= -q tests/backends > /tmp/hv/backends.log 2>&1; echo "tests/backends rc=$? $(( $(date +%s) - t0 ))s $(tail -1 /tmp/hv/backends.log)"
echo "gap end $(date -u +%H:%M:%S)"
rm -f /tmp/hold
