#!/usr/bin/env bash
# A cluster's checkpoint leaves Tessera (issue #19): DLRM trained by
# tessera_local on 3 parameter servers (every table and dense variable
# split over them), exported and predicted from the checkpoint folder with
# no cluster running. tessera_predict must print the test metrics the
# coordinator printed, and ONNX Runtime must agree with it
# (onnx_runtime_check.py), also with the weights as ONNX external data.
# Fails (never skips) without deploy/python_env.sh's environment.
#
# Usage: onnx_cluster_check.sh <tessera_local> <tessera_ctr_gen>
#          <tessera_export> <tessera_predict> <source root>
set -euo pipefail
LOCAL="$1"
GEN="$2"
EXPORT="$3"
PREDICT="$4"
ROOT="$5"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import onnx, onnxruntime' 2>/dev/null; then
  echo "onnx_cluster_check: no Python environment with onnx and" \
       "onnxruntime at $PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
"$GEN" --train_examples=10000 --test_examples=1000 --interaction_fields=8 \
  --out_dir="$DIR/ctr" > /dev/null 2>&1
"$LOCAL" --num_ps=3 --num_workers=2 --run_dir="$DIR/run" -- \
  --job_file="$ROOT/deploy/jobs/dlrm.textproto" --data_dir="$DIR/ctr" \
  --epochs=1 > "$DIR/train.log" 2>&1 || {
  tail -n 30 "$DIR/train.log"; echo "FAIL: training"; exit 1; }
"$EXPORT" --checkpoint="$DIR/run/checkpoints" --output="$DIR/dlrm.onnx"
"$PREDICT" --checkpoint="$DIR/run/checkpoints" --data_dir="$DIR/ctr" \
  --output="$DIR/predictions" --write_inputs="$DIR/inputs" 2> "$DIR/metrics"
tail -n 1 "$DIR/metrics"
grep "final test" "$DIR/train.log"
# The coordinator's final metrics, to 4 decimals, are tessera_predict's.
acc=$(sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$DIR/train.log")
auc=$(sed -n 's/.*final test AUC \([0-9.]*\).*/\1/p' "$DIR/train.log")
grep -q "accuracy $acc " "$DIR/metrics" || {
  echo "FAIL: tessera_predict's accuracy is not the coordinator's $acc"; exit 1; }
grep -q "auc $auc " "$DIR/metrics" || {
  echo "FAIL: tessera_predict's AUC is not the coordinator's $auc"; exit 1; }
"$PYENV/bin/python" "$HERE/onnx_runtime_check.py" dlrm_3ps "$DIR/dlrm.onnx" \
  "$DIR/inputs" "$DIR/predictions" "$DIR/metrics"
# The weights and tables as ONNX external data (as a model over 2 GB is
# written) give the same outputs.
mkdir "$DIR/external"
"$EXPORT" --checkpoint="$DIR/run/checkpoints" --external_data \
  --output="$DIR/external/dlrm.onnx"
[ -s "$DIR/external/dlrm.onnx.data" ] || {
  echo "FAIL: no external data file"; exit 1; }
"$PYENV/bin/python" "$HERE/onnx_runtime_check.py" dlrm_3ps_external_data \
  "$DIR/external/dlrm.onnx" "$DIR/inputs" "$DIR/predictions" "$DIR/metrics"
echo "PASS"
