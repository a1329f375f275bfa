#!/usr/bin/env bash
# GPU memory of optimizer choices for gpt-1.3b on the lent H200 (issue 19). Needs the wheels in .whl installed
# into /tmp/site first (see benchmarks/gpu/README.md). Usage: bash benchmarks/gpu/memory_h200.sh table|maxbatch
# table:    every choice at one batch size (one process each), ~5-8 min (first offload trial JIT-builds cpu_adam)
# maxbatch: largest batch for the choices whose point is a larger batch, doubling from 8 then bisecting to 10%
set -euo pipefail
mode=${1:-table}
out=${OUT:-results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 DS_ACCELERATOR=cuda
python3 -c 'import torch, deepspeed, bitsandbytes; print("torch", torch.__version__, "deepspeed", deepspeed.__version__,
"bitsandbytes", bitsandbytes.__version__, torch.cuda.get_device_name())' 2>&1 | tail -1 | tee "$out/versions.txt"
if [ "$mode" = table ]; then
  python3 -m dataperf memory --model gpt-1.3b --seq-len 1024 --batch-size 8 \
    --optimizers adamw,adam8bit,zero2,zero2-offload,zero3,zero3-offload,zero2-adam8bit \
    --out "$out/memory.jsonl" 2>&1 | grep -v -E '\[(INFO|WARNING)\]' | tee "$out/memory_table.log"
else
  python3 -m dataperf memory --model gpt-1.3b --seq-len 1024 --batch-size 8 --repeats 1 --steps 2 --warmup 1 \
    --optimizers adamw,adam8bit,zero2-offload,zero3-offload --max-batch --max-batch-limit 512 --tolerance 10 \
    --out "$out/memory_maxbatch.jsonl" 2>&1 | grep -v -E '\[(INFO|WARNING)\]' | tee "$out/memory_maxbatch.log"
fi
