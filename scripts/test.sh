#!/usr/bin/env bash
# Install dataperf with its test, DALI, SPDL, torchdata and Ray extras and LitData into .venv (so those backends' tests run),
# then the suite's fast tier and its slow tier (README: each one's time); then Mosaic Streaming's tests in the
# environment of its own it needs (scripts/streaming_env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[dev,dali,gpu,spdl,torchdata,ray]'
bash scripts/install_backends.sh litdata > /dev/null  # litdata's own metadata would move torch: --no-deps there
ruff check --no-cache dataperf tests benchmarks scripts
python -m pytest -p no:cacheprovider tests            # the fast tier (pyproject's addopts: -m 'not slow')
python -m pytest -p no:cacheprovider -m slow tests    # the slow tier (-n 2: see README; not safe yet)
PYTHON=$PWD/.venv/bin/python bash scripts/streaming_env.sh "${TMPDIR:-/tmp}/dataperf-streaming"
