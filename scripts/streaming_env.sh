#!/usr/bin/env bash
# Mosaic Streaming in its own environment, then its backend's tests (tests/backends/test_streaming.py) and the
# reading of a user's MDS folder as DATA (tests/data/test_splits.py).
# usage: bash scripts/streaming_env.sh [VENV]        (default /tmp/dataperf-streaming; PYTHON= the dataperf python)
#
# It cannot join dataperf's environment: mosaicml-streaming 0.11-0.13 pin numpy<2.2, and every release from
# 0.7.6 to 0.13.0 imports torchvision and transformers<5 when `streaming` is imported. So VENV holds its own
# numpy 2.1.3 (torch 2.13.0 runs on it), mosaicml-streaming 0.13.0 installed --no-deps with the modules it
# imports, and sees everything else (torch, dataperf's dependencies) from PYTHON's environment through a .pth.
# torchvision: PyPI's 0.28.0 (the release for torch 2.13.0) is a CUDA build that needs libtorch_cuda.so, so it
# does not load beside a CPU torch. Where no torchvision imports, VENV gets a marked stand-in holding the two
# names streaming.vision imports at import (VisionDataset, to_tensor); they raise if called, and dataperf's
# streaming backend never calls them (it reads MDS through streaming.StreamingDataset).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-/tmp/dataperf-streaming}
py=${PYTHON:-python3}
shared=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$py" -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$shared" > "$site/zz_dataperf_env.pth"  # after VENV's own packages: its numpy wins
"$venv/bin/python" -m pip install -q numpy==2.1.3 transformers==4.57.6 xxhash==3.8.2 zstd==1.5.7.2 \
  python-snappy==0.7.3 Brotli==1.2.1 catalogue==2.0.10 tqdm
"$venv/bin/python" -m pip install -q --no-deps mosaicml-streaming==0.13.0
if ! "$venv/bin/python" -c 'import torchvision' 2>/dev/null; then
  mkdir -p "$site/torchvision/datasets" "$site/torchvision/transforms"
  cat > "$site/torchvision/__init__.py" <<'EOF'
"""Stand-in written by dataperf's scripts/streaming_env.sh: no torchvision loads beside this torch here, and
`import streaming` imports streaming.vision, which needs these names at import only. Not torchvision."""


def missing(*_a, **_k):
    raise ImportError("torchvision stand-in (scripts/streaming_env.sh): install a torchvision that loads")
EOF
  printf 'from torchvision import missing\n\n\nclass VisionDataset:\n    __init__ = missing\n' \
    > "$site/torchvision/datasets/__init__.py"
  : > "$site/torchvision/transforms/__init__.py"
  printf 'from torchvision import missing as to_tensor  # noqa: F401\n' > "$site/torchvision/transforms/functional.py"
  echo "torchvision does not load here: stand-in written to $site/torchvision"
fi
"$venv/bin/python" -c 'import numpy, streaming, torch, transformers; print("streaming", streaming.__version__,
"numpy", numpy.__version__, "torch", torch.__version__, "transformers", transformers.__version__)'
PYTHONPATH=$PWD "$venv/bin/python" -m pytest -p no:cacheprovider tests/backends/test_streaming.py \
  tests/data/test_splits.py::test_an_mds_folder_is_read_through_streaming
