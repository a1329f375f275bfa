# Sourced by benchmarks/harness_trees.sh (on the 2-core box or a lent machine): OUT made,
# webdataset and braceexpand from .whlcore's wheels into $site (where present), and $OUT/machine.txt (cores,
# torch and Python versions, commit, CPU model).
set -u
OUT=${OUT:?}
mkdir -p "$OUT"
site=$(mktemp -d)
if compgen -G ".whlcore/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" --find-links .whlcore \
    webdataset braceexpand pyyaml
fi
{ nproc; python3 -c "import torch, sys; print(torch.__version__, sys.version.split()[0])"; git rev-parse HEAD 2>/dev/null
  lscpu | grep -E "Model name|^CPU\(s\)"; } > "$OUT/machine.txt" 2>&1
