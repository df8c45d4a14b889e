#!/usr/bin/env bash
# Set up seqrec on a fresh machine: a virtual environment in .venv with the CPU build of torch
# (pinned first, so that pip does not pull a multi-GB CUDA build) and the project, editable.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install --quiet torch==2.13.0
fi
if ! .venv/bin/python -c "import seqrec, hypothesis, fastapi, matplotlib" 2>/dev/null; then
  .venv/bin/python -m pip install --quiet -e ".[test,serve,plot]"
fi
