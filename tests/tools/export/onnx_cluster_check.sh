#!/usr/bin/env bash
# A cluster's checkpoint leaves Tessera (issue #19): DLRM trained by
# tessera_local on 3 parameter servers (every table and dense variable
# split over them), exported and predicted from the checkpoint folder with
# no cluster running. tessera_predict must print the test metrics the
# coordinator printed, and ONNX Runtime must agree with it
# (onnx_runtime_check.py), also with the weights as ONNX external data.
# Then the same job in hybrid mode (#30): the dense variables live in the
# workers' replicas, and the checkpoint holds them in the replica's file
# beside the servers' shards. It resumes on other numbers of servers and
# workers and in other modes (hybrid on 1 server and 4 workers, then async
# on 3 servers and 1 worker), every epoch once; its export and predictions
# agree with the coordinator's metrics and ONNX Runtime as the async
# job's do, and its ONNX graph is the async job's (same nodes, inputs,
# outputs, initializer names and shapes): only the weights differ.
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
# Found, not imported (an import takes seconds; a broken one fails the
# check at its first step anyway).
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("onnx", "onnxruntime")))' 2>/dev/null; then
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

# Hybrid: epoch 1 on 2 servers x 2 workers, epoch 2 on 1 x 4, epoch 3
# async on 3 x 1, one checkpoint folder throughout.
train_part() {  # name epochs mode num_ps num_workers
  "$LOCAL" --num_ps="$4" --num_workers="$5" --run_dir="$DIR/hybrid" -- \
    --job_file="$ROOT/deploy/jobs/dlrm.textproto" --data_dir="$DIR/ctr" \
    --epochs="$2" --mode="$3" > "$DIR/$1.log" 2>&1 || {
    tail -n 30 "$DIR/$1.log"; echo "FAIL: $1"; exit 1; }
}
train_part hybrid 1 hybrid 2 2
ls "$DIR/hybrid/checkpoints/"*/replica.shards > /dev/null || {
  echo "FAIL: the hybrid checkpoint has no replica file"; exit 1; }
"$EXPORT" --checkpoint="$DIR/hybrid/checkpoints" --output="$DIR/hybrid.onnx"
"$PREDICT" --checkpoint="$DIR/hybrid/checkpoints" --data_dir="$DIR/ctr" \
  --output="$DIR/hybrid_predictions" --write_inputs="$DIR/hybrid_inputs" \
  2> "$DIR/hybrid_metrics"
acc=$(sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$DIR/hybrid.log")
auc=$(sed -n 's/.*final test AUC \([0-9.]*\).*/\1/p' "$DIR/hybrid.log")
echo "hybrid: coordinator accuracy $acc AUC $auc; $(tail -n 1 "$DIR/hybrid_metrics")"
grep -q "accuracy $acc " "$DIR/hybrid_metrics" || {
  echo "FAIL: tessera_predict's accuracy on the hybrid checkpoint is not" \
       "the coordinator's $acc"; exit 1; }
grep -q "auc $auc " "$DIR/hybrid_metrics" || {
  echo "FAIL: tessera_predict's AUC on the hybrid checkpoint is not the" \
       "coordinator's $auc"; exit 1; }
"$PYENV/bin/python" "$HERE/onnx_runtime_check.py" dlrm_hybrid \
  "$DIR/hybrid.onnx" "$DIR/hybrid_inputs" "$DIR/hybrid_predictions" \
  "$DIR/hybrid_metrics"
"$PYENV/bin/python" - "$DIR/dlrm.onnx" "$DIR/hybrid.onnx" <<'PY'
import sys
import onnx
def shape(m):
    g = m.graph
    return ([(n.op_type, list(n.input), list(n.output)) for n in g.node],
            [i.name for i in g.input], [o.name for o in g.output],
            sorted((t.name, tuple(t.dims)) for t in g.initializer))
a, b = (onnx.load(p) for p in sys.argv[1:3])
if shape(a) != shape(b):
    sys.exit("FAIL: the hybrid job's ONNX graph differs from the async one's")
print("hybrid ONNX graph = async ONNX graph: %d nodes, %d initializers"
      % (len(a.graph.node), len(a.graph.initializer)))
PY
train_part hybrid_more_workers 2 hybrid 1 4
train_part async_more_servers 3 async 3 1
grep -h "resuming from" "$DIR/hybrid_more_workers.log" \
  "$DIR/async_more_servers.log"
grep -q "resuming from .*epoch 2" "$DIR/hybrid_more_workers.log" || {
  echo "FAIL: hybrid on 1 x 4 did not resume epoch 2"; exit 1; }
grep -q "resuming from .*epoch 3" "$DIR/async_more_servers.log" || {
  echo "FAIL: async on 3 x 1 did not resume epoch 3"; exit 1; }
examples=$(sed -n 's/.*"examples":\([0-9]*\).*/\1/p' "$DIR/hybrid/metrics.jsonl" | tr '\n' ' ')
echo "hybrid -> hybrid (1 x 4) -> async (3 x 1): examples per epoch $examples"
[ "$examples" = "10000 10000 10000 " ] || {
  echo "FAIL: every epoch must train the 10000 examples once"; exit 1; }
echo "PASS"
