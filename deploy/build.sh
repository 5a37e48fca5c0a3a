#!/usr/bin/env bash
# Configures and builds Tessera into build/ (or $TESSERA_BUILD_DIR).
# CUDA code is compiled when nvcc is found; no GPU is needed to build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${TESSERA_BUILD_DIR:-build}"
export CCACHE_BASEDIR="$PWD"
# The tests' precompiled header (tests/CMakeLists.txt) is cached only
# when ccache may ignore its timestamps and defines.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
# A build from scratch compiles the tests 8 files to a unit
# (tests/CMakeLists.txt says why).
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTESSERA_UNITY_TESTS=ON
fi
cmake --build "$BUILD_DIR" "$@"
