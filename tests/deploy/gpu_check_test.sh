#!/usr/bin/env bash
# deploy/gpu_check.sh's own logic, without a GPU: the script runs in a
# bundle layout whose binaries and nvidia-smi are stand-ins (each a few
# lines of bash that answer as the real one does), so that
#   - its stand-in Fashion-MNIST holds at least the training examples
#     tessera_device_compare loads by default (read from its source), as
#     the real reader requires;
#   - step 6 shows the benchmark's targets from a line whose device name
#     has spaces, and a MISSED target fails the step;
#   - the CNN is never benchmarked at batch 65536 (too big for 80 GB);
#   - with two GPUs the MLP runs mirrored and the step needs "all-reduce:
#     NCCL on cuda" in both workers' logs (n/a with one GPU);
#   - --budget_s marks the steps that do not fit "SKIP: time";
#   - TERM in the middle of a step prints the table so far, names the step
#     and writes summary.json, at once.
#
#   tests/deploy/gpu_check_test.sh <source folder>
set -uo pipefail
SOURCE="$(cd "$1" && pwd)"
W="$(mktemp -d /tmp/gpu_check_test.XXXXXX)"
trap 'rm -rf "$W"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

TRAIN_DEFAULT="$(sed -n 's/^DEFINE_int64(train_examples, \([0-9]*\),.*/\1/p' \
  "$SOURCE/tools/local_train/device_compare_main.cc")"
[ -n "$TRAIN_DEFAULT" ] || fail "no --train_examples default in device_compare_main.cc"

