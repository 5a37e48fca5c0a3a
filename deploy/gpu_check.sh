#!/usr/bin/env bash
# The GPU check in one command:
#
#   ./gpu_check.sh [--out DIR] [--data_dir DIR]       # in a bundle
#   bash deploy/gpu_check.sh [--out DIR] [--data_dir DIR]  # in the repository
#
# In a bundle (deploy/bundle.sh puts this script beside bin/) it installs
# and builds nothing: it runs the bundle's binaries, which load cuBLAS and
# NCCL from the node (LD_LIBRARY_PATH, the CUDA install, NVIDIA's Python
# packages: worker/backend/cuda/cuda_library_search.h). In the repository
# it first installs what deploy/install.sh lists and builds with CUDA into
# build-gpu/ (or $TESSERA_BUILD_DIR; CMAKE_ARGS go to cmake).
#
#   1. the GPU (nvidia-smi): where none answers, the FIRST line says so and
#      the exit code is 1;
#   2. the CUDA libraries: the files cuBLAS and NCCL load from;
#   3. every GPU test (the gpu_test binary, run directly: a node has no
#      ctest) with TESSERA_REQUIRE_GPU=1, so a GPU or driver that cannot
#      run the build's kernels fails instead of skipping;
#   4. each job file trained 20 steps on the CPU and on the GPU from one
#      seed (tessera_device_compare), the differences within 1e-3;
#   5. the MLP job end to end on the GPU, 2 parameter servers x 2 workers;
#   6. the CUDA step benchmark of the MLP, CNN and DLRM at batch 1024, 8192
#      and 65536 against their GEMMs alone in cuBLAS (bench_worker_step).
# Then one table. The full log (gpu_check.log), the summary (summary.json)
# and each tool's own output go to --out (default gpu-check-<time>/).
# Fashion-MNIST comes from --data_dir, else Debian's
# /usr/share/datasets/fashion-mnist, else a synthetic set of its shape is
# written with python3 (the table says which). About 5 minutes on one H100;
# each step has a time limit, so it ends within 8.
# Exit code 0 when every step passed, 1 otherwise, 2 for a bad argument.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"

# ---- 1. the GPU, before anything else prints ---------------------------------
SMI="$(command -v nvidia-smi || true)"
[ -n "$SMI" ] || [ ! -x /usr/bin/nvidia-smi ] || SMI=/usr/bin/nvidia-smi
if [ -z "$SMI" ]; then
  echo "gpu_check: no GPU: nvidia-smi is not installed (no NVIDIA driver)"
  exit 1
fi
if ! GPU_LIST="$("$SMI" -L 2>&1)" || ! grep -q '^GPU ' <<< "$GPU_LIST"; then
  echo "gpu_check: no GPU: nvidia-smi -L says: $(head -n 1 <<< "$GPU_LIST")"
  exit 1
fi

OUT=""
DATA=""
for arg in "$@"; do
  case "$arg" in
    --out=*) OUT="${arg#--out=}" ;;
    --data_dir=*) DATA="${arg#--data_dir=}" ;;
    --out | --data_dir) PENDING="$arg"; continue ;;
    *)
      if [ -n "${PENDING:-}" ]; then
        [ "$PENDING" = --out ] && OUT="$arg" || DATA="$arg"
      else
        echo "gpu_check: unknown argument $arg" \
          "(usage: gpu_check.sh [--out DIR] [--data_dir DIR])" >&2
        exit 2
      fi
      ;;
  esac
  PENDING=""
done
OUT="${OUT:-$PWD/gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT" || { echo "gpu_check: cannot create $OUT" >&2; exit 2; }
OUT="$(cd "$OUT" && pwd)"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
echo "gpu_check: $GPU_LIST"

if [ -x "$HERE/bin/tessera_worker" ]; then
  # A bundle: everything is here already.
  BIN="$HERE/bin"
  GPU_TEST="$HERE/libexec/tessera/gpu_test"
  BENCH="$HERE/libexec/tessera/bench_worker_step"
  LAUNCHER="$BIN/tessera_local"
  JOBS="$HERE/share/tessera/jobs"
  COMPARE="$BIN/tessera_device_compare"
  CTR_GEN="$BIN/tessera_ctr_gen"
