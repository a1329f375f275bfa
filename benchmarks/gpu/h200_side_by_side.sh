#!/usr/bin/env bash
# Every loader backend side by side on the lent H200 (issue 16): the DataLoader over WebDataset shards, DALI
# (CPU and GPU decode), torchdata.nodes (thread and process workers), SPDL (threads) and LitData, each with
# 4, 8 and 16 workers (DALI: threads), on one JPEG dataset generated here with 16 shards (every worker gets a
# shard), decoded and resized, same timer and footprint meter. Run from the repo root:
#     bash benchmarks/gpu/h200_side_by_side.sh          # OUT= where the log and JSONL go (default results/)
# What the machine lacks travels with the calls (one call carries at most 64 MiB):
#   .whl/      webdataset, braceexpand, torchdata, spdl_core, litdata, lightning_utilities, boto3, botocore,
#              jmespath, s3transfer (litdata imports boto3), astunparse, gast, optree (DALI imports them): 18 MiB
#   .dali/pN/  dali.tar.xz.part-* and dali.tar.xz.sha256: DALI 2.4.0's site folder with nvimgcodec and nvjpeg
#              (CUDA 12), xz-packed (199 MiB), split in 59 MiB parts, one folder per call
#     bash benchmarks/gpu/h200_side_by_side.sh stage     # carry .dali/p1, then p2, p3: parts kept in /tmp/dali-parts
#     bash benchmarks/gpu/h200_side_by_side.sh           # carry .whl and .dali/p4: stages p4, unpacks, runs
# (calls back to back: the machine keeps /tmp only while it stays warm). Missing parts: DALI is skipped.
# Env: SITE (/tmp/site), WHL (.whl), DATA (/tmp/bench-backends), WORKERS (4,8,16), COUNT (2048), SOURCE (512 px
# stored), SIZE (224 px decoded), BACKENDS, BUDGET_S (450: the run stops there, keeping the trials done).
# Without DALI or a GPU those trials are skipped with a line saying so.
set -euo pipefail
out=${OUT:-results}
site=${SITE:-/tmp/site}
whl=${WHL:-.whl}
staged=${STAGED:-/tmp/dali-parts}
mkdir -p "$out" "$site" "$staged"
export PYTHONUNBUFFERED=1
for f in .dali/*/dali.tar.xz.*; do [ -f "$f" ] && cp "$f" "$staged"/; done
if [ "${1:-run}" = stage ]; then ls -l "$staged"; exit 0; fi
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
  if [ -f "$staged/dali.tar.xz.sha256" ] && compgen -G "$staged/dali.tar.xz.part-*" >/dev/null; then
    cat "$staged"/dali.tar.xz.part-* > /tmp/dali.tar.xz
    if (cd /tmp && sha256sum -c --quiet "$staged/dali.tar.xz.sha256"); then
      tar -C "$site" -xJf /tmp/dali.tar.xz && echo "DALI unpacked into $site"
    else
      echo "skip DALI: parts incomplete ($(ls "$staged" | grep -c part-) staged): stage .dali/p1-p3 first"
    fi
    rm -f /tmp/dali.tar.xz
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
  # one process per backend: its PSS then holds no other backend's imports and buffers
  deadline=$((SECONDS + ${BUDGET_S:-450}))
  backends=${BACKENDS:-webdataset,dali,torchdata,spdl:thread,litdata}
  for b in ${backends//,/ }; do
    left=$((deadline - SECONDS))
    if [ "$left" -le 0 ]; then echo "skip $b: BUDGET_S reached"; continue; fi
    timeout "$left" python3 benchmarks/backends_side_by_side.py "${DATA:-/tmp/bench-backends}" --backends "$b" \
      --workers "${WORKERS:-4,8,16}" --dali-decode cpu,mixed --count "${COUNT:-2048}" --source-size "${SOURCE:-512}" \
      --shards 16 --image-size "${SIZE:-224}" --batch-size 32 --repeats 3 --out "$out/backends.jsonl" ||
      echo "$b stopped: exit $? (124: BUDGET_S reached; its trials above are kept in $out/backends.jsonl)"
  done
  date -u +"%Y-%m-%dT%H:%M:%SZ end"
} 2>&1 | grep -v -iE "nvjpeg2k|nvtiff|nvJPEG2000|If using nvImageCodec" | tee "$out/backends.log"
