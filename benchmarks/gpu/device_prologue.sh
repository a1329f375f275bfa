# Sourced by the device scripts (h200_*.sh) after they set NAME and OUT: strict mode, unbuffered Python, a phase
# clock named after the script, and copy_tree, which runs the rest from a private copy of the tree (each later
# device call re-sends the working tree under a running job).
set -uo pipefail
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$SECONDS
phase() { echo "[$NAME] $1 at $((SECONDS - t0)) s ($(date -u +%H:%M:%S))"; }
copy_tree() {  # $1: the copy's folder, emptied first; the caller's folder becomes it
  rm -rf "$1" && mkdir -p "$1" && tar -c --exclude=./.venv --exclude=./.dali --exclude=./.whl --exclude=./.raywhl --exclude=./shards . |
    tar -x -C "$1" && cd "$1"
}
