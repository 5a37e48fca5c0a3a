#!/usr/bin/env bash
# bench/compare_modes_job: trains one job file in every mode that fits it
# (async, ssp:2, sync, hybrid and hybrid:sync by default; models with
# tables included) with 2
# parameter servers and 2 workers on the same data, then writes a markdown
# table (final and best test AUC, or accuracy for a class-index label,
# examples/s, wall time, the parameter servers' peak memory) and SVG plots
# of the test metric against examples seen and against training time
# (bench/compare_modes_job_report.py).
#
#   bash bench/compare_modes_job.sh JOB DATA [OUT_DIR] [-- coordinator flags]
#
# JOB is a job file (deploy/jobs/dlrm.textproto), DATA its data folder
# (--data_dir). EPOCHS (default 3) and MODES narrow the runs; batches: the
# job's batch per worker in async and ssp, one global batch of twice that
# in the lockstep modes (sync, hybrid, hybrid:sync), so every mode computes
# the same per-worker batch.
# TESSERA_BUILD_DIR picks the build folder; TESSERA_NO_BUILD=1 uses the
# binaries already there.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
JOB="$1"
DATA="$2"
shift 2
name="$(basename "$JOB" .textproto)"
OUT="bench/results/compare_modes_$name"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then OUT="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
[ -f "$JOB" ] || { echo "no job file $JOB" >&2; exit 2; }
[ -d "$DATA" ] || { echo "no data folder $DATA" >&2; exit 2; }
EPOCHS="${EPOCHS:-3}"
MODES="${MODES:-async ssp:2 sync hybrid hybrid:sync}"
BUILD="${TESSERA_BUILD_DIR:-build}"
if [ -z "${TESSERA_NO_BUILD:-}" ]; then
  bash deploy/install.sh >/dev/null
  bash deploy/build.sh --target tessera_local tessera_ps tessera_worker \
    tessera_coordinator >/dev/null
fi
batch=$(sed -n 's/.*batch_size: *\([0-9]*\).*/\1/p' "$JOB" | head -1)
batch="${batch:-256}"
mkdir -p "$OUT/runs"
total=$(wc -w <<<"$MODES")
i=0
start=$(date +%s)
for mode in $MODES; do
  i=$((i + 1))
  run="$OUT/runs/${mode//:/}"
  rm -rf "$run"
  mkdir -p "$run"
  b="$batch"
  case "$mode" in sync | hybrid*) b=$((2 * batch)) ;; esac
  elapsed=$(( $(date +%s) - start ))
  eta="--:--"
  [ "$i" -gt 1 ] && eta=$(( elapsed * (total - i + 1) / (i - 1) ))s
  echo "[$i/$total] $name in $mode, batch $b, $EPOCHS epochs (elapsed ${elapsed}s, ETA $eta)"
  t0=$(date +%s.%N)
  "$BUILD/deploy/local/tessera_local" --num_ps=2 --num_workers=2 \
    --run_dir="$run" -- --job_file="$JOB" --data_dir="$DATA" \
    --mode="$mode" --batch_size="$b" --epochs="$EPOCHS" "$@" \
    >"$run/launcher.out" 2>&1 &
  launcher=$!
  # The parameter servers' peak resident memory, sampled twice a second.
  peak=0
  while kill -0 "$launcher" 2>/dev/null; do
    kb=0
    for f in "$run"/pids/ps-*; do
      [ -f "$f" ] || continue
      rss=$(awk '/VmHWM/ {print $2}' "/proc/$(cat "$f")/status" 2>/dev/null || echo 0)
      kb=$((kb + ${rss:-0}))
    done
    [ "$kb" -gt "$peak" ] && peak=$kb
    sleep 0.5
  done
  wait "$launcher" || { echo "  failed; see $run/launcher.out"; tail -5 "$run/launcher.out"; exit 1; }
  t1=$(date +%s.%N)
  echo "{\"wall_seconds\": $(awk "BEGIN {print $t1 - $t0}"), \"ps_peak_kib\": $peak}" >"$run/run.json"
  # What the report needs, kept beside it (runs/ holds logs and
  # checkpoints, and is not committed).
  mkdir -p "$OUT/metrics"
  cp "$run/metrics.jsonl" "$OUT/metrics/${mode//:/}.jsonl"
  cp "$run/run.json" "$OUT/metrics/${mode//:/}.json"
  grep -E "final test" "$run/launcher.out" | sed 's/^/  /' || true
done
PY="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}/bin/python"
[ -x "$PY" ] || { bash deploy/python_env.sh >/dev/null; }
"$PY" bench/compare_modes_job_report.py "$OUT" "$name"
