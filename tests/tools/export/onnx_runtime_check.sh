#!/usr/bin/env bash
# Every job file in deploy/jobs/ trained briefly in one process, exported
# to ONNX and run by ONNX Runtime (CPU) beside tessera_predict on a fixed
# batch: onnx_runtime_check.py holds the two to a relative difference of
# 1e-5 and the same accuracy and AUC (issue #19), with its tables and with
# pooled embeddings as inputs (--embeddings=pooled_inputs, whose table
# files must hold the tables' ids and rows); the model exported as one
# file (--format=tessera) predicts byte for byte what its checkpoint does.
# Fails (never skips) when deploy/python_env.sh's environment lacks onnx or onnxruntime.
#
# Usage: onnx_runtime_check.sh <tessera_local_train> <tessera_ctr_gen>
#          <tessera_export> <tessera_predict> <source root> [job file ...]
set -euo pipefail
TRAIN="$1"
GEN="$2"
EXPORT="$3"
PREDICT="$4"
ROOT="$5"
shift 5
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
# Found, not imported (an import takes seconds; a broken one fails the
# check at its first step anyway).
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("onnx", "onnxruntime")))' 2>/dev/null; then
  echo "onnx_runtime_check: no Python environment with onnx and" \
       "onnxruntime at $PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT

"$GEN" --train_examples=6000 --test_examples=1000 --vocab_size=2000 \
  --interaction_fields=8 --out_dir="$DIR/ctr" > /dev/null 2>&1

# The shipped jobs, and two of the layer kinds and options they do not use.
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=("$ROOT"/deploy/jobs/*.textproto "$HERE"/every_layer_*.textproto)
fi
for file in "${files[@]}"; do
  job="$(basename "$file" .textproto)"
  data=()
  if grep -q 'format: "criteo"' "$file"; then
    data=(--data_dir="$DIR/ctr")
  fi
  ckpt="$DIR/$job/ckpt"
  "$TRAIN" --job_file="$file" "${data[@]}" --epochs=1 --train_examples=3000 \
    --test_examples=500 --checkpoint_dir="$ckpt" > "$DIR/$job.train" 2>&1 || {
    cat "$DIR/$job.train"; echo "FAIL: $job did not train"; exit 1; }
  "$EXPORT" --checkpoint="$ckpt" --output="$DIR/$job.onnx" > /dev/null
  "$PREDICT" --checkpoint="$ckpt" "${data[@]}" --max_examples=500 \
    --output="$DIR/$job.predictions" --write_inputs="$DIR/$job.inputs" \
    2> "$DIR/$job.metrics"
  pooled=()
  if grep -q embedding_bag "$file"; then
    "$EXPORT" --checkpoint="$ckpt" --embeddings=pooled_inputs \
      --tables_dir="$DIR/$job.tables" --output="$DIR/$job.pooled.onnx" \
      > /dev/null
    pooled=("$DIR/$job.pooled.onnx" "$DIR/$job.tables")
  fi
  "$PYENV/bin/python" "$HERE/onnx_runtime_check.py" "$job" "$DIR/$job.onnx" \
    "$DIR/$job.inputs" "$DIR/$job.predictions" "$DIR/$job.metrics" \
    "${pooled[@]}"
  # The single-file model predicts exactly what the checkpoint does.
  "$EXPORT" --checkpoint="$ckpt" --format=tessera \
    --output="$DIR/$job.model" > /dev/null
  "$PREDICT" --checkpoint="$DIR/$job.model" "${data[@]}" --max_examples=500 \
    --output="$DIR/$job.from_file" 2> /dev/null
  cmp "$DIR/$job.predictions" "$DIR/$job.from_file" || {
    echo "FAIL: $job: the --format=tessera file predicts differently"; exit 1; }
done
echo "PASS"
