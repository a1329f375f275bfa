#!/usr/bin/env bash
# loaded series' gap: DALI's stage probe on the quiet 2 cores (512 JPEGs of 256 px, decode to 224), beside the
# files backend's books of the same config
touch /tmp/hold
while [ -e /tmp/loaded-running ]; do sleep 5; done
echo "gap start $(date -u +%H:%M:%S)"
cd /tmp/dx && . /work/main/.venv/bin/activate
for k in 1 2; do
  dataperf bench /tmp/dx/data --backend dali --dali-threads 2 --decode --image-size 224 --batch-size 16 --cache warm \
    --repeats 3 --no-collect --plot /tmp/dx/dali-$k.png --out /tmp/dx/dali.jsonl > /tmp/dx/dali-$k.log 2>&1; echo "dali-$k rc=$?"
  dataperf bench /tmp/dx/data --backend files --num-workers 2 --decode --image-size 224 --batch-size 16 --cache warm \
    --repeats 3 --no-collect --plot /tmp/dx/files-$k.png --out /tmp/dx/files.jsonl > /tmp/dx/files-$k.log 2>&1; echo "files-$k rc=$?"
done
echo "gap end $(date -u +%H:%M:%S)"
rm -f /tmp/hold
