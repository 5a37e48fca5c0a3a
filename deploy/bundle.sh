#!/usr/bin/env bash
# Makes the portable bundle: one folder (and a .tar.gz of it) that runs on
# any x86-64 Linux with glibc, from wherever it is unpacked, without root,
# a compiler or any package (docs/bundle.md):
#
#   bash deploy/bundle.sh [--from_build=DIR] [OUT_DIR]
#
#   OUT_DIR/tessera-<version>-linux-x86_64/
#     bin/            every binary a user runs, stripped
#     lib/            every shared library they need but glibc's and
#                     GCC's runtime (deploy/bundle/system_libs.txt), found through
#                     RUNPATH $ORIGIN/../lib; no CUDA library: cuBLAS and
#                     NCCL are the node's, loaded when first used
#     libexec/tessera/  gpu_check.sh's GPU tests and step benchmark
#     share/tessera/  the job files, train.sbatch, the TFJob manifest
#     gpu_check.sh, README.txt, BUILD_INFO
#   OUT_DIR/tessera-<version>-linux-x86_64.tar.gz
#
# Without --from_build it configures and builds a Release tree in
# build-bundle/ (or $TESSERA_BUNDLE_BUILD_DIR), only the targets the bundle
# holds, with CUDA code where nvcc is found. --from_build=DIR packages a
# tree already built instead (CI's RelWithDebInfo build: debug info is
# stripped on copy), building nothing.
#
# Exit code 2 for a bad argument or an incomplete build folder, 1 when the
# bundle breaks a rule (a CUDA library NEEDED, an unresolved library, over
# 64 MiB).
set -euo pipefail
SOURCE="$(cd "$(dirname "$0")/.." && pwd)"
MAX_BYTES=$((64 * 1024 * 1024))

# name -> folder in a build tree (each CMakeLists.txt's).
BINARIES=(
  ps_server/tessera_ps worker/tessera_worker coordinator/tessera_coordinator
  coordinator/tessera_ctl deploy/local/tessera_local
  deploy/slurm/tessera_slurm_task worker/export/tessera_export
  worker/predict/tessera_predict worker/evaluate/tessera_evaluator
  worker/tools/tessera_local_train worker/tools/tessera_device_compare
  worker/tessera_ctr_gen worker/tessera_to_tfrecord
)
GPU_CHECK_BINARIES=(tests/gpu_test bench/bench_worker_step)
# The dynamic linker's names for the CUDA libraries no binary may need.
CUDA_NEEDED='^lib(cuda|cudart|cublas|cublasLt|nccl|cufft|curand|cusolver|cusparse|cudnn|nvrtc|nvJitLink|nvToolsExt)\.so'

usage() {
  echo "usage: bash deploy/bundle.sh [--from_build=DIR] [OUT_DIR (default dist)]" >&2
  exit 2
}
fail() {
  echo "bundle.sh: $*" >&2
  exit 1
}

FROM_BUILD=""
OUT_DIR=""
for arg in "$@"; do
  case "$arg" in
    --from_build=*) FROM_BUILD="${arg#--from_build=}" ;;
    -h | --help) usage ;;
    -*) echo "bundle.sh: unknown flag $arg" >&2; usage ;;
    *)
      [ -z "$OUT_DIR" ] || { echo "bundle.sh: one OUT_DIR only" >&2; usage; }
      OUT_DIR="$arg"
      ;;
  esac
done
OUT_DIR="${OUT_DIR:-$SOURCE/dist}"
for tool in patchelf strip readelf ldd tar; do
  command -v "$tool" > /dev/null || {
    echo "bundle.sh: $tool is missing; run deploy/install.sh" >&2
    exit 2
  }
done

if [ -n "$FROM_BUILD" ]; then
  BUILD="$(cd "$FROM_BUILD" 2> /dev/null && pwd)" || {
    echo "bundle.sh: --from_build=$FROM_BUILD is not a folder" >&2
    exit 2
  }
