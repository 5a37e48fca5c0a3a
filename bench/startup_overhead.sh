#!/usr/bin/env bash
# Start-up overhead of a whole job against its number of workers (issue
# #35): tessera_local runs the Fashion-MNIST MLP (the coordinator's default
# job) for one epoch with 4 parameter servers and each number of workers in
# turn, and a markdown table shows, per run, the launcher's wall time, the
# coordinator's own wall time and training time (its summary line "... in
# T s of training ...; wall time W s"), and the overhead: everything that is
# not training (process start, waiting for the cluster, creating the
# variables, configuring the workers, the test-set evaluation, shutting
# down).
#
#   bash bench/startup_overhead.sh [WORKERS...]     (default: 4 8 32 64)
#
# The binaries come from $TESSERA_BUILD_DIR (default build); the runs are
# kept in $TESSERA_STARTUP_WORK (default a new folder under /tmp); extra
# coordinator flags may be given in $TESSERA_STARTUP_FLAGS.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${TESSERA_BUILD_DIR:-build}" && pwd)
LOCAL="$BUILD/deploy/local/tessera_local"
if [ ! -x "$LOCAL" ]; then
  echo "no $LOCAL: build tessera_local, tessera_coordinator, tessera_worker" \
    "and tessera_ps first (bash deploy/build.sh)" >&2
  exit 2
fi
WORKERS=("$@")
[ ${#WORKERS[@]} -eq 0 ] && WORKERS=(4 8 32 64)
WORK=${TESSERA_STARTUP_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/tessera_startup.XXXXXX")}
mkdir -p "$WORK"
NUM_PS=4

rows=()
for n in "${WORKERS[@]}"; do
  dir="$WORK/w$n"
  rm -rf "$dir"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$LOCAL" --num_ps=$NUM_PS --num_workers="$n" --run_dir="$dir" -- \
    --epochs=1 ${TESSERA_STARTUP_FLAGS:-} > "$WORK/w$n.out" 2>&1
  rc=$?
  end=$(date +%s.%N)
  summary=$(grep -E 'of training .*wall time' "$WORK/w$n.out" | tail -1)
  train=$(sed -n 's/.* in \([0-9.]*\) s of training.*/\1/p' <<< "$summary")
  coord=$(sed -n 's/.*wall time \([0-9.]*\) s.*/\1/p' <<< "$summary")
  if [ "$rc" -ne 0 ] || [ -z "$train" ] || [ -z "$coord" ]; then
    echo "workers=$n: the job failed (exit $rc); see $WORK/w$n.out" >&2
    rows+=("| $n | failed (exit $rc) | | | | |")
    continue
  fi
  rows+=("$(awk -v n="$n" -v s="$start" -v e="$end" -v t="$train" \
    -v c="$coord" 'BEGIN {
      printf "| %d | %.1f | %.1f | %.1f | %.1f | %.1f |", n, e - s, c, t,
        e - s - t, c - t }')")
  echo "workers=$n done: ${rows[-1]}" >&2
done

echo "Fashion-MNIST MLP, --num_ps=$NUM_PS, --epochs=1; $(nproc) CPU cores;" \
  "$(date -u +%Y-%m-%d)"
echo
echo "| workers | launcher wall s | coordinator wall s | training s |" \
  "overhead s (launcher wall - training) | coordinator overhead s |"
echo "|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "runs kept in $WORK"