# ---- the stand-ins -------------------------------------------------------------
B="$W/bundle"
mkdir -p "$B/bin" "$B/libexec/tessera" "$B/share/tessera/jobs" "$W/fakebin"
cp "$SOURCE/deploy/gpu_check.sh" "$B/gpu_check.sh"
chmod +x "$B/gpu_check.sh"
cp "$SOURCE"/deploy/jobs/*.textproto "$B/share/tessera/jobs/"
fake() { # <path>: an executable bash script from stdin
  { echo '#!/usr/bin/env bash'; cat; } > "$1"
  chmod +x "$1"
}
fake "$W/fakebin/nvidia-smi" << 'EOF'
if [ "${1:-}" = -L ]; then
  for ((i = 0; i < ${FAKE_GPUS:-1}; i++)); do
    echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"
  done
else
  echo "NVIDIA H100 80GB HBM3, 580.65.06, 81559 MiB"
fi
EOF
fake "$B/bin/tessera_worker" <<< 'exit 0'
fake "$B/bin/tessera_ctr_gen" << 'EOF'
for a in "$@"; do case "$a" in --out_dir=*) mkdir -p "${a#--out_dir=}" ;; esac; done
EOF
fake "$B/libexec/tessera/gpu_test" << 'EOF'
if [[ "$*" == *"=CudaLibrariesGpuTest.*"* ]]; then
  echo "cuBLAS: /opt/venv/nvidia/cu13/lib/libcublas.so.13"
  echo "NCCL: /opt/venv/nvidia/nccl/lib/libnccl.so.2"
  exit 0
fi
if [ -n "${FAKE_GPU_TEST_SLEEP:-}" ]; then
  echo $$ > "$FAKE_MARKS/gpu_test.pid"
  exec sleep "$FAKE_GPU_TEST_SLEEP"
fi
echo "[  PASSED  ] 97 tests."
EOF
# As the real one: the reader refuses more examples than the file holds.
fake "$B/bin/tessera_device_compare" << EOF
data=""
for a in "\$@"; do case "\$a" in --data_dir=*) data="\${a#--data_dir=}" ;; esac; done
images="\$data/train-images-idx3-ubyte.gz"
if [ -f "\$images" ]; then
  n="\$(gzip -dc "\$images" | head -c 8 | od -An -tu1 |
    awk '{print ((\$5 * 256 + \$6) * 256 + \$7) * 256 + \$8}')"
  if [ "\$n" -lt $TRAIN_DEFAULT ]; then
    echo "tessera_device_compare: train_examples is $TRAIN_DEFAULT but \$images holds only \$n examples" >&2
    exit 2
  fi
fi
echo "job: 20 steps, final loss cpu 0.5 cuda 0.5; max |loss diff| 1e-07; max |parameter diff| 2e-07 (tolerance 0.001)"
EOF
fake "$B/bin/tessera_local" << 'EOF'
run="" mirrored=false
for a in "$@"; do
  case "$a" in
    --run_dir=*) run="${a#--run_dir=}" ;;
    --mode=mirrored) mirrored=true ;;
  esac
done
mkdir -p "$run"
for w in 0 1; do
  echo "I1128 device: cuda:$w (NVIDIA H100 80GB HBM3, 81559 MiB)" > "$run/worker-$w.log"
  if $mirrored && [ -z "${FAKE_NO_NCCL:-}" ]; then
    echo "I1128 all-reduce: NCCL on cuda:$w (every worker has a GPU)" >> "$run/worker-$w.log"
  elif $mirrored; then
    echo "W1128 all-reduce: ring over gRPC (only 1 of 2 workers could join NCCL)" >> "$run/worker-$w.log"
  fi
done
echo "final test accuracy 0.9125"
EOF
# Prints the targets as bench_worker_step does, with the device name
# bench_worker_step gives, and notes its arguments.
fake "$B/libexec/tessera/bench_worker_step" << 'EOF'
echo "$*" >> "$FAKE_MARKS/bench_args"
dev="cuda:0 (NVIDIA H100 80GB HBM3, 81559 MiB, sm_90, driver CUDA 13.0)"
echo "# $dev"
if [[ "$*" == *mlp_fashion_mnist* ]]; then
  echo "target: mlp_fashion_mnist on $dev at batch 8192: step/gemm 1.21, target <= 1.5: met"
  echo "target: dlrm on $dev at batch 8192: step/gemm ${FAKE_DLRM_RATIO:-1.40}, target <= 1.5: ${FAKE_DLRM_VERDICT:-met}"
else
  echo "target (MLP and DLRM steps at batch 8192 within 1.5x of their GEMMs on the GPU): not checked"
fi
EOF

# A Fashion-MNIST folder with full-size headers (the stand-ins read no more).
mkdir "$W/fmnist"
for f in train-images-idx3-ubyte t10k-images-idx3-ubyte; do
  printf '\x00\x00\x08\x03\x00\x00\xea\x60\x00\x00\x00\x1c\x00\x00\x00\x1c' |
    gzip > "$W/fmnist/$f.gz"
done
for f in train-labels-idx1-ubyte t10k-labels-idx1-ubyte; do
  printf '\x00\x00\x08\x01\x00\x00\xea\x60' | gzip > "$W/fmnist/$f.gz"
done

export FAKE_MARKS="$W/marks"
CHECK_PATH="$W/fakebin:/usr/bin:/bin"
check() { # <name> <env...> -- <arguments>: runs gpu_check into $W/<name>
  local name="$1"
  shift
  local envs=()
  while [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  rm -rf "$FAKE_MARKS"
  mkdir -p "$FAKE_MARKS"
  env PATH="$CHECK_PATH" FAKE_MARKS="$FAKE_MARKS" \
    TESSERA_SYSTEM_FASHION_MNIST="$W/none" "${envs[@]}" \
    "$B/gpu_check.sh" --out="$W/$name" "$@" > "$W/$name.txt" 2>&1
}
row() { # <name> <step>: the table's row of <step>
  sed -n '/^== gpu_check summary/,$p' "$W/$1.txt" | grep "^$2 "
}

# ---- one GPU, the stand-in data ---------------------------------------------------
check one FAKE_GPUS=1 --
status=$?
cat "$W/one.txt"
[ "$status" -eq 0 ] || fail "one GPU: exit $status, not 0"
grep -q 'synthetic images' "$W/one.txt" || fail "the stand-in data was not written"
row one "compare mlp_fashion_mnist" | grep -q PASS ||
  fail "the MLP compare does not pass on the stand-in data (too few examples?)"
row one "compare cnn_fashion_mnist" | grep -q PASS || fail "the CNN compare does not pass"
row one "step bench" | grep -q 'PASS .*mlp_fashion_mnist step/gemm 1.21, target <= 1.5: met; dlrm step/gemm 1.40' ||
  fail "step 6 does not show the targets: $(row one "step bench")"
row one "mlp mirrored 2 gpus" | grep -q 'n/a' || fail "a mirrored run on one GPU"
if grep 'cnn_fashion_mnist' "$FAKE_MARKS/bench_args" | grep -q 65536; then
  fail "the CNN is benchmarked at batch 65536: $(cat "$FAKE_MARKS/bench_args")"
fi
grep 'mlp_fashion_mnist' "$FAKE_MARKS/bench_args" | grep -q 65536 ||
  fail "the MLP is no longer benchmarked at 65536"
python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["passed"] is True, s
assert s["budget_s"] == 420, s
assert len(s["steps"]) == 14, [x["name"] for x in s["steps"]]
' "$W/one/summary.json" || fail "summary.json: $(cat "$W/one/summary.json")"

# ---- a MISSED target fails step 6 -------------------------------------------------
check missed FAKE_DLRM_RATIO=2.31 FAKE_DLRM_VERDICT=MISSED -- --data_dir="$W/fmnist"
status=$?
[ "$status" -eq 1 ] || fail "a MISSED target: exit $status, not 1"
row missed "step bench" | grep -q 'FAIL .*dlrm step/gemm 2.31, target <= 1.5: MISSED' ||
  fail "a MISSED target: $(row missed "step bench")"

# ---- two GPUs: NCCL between processes ----------------------------------------------
check two FAKE_GPUS=2 -- --data_dir="$W/fmnist"
status=$?
[ "$status" -eq 0 ] || fail "two GPUs: exit $status; $(cat "$W/two.txt")"
row two "mlp mirrored 2 gpus" | grep -q 'PASS .*2 of 2 workers on NCCL' ||
  fail "two GPUs: $(row two "mlp mirrored 2 gpus")"
check two_ring FAKE_GPUS=2 FAKE_NO_NCCL=1 -- --data_dir="$W/fmnist"
status=$?
[ "$status" -eq 1 ] || fail "two GPUs on the ring: exit $status, not 1"
row two_ring "mlp mirrored 2 gpus" | grep -q 'FAIL .*0 of 2 workers on NCCL (all-reduce: ring over gRPC' ||
  fail "two GPUs on the ring: $(row two_ring "mlp mirrored 2 gpus")"

# ---- the budget ----------------------------------------------------------------
# 30 s: the libraries (5 s) and the compares (10 s each, the stand-ins end
# at once) fit; the GPU tests (45), the end-to-end run (40) and the
# benchmark (60) do not.
check budget -- --data_dir="$W/fmnist" --budget_s=30
status=$?
[ "$status" -eq 1 ] || fail "--budget_s=30: exit $status, not 1"
for skipped in "gpu tests" "mlp 2 ps x 2 workers" "step bench"; do
  row budget "$skipped" | grep -q 'SKIP .*time: needs' ||
    fail "--budget_s=30: $skipped was not skipped for time: $(row budget "$skipped")"
done
row budget "cuda libraries" | grep -q PASS || fail "--budget_s=30 skipped the libraries"
grep -q '^-> SKIP: time: needs ~45 s' "$W/budget.txt" ||
  fail "no \"SKIP: time\" line for the GPU tests"
check bad_budget -- --budget_s=soon
[ $? -eq 2 ] || fail "--budget_s=soon is not refused with exit 2"
grep -q 'budget_s must be a whole number' "$W/bad_budget.txt" ||
  fail "--budget_s=soon: $(cat "$W/bad_budget.txt")"

# ---- TERM in the middle of a step ---------------------------------------------------
rm -rf "$FAKE_MARKS"
mkdir -p "$FAKE_MARKS"
env PATH="$CHECK_PATH" FAKE_MARKS="$FAKE_MARKS" FAKE_GPU_TEST_SLEEP=120 \
  "$B/gpu_check.sh" --out="$W/term" --data_dir="$W/fmnist" \
  > "$W/term.txt" 2>&1 &
pid=$!
for ((i = 0; i < 300; i++)); do
  [ -s "$FAKE_MARKS/gpu_test.pid" ] && break
  sleep 0.1
done
[ -s "$FAKE_MARKS/gpu_test.pid" ] || fail "the GPU tests never started: $(cat "$W/term.txt")"
start=$SECONDS
kill -TERM "$pid"
wait "$pid"
status=$?
took=$((SECONDS - start))
cat "$W/term.txt"
[ "$status" -eq 143 ] || fail "TERM: exit $status, not 143"
[ "$took" -le 10 ] || fail "TERM: the check took $took s to stop"
row term "cuda libraries" | grep -q PASS || fail "TERM: the table so far is missing"
row term "gpu tests" | grep -q 'FAIL .*stopped by TERM' ||
  fail "TERM: the step it was in is not named: $(row term "gpu tests")"
if kill -0 "$(cat "$FAKE_MARKS/gpu_test.pid")" 2> /dev/null; then
  fail "TERM: the GPU tests still run"
fi
python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["passed"] is False and s["stopped_by"] == "TERM", s
assert [x["name"] for x in s["steps"]] == ["gpu", "cuda libraries", "gpu tests"], s
' "$W/term/summary.json" || fail "TERM: summary.json: $(cat "$W/term/summary.json")"

echo "gpu_check_test: PASSED"
