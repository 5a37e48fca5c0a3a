#!/usr/bin/env bash
# The evaluator task beside a cluster (issue #19): tessera_local
# --evaluator trains DLRM for 2 epochs on 2 parameter servers, keeping one
# checkpoint (so rotation deletes what the evaluator may be reading); the
# evaluator writes a line per checkpoint it evaluated to eval.jsonl and
# TensorBoard scalars under tensorboard/eval, and its last line, the final
# checkpoint's, holds the test accuracy and AUC the coordinator printed;
# TensorBoard's own reader (deploy/python_env.sh) finds the scalars.
#
# Usage: evaluator_check.sh <tessera_local> <tessera_ctr_gen> <source root>
set -euo pipefail
LOCAL="$1"
GEN="$2"
ROOT="$3"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
"$GEN" --train_examples=10000 --test_examples=1000 --interaction_fields=8 \
  --out_dir="$DIR/ctr" > /dev/null 2>&1
"$LOCAL" --evaluator --num_ps=2 --num_workers=2 --run_dir="$DIR/run" -- \
  --job_file="$ROOT/deploy/jobs/dlrm.textproto" --data_dir="$DIR/ctr" \
  --epochs=2 --keep_checkpoints=1 > "$DIR/train.log" 2>&1 || {
  tail -n 30 "$DIR/train.log"; echo "FAIL: training"; exit 1; }
cat "$DIR/run/evaluator.log"
grep "final test" "$DIR/train.log"
lines=$(wc -l < "$DIR/run/eval.jsonl")
[ "$lines" -ge 1 ] || { echo "FAIL: eval.jsonl is empty"; exit 1; }
ls "$DIR"/run/tensorboard/eval/events.out.tfevents.* > /dev/null || {
  echo "FAIL: no TensorBoard events under tensorboard/eval"; exit 1; }
last=$(tail -n 1 "$DIR/run/eval.jsonl")
acc=$(sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$DIR/train.log")
auc=$(sed -n 's/.*final test AUC \([0-9.]*\).*/\1/p' "$DIR/train.log")
got_acc=$(echo "$last" | sed -n 's/.*"accuracy":\([0-9.]*\).*/\1/p')
got_auc=$(echo "$last" | sed -n 's/.*"auc":\([0-9.]*\).*/\1/p')
[ "$(printf '%.4f' "$got_acc")" = "$acc" ] || {
  echo "FAIL: the evaluator's final accuracy $got_acc is not $acc"; exit 1; }
[ "$(printf '%.4f' "$got_auc")" = "$auc" ] || {
  echo "FAIL: the evaluator's final AUC $got_auc is not $auc"; exit 1; }
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
"$PYENV/bin/python" - "$DIR/run/tensorboard/eval" "$lines" <<'PY'
import sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1])
acc.Reload()
tags = acc.Tags()["scalars"]
for tag in ("eval/loss", "eval/accuracy", "eval/auc", "eval/log_loss"):
    assert tag in tags, (tag, tags)
    assert len(acc.Scalars(tag)) == int(sys.argv[2]), tag
print("tensorboard: " + ", ".join(sorted(tags)))
PY
echo "PASS"
