#!/usr/bin/env bash
# Issue #43's target: a table of 100 M rows x dim 16 (fp16, row-wise
# Adagrad) served by 2 servers on one 24 GiB machine. Starts 2 tessera_ps
# processes on this machine and runs bench_huge_table against them: pass 0
# creates every row (ids 0 .. rows-1, pulled in batches), the next passes
# pull every row and push a gradient for it; progress lines give the rate,
# the ETA and the servers' memory, the end each server's resident memory
# and bytes per row, and a sample of rows is checked (bench/huge_table_bench.cc).
#
#   bash bench/huge_table_100m.sh [bench_huge_table flags...]
#     e.g. --rows=10000000 for a quick run, --precision=fp32 --optimizer=adagrad
#
# The servers' memory is capped by the bench (--max_rss_gib, default 12:
# the machine is shared); the script refuses to start when less than
# 14 GiB are available. Binaries from $TESSERA_BUILD_DIR (default build).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${TESSERA_BUILD_DIR:-build}" && pwd)
PS="$BUILD/ps_server/tessera_ps"
BENCH="$BUILD/bench/bench_huge_table"
for bin in "$PS" "$BENCH"; do
  if [ ! -x "$bin" ]; then
    echo "no $bin: build tessera_ps and bench_huge_table first" \
      "(bash deploy/build.sh --target tessera_ps bench_huge_table)" >&2
    exit 2
  fi
done
available_gib=$(awk '/MemAvailable/ {printf "%d", $2 / 1048576}' /proc/meminfo)
echo "memory available: ${available_gib} GiB (free -g:)"
free -g
if [ "${available_gib:-0}" -lt "${TESSERA_HUGE_MIN_GIB:-14}" ]; then
  echo "only ${available_gib} GiB available; the run needs up to 12 GiB" \
    "(set TESSERA_HUGE_MIN_GIB to override)" >&2
  exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera_huge.XXXXXX")
pick_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
P0=$(pick_port)
P1=$(pick_port)
while [ "$P1" = "$P0" ]; do P1=$(pick_port); done
HOSTS="localhost:$P0,localhost:$P1"
PIDS=()
stop_servers() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
}
trap stop_servers EXIT
for i in 0 1; do
  "$PS" --ps_hosts="$HOSTS" --task_type=ps --task_index=$i \
    > "$WORK/ps-$i.log" 2>&1 &
  PIDS+=($!)
done
for i in 0 1; do
  for _ in $(seq 100); do
    grep -q "serving at" "$WORK/ps-$i.log" && break
    if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
      echo "ps-$i exited at start; see $WORK/ps-$i.log" >&2
      exit 1
    fi
    sleep 0.1
  done
done
echo "servers: $HOSTS (pids ${PIDS[*]}); logs in $WORK; $(nproc) cores;" \
  "$(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD 2>/dev/null)"
"$BENCH" --ps_hosts="$HOSTS" --ps_pids="${PIDS[0]},${PIDS[1]}" "$@"
rc=$?
echo "bench_huge_table exit $rc"
exit $rc