else
  BUILD="${TESSERA_BUNDLE_BUILD_DIR:-$SOURCE/build-bundle}"
  export CCACHE_BASEDIR="$SOURCE"
  if [ ! -f "$BUILD/build.ninja" ]; then
    cmake -S "$SOURCE" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
  fi
  targets=()
  for path in "${BINARIES[@]}" "${GPU_CHECK_BINARIES[@]}"; do
    targets+=("$(basename "$path")")
  done
  cmake --build "$BUILD" --target "${targets[@]}"
fi
missing=()
for path in "${BINARIES[@]}" "${GPU_CHECK_BINARIES[@]}"; do
  [ -x "$BUILD/$path" ] || missing+=("$BUILD/$path")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bundle.sh: the build folder lacks ${missing[*]}; build them" \
    "(deploy/build.sh) or leave out --from_build" >&2
  exit 2
fi

VERSION="$(sed -n 's/^project(tessera VERSION \([0-9.]*\).*/\1/p' \
  "$SOURCE/CMakeLists.txt")"
NAME="tessera-${VERSION:-0}-linux-$(uname -m)"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
ROOT="$OUT_DIR/$NAME"
rm -rf "$ROOT" "$ROOT.tar.gz"
mkdir -p "$ROOT/bin" "$ROOT/lib" "$ROOT/libexec/tessera" \
  "$ROOT/share/tessera/jobs"

# Binaries, stripped of debug info and symbols, each with the RUNPATH of
# its folder: the build's own RUNPATH (its build and CUDA folders) goes.
copy_binary() { # <build path> <folder> <runpath>
  local to
  to="$2/$(basename "$1")"
  strip --strip-all -o "$to" "$1"
  patchelf --set-rpath "$3" "$to"
}
# shellcheck disable=SC2016  # $ORIGIN is the dynamic linker's, not bash's
for path in "${BINARIES[@]}"; do
  copy_binary "$BUILD/$path" "$ROOT/bin" '$ORIGIN/../lib'
done
# shellcheck disable=SC2016
for path in "${GPU_CHECK_BINARIES[@]}"; do
  copy_binary "$BUILD/$path" "$ROOT/libexec/tessera" '$ORIGIN/../../lib'
done

# Libraries: what the dynamic linker resolves for the binaries (ldd lists
# dependencies of dependencies too), but for glibc's own. Each gets
# RUNPATH $ORIGIN: a RUNPATH serves only its own object's NEEDED, so
# libgrpc++ finds libgrpc beside it by its own.
mapfile -t SYSTEM_LIBS < <(grep -v '^#' "$SOURCE/deploy/bundle/system_libs.txt" |
  sed '/^$/d')
is_system() {
  local lib
  for lib in "${SYSTEM_LIBS[@]}"; do [ "$1" = "$lib" ] && return 0; done
  return 1
}
declare -A carried=()
# Asked of the build's binaries, whose RUNPATH (the build's own) still
# finds a library outside the system folders.
for path in "${BINARIES[@]}" "${GPU_CHECK_BINARIES[@]}"; do
  binary="$BUILD/$path"
  # "name => /path (addr)"; "name => not found" fails below.
  while read -r soname arrow file _; do
    [ "$arrow" = "=>" ] || continue
    is_system "$soname" && continue
    if [ "$file" = "not" ]; then
      fail "$(basename "$binary") needs $soname, which this machine lacks"
    fi
    carried[$soname]="$file"
  done < <(env -u LD_LIBRARY_PATH ldd "$binary")
done
for soname in "${!carried[@]}"; do
  if [[ "$soname" =~ $CUDA_NEEDED ]]; then
    fail "a binary needs the CUDA library $soname (${carried[$soname]});" \
      "CUDA libraries are loaded from the node when used, never linked"
  fi
  cp -L "${carried[$soname]}" "$ROOT/lib/$soname"
  chmod u+w "$ROOT/lib/$soname"
  strip --strip-unneeded "$ROOT/lib/$soname"
  # shellcheck disable=SC2016
  patchelf --set-rpath '$ORIGIN' "$ROOT/lib/$soname"
