#!/usr/bin/env bash
# The portable bundle (deploy/bundle.sh) of this build runs on a bare
# machine: packaged from the build CI made (--from_build), unpacked
# elsewhere, it
#   - holds at most 64 MiB and no binary or library that lists a CUDA
#     library as NEEDED (readelf -d);
#   - resolves every library inside itself but glibc's own
#     (deploy/bundle/system_libs.txt), as ldd sees it with an empty
#     environment;
#   - trains the MLP job for one epoch through its launcher, started from
#     another folder with an empty environment (env -i PATH=/usr/bin:/bin),
#     the launcher starting the bundle's own binaries;
#   - has a gpu_check.sh whose first line says there is no GPU, with a
#     non-zero exit, where none is (skipped where nvidia-smi finds one).
#
#   tests/deploy/bundle_test.sh <build folder> <source folder>
set -euo pipefail
BUILD="$(cd "$1" && pwd)"
SOURCE="$(cd "$2" && pwd)"
WORK="$(mktemp -d /tmp/bundle_test.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

bash "$SOURCE/deploy/bundle.sh" --from_build="$BUILD" "$WORK/dist"
tarball="$(find "$WORK/dist" -maxdepth 1 -name 'tessera-*-linux-*.tar.gz')"
[ -f "$tarball" ] || fail "no tessera-*.tar.gz in $WORK/dist"
mkdir "$WORK/node"
tar -C "$WORK/node" -xzf "$tarball"
HOME_DIR="$(realpath "$(find "$WORK/node" -mindepth 1 -maxdepth 1 -type d)")"
echo "unpacked: $HOME_DIR ($(du -sh "$HOME_DIR" | cut -f1);" \
  "tar.gz $(du -h "$tarball" | cut -f1))"

bytes="$(du -sb "$HOME_DIR" | cut -f1)"
[ "$bytes" -le $((64 * 1024 * 1024)) ] ||
  fail "the bundle is $((bytes / 1024 / 1024)) MiB, over 64"
for binary in tessera_ps tessera_worker tessera_coordinator tessera_local \
  tessera_slurm_task tessera_ctl tessera_export tessera_predict \
  tessera_evaluator tessera_local_train tessera_device_compare \
  tessera_ctr_gen tessera_to_tfrecord; do
  [ -x "$HOME_DIR/bin/$binary" ] || fail "bin/$binary is missing"
done
for f in gpu_check.sh README.txt BUILD_INFO libexec/tessera/gpu_test \
  libexec/tessera/bench_worker_step share/tessera/jobs/mlp_fashion_mnist.textproto; do
  [ -e "$HOME_DIR/$f" ] || fail "$f is missing"
done

# Every ELF file: no CUDA library NEEDED, every library inside the bundle
# or glibc's.
mapfile -t SYSTEM_LIBS < <(grep -v '^#' "$SOURCE/deploy/bundle/system_libs.txt" |
  sed '/^$/d')
elves=()
for f in "$HOME_DIR"/bin/* "$HOME_DIR"/libexec/tessera/* "$HOME_DIR"/lib/*; do
  if head -c 4 "$f" | grep -q 'ELF'; then elves+=("$f"); fi
done
for f in "${elves[@]}"; do
  needed="$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
  if grep -E '^lib(cuda|cudart|cublas|cublasLt|nccl|cufft|curand|cusolver|cusparse|cudnn|nvrtc|nvJitLink)\.so' \
    <<< "$needed"; then
    fail "${f#"$HOME_DIR"/} lists a CUDA library as NEEDED"
  fi
  while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [ "$path" != "not" ] || fail "${f#"$HOME_DIR"/}: $soname not found"
    path="$(realpath -m "$path")"  # ldd says <bundle>/bin/../lib/...
    case "$path" in "$HOME_DIR"/lib/*) continue ;; esac
    system=false
    for lib in "${SYSTEM_LIBS[@]}"; do
      [ "$soname" != "$lib" ] || system=true
    done
    $system || fail "${f#"$HOME_DIR"/} takes $soname from $path, outside" \
      "the bundle and not glibc's"
  done < <(env -i PATH=/usr/bin:/bin ldd "$f")
done
echo "ldd and readelf: ${#elves[@]} files, nothing outside the bundle but" \
  "glibc, no CUDA library NEEDED"
echo "ldd $HOME_DIR/bin/tessera_worker:"
env -i PATH=/usr/bin:/bin ldd "$HOME_DIR/bin/tessera_worker" |
  sed "s|$HOME_DIR|<bundle>|; s/^/  /"

# One epoch of the MLP from another folder, with nothing in the environment.
# The launcher finds the role binaries beside itself in bin/ only: the build
# tree's layout (ps_server/tessera_ps, ...) exists nowhere near the bundle.
mkdir "$WORK/elsewhere"
cd "$WORK/elsewhere"
env -i PATH=/usr/bin:/bin "$HOME_DIR/bin/tessera_local" --num_ps=1 \
  --num_workers=1 --run_dir="$WORK/run" -- \
  --job_file="$HOME_DIR/share/tessera/jobs/mlp_fashion_mnist.textproto" \
  --epochs=1 > "$WORK/run.txt" 2>&1 || {
  tail -n 30 "$WORK/run.txt"
  fail "the MLP run from the bundle failed"
}
grep -E '^final test accuracy' "$WORK/run.txt" ||
  fail "no final test accuracy in the run's output"
accuracy="$(sed -n 's/^final test accuracy \([0-9.]*\).*/\1/p' "$WORK/run.txt")"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.75) }' ||
  fail "test accuracy $accuracy after one epoch, expected >= 0.75"

# gpu_check.sh where there is no GPU: its first line says so.
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  echo "a GPU answers here: gpu_check.sh's no-GPU line not checked"
else
  status=0
  env -i PATH=/usr/bin:/bin "$HOME_DIR/gpu_check.sh" --out="$WORK/gpu" \
    > "$WORK/gpu.txt" 2>&1 || status=$?
  echo "gpu_check.sh (exit $status): $(head -n 1 "$WORK/gpu.txt")"
  [ "$status" -ne 0 ] || fail "gpu_check.sh exits 0 without a GPU"
  head -n 1 "$WORK/gpu.txt" | grep -q '^gpu_check: no GPU' ||
    fail "gpu_check.sh's first line does not say there is no GPU"
fi
echo "PASS"
