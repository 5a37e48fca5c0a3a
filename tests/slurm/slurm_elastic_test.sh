#!/usr/bin/env bash
# A worker joins a running Slurm job through a second srun into its
# allocation (issue #35; docs/operations.md, "Growing and shrinking a
# job"): a real Slurm on this machine (tests/slurm/local_slurm.sh, one
# node) runs deploy/slurm/train.sbatch with 1 ps and 2 workers; while both
# workers are stopped at a fault point in their 50th step (SIGSTOP by
# themselves, common/process/fault_point.h: the join lands inside the job
# whatever the machine's load),
#   srun --jobid=JOB --overlap -N1 -n1 bash -c \
#     'tessera_worker --join=CHIEF --join_address=$(hostname):PORT ...'
# adds a third worker, and the workers go on once the coordinator says it
# joined. The job must complete, train every example of every
# epoch once, count the newcomer active with steps of its own, and the
# newcomer's srun must end cleanly when the job does.
#
#   bash tests/slurm/slurm_elastic_test.sh [build dir, default build]
#
# Needs root (Slurm daemons, packages); exits 77 (skipped) without it or
# without the Fashion-MNIST files, 1 on a failed check. About 20 s.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_ARG=${1:-build}
DATA=/usr/share/datasets/fashion-mnist
JOB_TIMEOUT_S=${JOB_TIMEOUT_S:-300}
TRAIN=6000
EPOCHS=6
SKIP=77

say() { echo "slurm_elastic_test: $*"; }
[ "$(id -u)" -eq 0 ] || {
  say "SKIPPED: needs root (Slurm daemons, packages)"
  exit "$SKIP"
}
[ -d "$DATA" ] || {
  say "SKIPPED: $DATA is not installed"
  exit "$SKIP"
}
BUILD=$(cd "$BUILD_ARG" && pwd)
for bin in deploy/slurm/tessera_slurm_task coordinator/tessera_coordinator \
  ps_server/tessera_ps worker/tessera_worker; do
  [ -x "$BUILD/$bin" ] || {
    say "$BUILD/$bin not built"
    exit 1
  }
done

# shellcheck source=tests/slurm/local_slurm.sh
source "$ROOT/tests/slurm/local_slurm.sh"
if ! command -v apt-get >/dev/null && ! command -v slurmctld >/dev/null; then
  say "SKIPPED: no Slurm and no apt-get to install it"
  exit "$SKIP"
fi
slurm_install || exit 1
WORK=$(mktemp -d /tmp/tessera-slurm-elastic.XXXXXX)
cleanup() {
  local rc=$?
  slurm_stop
  if [ "$rc" -eq 0 ] && [ "${KEEP_TEST_FILES:-0}" != 1 ]; then
    rm -rf "$WORK"
  else
    say "files kept in $WORK"
  fi
  exit "$rc"
}
slurm_start 1
trap cleanup EXIT

base=$(slurm_free_port_base 4)
RD=$WORK/run
# sbatch passes the environment on to the job's tasks.
FAULTS=$WORK/faults
mkdir -p "$FAULTS"
echo "stop 49" >"$FAULTS/worker-0.step"
echo "stop 49" >"$FAULTS/worker-1.step"
export TESSERA_FAULT_POINTS=$FAULTS
id=$(cd "$ROOT" && TESSERA_BUILD="$BUILD" RUN_DIR="$RD" NUM_PS=1 \
  NUM_WORKERS=2 EPOCHS=$EPOCHS BATCH_SIZE=32 PORT_BASE=$base \
  sbatch --parsable --ntasks=4 --output="$WORK/job.out" \
  deploy/slurm/train.sbatch --train_examples=$TRAIN --test_examples=1000 \
  --hidden_units=512,512)
say "job $id; waiting for both workers to stop in their 50th step"
deadline=$((SECONDS + JOB_TIMEOUT_S))
until [ -e "$FAULTS/worker-0.step.hit" ] && [ -e "$FAULTS/worker-1.step.hit" ]; do
  [ "$SECONDS" -lt "$deadline" ] || {
    say "FAIL: the workers did not reach their 50th step within ${JOB_TIMEOUT_S}s"
    exit 1
  }
  sleep 0.2
done
# The pids of the stopped workers: the .hit files name them.
stopped=$(sed -n 's/^hit by pid \([0-9]*\)$/\1/p' \
  "$FAULTS/worker-0.step.hit" "$FAULTS/worker-1.step.hit")
chief=$(sed -n 's/.*task=chief:0 address=\([^ ]*\).*/\1/p' "$RD/cluster.txt")
say "srun --jobid=$id --overlap -N1 -n1: a worker joins $chief"
srun --jobid="$id" --overlap -N1 -n1 bash -c \
  "'$BUILD/worker/tessera_worker' --join=$chief \
   --join_address=\$(hostname):$((base + 100)) \
   --job_token_file='$RD/job.token'" >"$WORK/joined.log" 2>&1 &
joiner=$!
until grep -q "worker 2 (.*) \(joined on\|could not join\)" "$RD/rank-0.log" \
  2>/dev/null; do
  [ "$SECONDS" -lt "$deadline" ] || break
  sleep 0.2
done
# shellcheck disable=SC2086  # two pids
kill -CONT $stopped
state=""
while [ "$SECONDS" -lt "$deadline" ]; do
  state=$(scontrol show job -o "$id" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
  sleep 1
done
[ "$state" = COMPLETED ] || scancel "$id" || true
joiner_exit=0
wait "$joiner" || joiner_exit=$?

failures=0
check() {
  if eval "$2"; then say "  ok   $1"; else
    say "  FAIL $1"
    failures=$((failures + 1))
  fi
}
check "the job completed ($state)" '[ "$state" = COMPLETED ]'
check "the joining srun ended cleanly (exit $joiner_exit)" \
  '[ "$joiner_exit" -eq 0 ]'
check "the coordinator configured the newcomer" \
  'grep -q "worker 2 (.*) joined on" "$RD/rank-0.log"'
check "the newcomer ran steps of its own" \
  'grep -Eq "^  worker 2 .* active +[1-9][0-9]* steps" "$RD/rank-0.log"'
counts=$(sed -n 's/.*"examples":\([0-9]*\),.*/\1/p' "$RD/metrics.jsonl" |
  tr '\n' ' ')
say "examples per epoch: $counts"
check "every epoch trained every example once" \
  '[ "$(grep -c "\"examples\":$TRAIN," "$RD/metrics.jsonl")" -eq $EPOCHS ]'
grep -E "^  worker [0-9]|final test accuracy" "$RD/rank-0.log" || true
[ "$failures" -eq 0 ] || exit 1
say "passed"