done

# No binary may list a CUDA library: it would not start on a node without.
for binary in "$ROOT"/bin/* "$ROOT"/libexec/tessera/*; do
  if readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
    grep -E "$CUDA_NEEDED"; then
    fail "$(basename "$binary") lists a CUDA library as NEEDED"
  fi
done

cp "$SOURCE"/deploy/jobs/*.textproto "$ROOT/share/tessera/jobs/"
mkdir -p "$ROOT/share/tessera/slurm" "$ROOT/share/tessera/k8s"
cp "$SOURCE/deploy/slurm/train.sbatch" "$ROOT/share/tessera/slurm/"
cp "$SOURCE/deploy/k8s/tfjob.yaml" "$ROOT/share/tessera/k8s/"
cp "$SOURCE/deploy/gpu_check.sh" "$ROOT/gpu_check.sh"
cp "$SOURCE/deploy/bundle/README.txt" "$ROOT/README.txt"
chmod +x "$ROOT/gpu_check.sh"

# The newest glibc and libstdc++ symbol versions any file asks for: the
# oldest of each the bundle runs on.
newest_version() { # <prefix>
  for f in "$ROOT"/bin/* "$ROOT"/libexec/tessera/* "$ROOT"/lib/*; do
    readelf --dyn-syms -W "$f" | grep -o "$1[0-9][0-9.]*" || true
  done | sort -u -V | tail -n 1
}
GLIBC="$(newest_version GLIBC_)"
GLIBCXX="$(newest_version GLIBCXX_)"
BUILD_TYPE="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
# The GPU code nvcc was asked for (sm_XX: machine code; compute_XX: PTX).
CUDA_ARCHS="$(grep -o -- '--generate-code=arch=compute_[0-9]*,code=\[[^]]*\]' \
  "$BUILD/build.ninja" 2> /dev/null | sed 's/.*code=\[\(.*\)\]/\1/' |
  tr ',' '\n' | sort -u | paste -sd ' ' -)"
{
  echo "name: $NAME"
  echo "commit: $(git -C "$SOURCE" rev-parse --short HEAD 2> /dev/null ||
    echo unknown)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n \
    's/^PRETTY_NAME="\(.*\)"/\1/p' /etc/os-release)"
  echo "build type: ${BUILD_TYPE:-?} (stripped)"
  echo "CUDA code: ${CUDA_ARCHS:-none (a CPU-only build)}"
  echo "needs: x86-64 Linux with glibc >= ${GLIBC#GLIBC_} and a libstdc++" \
    "with ${GLIBCXX:-GLIBCXX_3.4} (GCC 12 or newer's for 3.4.30)"
} > "$ROOT/BUILD_INFO"

bytes="$(du -sb "$ROOT" | cut -f1)"
if [ "$bytes" -gt "$MAX_BYTES" ]; then
  du -sh "$ROOT"/* >&2
  fail "$ROOT is $((bytes / 1024 / 1024)) MiB, over the 64 MiB limit"
fi
tar -C "$OUT_DIR" -czf "$ROOT.tar.gz" "$NAME"
echo "bundle.sh: $ROOT ($((bytes / 1024 / 1024)) MiB," \
  "$(find "$ROOT/bin" -type f | wc -l) binaries," \
  "$(find "$ROOT/lib" -type f | wc -l) libraries," \
  "glibc >= ${GLIBC#GLIBC_}, ${GLIBCXX:-no GLIBCXX})"
echo "bundle.sh: $ROOT.tar.gz ($(($(stat -c %s "$ROOT.tar.gz") / 1024 / 1024)) MiB)"
