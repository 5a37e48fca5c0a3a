#!/usr/bin/env bash
# The GPU check in one command:
#
#   ./gpu_check.sh [--out DIR] [--data_dir DIR] [--budget_s S]  # in a bundle
#   bash deploy/gpu_check.sh [same arguments]                  # in the repository
#   ./gpu_check.sh --rehearse [--out DIR] ...   # a bundle's, on any machine
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
#      on a node with 2 or more GPUs also mirrored on 2 GPU workers, whose
#      logs must say "all-reduce: NCCL on cuda" (NCCL across processes);
#   6. the CUDA step benchmark of the MLP and DLRM at batch 1024, 8192 and
#      65536 and the CNN at 1024 and 8192 (at 65536 its activations and the
#      GEMM timing's operand copies need ~95 GB, more than an 80 GB H100)
#      against their GEMMs alone in cuBLAS (bench_worker_step); a MISSED
#      target fails the step.
# Then one table. The full log (gpu_check.log), the summary (summary.json)
# and each tool's own output go to --out (default gpu-check-<time>/).
# Fashion-MNIST comes from --data_dir, else Debian's
# /usr/share/datasets/fashion-mnist, else a synthetic set of its shape is
# written with python3 (the table says which). About 5 minutes on one H100.
# The whole check keeps to --budget_s (default 420 s): a step that would
# not fit in what is left is marked "SKIP: time", and each runs at most
# for what is left. Stopped early (TERM, INT), it still prints the table
# so far and writes summary.json, naming the step it was in.
#
# --rehearse runs every step on the CPU of any machine, with the bundle's
# binaries and layout, so that the check's own logic (time budget, data,
# patterns, table, summary.json) is tried before a GPU is lent: the
# libraries and GPU tests as they are (skips are no failure), each job
# file 2 steps CPU against CPU, the MLP end to end 50 steps an epoch, and
# the benchmark's CPU rows; nvidia-smi is not asked (one GPU is assumed).
# CTest gpu_check_rehearsal runs it from a freshly made bundle.
#
# Exit code 0 when every step passed (or does not apply), 1 otherwise, 2
# for a bad argument.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"

OUT=""
DATA=""
BUDGET_S=420
REHEARSE=false
USAGE="usage: gpu_check.sh [--out DIR] [--data_dir DIR] [--budget_s SECONDS]"
USAGE="$USAGE [--rehearse]"
for arg in "$@"; do
  case "$arg" in
    --rehearse) REHEARSE=true ;;
    --out=*) OUT="${arg#--out=}" ;;
    --data_dir=*) DATA="${arg#--data_dir=}" ;;
    --budget_s=*) BUDGET_S="${arg#--budget_s=}" ;;
    --out | --data_dir | --budget_s) PENDING="$arg"; continue ;;
    *)
      case "${PENDING:-}" in
        --out) OUT="$arg" ;;
        --data_dir) DATA="$arg" ;;
        --budget_s) BUDGET_S="$arg" ;;
        *)
          echo "gpu_check: unknown argument $arg ($USAGE)" >&2
          exit 2
          ;;
      esac
      ;;
  esac
  PENDING=""
done
if [ -n "${PENDING:-}" ]; then
  echo "gpu_check: $PENDING needs a value ($USAGE)" >&2
  exit 2
fi
if ! [[ "$BUDGET_S" =~ ^[0-9]+$ ]] || [ "$BUDGET_S" -lt 1 ]; then
  echo "gpu_check: --budget_s must be a whole number of seconds >= 1," \
    "got \"$BUDGET_S\"" >&2
  exit 2
fi
if $REHEARSE && [ ! -x "$HERE/bin/tessera_worker" ]; then
  echo "gpu_check: --rehearse runs in a bundle (deploy/bundle.sh makes" \
    "one), not in the repository" >&2
  exit 2
fi

# ---- 1. the GPU, before anything else prints ---------------------------------
if $REHEARSE; then
  SMI=""
  GPU_LIST="GPU 0: none (--rehearse: every step on the CPU)"
