#!/usr/bin/env bash
# One lease, several experiments in a row (never side by side: they would share the 16 cores): each `NAME=SCRIPT`
# argument runs `OUT=/tmp/chain/NAME bash SCRIPT` with the environment given, in order; when all are done,
# /tmp/chain/DONE. Start it under setsid in the first device call and poll in the next ones (a call must stay in
# flight: the machine is given back 30 s after the last one, and the job with it):
#   call 1: mkdir -p /tmp/chain; (ENV_pq="..." setsid nohup bash benchmarks/gpu/h200_chain.sh pq=benchmarks/gpu/h200_pick_quality.sh \
#             st=benchmarks/gpu/h200_stages.sh >/tmp/chain/job.log 2>&1 </dev/null &); sleep 570; tail -c 2000 /tmp/chain/*/job.log
#   call 2+: for i in $(seq 57); do [ -f /tmp/chain/DONE ] && break; sleep 10; done; cp /tmp/chain/*/*.tar.gz $OUT/
# Each experiment's own overrides come in ENV_<NAME> as `K=V K=V` (e.g. ENV_pq="PATHS=tune,sweep AMP=none").
root=/tmp/chain OUT=/tmp/chain NAME=h200_chain
. "$(dirname "$0")/device_prologue.sh"
copy_tree "$root/tree" || exit 1
for arg in "$@"; do
  name=${arg%%=*} script=${arg#*=}
  mkdir -p "$root/$name"
  envs="ENV_$name"
  echo "[h200_chain] $name: $script ${!envs:-} at $(date -u +%H:%M:%S)"
  env ${!envs:-} OUT="$root/$name" bash "$script" > "$root/$name/job.log" 2>&1 </dev/null
  echo "[h200_chain] $name exit $? at $(date -u +%H:%M:%S)"
done
touch "$root/DONE"
