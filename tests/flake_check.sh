#!/usr/bin/env bash
# The flake gate (#48): runs the tests that kill, stop or time processes
# (CTest labels fault, elastic, chaos, control) RUNS times each, once on a
# quiet machine and once with two busy processes beside them, and prints
# a markdown table: label, load, runs, failed runs, the tests that failed.
# Too long for CI; its table goes in bench/results/flakes.md.
#
#   bash tests/flake_check.sh [BUILD_DIR] [RUNS] [LABELS]
#
# BUILD_DIR defaults to build, RUNS to 20, LABELS to "fault elastic chaos
# control". Each run is one `ctest -L LABEL` in BUILD_DIR.
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

rows=()
for load in quiet loaded; do
  [ "$load" = loaded ] && start_load
  for label in $LABELS; do
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
      elapsed=$(($(date +%s) - start))
      left=$(((RUNS - run) * elapsed / run))
      printf '\rflake_check: %s %s run %d/%d, %d failed, ETA %ds   ' \
        "$label" "$load" "$run" "$RUNS" "$failed" "$left" >&2
    done
    echo >&2
    names=$(echo "$names" | tr ' ' '\n' | sed '/^$/d' | sort | uniq -c |
      awk '{ printf "%s%s (%d)", (n++ ? ", " : ""), $2, $1 }')
    rows+=("| $label | $load | $RUNS | $failed | ${names:-} |")
  done
  [ "$load" = loaded ] && stop_load
done

echo "| label | load | runs | failed runs | failed tests (times) |"
echo "|---|---|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo
echo "logs: $LOG"
