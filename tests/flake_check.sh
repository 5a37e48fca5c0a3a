#!/usr/bin/env bash
# The flake gate (#48): runs the tests that kill, stop or time processes
# (CTest labels fault, elastic, chaos, control) RUNS times each, once on a
# quiet machine and once with two busy processes beside them, and prints
# a markdown table: label, load, the mean of the 1-minute load average
# read after each run, minutes, runs, failed runs, the tests that failed.
# Too long for CI; its table goes in bench/results/flakes.md.
#
#   bash tests/flake_check.sh [BUILD_DIR] [RUNS] [LABELS]
#
# BUILD_DIR defaults to build, RUNS to 20, LABELS to "fault elastic chaos
# control". Each run is one `ctest -L LABEL` in BUILD_DIR.
# FLAKE_LOADS="quiet loaded" (the default) picks the phases, so that the
# two can run at different times: a quiet machine is rarer than a loaded
# one.
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd)
RUNS=${2:-20}
LABELS=${3:-fault elastic chaos control}
export TESSERA_REQUIRE_DATA=1 TESSERA_REQUIRE_TLS=1
LOG=$(mktemp -d "${TMPDIR:-/tmp}/tessera_flakes.XXXXXX")

busy_pids=()
start_load() {
  for _ in 1 2; do
    (while :; do :; done) &
    busy_pids+=($!)
  done
}
stop_load() {
  [ "${#busy_pids[@]}" -gt 0 ] && kill "${busy_pids[@]}" 2> /dev/null
  wait "${busy_pids[@]}" 2> /dev/null
  busy_pids=()
}
trap stop_load EXIT

# Every phase is checked before any runs: a typo must not cost the hours
# of a quiet phase and then its table.
LOADS=${FLAKE_LOADS:-quiet loaded}
for load in $LOADS; do
  case "$load" in
    quiet | loaded) ;;
    *)
      echo "flake_check: FLAKE_LOADS: unknown phase \"$load\" (quiet or loaded)" >&2
      exit 2
      ;;
  esac
done

rows=()
for load in $LOADS; do
  [ "$load" = loaded ] && start_load
  for label in $LABELS; do
    load_sum=0
    load_n=0
    failed=0
    names=""
    start=$(date +%s)
    for ((run = 1; run <= RUNS; ++run)); do
      out="$LOG/$label-$load-$run.log"
      if ! (cd "$BUILD" && ctest -L "^$label\$" --timeout 900 > "$out" 2>&1); then
        failed=$((failed + 1))
        names+=" $(grep -oE '[0-9]+ - [^ ]+' "$out" | cut -d' ' -f3 |
          sort -u | tr '\n' ' ')"
      fi
      load_sum=$(awk -v s="$load_sum" '{ print s + $1 }' /proc/loadavg)
      load_n=$((load_n + 1))
      elapsed=$(($(date +%s) - start))
      left=$(((RUNS - run) * elapsed / run))
      printf '\rflake_check: %s %s run %d/%d, %d failed, ETA %ds   ' \
        "$label" "$load" "$run" "$RUNS" "$failed" "$left" >&2
    done
    echo >&2
    names=$(echo "$names" | tr ' ' '\n' | sed '/^$/d' | sort | uniq -c |
      awk '{ printf "%s%s (%d)", (n++ ? ", " : ""), $2, $1 }')
    mean_load=$(awk -v s="$load_sum" -v n="$load_n" 'BEGIN { printf "%.1f", s / n }')
    minutes=$(awk -v s="$(($(date +%s) - start))" 'BEGIN { printf "%.0f", s / 60 }')
    rows+=("| $label | $load | $mean_load | $minutes | $RUNS | $failed | ${names:-} |")
  done
  [ "$load" = loaded ] && stop_load
done

echo "| label | load | load average | minutes | runs | failed runs | failed tests (times) |"
echo "|---|---|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo
echo "logs: $LOG"
