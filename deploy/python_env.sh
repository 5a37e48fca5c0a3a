#!/usr/bin/env bash
# Creates the Python environment the checks need (TensorBoard's own event
# file reader, matplotlib for charts, onnx's checker and ONNX Runtime for
# exported models, Keras 3 on JAX's CPU backend for tessera_keras' checks,
# PyTorch and safetensors for tessera_torch's)
# at ${TESSERA_PYENV:-~/.cache/tessera/pyenv}, from PyPI, with pinned
# versions. Safe to run any number of times: it does nothing when the
# environment already holds exactly these pins.
# Needs python3-venv (deploy/install.sh installs it).
set -euo pipefail

PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"

# Pins that work together on Python 3.11. protobuf and numpy are pinned
# too, so that a new major release of either cannot break TensorBoard's
# reader under us.
REQUIREMENTS=(
  tensorboard==2.20.0
  matplotlib==3.10.7
  protobuf==6.33.0
  numpy==2.3.4
  setuptools==80.9.0
  onnx==1.19.1
  onnxruntime==1.23.2
  keras==3.15.1
  jax==0.10.2
  jaxlib==0.10.2
  h5py==3.16.0
  # PyPI's wheel (the CPU-only index is not reachable from CI): about 3 GB
  # with its CUDA libraries, which import torch needs even on a CPU, and
  # about a minute to install; the checks run it on the CPU.
  torch==2.15.0
  safetensors==0.8.0
)

STAMP="$PYENV/.tessera-requirements"
WANTED="$(printf '%s\n' "${REQUIREMENTS[@]}")"

if [ -x "$PYENV/bin/python" ] && [ -f "$STAMP" ] &&
   [ "$(cat "$STAMP")" = "$WANTED" ]; then
  echo "python_env.sh: $PYENV is up to date"
  exit 0
fi

if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "python_env.sh: python3-venv is missing; run deploy/install.sh" >&2
  exit 1
fi

echo "python_env.sh: creating $PYENV"
mkdir -p "$(dirname "$PYENV")"
python3 -m venv "$PYENV"
"$PYENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "${REQUIREMENTS[@]}"
# Proves the install before the stamp says it is good.
"$PYENV/bin/python" -c '
from tensorboard.backend.event_processing import event_accumulator
import matplotlib
import onnx, onnxruntime
import os; os.environ["KERAS_BACKEND"] = "jax"
import keras, h5py
import torch, torch.fx, safetensors.torch
'
echo "$WANTED" > "$STAMP"
echo "python_env.sh: done"
