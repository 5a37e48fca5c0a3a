#!/usr/bin/env bash
# Trains the CNN description (deploy/models/cnn_fashion_mnist.textproto) on
# the first 3000 Fashion-MNIST images for one epoch with tessera_graph_train
# and checks that it learns (test accuracy above 0.6; chance is 0.1), then
# that a broken description exits 2 with an error naming the layer.
set -euo pipefail
TRAIN="$1"
ROOT="$2"
out=$("$TRAIN" --model_file="$ROOT/deploy/models/cnn_fashion_mnist.textproto" \
  --epochs=1 --train_examples=3000 --test_examples=1000 2>/dev/null)
echo "$out"
acc=$(echo "$out" | awk '$1 == "1" { print $5 }')
awk -v a="$acc" 'BEGIN { exit !(a > 0.6) }' || {
  echo "FAIL: test accuracy $acc, expected > 0.6"; exit 1; }

bad=$(mktemp)
trap 'rm -f "$bad"' EXIT
sed 's/inputs: "pool2" flatten/inputs: "pool2" dropout { rate: 0.1 } } layers { name: "x" inputs: "flat" flatten/' \
  "$ROOT/deploy/models/cnn_fashion_mnist.textproto" > "$bad"
set +e
msg=$("$TRAIN" --model_file="$bad" 2>&1)
rc=$?
set -e
echo "$msg"
[ "$rc" -eq 2 ] || { echo "FAIL: exit code $rc, expected 2"; exit 1; }
echo "$msg" | grep -q 'layer "fc" (dense): input "flat" has shape \[5, 5, 64\]' || {
  echo "FAIL: the error does not name the layer and the shape"; exit 1; }
echo "PASS"