else
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
fi
GPU_COUNT="$(grep -c '^GPU ' <<< "$GPU_LIST")"
OUT="${OUT:-$PWD/gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT" || { echo "gpu_check: cannot create $OUT" >&2; exit 2; }
OUT="$(cd "$OUT" && pwd)"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
TEE_PID=$!
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

# ---- the summary, the budget, and the end --------------------------------------
# A result is PASS, FAIL, SKIP (not run for want of time: the check is
# incomplete, so it fails) or n/a (does not apply to this node).
NAMES=() RESULTS=() SECONDS_TAKEN=() DETAILS=()
STARTED=0
CURRENT=""  # the step running now, named when a signal stops the check
CHILD=""    # its process (timeout's), ended with it
GPU_NAME=""
RESERVE_S=5 # kept for the table at the end
begin() {
  echo
  echo "== $1"
  STARTED=$SECONDS
}
record() { # <name> <PASS|FAIL|SKIP|n/a> <detail>
  NAMES+=("$1")
  RESULTS+=("$2")
  SECONDS_TAKEN+=($((SECONDS - STARTED)))
  DETAILS+=("$3")
  CURRENT=""
  echo "-> $2: $3"
}
json() { # a JSON string of $1
  printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' |
    tr '\t\n' '  ')"
}
# step <name> <needs_s> <limit_s> <title>: starts step <name> when the
# <needs_s> seconds it takes on one H100 fit in what is left of the budget,
# with LIMIT its time limit: <limit_s>, or what is left if less. Else
# records it as "SKIP: time" and fails (the caller skips it).
LIMIT=0
step() {
  local left=$((BUDGET_S - SECONDS - RESERVE_S))
  if [ "$left" -lt "$2" ]; then
    STARTED=$SECONDS
    record "$1" SKIP "time: needs ~$2 s, $((left < 0 ? 0 : left)) s of the" \
      "--budget_s=$BUDGET_S left"
    return 1
  fi
  LIMIT=$(($3 < left ? $3 : left))
  CURRENT="$1"
  begin "$4 (at most $LIMIT s)"
}
# limited <output file> <command...>: the command under the step's LIMIT,
# its output to the file; in the background, so that a signal is handled
# at once rather than when the command ends.
limited() {
  local file="$1"
  shift
  timeout "$LIMIT" "$@" > "$file" 2>&1 < /dev/null &
  CHILD=$!
  wait "$CHILD"
  local status=$?
  CHILD=""
  return $status
}
FINISHED=false
finish() { # prints the table and writes summary.json, once
  $FINISHED && return
  FINISHED=true
  if [ -n "$CHILD" ]; then
    kill "$CHILD" 2> /dev/null
    wait "$CHILD" 2> /dev/null
  fi
  rm -rf "$WORK"
  ok=true
  {
    echo
    echo "== gpu_check summary: ${GPU_NAME:-GPU} (full log $OUT/gpu_check.log)"
    printf '%-28s %-6s %5s  %s\n' step result s detail
    for i in "${!NAMES[@]}"; do
      printf '%-28s %-6s %5s  %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" \
        "${SECONDS_TAKEN[$i]}" "${DETAILS[$i]}"
      case "${RESULTS[$i]}" in PASS | n/a) ;; *) ok=false ;; esac
    done
    echo "gpu_check: $($ok && echo PASSED || echo FAILED) in ${SECONDS} s" \
      "(budget $BUDGET_S s)${STOPPED:+; stopped by $STOPPED}"
  }
  {
    printf '{"gpu": %s, "passed": %s, "seconds": %d, "budget_s": %d, ' \
      "$(json "$GPU_NAME")" "$ok" "$SECONDS" "$BUDGET_S"
    printf '"stopped_by": %s, "steps": [' "$(json "${STOPPED:-}")"
    for i in "${!NAMES[@]}"; do
      [ "$i" -eq 0 ] || printf ', '
      printf '{"name": %s, "result": %s, "seconds": %d, "detail": %s}' \
        "$(json "${NAMES[$i]}")" "$(json "${RESULTS[$i]}")" \
        "${SECONDS_TAKEN[$i]}" "$(json "${DETAILS[$i]}")"
    done
    printf ']}\n'
  } > "$OUT/summary.json"
  # The log's tee writes the table last: it has, once the check has ended.
  exec > /dev/null 2>&1
  wait "$TEE_PID" 2> /dev/null
}
stopped() { # <signal> <exit code>
  STOPPED="$1"
  [ -z "$CURRENT" ] || record "$CURRENT" FAIL \
    "stopped by $1 after $((SECONDS - STARTED)) s of this step"
  finish
  exit "$2"
}
STOPPED=""
trap 'stopped TERM 143' TERM
trap 'stopped INT 130' INT
trap finish EXIT

