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
# install.sh installed Fashion-MNIST and openssl: a test that would skip
# without them fails instead (tests/skip_unless_required.h).
export TESSERA_REQUIRE_DATA="${TESSERA_REQUIRE_DATA:-1}"
export TESSERA_REQUIRE_TLS="${TESSERA_REQUIRE_TLS:-1}"
ctest --output-on-failure -j2 --timeout 900
