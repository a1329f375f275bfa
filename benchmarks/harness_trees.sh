#!/usr/bin/env bash
# Issue 30: two (or more) dataperf packages' harness cost against the plain loop, on one lent machine, the trees
# alternating so that the machine's drift falls on each alike. Each run is one harness_vs_plain.py process pinned
# to CPUS (default 2,3) timing each mode it is given in turn, every round (0 workers after worker trials); the
# trees' processes of one rep share a PYTHONHASHSEED (the rep's number): string hashes and the dict layouts that
# follow from them moved a process's reading by 2-3 points on the 2-core box (2026-12-06). BLOCKS=B
# takes a round's epochs in paired blocks of B epochs a side, each dataperf block a trial of its own (B=0: each
# side's epochs in one timing, one trial of many repeats, the issue's own method). .whlcore wheels are installed
# if present. FIRST=N numbers the reps (and their seeds) from N [1].
#   OUT=DIR TREES=new=.,old=../old [REPS=2] [FIRST=1] [ROUNDS=4] [BLOCKS=2] [CPUS=2,3] [ARGS="--decode off --workers 0,1,2"] \
#     bash benchmarks/harness_trees.sh
. benchmarks/gpu/harness_setup.sh
bench=$PWD/benchmarks/harness_vs_plain.py
IFS=, read -ra trees <<< "${TREES:?}"
first=${FIRST:-1}
for rep in $(seq "$first" $((first + ${REPS:-2} - 1))); do
  for t in "${trees[@]}"; do
    name=${t%%=*}; dir=$(cd "${t#*=}" && pwd)
    # shellcheck disable=SC2086
    PYTHONHASHSEED=$rep PYTHONPATH="$dir:$site" taskset -c "${CPUS:-2,3}" python3 "$bench" --out "$OUT/$name-$rep" \
      --rounds "${ROUNDS:-4}" --min-s 2 --block-epochs "${BLOCKS:-2}" ${ARGS:---decode off --workers 0,1,2} > "$OUT/$name-$rep.log" 2>&1
    rm -rf "$OUT/$name-$rep/data"
    echo "== $name rep $rep"; grep -E "ratio|raw|decode" "$OUT/$name-$rep.log" | tail -n 8
  done
done