# What differs in a rehearsal: the device, the GPU tests' environment
# (skips allowed), the sizes (seconds on a small CPU, not minutes).
if $REHEARSE; then
  GPU_NAME="rehearsal on the CPU"
  DEVICE=cpu
  REQUIRE_GPU=0
  COMPARE_ARGS=(--against=cpu --steps=2)
  RUN_ARGS=(--epochs=1 --steps_per_epoch=50)
  BENCH_ARGS=(--devices=cpu --cpu_batches=64 --min_seconds=0.01 --rounds=1
    --split_steps=1)
else
  GPU_NAME="$("$SMI" --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2> /dev/null | head -n 1)"
  DEVICE=cuda
  REQUIRE_GPU=1
  COMPARE_ARGS=(--steps=20)
  RUN_ARGS=(--epochs=2)
  BENCH_ARGS=(--devices=cuda)
fi
STARTED=$SECONDS
record "gpu" PASS "${GPU_NAME:-$(head -n 1 <<< "$GPU_LIST")}"

# ---- 2. the CUDA libraries ---------------------------------------------------
if step "cuda libraries" 5 60 "the CUDA libraries (as the worker finds them)"; then
TESSERA_REQUIRE_GPU=$REQUIRE_GPU limited "$OUT/cuda_libraries.txt" \
  "$GPU_TEST" --gtest_filter='CudaLibrariesGpuTest.*'
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
fi

# ---- 3. the GPU tests --------------------------------------------------------
if step "gpu tests" 45 240 \
  "the GPU tests (TESSERA_REQUIRE_GPU=1: a skip is a failure)"; then
TESSERA_REQUIRE_GPU=$REQUIRE_GPU limited "$OUT/gpu_test.txt" "$GPU_TEST" \
  --gtest_filter='-CudaLibrariesGpuTest.*' \
  --gtest_output="json:$OUT/gpu_test.json"
status=$?
skipped="$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$OUT/gpu_test.txt")"
grep -E '^\[ *(RUN|OK|FAILED|PASSED|SKIPPED) *\]' "$OUT/gpu_test.txt" |
  grep -v '^\[ RUN' || true
passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$OUT/gpu_test.txt")"
failed="$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$OUT/gpu_test.txt")"
if [ "$status" -eq 0 ]; then
  record "gpu tests" PASS "${passed:-?} passed${skipped:+, $skipped skipped}"
else
  record "gpu tests" FAIL \
    "${passed:-0} passed, ${failed:-?} failed (exit $status; gpu_test.txt)"
fi
fi

# ---- Fashion-MNIST -----------------------------------------------------------
DATA_NOTE=""
# (TESSERA_SYSTEM_FASHION_MNIST: another place for Debian's copy, for
# tests/deploy/gpu_check_test.sh.)
SYSTEM_DATA="${TESSERA_SYSTEM_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"
if [ -z "$DATA" ] && [ -d "$SYSTEM_DATA" ]; then
  DATA="$SYSTEM_DATA"
