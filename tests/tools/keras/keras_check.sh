#!/usr/bin/env bash
# tessera_keras against real Keras 3 (issue #34): models built, fitted a
# step and saved by Keras (an MLP and a CNN, Sequential; a Functional
# model of three inputs and two outputs; two Keras-2 to_json() files) are
# imported, checked by tessera_coordinator --dry_run, exported from their
# imported weights and loaded back by Keras, which must find every weight
# bit for bit and the same predictions (logits for a model that output
# logits: the tutorial MLP and a BatchNorm CNN, issue #42); a second
# import of each export must give the same job. Trained models (the
# imported MLP, the shipped MLP and CNN jobs) are exported and Keras'
# predict held to tessera_predict's to 1e-5. Each refused model must exit
# 2 naming its layer, optimizer or compile option, and write nothing.
# Fails (never skips) when deploy/python_env.sh's environment lacks Keras.
#
# Usage: keras_check.sh <tessera_keras> <tessera_coordinator>
#          <tessera_local_train> <tessera_predict> <source root>
set -euo pipefail
TOOL="$1"
COORD="$2"
TRAIN="$3"
PREDICT="$4"
ROOT="$5"
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
  echo "keras_check: no Python environment with keras, jax and h5py at" \
       "$PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
PY=("$PYENV/bin/python" "$HERE/keras_check.py")
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"${PY[@]}" save "$DIR" 2>/dev/null

# A placeholder of TFRecord globs (the multi-input model's data) cannot be
# read yet: the dry run checks the model alone.
dry_run() {
  local data=()
  if grep -q REPLACE_ME "$1"; then data=(--check_data=false); fi
  "$COORD" --dry_run "${data[@]}" --job_file="$1" --chief_host=127.0.0.1:1 \
    --ps_hosts=127.0.0.1:2 --worker_hosts=127.0.0.1:3 --task_type=chief \
    > "$1.dry" 2>&1 || { cat "$1.dry"; fail "dry run of $1"; }
}
# A job file without its comments (the file names they quote differ).
body() { grep -v '^#' "$1"; }
# The model as the dry run resolves it (every default written out) and
# its summary, without the job's partitioning.
model_of() {
  "$COORD" --dry_run --job_file="$1" --chief_host=127.0.0.1:1 \
    --ps_hosts=127.0.0.1:2 --worker_hosts=127.0.0.1:3 --task_type=chief \
    2>&1 | sed '/^parameters:/q'
}

compare=(roundtrip)
for m in mlp cnn multi tutorial_mlp bn_cnn; do
  "$TOOL" import --model="$DIR/$m.keras" --output="$DIR/$m.textproto" \
    --checkpoint_out="$DIR/$m.ckpt" > "$DIR/$m.import" ||
    { cat "$DIR/$m.import"; fail "import of $m.keras"; }
  dry_run "$DIR/$m.textproto"
  "$TOOL" export --checkpoint="$DIR/$m.ckpt" --output="$DIR/$m.out.keras" \
    > /dev/null || fail "export of $m"
  "$TOOL" import --model="$DIR/$m.out.keras" --output="$DIR/$m.again.textproto" \
    > /dev/null || fail "import of the exported $m"
  diff <(body "$DIR/$m.textproto") <(body "$DIR/$m.again.textproto") ||
    fail "$m: the exported model imports to another job"
  compare+=("$DIR/$m.keras" "$DIR/$m.out.keras")
  echo "ok: $m imported, dry run, exported, imported again to the same job"
done
# to_json() of Keras 3 (no weights) and hand-written Keras 2 files.
for m in multi3 keras2_sequential keras2_functional; do
  "$TOOL" import --model="$DIR/$m.json" --output="$DIR/$m.textproto" \
    > "$DIR/$m.import" || { cat "$DIR/$m.import"; fail "import of $m.json"; }
  dry_run "$DIR/$m.textproto"
  echo "ok: $m.json imported, dry run"
done
diff <(body "$DIR/multi3.textproto") <(body "$DIR/multi.textproto") ||
  fail "multi: to_json() and .keras import to different jobs"
"$TOOL" import --model="$DIR/keras2_functional.json" \
  --loss=sparse_categorical_crossentropy \
  --output="$DIR/keras2_loss.textproto" > /dev/null
grep -q 'kind: SOFTMAX_CROSS_ENTROPY' "$DIR/keras2_loss.textproto" ||
  fail "--loss was not taken"

# Refusals: exit 2, the layer (or optimizer) named, nothing written.
refuse() {
  local file="$1" want="$2" out="$DIR/refused.textproto" code=0
  "$TOOL" import --model="$DIR/refused/$file" --output="$out" \
    --checkpoint_out="$DIR/refused.ckpt" 2> "$DIR/refused.err" || code=$?
  [ "$code" = 2 ] || fail "$file: exit code $code, not 2"
  grep -qF "$want" "$DIR/refused.err" ||
    { cat "$DIR/refused.err"; fail "$file: the error does not say: $want"; }
  [ ! -e "$out" ] && [ ! -e "$DIR/refused.ckpt" ] ||
    fail "$file: something was written"
  echo "ok: refused $file: $(cat "$DIR/refused.err")"
}
refuse lstm.keras 'layer "lstm" (LSTM): Tessera has no recurrent layers'
refuse lambda.keras 'layer "double" (Lambda): a Lambda layer is Python code'
refuse channels_first.keras 'layer "conv_cf" (Conv2D): data_format channels_first'
refuse custom.keras 'layer "scale" (Scale): not a layer Tessera has'
refuse rmsprop.keras 'optimizer RMSprop: Tessera has no RMSprop optimizer'
refuse gelu.keras 'layer "gelu_out" (Dense): activation "gelu"'
refuse loss_weights.keras 'compile config: loss_weights [0.5] for output "y"'
refuse float16.keras 'layer "half" (Dense): dtype float16'

# Trained models: the imported MLP and the shipped jobs, one short epoch.
# The shipped jobs read these files; the imported MLP's placeholder names none.
FASHION=/usr/share/datasets/fashion-mnist
compare+=(predict)
for job in "$DIR/mlp.textproto" "$ROOT/deploy/jobs/mlp_fashion_mnist.textproto" \
           "$ROOT/deploy/jobs/cnn_fashion_mnist.textproto"; do
  name="$(basename "$job" .textproto)"
  "$TRAIN" --job_file="$job" --data_dir="$FASHION" --epochs=1 --train_examples=1000 \
    --test_examples=200 --batch_size=50 --checkpoint_dir="$DIR/$name.trained" \
    > "$DIR/$name.train" 2>&1 || { cat "$DIR/$name.train"; fail "train $name"; }
  "$TOOL" export --checkpoint="$DIR/$name.trained" \
    --output="$DIR/$name.trained.keras" > /dev/null || fail "export $name"
  "$PREDICT" --checkpoint="$DIR/$name.trained" --data_dir="$FASHION" --max_examples=300 \
    --output="$DIR/$name.jsonl" 2> /dev/null || fail "predict $name"
  "$TOOL" import --model="$DIR/$name.trained.keras" \
    --output="$DIR/$name.back.textproto" > /dev/null ||
    fail "import of the exported $name"
  dry_run "$DIR/$name.back.textproto"
  diff <(model_of "$job") <(model_of "$DIR/$name.back.textproto") ||
    fail "$name: the exported model imports to another model"
  compare+=("$DIR/$name.trained.keras" "$DIR/$name.jsonl")
done
"${PY[@]}" compare "${compare[@]}" 2>/dev/null
echo "keras_check: ok"
