#!/usr/bin/env bash
# The course's Fashion-MNIST MLP and a small CNN, saved by Keras 3, imported
# with their weights, trained by a Tessera cluster (tessera_local: 2
# parameter servers, 2 workers) from those weights for one short epoch
# (--init_checkpoint, whose one-server checkpoint the restore re-shards),
# exported, and evaluated by Keras on the same test examples: Keras'
# accuracy must be Tessera's final test accuracy to 0.001 (issue #34).
#
# Usage: keras_fashion_mnist_check.sh <tessera_keras> <tessera_local>
#          <source root>
set -euo pipefail
TOOL="$1"
LOCAL="$2"
ROOT="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
# Keras 3 on JAX's CPU backend (TensorFlow is not installed).
export KERAS_BACKEND=jax JAX_PLATFORMS=cpu
# Found, not imported: importing Keras and JAX takes seconds, and a broken
# one fails the check at its first step anyway.
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("keras", "jax", "h5py")))' \
     2>/dev/null; then
  echo "keras_fashion_mnist_check: no Python environment with keras, jax" \
       "and h5py at $PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
PY=("$PYENV/bin/python" "$HERE/keras_check.py")
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
TEST_EXAMPLES=2000

"${PY[@]}" save_course "$DIR" 2>/dev/null
evaluate=()
for m in mlp cnn; do
  "$TOOL" import --model="$DIR/$m.keras" --output="$DIR/$m.textproto" \
    --checkpoint_out="$DIR/$m.init" \
    --data_from="$ROOT/deploy/jobs/mlp_fashion_mnist.textproto" > /dev/null ||
    fail "import $m"
  "$LOCAL" --num_ps=2 --num_workers=2 --run_dir="$DIR/$m.run" -- \
    --job_file="$DIR/$m.textproto" --init_checkpoint="$DIR/$m.init" \
    --epochs=1 --train_examples=3000 --test_examples=$TEST_EXAMPLES \
    --batch_size=64 > "$DIR/$m.log" 2>&1 || { cat "$DIR/$m.log"; fail "train $m"; }
  grep -q '^warm start from ' "$DIR/$m.log" ||
    { cat "$DIR/$m.log"; fail "$m: no warm start from the Keras weights"; }
  accuracy="$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$DIR/$m.log")"
  [ -n "$accuracy" ] || { cat "$DIR/$m.log"; fail "$m: no final test accuracy"; }
  "$TOOL" export --checkpoint="$DIR/$m.run/checkpoints" \
    --output="$DIR/$m.trained.keras" > /dev/null || fail "export $m"
  echo "$m: $(grep '^warm start from ' "$DIR/$m.log"); Tessera's final test accuracy $accuracy"
  evaluate+=("$DIR/$m.trained.keras" "$TEST_EXAMPLES" "$accuracy")
done
"${PY[@]}" evaluate "${evaluate[@]}" 2>/dev/null
echo "keras_fashion_mnist_check: ok"
