#!/usr/bin/env bash
# Install the optional loader backends into the active environment without moving torch or numpy.
# usage: bash scripts/install_backends.sh [spdl] [torchdata] [litdata]   (default: all three)
set -euo pipefail
want=("${@:-spdl torchdata litdata}")
for b in ${want[@]}; do
  case "$b" in
    spdl) pip install 'spdl-core==0.8.0' ;;
    torchdata) pip install 'torchdata==0.11.0' ;;
    litdata) pip install --no-deps 'litdata==0.2.76' && pip install lightning-utilities boto3 requests filelock ;;
    streaming) echo "mosaicml-streaming needs numpy<2.2, torchvision, transformers: bash scripts/streaming_env.sh" >&2; exit 2 ;;
    *) echo "unknown backend $b (spdl, torchdata, litdata)" >&2; exit 2 ;;
  esac
done
python -c "import torch; print('torch', torch.__version__)"
