#!/usr/bin/env bash
# The GPU check in one command, for a machine with an NVIDIA GPU where
# nothing was set up beforehand but what deploy/install.sh installs:
#   1. installs what is missing and builds with CUDA (nvcc from
#      /usr/local/cuda or PATH) into build-gpu/ (or $TESSERA_BUILD_DIR);
#   2. runs every GPU test (ctest -L gpu; they need no gRPC server) with
#      TESSERA_REQUIRE_GPU=1, so a machine whose GPU or driver cannot run
#      the build's kernels fails instead of skipping;
#   3. trains each job file in deploy/jobs/ for some steps on the CPU and on
#      the GPU from the same seed and prints the largest difference of the
#      losses and of the parameters;
#   4. trains the MLP job end to end (2 ps, 2 workers) on the GPUs and then
#      on the CPU, printing both accuracies and each worker's device;
#   5. runs bench_worker_step on both devices: the CUDA table per job file
#      at batch 1024, 8192 and 65536 (examples/s, copies in / compute /
#      copies out from CUDA events, the GEMMs alone in cuBLAS) and whether
#      the MLP and DLRM steps at 8192 are within 1.5x of their GEMMs.
# Extra arguments go to the build (e.g. -DCMAKE_CUDA_ARCHITECTURES=90 is
# not one: set CMAKE_ARGS for cmake options).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"
BUILD_DIR="${TESSERA_BUILD_DIR:-build-gpu}"
command -v nvidia-smi > /dev/null && nvidia-smi -L || {
  echo "gpu_check: nvidia-smi finds no GPU"; exit 1; }
command -v nvcc > /dev/null || {
  echo "gpu_check: no nvcc (CUDA toolkit) in /usr/local/cuda/bin or PATH";
  exit 1; }
bash deploy/install.sh
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    ${CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" --target gpu_test tessera_device_compare \
  tessera_ctr_gen bench_worker_step tessera_local tessera_ps tessera_worker \
  tessera_coordinator "$@"

echo "== CUDA tests (ctest -L gpu; a skip is a failure here)"
status=0
(cd "$BUILD_DIR" && TESSERA_REQUIRE_GPU=1 ctest -L gpu --output-on-failure) \
  || status=1

echo "== each job file, CPU against GPU"
data=$(mktemp -d)
"$BUILD_DIR/worker/tessera_ctr_gen" --train_examples=20000 \
  --test_examples=1000 --out_dir="$data/ctr" > /dev/null
for job in deploy/jobs/*.textproto; do
  extra=()
  if grep -q 'format: "criteo"' "$job"; then extra=(--data_dir="$data/ctr"); fi
  "$BUILD_DIR/worker/tools/tessera_device_compare" --job_file="$job" \
    --steps=20 "${extra[@]}" || status=1
done
rm -rf "$data"

echo "== the MLP job end to end, 2 ps x 2 workers: on the GPUs, then on the CPU"
for run in gpu cpu; do
  dir=$(mktemp -d)
  visible=()
  if [ "$run" = cpu ]; then visible=(env CUDA_VISIBLE_DEVICES=); fi
  "${visible[@]}" "$BUILD_DIR/deploy/local/tessera_local" --num_ps=2 \
    --num_workers=2 --run_dir="$dir" -- \
    --job_file=deploy/jobs/mlp_fashion_mnist.textproto --epochs=3 \
    | grep '^final' | sed "s/^/$run: /" || status=1
  grep -h 'device: ' "$dir"/worker-*.log | sed 's/^.*device: /  worker device: /'
  rm -rf "$dir"
done

echo "== bench_worker_step (per job: CUDA rows, then CPU rows)"
"$BUILD_DIR/bench/bench_worker_step" --devices=cuda,cpu \
  --batches=1024,8192,65536 --cpu_batches=64,1024 || status=1
exit $status
