#!/usr/bin/env bash
# Writes TFRecord files of tf.train.Example (plain, GZIP and ZLIB) with the
# TFRecord writer the tensorboard package bundles, from the Python
# environment that deploy/python_env.sh makes, and checks that Tessera's
# stream reader reads every value back. Fails (never skips) when that
# environment is missing.
#
# Usage: tf_examples_check.sh <dump_stream_examples binary>
set -euo pipefail
DUMP="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import tensorboard' 2>/dev/null; then
  echo "tf_examples_check: no Python environment with tensorboard at" \
       "$PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
"$PYENV/bin/python" "$HERE/tf_examples_check.py" "$DUMP" "$DIR"