else
  ROOT="$(cd "$HERE/.." && pwd)"
  BUILD="${TESSERA_BUILD_DIR:-$ROOT/build-gpu}"
  export PATH="/usr/local/cuda/bin:$PATH"
  command -v nvcc > /dev/null || {
    echo "gpu_check: no nvcc (CUDA toolkit) in /usr/local/cuda/bin or PATH" \
      "to build with; or run the gpu_check.sh of a bundle (docs/bundle.md)"
    exit 1
  }
  bash "$ROOT/deploy/install.sh" || exit 1
  if [ ! -f "$BUILD/build.ninja" ]; then
    # shellcheck disable=SC2086
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      ${CMAKE_ARGS:-} || exit 1
  fi
  cmake --build "$BUILD" --target gpu_test tessera_device_compare \
    tessera_ctr_gen bench_worker_step tessera_local tessera_ps \
    tessera_worker tessera_coordinator || exit 1
  GPU_TEST="$BUILD/tests/gpu_test"
  BENCH="$BUILD/bench/bench_worker_step"
  LAUNCHER="$BUILD/deploy/local/tessera_local"
  JOBS="$ROOT/deploy/jobs"
  COMPARE="$BUILD/worker/tools/tessera_device_compare"
  CTR_GEN="$BUILD/worker/tessera_ctr_gen"
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# ---- the summary -------------------------------------------------------------
NAMES=() RESULTS=() SECONDS_TAKEN=() DETAILS=()
STARTED=0
begin() {
  echo
  echo "== $1"
  STARTED=$SECONDS
}
record() { # <name> <PASS|FAIL> <detail>
  NAMES+=("$1")
  RESULTS+=("$2")
  SECONDS_TAKEN+=($((SECONDS - STARTED)))
  DETAILS+=("$3")
  echo "-> $2: $3"
}
json() { # a JSON string of $1
  printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' |
    tr '\t\n' '  ')"
}

GPU_NAME="$("$SMI" --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader 2> /dev/null | head -n 1)"
STARTED=$SECONDS
record "gpu" PASS "${GPU_NAME:-$(head -n 1 <<< "$GPU_LIST")}"

# ---- 2. the CUDA libraries ---------------------------------------------------
begin "the CUDA libraries (as the worker finds them)"
TESSERA_REQUIRE_GPU=1 timeout 60 "$GPU_TEST" \
  --gtest_filter='CudaLibrariesGpuTest.*' > "$OUT/cuda_libraries.txt" 2>&1
status=$?
cat "$OUT/cuda_libraries.txt"
found="$(grep -E '^(cuBLAS|NCCL): ' "$OUT/cuda_libraries.txt" |
  sed 's/$/;/' | paste -sd ' ' - | sed 's/;$//')"
if [ "$status" -eq 0 ]; then
  record "cuda libraries" PASS "$found"
else
  why="$(grep -m 1 -E 'cannot load|no NCCL|Failure' "$OUT/cuda_libraries.txt")"
  record "cuda libraries" FAIL "${found:+$found; }${why:-exit $status}"
fi

# ---- 3. the GPU tests --------------------------------------------------------
begin "the GPU tests (TESSERA_REQUIRE_GPU=1: a skip is a failure)"
TESSERA_REQUIRE_GPU=1 timeout 240 "$GPU_TEST" \
  --gtest_filter='-CudaLibrariesGpuTest.*' \
  --gtest_output="json:$OUT/gpu_test.json" > "$OUT/gpu_test.txt" 2>&1
status=$?
grep -E '^\[ *(RUN|OK|FAILED|PASSED|SKIPPED) *\]' "$OUT/gpu_test.txt" |
  grep -v '^\[ RUN' || true
passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$OUT/gpu_test.txt")"
failed="$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$OUT/gpu_test.txt")"
if [ "$status" -eq 0 ]; then
  record "gpu tests" PASS "${passed:-?} passed"
else
  record "gpu tests" FAIL \
    "${passed:-0} passed, ${failed:-?} failed (exit $status; gpu_test.txt)"
fi

# ---- Fashion-MNIST -----------------------------------------------------------
DATA_NOTE=""
if [ -z "$DATA" ] && [ -d /usr/share/datasets/fashion-mnist ]; then
  DATA=/usr/share/datasets/fashion-mnist
fi
if [ -z "$DATA" ]; then
  # Ten classes, each a fixed random image with noise on it: learnable, so
  # the end-to-end accuracy still says something.
  DATA="$WORK/fashion-mnist"
  mkdir -p "$DATA"
  if command -v python3 > /dev/null && python3 - "$DATA" << 'EOF'; then
import gzip, random, struct, sys
out = sys.argv[1]
rng = random.Random(7)
templates = [bytes(rng.randrange(256) for _ in range(784)) for _ in range(10)]
for prefix, n in (("train", 12000), ("t10k", 2000)):
    labels = bytes(rng.randrange(10) for _ in range(n))
    images = bytearray()
    for label in labels:
        noise = rng.randbytes(784)
        images += bytes((3 * t + z) >> 2 for t, z in zip(templates[label], noise))
    with gzip.open(f"{out}/{prefix}-images-idx3-ubyte.gz", "wb", 1) as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + images)
    with gzip.open(f"{out}/{prefix}-labels-idx1-ubyte.gz", "wb", 1) as f:
        f.write(struct.pack(">II", 2049, n) + labels)
EOF
    DATA_NOTE=" (synthetic data: no Fashion-MNIST here)"
    echo "gpu_check: no Fashion-MNIST (--data_dir, or Debian's" \
      "/usr/share/datasets/fashion-mnist): synthetic images in $DATA"
  else
    DATA=""
    echo "gpu_check: no Fashion-MNIST and no python3 to make a stand-in;" \
      "pass --data_dir"
  fi
fi

# ---- 4. every job file, CPU against GPU --------------------------------------
"$CTR_GEN" --train_examples=20000 --test_examples=1000 \
  --out_dir="$WORK/ctr" > /dev/null
