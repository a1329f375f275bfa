#!/usr/bin/env bash
# Regression gate example: measure BASE (a git ref, default HEAD~1) and the working tree with the same seed
# and 3 repeats, twice each, interleaved, then compare. Exits 1 when head regresses beyond the noise, so CI can gate on it.
#   scripts/compare_example.sh [BASE_REF]
set -euo pipefail
cd "$(dirname "$0")/.."
base_ref=${1:-HEAD~1}
out=results/compare
mkdir -p "$out"
work=$(mktemp -d)
trap 'git worktree remove --force "$work" >/dev/null 2>&1 || true' EXIT
git worktree add --detach "$work" "$base_ref" >/dev/null
data=shards/compare-tokens
[ -f "$data/manifest.json" ] || dataperf shards make --kind tokens --format webdataset --count 512 \
  --median-len 128 --max-len 1024 --shard-mb 1 --seed 0 --out "$data" --overwrite
measure() {  # $1 = source tree, $2 = results file (appended: runs of one config pool their repeats)
  PYTHONPATH="$1" python -m dataperf bench "$data" --num-workers 2 --batch-size 16 --decode --repeats 3 \
    --seed 0 --no-collect --out "$2" >/dev/null
  PYTHONPATH="$1" python -m dataperf step --model gpt-tiny --batch-size 8 --seq-len 128 --repeats 3 \
    --out "$2" >/dev/null
}
rm -f "$out/base.jsonl" "$out/head.jsonl"
for round in 1 2; do  # interleaved, so drift on the machine hits base and head alike
  measure "$work" "$out/base.jsonl"
  measure "$PWD" "$out/head.jsonl"
done
dataperf compare "$out/base.jsonl" "$out/head.jsonl" --metrics step_ms,peak_mem_mib,samples_per_s --threshold 5%
