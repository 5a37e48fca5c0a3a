#!/usr/bin/env bash
# Issue #44's Keras target: an MLP compiled with
# AdamW(learning_rate=CosineDecay(..., warmup_steps=2), global_clipnorm=1.0)
# is imported with its weights (tessera_keras import), trained five steps
# by tessera_local_train on the batch Keras trains on (the first 256
# Fashion-MNIST images, one step per epoch), and exported
# (tessera_keras export). Keras' and Tessera's five losses must agree to
# 1e-5 (printed side by side), the clipping must change Keras' losses (so
# it is tested), and the export must load in Keras with the original's
# optimizer, schedule and clipping and Keras' weights after the steps.
# Fails (never skips) when deploy/python_env.sh's environment lacks Keras.
#
# Usage: keras_training_check.sh <tessera_keras> <tessera_local_train>
set -euo pipefail
TOOL="$1"
TRAIN="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
# Found, not imported: importing Keras and JAX takes seconds, and a broken
# one fails the check at its first step anyway.
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("keras", "jax", "h5py")))' \
     2>/dev/null; then
  echo "keras_training_check: no Python environment with keras, jax and" \
       "h5py at $PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
PY=("$PYENV/bin/python" "$HERE/keras_training_check.py")
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"${PY[@]}" save "$DIR" 2>/dev/null || fail "Keras could not save and train"
"$TOOL" import --model="$DIR/adamw.keras" --output="$DIR/adamw.textproto" \
  --checkpoint_out="$DIR/initial" > "$DIR/import.out" ||
  { cat "$DIR/import.out"; fail "import of adamw.keras"; }
grep -A12 '^optimizer' "$DIR/adamw.textproto"
"$TRAIN" --job_file="$DIR/adamw.textproto" \
  --data_dir=/usr/share/datasets/fashion-mnist --train_examples=256 \
  --batch_size=256 --epochs=5 --test_examples=100 \
  --init_checkpoint="$DIR/initial" --checkpoint_dir="$DIR/trained" \
  --step_losses > "$DIR/train.out" 2>&1 ||
  { cat "$DIR/train.out"; fail "tessera_local_train"; }
awk '$1 == "step" && $3 == "loss" { print $4 }' "$DIR/train.out" \
  > "$DIR/tessera_losses.txt"
"$TOOL" export --checkpoint="$DIR/trained" --output="$DIR/trained.keras" \
  > /dev/null || fail "export of the trained model"
"${PY[@]}" compare "$DIR" "$DIR/tessera_losses.txt" "$DIR/trained.keras" \
  2>/dev/null || fail "Keras and Tessera differ"
echo "keras_training_check: ok"
