#!/usr/bin/env bash
# bench/predict_throughput: tessera_predict beside ONNX Runtime on the
# exported model, same machine, same run, CPU, batch 1024 (issue #19): the
# Fashion-MNIST MLP and DLRM, each trained for one short epoch first.
# Writes a markdown table to bench/results/predict_throughput.md (or $1).
#
#   bash bench/predict_throughput.sh [out.md]
#
# Up to EXAMPLES (default 20000) test examples are predicted (Fashion-MNIST
# has 10000). tessera_predict's rates are the model alone (the forward pass
# and the table lookups) and end to end (also gathering examples and
# writing JSON lines to /dev/null); ONNX Runtime's is session.run alone on
# feeds built before the clock starts, best of three passes. TESSERA_BUILD_DIR picks the build
# folder; TESSERA_NO_BUILD=1 uses the binaries already there.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-bench/results/predict_throughput.md}"
EXAMPLES="${EXAMPLES:-20000}"
BATCH=1024
BUILD="${TESSERA_BUILD_DIR:-build}"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
bash deploy/install.sh >/dev/null
bash deploy/python_env.sh >/dev/null
if [ -z "${TESSERA_NO_BUILD:-}" ]; then
  bash deploy/build.sh --target tessera_local_train tessera_ctr_gen \
    tessera_export tessera_predict >/dev/null
fi
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
"$BUILD/worker/tessera_ctr_gen" --train_examples=20000 \
  --test_examples="$EXAMPLES" --out_dir="$DIR/ctr" > /dev/null 2>&1

{
  echo "$(date -u +%Y-%m-%d), $(nproc) cores ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)), load average $(cut -d' ' -f1 /proc/loadavg) at the start; tessera_predict with one thread per core, ONNX Runtime with its defaults."
  echo
  echo "| model | examples | tessera_predict ex/s (model) | tessera_predict ex/s (end to end) | ONNX Runtime ex/s | ratio (model) |"
  echo "|---|---:|---:|---:|---:|---:|"
} > "$OUT.tmp"
for job in mlp_fashion_mnist dlrm; do
  file="deploy/jobs/$job.textproto"
  data=()
  if grep -q 'format: "criteo"' "$file"; then data=(--data_dir="$DIR/ctr"); fi
  "$BUILD/worker/tools/tessera_local_train" --job_file="$file" "${data[@]}" \
    --epochs=1 --train_examples=20000 --test_examples=1000 \
    --checkpoint_dir="$DIR/$job" > /dev/null 2>&1
  "$BUILD/worker/export/tessera_export" --checkpoint="$DIR/$job" \
    --output="$DIR/$job.onnx" > /dev/null
  # One pass writes the ONNX inputs; the timed pass writes nothing else.
  "$BUILD/worker/predict/tessera_predict" --checkpoint="$DIR/$job" \
    "${data[@]}" --max_examples="$EXAMPLES" --output=/dev/null \
    --write_inputs="$DIR/$job.inputs" 2> /dev/null
  line=$("$BUILD/worker/predict/tessera_predict" --checkpoint="$DIR/$job" \
    "${data[@]}" --max_examples="$EXAMPLES" --batch_size=$BATCH \
    --output=/dev/null 2>&1 | tail -n 1)
  tessera=$(echo "$line" | sed -n 's/.*model \([0-9]*\) ex\/s.*/\1/p')
  total=$(echo "$line" | sed -n 's/.*  \([0-9]*\) ex\/s$/\1/p')
  n=$(echo "$line" | sed -n 's/.*: \([0-9]*\) examples.*/\1/p')
  onnx=$("$PYENV/bin/python" bench/predict_throughput_ort.py \
    "$DIR/$job.onnx" "$DIR/$job.inputs" $BATCH)
  ratio=$(awk -v a="$tessera" -v b="$onnx" 'BEGIN { printf "%.2f", a / b }')
  echo "| $job | $n | $tessera | $total | $onnx | $ratio |" >> "$OUT.tmp"
done
mv "$OUT.tmp" "$OUT"
cat "$OUT"
