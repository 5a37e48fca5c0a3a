#!/usr/bin/env bash
# tessera_predict on new examples that have no labels (issue #19): a
# Criteo file without its label column and IDX images without a labels
# file give the predictions the same examples with labels give, and the
# metrics line says there were no labels; a malformed row still fails
# with the reader's error naming the line.
#
# Usage: predict_unlabeled_check.sh <tessera_local_train> <tessera_ctr_gen>
#          <tessera_predict> <source root>
set -euo pipefail
TRAIN="$1"
GEN="$2"
PREDICT="$3"
ROOT="$4"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$GEN" --train_examples=2000 --test_examples=300 --out_dir="$DIR/ctr" \
  > /dev/null 2>&1
"$TRAIN" --job_file="$ROOT/deploy/jobs/ctr_click.textproto" \
  --data_dir="$DIR/ctr" --epochs=1 --train_examples=2000 --test_examples=300 \
  --checkpoint_dir="$DIR/ctr_ckpt" > "$DIR/ctr.train" 2>&1 || {
  cat "$DIR/ctr.train"; fail "ctr_click did not train"; }
"$PREDICT" --checkpoint="$DIR/ctr_ckpt" --data_dir="$DIR/ctr" \
  --output="$DIR/labeled" 2> "$DIR/labeled.log"
cut -f2- "$DIR/ctr/test.tsv" > "$DIR/new.tsv"
"$PREDICT" --checkpoint="$DIR/ctr_ckpt" --data_dir="$DIR/ctr" \
  --examples="$DIR/new.tsv" --output="$DIR/unlabeled" \
  --write_inputs="$DIR/inputs" 2> "$DIR/unlabeled.log"
cmp "$DIR/labeled" "$DIR/unlabeled" ||
  fail "criteo: predictions without labels differ"
tail -n 1 "$DIR/unlabeled.log"
tail -n 1 "$DIR/unlabeled.log" | grep -q "no labels, so no metrics" ||
  fail "criteo: no line saying there were no labels"
if tail -n 1 "$DIR/unlabeled.log" | grep -q "accuracy\|auc"; then
  fail "criteo: metrics without labels"
fi
if grep -q '"label"' "$DIR/inputs"; then fail "criteo: inputs with a label"; fi
# A malformed row keeps the reader's error (line and column named).
{ head -n 2 "$DIR/new.tsv"; head -n 1 "$DIR/new.tsv" | cut -f2-; } \
  > "$DIR/bad.tsv"
if "$PREDICT" --checkpoint="$DIR/ctr_ckpt" --data_dir="$DIR/ctr" \
    --examples="$DIR/bad.tsv" --output=/dev/null 2> "$DIR/bad.log"; then
  fail "criteo: a malformed row was accepted"
fi
grep -q "bad.tsv:3: expected 39 tab-separated columns (no label" \
  "$DIR/bad.log" || { cat "$DIR/bad.log"; fail "criteo: wrong error"; }

# IDX images without their labels file.
MNIST=/usr/share/datasets/fashion-mnist
"$TRAIN" --job_file="$ROOT/deploy/jobs/mlp_fashion_mnist.textproto" \
  --epochs=1 --train_examples=2000 --test_examples=300 \
  --checkpoint_dir="$DIR/mlp_ckpt" > "$DIR/mlp.train" 2>&1 || {
  cat "$DIR/mlp.train"; fail "mlp_fashion_mnist did not train"; }
"$PREDICT" --checkpoint="$DIR/mlp_ckpt" --max_examples=300 \
  --examples="$MNIST/t10k-images-idx3-ubyte.gz" \
  --labels="$MNIST/t10k-labels-idx1-ubyte.gz" \
  --output="$DIR/images_labeled" 2> "$DIR/images_labeled.log"
grep -q "accuracy" "$DIR/images_labeled.log" || fail "idx: no metrics"
"$PREDICT" --checkpoint="$DIR/mlp_ckpt" --max_examples=300 \
  --examples="$MNIST/t10k-images-idx3-ubyte.gz" \
  --output="$DIR/images" 2> "$DIR/images.log"
cmp "$DIR/images_labeled" "$DIR/images" ||
  fail "idx: predictions without labels differ"
tail -n 1 "$DIR/images.log"
tail -n 1 "$DIR/images.log" | grep -q "no labels, so no metrics" ||
  fail "idx: no line saying there were no labels"
# --labels belongs to images.
if "$PREDICT" --checkpoint="$DIR/ctr_ckpt" --examples="$DIR/new.tsv" \
    --labels=x 2> /dev/null > /dev/null; then
  fail "--labels with a Criteo file was accepted"
fi
echo "PASS"
