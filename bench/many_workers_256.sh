#!/usr/bin/env bash
# 256 workers and 4 parameter servers on one machine (issue #46, item 4):
# tessera_local runs the Fashion-MNIST MLP and DLRM (on a small generated
# click set) for one epoch each, small batches, and this prints per model
# whether every example was trained once (the coordinator checks the
# epoch's example digest and fails the job otherwise; metrics.jsonl's
# "examples" must equal the training set), the start-up overhead (the
# launcher's wall time minus the coordinator's training time), and the
# parameter servers' threads and resident memory, sampled every second
# while the job ran (the largest seen), with their data-plane connections.
#
#   bash bench/many_workers_256.sh [WORKERS]     (default 256)
#
# The binaries come from $TESSERA_BUILD_DIR (default build); the runs are
# kept in $TESSERA_MANY_WORK (default a new folder under /tmp).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${TESSERA_BUILD_DIR:-build}" && pwd)
LOCAL="$BUILD/deploy/local/tessera_local"
CTR_GEN=$(ls "$BUILD"/tools/ctr_gen/tessera_ctr_gen "$BUILD"/tools/tessera_ctr_gen \
  "$BUILD"/worker/tessera_ctr_gen 2>/dev/null | head -1)
if [ ! -x "$LOCAL" ] || [ -z "$CTR_GEN" ]; then
  echo "no $LOCAL or tessera_ctr_gen: build tessera_local, tessera_coordinator," \
    "tessera_worker, tessera_ps and tessera_ctr_gen first" >&2
  exit 2
fi
WORKERS=${1:-256}
NUM_PS=4
PER_WORKER=16   # examples per worker and epoch: 4 steps of 4
TRAIN=$((WORKERS * PER_WORKER))
WORK=${TESSERA_MANY_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/tessera_many.XXXXXX")}
mkdir -p "$WORK"

if [ ! -f "$WORK/ctr/train.tsv" ]; then
  "$CTR_GEN" --train_examples="$TRAIN" --test_examples=1024 \
    --vocab_size=2000 --out_dir="$WORK/ctr" > "$WORK/ctr_gen.out" 2>&1 || {
    echo "tessera_ctr_gen failed; see $WORK/ctr_gen.out" >&2
    exit 1
  }
fi

# The largest thread count and RSS (KiB) each parameter server (a child of
# the launcher $1 named tessera_ps) showed, one line per server, sampled
# every second until the launcher exits.
sample_servers() {
  local launcher=$1 out=$2
  : > "$out"
  while kill -0 "$launcher" 2>/dev/null; do
    for pid in $(pgrep -P "$launcher" tessera_ps); do
      local threads rss fds
      threads=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
      rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
      fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
      [ -n "$threads" ] && echo "$pid $threads $rss $fds" >> "$out"
    done
    sleep 1
  done
}

run() {
  local name=$1; shift
  local dir="$WORK/$name"
  rm -rf "$dir"
  local start end rc
  start=$(date +%s.%N)
  "$LOCAL" --num_ps=$NUM_PS --num_workers="$WORKERS" --run_dir="$dir" -- \
    --epochs=1 --batch_size=4 --train_examples="$TRAIN" --heartbeat_s=2 \
    "$@" > "$WORK/$name.out" 2>&1 &
  local launcher=$!
  sample_servers "$launcher" "$WORK/$name.servers"
  wait "$launcher"
  rc=$?
  end=$(date +%s.%N)
  local summary train examples threads rss fds
  summary=$(grep -E 'of training .*wall time' "$WORK/$name.out" | tail -1)
  train=$(sed -n 's/.* in \([0-9.]*\) s of training.*/\1/p' <<< "$summary")
  examples=$(sed -n 's/.*"examples":\([0-9]*\).*/\1/p' "$dir/metrics.jsonl" 2>/dev/null | head -1)
  threads=$(awk '{ if ($2 > m[$1]) m[$1] = $2 } END { for (p in m) printf "%d ", m[p] }' "$WORK/$name.servers")
  rss=$(awk '{ if ($3 > m[$1]) m[$1] = $3 } END { for (p in m) printf "%.0f ", m[p] / 1024 }' "$WORK/$name.servers")
  fds=$(awk '{ if ($4 > m[$1]) m[$1] = $4 } END { for (p in m) printf "%d ", m[p] }' "$WORK/$name.servers")
  echo "== $name: exit $rc"
  echo "summary: $summary"
  echo "examples trained in the epoch: ${examples:-?} of $TRAIN"
  awk -v s="$start" -v e="$end" -v t="${train:-0}" 'BEGIN {
    printf "launcher wall %.1f s, training %.1f s, start-up and shut-down overhead %.1f s\n",
      e - s, t, e - s - t }'
  echo "servers' threads (max): $threads; RSS MiB (max): $rss; open descriptors (max): $fds"
}

echo "$WORKERS workers, $NUM_PS parameter servers, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M'), $(git rev-parse --short HEAD)"
run mlp --hidden_units=8 --test_examples=1000
run dlrm --job_file=deploy/jobs/dlrm.textproto --data_dir="$WORK/ctr"
echo "runs kept in $WORK"
