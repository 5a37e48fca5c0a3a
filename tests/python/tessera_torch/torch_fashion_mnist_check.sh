#!/usr/bin/env bash
# The course's Fashion-MNIST MLP and a BatchNorm CNN as PyTorch modules,
# imported with their initial weights (python3 -m tessera_torch import
# --weights_out), trained by a Tessera cluster (tessera_local: 2 parameter
# servers, 2 workers, async) from those weights for one short epoch
# (tessera_coordinator --init_weights, re-sharded from the state_dict),
# exported with tessera_export --format=safetensors and evaluated by
# PyTorch on the same test examples: PyTorch's accuracy must be Tessera's
# final test accuracy to the last digit printed (issue #45).
#
# Usage: torch_fashion_mnist_check.sh <tessera_local> <tessera_export>
#          <source root>
set -euo pipefail
LOCAL="$1"
EXPORT="$2"
ROOT="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
# Found, not imported: an import of torch takes seconds, and a broken one
# fails the check at its first step anyway.
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import importlib.util as u, sys
sys.exit(not (u.find_spec("torch") and u.find_spec("safetensors")))' \
     2>/dev/null
then
  echo "torch_fashion_mnist_check: no Python environment with torch and" \
       "safetensors at $PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
export PYTHONPATH="$ROOT/python"
PY="$PYENV/bin/python"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
TEST_EXAMPLES=2000

# Python starts twice, not four times (each start imports torch): both
# imports run through the module's main in one interpreter
# (torch_check.py cli), both evaluations in another.
CLI="$DIR/cli.list"
for spec in MLP:x:784:float32 CNN:x:1x28x28:float32; do
  IFS=: read -r name input dims dtype <<< "$spec"
  printf '%q ' "$name.import" import --module="$HERE/torch_models.py:$name" \
    --inputs="$input:$dims:$dtype" --loss=cross_entropy \
    --optimizer=adam:0.001 --output="$DIR/$name.textproto" \
    --weights_out="$DIR/$name.safetensors" \
    --data_from="$ROOT/deploy/jobs/mlp_fashion_mnist.textproto" >> "$CLI"
  echo >> "$CLI"
done
"$PY" "$HERE/torch_check.py" cli "$CLI"
EVALUATE=()
for name in MLP CNN; do
  [ "$(cat "$DIR/$name.import.code")" = 0 ] ||
    { cat "$DIR/$name.import.out" "$DIR/$name.import.err"; fail "import $name"; }
  "$LOCAL" --num_ps=2 --num_workers=2 --run_dir="$DIR/$name.run" -- \
    --job_file="$DIR/$name.textproto" \
    --init_weights="$DIR/$name.safetensors" --epochs=1 \
    --train_examples=3000 --test_examples=$TEST_EXAMPLES --batch_size=64 \
    > "$DIR/$name.log" 2>&1 || { cat "$DIR/$name.log"; fail "train $name"; }
  grep -q '^warm start from ' "$DIR/$name.log" ||
    { cat "$DIR/$name.log"; fail "$name: no warm start from the state_dict"; }
  accuracy="$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$DIR/$name.log")"
  [ -n "$accuracy" ] || { cat "$DIR/$name.log"; fail "$name: no final test accuracy"; }
  "$EXPORT" --format=safetensors --checkpoint="$DIR/$name.run/checkpoints" \
    --output="$DIR/$name.trained.safetensors" > /dev/null || fail "export $name"
  echo "$name: $(grep '^warm start from ' "$DIR/$name.log")"
  EVALUATE+=(+ evaluate "$name" "$DIR/$name.trained.safetensors" \
    "$TEST_EXAMPLES" "$accuracy")
done
"$PY" "$HERE/torch_check.py" "${EVALUATE[@]:1}" ||
  fail "PyTorch's accuracy is not Tessera's (the FAIL lines above)"
echo "torch_fashion_mnist_check: ok"
