#!/usr/bin/env bash
# The main job in one command: installs what is missing, builds, and trains
# the Fashion-MNIST MLP on this machine with 2 parameter servers and 2
# asynchronous workers. Extra arguments go to the coordinator, e.g.
#   deploy/train_local.sh --epochs=3 --optimizer=sgd --learning_rate=0.05
# TESSERA_DATA_PLANE=grpc moves the workers' tensors from the TCP data
# plane to gRPC calls (tessera_local --data_plane; default tcp).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install.sh
# Only what the main job runs (the launcher and the three roles), not the
# tests and tools: deploy/test.sh builds everything.
bash deploy/build.sh --target tessera_local tessera_ps tessera_worker \
  tessera_coordinator
BUILD_DIR="${TESSERA_BUILD_DIR:-build}"
exec "$BUILD_DIR/deploy/local/tessera_local" --num_ps=2 --num_workers=2 \
  --data_plane="${TESSERA_DATA_PLANE:-tcp}" -- --epochs=10 "$@"
