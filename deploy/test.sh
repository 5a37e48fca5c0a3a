#!/usr/bin/env bash
# The tests in one command: installs what is missing, builds, and runs every
# test (unit tests, loopback gRPC tests, and the integration test that runs
# the real binaries) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install.sh
# TensorBoard's own reader checks the event files (tensorboard from PyPI).
bash deploy/python_env.sh
bash deploy/build.sh
BUILD_DIR="${TESSERA_BUILD_DIR:-build}"
cd "$BUILD_DIR"
ctest --output-on-failure -j2 --timeout 900