for job in "$JOBS"/*.textproto; do
  name="$(basename "$job" .textproto)"
  begin "$name: 20 steps on the CPU and on the GPU, one seed"
  if grep -q 'format: "criteo"' "$job"; then
    data=(--data_dir="$WORK/ctr")
  elif [ -n "$DATA" ]; then
    data=(--data_dir="$DATA")
  else
    record "compare $name" FAIL "no Fashion-MNIST: pass --data_dir"
    continue
  fi
  line="$(timeout 120 "$COMPARE" --job_file="$job" --steps=20 "${data[@]}" \
    2>&1 | tee -a "$OUT/device_compare.txt" | tail -n 1)"
  status=${PIPESTATUS[0]}
  echo "$line"
  detail="$(sed -n 's/.*max |loss diff| \([^;]*\); max |parameter diff| \([^ ]*\).*/loss diff \1, parameter diff \2/p' <<< "$line")"
  if [ "$status" -eq 0 ]; then
    record "compare $name" PASS "${detail:-$line}"
  else
    record "compare $name" FAIL "${detail:-$line} (exit $status)"
  fi
done

# ---- 5. the MLP job end to end on the GPU ------------------------------------
begin "the MLP job end to end on the GPU: 2 ps x 2 workers, 2 epochs"
if [ -z "$DATA" ]; then
  record "mlp 2 ps x 2 workers" FAIL "no Fashion-MNIST: pass --data_dir"
else
  run="$OUT/mlp_run"
  rm -rf "$run"
  timeout 300 "$LAUNCHER" --num_ps=2 --num_workers=2 --run_dir="$run" -- \
    --job_file="$JOBS/mlp_fashion_mnist.textproto" --epochs=2 \
    --data_dir="$DATA" > "$OUT/mlp_run.txt" 2>&1
  status=$?
  tail -n 5 "$OUT/mlp_run.txt"
  accuracy="$(sed -n 's/^final test accuracy \([0-9.]*\).*/\1/p' \
    "$OUT/mlp_run.txt")"
  devices="$(grep -h 'device: ' "$run"/worker-*.log 2> /dev/null |
    sed 's/^.*device: \([^ ]*\).*/\1/' | sort | uniq -c |
    awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')"
  detail="test accuracy ${accuracy:-?}, workers on ${devices:-?}$DATA_NOTE"
  if [ "$status" -eq 0 ] && [ -n "$accuracy" ] && grep -q cuda <<< "$devices" &&
    ! grep -q cpu <<< "$devices"; then
    record "mlp 2 ps x 2 workers" PASS "$detail"
  else
    record "mlp 2 ps x 2 workers" FAIL "$detail (exit $status; $run)"
  fi
fi

# ---- 6. the CUDA step benchmark ----------------------------------------------
begin "the CUDA step benchmark: MLP, CNN, DLRM against cuBLAS alone"
timeout 300 "$BENCH" --devices=cuda --batches=1024,8192,65536 \
  --job_files="$JOBS/mlp_fashion_mnist.textproto,$JOBS/cnn_fashion_mnist.textproto,$JOBS/dlrm.textproto" \
  > "$OUT/step_bench.txt" 2>&1
status=$?
cat "$OUT/step_bench.txt"
targets="$(sed -n 's/^target: \(.*\) on [^ ]* at batch [0-9]*: \(.*\)/\1 \2/p' \
  "$OUT/step_bench.txt" | sed 's/$/;/' | paste -sd ' ' - | sed 's/;$//')"
if [ "$status" -eq 0 ] && ! grep -q 'skipped' "$OUT/step_bench.txt"; then
  record "step bench" PASS "${targets:-see step_bench.txt}"
else
  record "step bench" FAIL "exit $status; $(grep -m 1 -E 'skipped|failed' \
    "$OUT/step_bench.txt")"
fi

# ---- the table ---------------------------------------------------------------
ok=true
{
  echo
  echo "== gpu_check summary: ${GPU_NAME:-GPU} (full log $OUT/gpu_check.log)"
  printf '%-28s %-6s %5s  %s\n' step result s detail
  for i in "${!NAMES[@]}"; do
    printf '%-28s %-6s %5s  %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" \
      "${SECONDS_TAKEN[$i]}" "${DETAILS[$i]}"
    [ "${RESULTS[$i]}" = PASS ] || ok=false
  done
  echo "gpu_check: $($ok && echo PASSED || echo FAILED) in ${SECONDS} s"
}
{
  printf '{"gpu": %s, "passed": %s, "seconds": %d, "steps": [' \
    "$(json "$GPU_NAME")" "$ok" "$SECONDS"
  for i in "${!NAMES[@]}"; do
    [ "$i" -eq 0 ] || printf ', '
    printf '{"name": %s, "result": %s, "seconds": %d, "detail": %s}' \
      "$(json "${NAMES[$i]}")" "$(json "${RESULTS[$i]}")" \
      "${SECONDS_TAKEN[$i]}" "$(json "${DETAILS[$i]}")"
  done
  printf ']}\n'
} > "$OUT/summary.json"
$ok
