#!/usr/bin/env bash
# bench/compare_modes: trains the Fashion-MNIST MLP in async, sync, ssp:2
# and mirrored mode with 1, 2 and 4 workers on the same number of examples
# (--epochs passes over the training set), then writes a CSV, PNG plots of
# test accuracy against examples seen and against wall time, and a
# markdown table (bench/compare_modes_report.py).
#
#   bash bench/compare_modes.sh [out_dir] [-- extra coordinator flags]
#   bash bench/compare_modes.sh JOB DATA [out_dir] [-- flags]
#
# The second form compares the modes on any job file and its data
# (bench/compare_modes_job.sh: DLRM, DeepFM, ... with AUC).
#
# EPOCHS, WORKERS and MODES (environment) narrow the grid;
# TESSERA_BUILD_DIR picks the build folder; TESSERA_NO_BUILD=1 uses the
# binaries already there.
#
# Batches: async and ssp:2 use --batch_size per worker (64); sync and
# mirrored use one global batch of 128 split over the workers, so "sync, 1
# worker" and "sync, 2 workers" train on the same global batches.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  *.textproto) exec bash bench/compare_modes_job.sh "$@" ;;
esac
OUT="${1:-bench/results/compare_modes}"
shift || true
[ "${1:-}" = "--" ] && shift
EPOCHS="${EPOCHS:-10}"
WORKERS="${WORKERS:-1 2 4}"
MODES="${MODES:-async sync ssp:2 mirrored}"
BUILD="${TESSERA_BUILD_DIR:-build}"
bash deploy/install.sh >/dev/null
if [ -z "${TESSERA_NO_BUILD:-}" ]; then
  bash deploy/build.sh --target tessera_local tessera_ps tessera_worker \
    tessera_coordinator >/dev/null
fi
bash deploy/python_env.sh >/dev/null
mkdir -p "$OUT/runs"
total=$(( $(wc -w <<<"$MODES") * $(wc -w <<<"$WORKERS") ))
i=0
start=$(date +%s)
for mode in $MODES; do
  for n in $WORKERS; do
    i=$((i + 1))
    name="${mode//:/}-w${n}"
    run="$OUT/runs/$name"
    rm -rf "$run"
    ps=2
    batch=64
    case "$mode" in
      sync) batch=128 ;;
      mirrored) batch=128; ps=0 ;;
    esac
    elapsed=$(( $(date +%s) - start ))
    eta="--:--"
    if [ "$i" -gt 1 ]; then
      eta=$(( elapsed * (total - i + 1) / (i - 1) ))s
    fi
    echo "[$i/$total] $mode with $n worker(s), batch $batch, $EPOCHS epochs (elapsed ${elapsed}s, ETA $eta)"
    "$BUILD/deploy/local/tessera_local" --num_ps="$ps" --num_workers="$n" \
      --run_dir="$run" -- --mode="$mode" --batch_size="$batch" \
      --epochs="$EPOCHS" "$@" >"$run.out" 2>&1 || {
        echo "  failed; see $run.out"; tail -5 "$run.out"; exit 1; }
    grep "final test accuracy" "$run.out" | sed 's/^/  /'
  done
done
PY="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}/bin/python"
"$PY" bench/compare_modes_report.py "$OUT"
