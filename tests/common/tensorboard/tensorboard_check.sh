#!/usr/bin/env bash
# Writes an event file with Tessera's writer and reads it back with
# TensorBoard's own reader, from the Python environment that
# deploy/python_env.sh makes. Fails (never skips) when that environment is
# missing.
#
# Usage: tensorboard_check.sh <write_tensorboard_events binary>
set -euo pipefail
WRITER="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import tensorboard' 2>/dev/null; then
  echo "tensorboard_check: no Python environment with tensorboard at" \
       "$PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
"$WRITER" "$DIR/run"
"$PYENV/bin/python" "$HERE/tensorboard_check.py" "$DIR/run"
