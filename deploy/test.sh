#!/usr/bin/env bash
# The tests in one command: installs what is missing, builds, and runs every
# test (unit tests, loopback gRPC tests, and the integration test that runs
# the real binaries) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install.sh
# The Python environment the checks use (TensorBoard's own event reader,
# ONNX Runtime, Keras, PyTorch; mostly a download, about 3 GB with
# PyTorch's wheel) is made while the C++ build keeps both cores busy,
# instead of before it: on a fresh machine that takes minutes off the run.
PYENV_LOG="$(mktemp "${TMPDIR:-/tmp}/tessera-python-env.XXXXXX")"
bash deploy/python_env.sh >"$PYENV_LOG" 2>&1 &
pyenv_pid=$!
# Interrupted, or the build failed: the download stops too.
trap 'kill "$pyenv_pid" 2>/dev/null; rm -f "$PYENV_LOG"' EXIT
build_rc=0
bash deploy/build.sh || build_rc=$?
if [ "$build_rc" -ne 0 ]; then exit "$build_rc"; fi
pyenv_rc=0
wait "$pyenv_pid" || pyenv_rc=$?
trap - EXIT
cat "$PYENV_LOG"
rm -f "$PYENV_LOG"
if [ "$pyenv_rc" -ne 0 ]; then
  echo "test.sh: deploy/python_env.sh failed (exit $pyenv_rc)" >&2
  exit "$pyenv_rc"
fi
BUILD_DIR="${TESSERA_BUILD_DIR:-build}"
cd "$BUILD_DIR"
# install.sh installed Fashion-MNIST and openssl: a test that would skip
# without them fails instead (tests/skip_unless_required.h).
export TESSERA_REQUIRE_DATA="${TESSERA_REQUIRE_DATA:-1}"
export TESSERA_REQUIRE_TLS="${TESSERA_REQUIRE_TLS:-1}"
# The tests that kill or stop processes at a moment or change a job's
# workers (labels fault and elastic) run twice, so that one that passes
# by luck fails CI once in a while instead of never (#48;
# bench/results/flakes.md has the long gate). Both runs go on whatever the
# other's result; either failing fails. The chaos test runs once: it
# draws a new schedule every run, and it runs alone (RUN_SERIAL), so its
# second run cost CI ~100 s of the 30 minutes a run should stay under
# (33.5 minutes on a fresh clone with all three repeated).
REPEAT_LABELS='^(fault|elastic)$'
# Every test's files (runs, checkpoints, generated data) go under one
# folder, removed when every test passed and kept, for their logs, when
# one failed: a passing case removes its own (tests/scratch_dir.h), and
# this catches the rest. Both passes share it, and with it the undisturbed
# runs kept per build (tests/kept_metrics.h).
TEST_TMP="$(mktemp -d "${TMPDIR:-/tmp}/tessera-tests.XXXXXX")"
export TMPDIR="$TEST_TMP" TEST_TMPDIR="$TEST_TMP"
rc=0
ctest --output-on-failure -j2 --timeout 900 -LE "$REPEAT_LABELS" || rc=$?
ctest --output-on-failure -j2 --timeout 900 -L "$REPEAT_LABELS" \
  --repeat until-fail:2 || rc=$?
if [ "$rc" -eq 0 ]; then
  rm -rf "$TEST_TMP"
else
  echo "test.sh: a test failed; its files are kept in $TEST_TMP" >&2
fi
exit "$rc"
