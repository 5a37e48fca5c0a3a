#!/usr/bin/env bash
# Installs what Tessera needs to build, test and train on Debian 12, and
# nothing that is already there. Safe to run any number of times.
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgoogle-glog-dev libgflags-dev libgtest-dev libgmock-dev
  libeigen3-dev nlohmann-json3-dev libgoogle-perftools-dev zlib1g-dev
  libboost-dev
  librocksdb-dev
  libonnx-dev
  libhdf5-dev libzip-dev
  clang libclang-rt-14-dev lld
  python3-venv
  dataset-fashion-mnist
  openssl libssl-dev
  patchelf
  iproute2 nftables iptables iputils-ping libnetfilter-queue-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install.sh: every package is already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install.sh: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
