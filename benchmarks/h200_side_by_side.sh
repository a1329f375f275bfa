#!/usr/bin/env bash
# Every loader backend side by side on the lent H200 (issue 16): the DataLoader over WebDataset shards, DALI
# (CPU and GPU decode), torchdata.nodes (thread and process workers), SPDL (threads) and LitData, each with
# 4, 8 and 16 workers (DALI: threads), on one JPEG dataset generated here with 16 shards (every worker gets a
# shard), decoded and resized, same timer and footprint meter. Run from the repo root:
#     bash benchmarks/h200_side_by_side.sh          # OUT= where the log and JSONL go (default results/)
# What the machine lacks travels with the call (benchmarks/README.md says which call carries what):
#   .whl/   webdataset, braceexpand, torchdata, spdl_core, litdata, boto3, botocore, jmespath, s3transfer
#           (litdata imports boto3), astunparse, gast, optree (DALI imports them)
#   .dali/  dali.tar.xz.part-*: DALI 2.4.0's site folder with nvimgcodec and nvjpeg (CUDA 12), xz, split
#           (or DALI_PARTS= a folder where earlier calls left the parts)
# Env: SITE (/tmp/site), WHL (.whl), DALI_PARTS (.dali), DATA (/tmp/bench-backends), WORKERS (4,8,16),
# COUNT (2048), SOURCE (512 px stored), SIZE (224 px decoded), BACKENDS, BUDGET_S (450: the run stops there,
# keeping the trials done). Without DALI or a GPU those trials are skipped with a line saying so.
set -euo pipefail
out=${OUT:-results}
site=${SITE:-/tmp/site}
whl=${WHL:-.whl}
parts=${DALI_PARTS:-.dali}
mkdir -p "$out" "$site"
export PYTHONUNBUFFERED=1
{
  date -u +"%Y-%m-%dT%H:%M:%SZ start"
  if compgen -G "$whl/*.whl" >/dev/null; then
    # all at once; where one wheel is not for this Python (a dry run elsewhere), one by one, skipping it
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" "$whl"/*.whl 2>/dev/null ||
      for w in "$whl"/*.whl; do
        python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" "$w" 2>/dev/null ||
          echo "skip $w: not for this Python"
      done
  fi
  if compgen -G "$parts/dali.tar.xz.part-*" >/dev/null; then
    cat "$parts"/dali.tar.xz.part-* | tar -C "$site" -xJf -
  fi
  export PYTHONPATH=$site:$PWD
  python3 - <<'EOF'
import importlib, torch
have = []
for m in ("webdataset", "torchdata", "spdl", "litdata", "nvidia.dali"):
    try:
        have.append(f"{m} {getattr(importlib.import_module(m), '__version__', '?')}")
    except Exception as e:
        have.append(f"{m} missing ({type(e).__name__}: {e})")
print("python", __import__("sys").version.split()[0], "torch", torch.__version__,
      "gpu", torch.cuda.get_device_name() if torch.cuda.is_available() else "none", "|", "; ".join(have))
EOF
  timeout "${BUDGET_S:-450}" python3 benchmarks/backends_side_by_side.py "${DATA:-/tmp/bench-backends}" \
    --backends "${BACKENDS:-webdataset,dali,torchdata,spdl:thread,litdata}" --workers "${WORKERS:-4,8,16}" \
    --dali-decode cpu,mixed --count "${COUNT:-2048}" --source-size "${SOURCE:-512}" --shards 16 \
    --image-size "${SIZE:-224}" --batch-size 32 --repeats 3 --out "$out/backends.jsonl" ||
    echo "stopped: exit $? (124: BUDGET_S reached; the trials above are kept in $out/backends.jsonl)"
  date -u +"%Y-%m-%dT%H:%M:%SZ end"
} 2>&1 | grep -v -iE "nvjpeg2k|nvtiff|nvJPEG2000|If using nvImageCodec" | tee "$out/backends.log"
