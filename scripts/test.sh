#!/usr/bin/env bash
# Install dataperf with its test and DALI extras into .venv, then run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[dev,dali,gpu]'
ruff check dataperf tests benchmarks scripts
python -m pytest -p no:cacheprovider tests
