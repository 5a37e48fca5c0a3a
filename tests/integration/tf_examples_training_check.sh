#!/usr/bin/env bash
# Trains Tessera on TFRecord files of tf.train.Example written by the
# TFRecord writer TensorBoard bundles (tf_examples_training_check.py), from
# the Python environment deploy/python_env.sh makes. Fails (never skips)
# when that environment is missing.
#
# Usage: tf_examples_training_check.sh <build dir>
set -euo pipefail
BUILD="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
# Found, not imported (an import takes seconds; a broken one fails the
# check at its first step anyway).
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("tensorboard", "numpy")))' 2>/dev/null; then
  echo "tf_examples_training_check: no Python environment with tensorboard" \
       "at $PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
"$PYENV/bin/python" "$HERE/tf_examples_training_check.py" "$BUILD" "$DIR"