fi
if [ -z "$DATA" ]; then
  # Ten classes, each a fixed random image with noise on it: learnable, so
  # the end-to-end accuracy still says something. At least as many
  # training images as tessera_device_compare loads by default
  # (--train_examples=20000), which refuses a file that holds fewer.
  DATA="$WORK/fashion-mnist"
  mkdir -p "$DATA"
  if command -v python3 > /dev/null && python3 - "$DATA" << 'EOF'; then
import gzip, random, struct, sys
out = sys.argv[1]
rng = random.Random(7)
templates = [bytes(rng.randrange(256) for _ in range(784)) for _ in range(10)]
for prefix, n in (("train", 20000), ("t10k", 2000)):
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
  step "compare $name" 10 120 \
    "$name: 20 steps on the CPU and on the GPU, one seed" || continue
  if grep -q 'format: "criteo"' "$job"; then
    data=(--data_dir="$WORK/ctr")
  elif [ -n "$DATA" ]; then
    data=(--data_dir="$DATA")
  else
    record "compare $name" FAIL "no Fashion-MNIST: pass --data_dir"
    continue
  fi
  limited "$WORK/compare.txt" "$COMPARE" --job_file="$job" \
    "${COMPARE_ARGS[@]}" "${data[@]}"
  status=$?
  cat "$WORK/compare.txt" >> "$OUT/device_compare.txt"
  line="$(tail -n 1 "$WORK/compare.txt")"
  echo "$line"
  detail="$(sed -n 's/.*max |loss diff| \([^;]*\); max |parameter diff| \([^ ]*\).*/loss diff \1, parameter diff \2/p' <<< "$line")"
  if [ "$status" -eq 0 ]; then
    record "compare $name" PASS "${detail:-$line}"
  else
    record "compare $name" FAIL "${detail:-$line} (exit $status)"
  fi
done

# ---- 5. the MLP job end to end on the GPU ------------------------------------
if ! step "mlp 2 ps x 2 workers" 40 300 \
  "the MLP job end to end on the GPU: 2 ps x 2 workers, 2 epochs"; then
  :
elif [ -z "$DATA" ]; then
  record "mlp 2 ps x 2 workers" FAIL "no Fashion-MNIST: pass --data_dir"
else
  run="$OUT/mlp_run"
  rm -rf "$run"
  limited "$OUT/mlp_run.txt" "$LAUNCHER" --num_ps=2 --num_workers=2 \
    --run_dir="$run" -- --job_file="$JOBS/mlp_fashion_mnist.textproto" \
    "${RUN_ARGS[@]}" --data_dir="$DATA"
  status=$?
  tail -n 5 "$OUT/mlp_run.txt"
  accuracy="$(sed -n 's/^final test accuracy \([0-9.]*\).*/\1/p' \
    "$OUT/mlp_run.txt")"
  devices="$(grep -h 'device: ' "$run"/worker-*.log 2> /dev/null |
    sed 's/^.*device: \([^ ]*\).*/\1/' | sort | uniq -c |
    awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')"
  detail="test accuracy ${accuracy:-?}, workers on ${devices:-?}$DATA_NOTE"
  other=cpu
  [ "$DEVICE" = cuda ] || other=cuda
  if [ "$status" -eq 0 ] && [ -n "$accuracy" ] &&
    grep -q "$DEVICE" <<< "$devices" && ! grep -q "$other" <<< "$devices"; then
    record "mlp 2 ps x 2 workers" PASS "$detail"
  else
    record "mlp 2 ps x 2 workers" FAIL "$detail (exit $status; $run)"
  fi
fi

# ---- 5b. the MLP mirrored on two GPU workers: NCCL between processes ---------
if [ "$GPU_COUNT" -lt 2 ]; then
  STARTED=$SECONDS
  record "mlp mirrored 2 gpus" n/a "one GPU: NCCL between processes needs two"
elif ! step "mlp mirrored 2 gpus" 40 180 \
  "the MLP mirrored on 2 GPU workers: NCCL's all-reduce between processes"; then
  :
elif [ -z "$DATA" ]; then
  record "mlp mirrored 2 gpus" FAIL "no Fashion-MNIST: pass --data_dir"
