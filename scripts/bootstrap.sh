#!/usr/bin/env bash
# Set up seqrec on a fresh machine: a virtual environment in .venv with PyTorch and the project
# (editable, with the test, serve and plot extras). Idempotent: a second run only checks.
#
# PyTorch comes first, pinned, because a plain `torch` requirement resolved on the public index
# pulls the CUDA build with several GB of NVIDIA libraries. Without an NVIDIA GPU (no working
# nvidia-smi) torch is taken from PyTorch's CPU wheel index; when that index cannot be reached
# (offline mirror, firewall) the default index is used instead. With a GPU, the default index
# (CUDA build on Linux). SEQREC_TORCH_INDEX=URL forces an index.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_VERSION=2.13.0
CPU_INDEX=https://download.pytorch.org/whl/cpu
say() { echo "bootstrap: $*"; }

if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    say "seqrec needs Python >= 3.10; '$PY' is $("$PY" --version 2>/dev/null || echo 'not found'): set PYTHON=/path/to/python3.X"
    exit 1
  fi
  say "creating the virtual environment .venv with $("$PY" --version 2>&1)"
  if ! "$PY" -m venv .venv; then
    rm -rf .venv  # a half-made environment would pass the check above on the next run
    say "could not create .venv: on Debian / Ubuntu install the venv module first" \
        "(sudo apt install python3-venv), or set PYTHON to another interpreter"
    exit 1
  fi
  say "upgrading pip"
  .venv/bin/python -m pip install --quiet --upgrade pip
else
  say ".venv exists"
fi
PIP=(.venv/bin/python -m pip install --quiet)

reachable() {  # is a package index answering within a few seconds?
  .venv/bin/python - "$1" <<'EOF' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=5)
EOF
}

if .venv/bin/python -c "import torch" 2>/dev/null; then
  say "torch $(.venv/bin/python -W ignore -c 'import torch; print(torch.__version__)') already installed"
else
  index=${SEQREC_TORCH_INDEX:-}
  if [ -z "$index" ]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      say "NVIDIA GPU found: torch from the default index (CUDA build)"
      index=default
    else
      say "no NVIDIA GPU (no working nvidia-smi): the CPU build of torch, from $CPU_INDEX"
      index=$CPU_INDEX
    fi
  fi
  if [ "$index" != default ]; then
    say "checking that $index answers (5 s timeout)"
    if reachable "$index"; then
      say "installing torch==$TORCH_VERSION from $index"
      # --no-deps: only torch comes from that index; its dependencies (and everything else)
      # come from the default index configured for pip, in the next step
      if ! "${PIP[@]}" --index-url "$index" --no-deps --timeout 30 "torch==$TORCH_VERSION"; then
        say "installing from $index failed: falling back to the default index"
      fi
    else
      say "$index cannot be reached: falling back to the default index"
    fi
  fi
  say "installing torch==$TORCH_VERSION and its dependencies from the default index"
  "${PIP[@]}" "torch==$TORCH_VERSION"
  # -W ignore: torch warns that NumPy is missing, which the project's install brings next
  say "torch $(.venv/bin/python -W ignore -c 'import torch; print(torch.__version__, "CUDA" if torch.version.cuda else "CPU")') installed"
fi

# the entry point check: an editable install made before a command was declared lacks it
if .venv/bin/python -c "import seqrec, seqrec_lab, hypothesis, xdist, fastapi, uvloop, httptools, matplotlib, onnxruntime, onnxscript, optuna, redis, faiss
from importlib.metadata import entry_points
assert 'reproduce' in [e.name for e in entry_points(group='seqrec.commands')]" 2>/dev/null; then
  say "seqrec and its extras already installed"
else
  say "installing seqrec (editable) with the test, serve, plot, export, tune, excel, live and ann extras"
  "${PIP[@]}" -e ".[test,serve,plot,export,tune,excel,live,ann]"
fi
say "done: .venv/bin/seqrec demo runs the quickstart, .venv/bin/python -m pytest -n auto the tests"
