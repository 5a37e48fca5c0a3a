#!/usr/bin/env bash
# deploy/gpu_check.sh --rehearse from a freshly made bundle of this build
# (deploy/bundle.sh --from_build), with an empty environment and no
# Fashion-MNIST, so that the stand-in data is written and read by the real
# tessera_device_compare: every step passes (or does not apply) on the
# CPU, within its budget, and summary.json says so. The check's logic over
# stand-in binaries is tests/deploy/gpu_check_test.sh's.
#
#   tests/deploy/gpu_check_rehearsal_test.sh <build folder> <source folder>
set -uo pipefail
BUILD="$(cd "$1" && pwd)"
SOURCE="$(cd "$2" && pwd)"
WORK="$(mktemp -d /tmp/gpu_check_rehearsal.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

bash "$SOURCE/deploy/bundle.sh" --from_build="$BUILD" "$WORK/dist" \
  > "$WORK/bundle.txt" 2>&1 || {
  cat "$WORK/bundle.txt"
  fail "bundle.sh failed"
}
HOME_DIR="$(find "$WORK/dist" -mindepth 1 -maxdepth 1 -type d)"
[ -x "$HOME_DIR/gpu_check.sh" ] || fail "no gpu_check.sh in $HOME_DIR"

start=$SECONDS
env -i PATH=/usr/bin:/bin HOME="$WORK" \
  TESSERA_SYSTEM_FASHION_MNIST="$WORK/no-fashion-mnist" \
  "$HOME_DIR/gpu_check.sh" --rehearse --out="$WORK/out" > "$WORK/out.txt" 2>&1
status=$?
took=$((SECONDS - start))
sed -n '/^== gpu_check summary/,$p' "$WORK/out.txt"
echo "rehearsal: exit $status in $took s"
if [ "$status" -ne 0 ]; then
  tail -n 60 "$WORK/out.txt"
  fail "the rehearsal failed (exit $status)"
fi
grep -q 'synthetic images' "$WORK/out.txt" || fail "no stand-in data was written"
python3 - "$WORK/out/summary.json" << 'PY' || fail "summary.json: $(cat "$WORK/out/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["passed"] is True, s
steps = {x["name"]: x for x in s["steps"]}
for name in ("cuda libraries", "gpu tests", "compare mlp_fashion_mnist",
             "compare cnn_fashion_mnist", "compare dlrm",
             "mlp 2 ps x 2 workers", "step bench"):
    assert steps[name]["result"] == "PASS", steps.get(name)
assert steps["mlp mirrored 2 gpus"]["result"] == "n/a", steps
assert "workers on cpu x2" in steps["mlp 2 ps x 2 workers"]["detail"], steps
PY
echo "gpu_check_rehearsal: PASSED"
