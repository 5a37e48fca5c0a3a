#!/usr/bin/env bash
# tessera_local_train on the shipped job files:
#  - the CNN (deploy/jobs/cnn_fashion_mnist.textproto) on the first 3000
#    Fashion-MNIST images for one epoch learns (test accuracy above 0.6;
#    chance is 0.1);
#  - the click model (deploy/jobs/ctr_click.textproto) on 20000 generated
#    examples learns (test AUC above 0.6; chance is 0.5);
#  - a broken description exits 2 with an error naming the layer.
set -euo pipefail
TRAIN="$1"
GEN="$2"
ROOT="$3"
out=$("$TRAIN" --job_file="$ROOT/deploy/jobs/cnn_fashion_mnist.textproto" \
  --epochs=1 --train_examples=3000 --test_examples=1000 2>/dev/null)
echo "$out"
acc=$(echo "$out" | awk '$1 == "1" { print $5 }')
awk -v a="$acc" 'BEGIN { exit !(a > 0.6) }' || {
  echo "FAIL: test accuracy $acc, expected > 0.6"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GEN" --train_examples=20000 --test_examples=4000 --out_dir="$tmp/ctr" \
  > /dev/null 2>&1
out=$("$TRAIN" --job_file="$ROOT/deploy/jobs/ctr_click.textproto" \
  --data_dir="$tmp/ctr" --epochs=1 2>/dev/null)
echo "$out"
auc=$(echo "$out" | awk '$1 == "1" { print $6 }')
awk -v a="$auc" 'BEGIN { exit !(a > 0.6) }' || {
  echo "FAIL: test AUC $auc, expected > 0.6"; exit 1; }

sed 's/inputs: "pool2" flatten/inputs: "pool2" dropout { rate: 0.1 } } layers { name: "x" inputs: "flat" flatten/' \
  "$ROOT/deploy/jobs/cnn_fashion_mnist.textproto" > "$tmp/bad.textproto"
set +e
msg=$("$TRAIN" --job_file="$tmp/bad.textproto" 2>&1)
rc=$?
set -e
echo "$msg"
[ "$rc" -eq 2 ] || { echo "FAIL: exit code $rc, expected 2"; exit 1; }
echo "$msg" | grep -q 'layer "fc" (dense): input "flat" has shape \[5, 5, 64\]' || {
  echo "FAIL: the error does not name the layer and the shape"; exit 1; }
echo "PASS"
