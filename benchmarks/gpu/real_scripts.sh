#!/usr/bin/env bash
# Issue 50 on a lent GPU machine, unattended: benchmarks/real_scripts.py (the default `dataperf sweep --model`, then
# pytorch/examples' unmodified imagenet/main.py for EPOCHS (3) epochs at the pick's and other worker counts, scored against
# each other). Needs .public/imagenet_main.py carried (git-ignored; real_scripts.py says how to fetch it; its
# sha256 is checked). Everything lands in $OUT/<name> and $OUT/<name>.tar.gz.
#
# About 13 minutes for ResNet-50 on 16,000 JPEGs: start it under setsid and poll, keeping a call in flight:
#   call 1 (carry .public): mkdir -p /tmp/rs; OUT=/tmp/rs setsid nohup bash benchmarks/gpu/real_scripts.sh \
#           >/tmp/rs/job.log 2>&1 </dev/null & sleep 560; tail -c 2500 /tmp/rs/job.log
#   call 2: for i in $(seq 57); do [ -f /tmp/rs/DONE ] && break; sleep 10; done; tail -c 4000 /tmp/rs/job.log;
#           cp /tmp/rs/*.tar.gz /tmp/rs/job.log $OUT/
# Env overrides: OUT (/tmp/rs), ARCH (resnet50), WORKERS (4,6,8,12,16), COUNT (16000), DATA (/tmp/rsdata),
# EPOCHS (3: every epoch after the 1st scored, each epoch start kept), DEADLINE_S (900: no script run starts later), PATHS (sweep; sweep,budget,tune adds about 6 minutes: a third
# call polling as the second does).
OUT=${OUT:-/tmp/rs} NAME=real_scripts
. "$(dirname "$0")/device_prologue.sh"
phase start
copy_tree /tmp/rs-repo || exit 1
export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
name=${ARCH:-resnet50}
python3 benchmarks/real_scripts.py --data "${DATA:-/tmp/rsdata}" --out "$OUT/$name" --arch "${ARCH:-resnet50}" \
  --workers "${WORKERS:-4,6,8,12,16}" --count "${COUNT:-16000}" --deadline-s "${DEADLINE_S:-900}" \
  --paths "${PATHS:-sweep}" --epochs "${EPOCHS:-3}"
phase "real_scripts exit $?"
ls -la "$OUT"
touch "$OUT/DONE"