else
  run="$OUT/mirrored_run"
  rm -rf "$run"
  limited "$OUT/mirrored_run.txt" "$LAUNCHER" --num_ps=1 --num_workers=2 \
    --run_dir="$run" -- --job_file="$JOBS/mlp_fashion_mnist.textproto" \
    --epochs=1 --data_dir="$DATA" --mode=mirrored
  status=$?
  tail -n 5 "$OUT/mirrored_run.txt"
  nccl="$(grep -l 'all-reduce: NCCL on cuda' "$run"/worker-*.log 2> /dev/null |
    wc -l)"
  accuracy="$(sed -n 's/^final test accuracy \([0-9.]*\).*/\1/p' \
    "$OUT/mirrored_run.txt")"
  detail="test accuracy ${accuracy:-?}, $nccl of 2 workers on NCCL$DATA_NOTE"
  if [ "$status" -eq 0 ] && [ -n "$accuracy" ] && [ "$nccl" -eq 2 ]; then
    record "mlp mirrored 2 gpus" PASS "$detail"
  else
    why="$(grep -h -m 1 'all-reduce: ' "$run"/worker-*.log 2> /dev/null |
      head -n 1 | sed 's/^.*all-reduce: /all-reduce: /')"
    record "mlp mirrored 2 gpus" FAIL "$detail${why:+ ($why)} (exit $status; $run)"
  fi
fi

# ---- 6. the CUDA step benchmark ----------------------------------------------
# The CNN stops at 8192: at 65536 its activations (~45 GB) and the GEMM
# timing's own operand copies (~50 GB) do not fit an 80 GB H100.
BENCH_RUNS=(
  "mlp_fashion_mnist,dlrm:1024,8192,65536"
  "cnn_fashion_mnist:1024,8192"
)
if step "step bench" 60 300 \
  "the CUDA step benchmark: MLP, CNN, DLRM against cuBLAS alone"; then
  : > "$OUT/step_bench.txt"
  status=0
  step_end=$((SECONDS + LIMIT))
  for bench_run in "${BENCH_RUNS[@]}"; do
    files=""
    for job in $(tr ',' ' ' <<< "${bench_run%%:*}"); do
      files="${files:+$files,}$JOBS/$job.textproto"
    done
    LIMIT=$((step_end - SECONDS))
    [ "$LIMIT" -gt 0 ] || LIMIT=1
    limited "$WORK/bench.txt" "$BENCH" "${BENCH_ARGS[@]}" \
      --batches="${bench_run#*:}" --job_files="$files"
    s=$?
    [ "$s" -eq 0 ] || status=$s
    cat "$WORK/bench.txt" >> "$OUT/step_bench.txt"
  done
  cat "$OUT/step_bench.txt"
  # "target: mlp_fashion_mnist on cuda:0 (NVIDIA H200, ... CUDA 13.0) at
  # batch 8192: step/gemm 1.21, target <= 1.5: met": the device name has
  # spaces.
  targets="$(sed -n 's/^target: \([^ ]*\) on .* at batch [0-9]*: \(.*\)/\1 \2/p' \
    "$OUT/step_bench.txt" | sed 's/$/;/' | paste -sd ' ' - | sed 's/;$//')"
  if [ "$status" -eq 0 ] && ! grep -q 'skipped' "$OUT/step_bench.txt" &&
    [ -n "$targets" ] && ! grep -q 'MISSED' <<< "$targets"; then
    record "step bench" PASS "$targets"
  elif [ "$status" -eq 0 ] && [ -n "$targets" ]; then
    record "step bench" FAIL "$targets"
  elif $REHEARSE && [ "$status" -eq 0 ]; then
    record "step bench" PASS "CPU rows only: $(grep -c ' cpu ' \
      "$OUT/step_bench.txt") (the targets need a GPU)"
  else
    record "step bench" FAIL "exit $status; $(grep -m 1 -E 'skipped|failed' \
      "$OUT/step_bench.txt")${targets:+; $targets}"
  fi
fi

finish
$ok
