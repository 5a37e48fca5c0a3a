#!/usr/bin/env bash
# Trains Tessera through a real Slurm (Debian's packages) started on this
# machine by tests/slurm/local_slurm.sh:
#   (a) one node: sbatch deploy/slurm/train.sbatch, 2 ps + 2 workers;
#   (b) two fake nodes (node1 = 127.0.0.1, node2 = 127.0.0.2):
#       tessera_slurm_task --print_cluster under srun -N2 -n4 (3,1 tasks per
#       node) and -N2 --ntasks-per-node=2 (2(x2)): every rank's role and
#       address as expected, on the node Slurm really put it, and all ranks
#       agreeing on one cluster; then real training across both nodes with
#       --listen_host=cluster, through train.sbatch and through
#       train_multiprog.sbatch.
# Each training run must complete with a final test accuracy above 0.7.
#
#   bash tests/slurm/slurm_training_test.sh [build dir, default build]
#
# Needs root to install the packages when missing, edit /etc/hosts and run
# the daemons; exits 77 (skipped) without it, or
# without the Fashion-MNIST files. Exit 1 on any failed check. Takes about
# 30 s on 2 cores (plus a few seconds to install the packages the first
# time); every wait is bounded (JOB_TIMEOUT_S per job, default 600, then
# scancel). KEEP_TEST_FILES=1 keeps the job outputs and run folders (they are
# kept anyway when a check fails).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_ARG=${1:-build}
DATA=/usr/share/datasets/fashion-mnist
JOB_TIMEOUT_S=${JOB_TIMEOUT_S:-600}
MIN_ACCURACY=0.7
# Small jobs: two short epochs of the MLP reach about 0.8.
COORDINATOR_ARGS=(--train_examples=12000 --test_examples=2000)
SKIP=77

say() { echo "slurm_training_test: $*"; }
skip() {
  say "SKIPPED: $*"
  exit "$SKIP"
}

FAILURES=0
check() { # check <description> <command...>
  local what=$1
  shift
  if "$@"; then
    say "  ok   $what"
  else
    say "  FAIL $what"
    FAILURES=$((FAILURES + 1))
  fi
}

# ---- Preconditions ----------------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
  skip "needs root (Slurm daemons, packages, /etc/hosts)"
fi
[ -d "$DATA" ] || skip "$DATA is not installed"
[ -d "$BUILD_ARG" ] || {
  say "build folder $BUILD_ARG not found"
  exit 1
}
BUILD=$(cd "$BUILD_ARG" && pwd)
TASK_BIN=$BUILD/deploy/slurm/tessera_slurm_task
for bin in "$TASK_BIN" "$BUILD/coordinator/tessera_coordinator" \
  "$BUILD/ps_server/tessera_ps" "$BUILD/worker/tessera_worker"; do
  [ -x "$bin" ] || {
    say "$bin not built"
    exit 1
  }
done

# shellcheck source=tests/slurm/local_slurm.sh
source "$ROOT/tests/slurm/local_slurm.sh"
if ! command -v apt-get >/dev/null && ! command -v slurmctld >/dev/null; then
  skip "no Slurm and no apt-get to install it"
fi
slurm_install || exit 1

WORK=$(mktemp -d /tmp/tessera-slurm-test.XXXXXX)
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
# slurm_start sets its own EXIT trap; this one replaces it after each start.
start_cluster() {
  slurm_start "$1"
  trap cleanup EXIT
}
trap cleanup EXIT

# Waits for job $1 to end (at most JOB_TIMEOUT_S; scancel after that) and
# prints its final state, e.g. "COMPLETED 0:0". Without accounting, sacct
# has nothing; finished jobs stay in scontrol for MinJobAge (600 s here).
wait_job() {
  local id=$1 line state exit_code deadline=$((SECONDS + JOB_TIMEOUT_S))
  while true; do
    line=$(scontrol show job -o "$id" 2>/dev/null || true)
    state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$line")
    exit_code=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$line")
    case "$state" in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | \
      PREEMPTED | BOOT_FAIL | DEADLINE)
      echo "$state $exit_code"
      return 0
      ;;
    esac
    if [ "$SECONDS" -ge "$deadline" ]; then
      scancel "$id" || true
      echo "TIMEOUT_IN_TEST ${state:-unknown}"
      return 0
    fi
    sleep 1
  done
}

# The final accuracy the coordinator printed in file $1, or "".
final_accuracy() {
  [ -f "$1" ] || return 0
  sed -n 's/.*final test accuracy \([0-9.]*\) after.*/\1/p' "$1" | tail -n 1
}
above() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# Submits sbatch script $2 with sbatch options $3 and the environment in the
# remaining arguments, and waits; sets id and result of the caller.
# submit_and_wait <name> <script> <sbatch options> <VAR=value...>
submit_and_wait() {
  local name=$1 script=$2 options=$3
  shift 3
  say "$name: sbatch $options $script ${COORDINATOR_ARGS[*]}   ($*)"
  # shellcheck disable=SC2086  # options holds several sbatch options.
  id=$(cd "$ROOT" && env "$@" TESSERA_BUILD="$BUILD" RUN_DIR="$run_dir" \
    EPOCHS=2 sbatch --parsable --output="$out" $options "$script" \
    "${COORDINATOR_ARGS[@]}")
  id=${id%%;*}
  result=$(wait_job "$id")
  say "$name: job $id ended: $result; output $out"
}

# Submits sbatch script $1 with sbatch options $2 (a string) and the
# environment in the remaining arguments, waits, and checks the job and its
# training result. Runs in the repository root, as a user would.
# run_training <name> <script> <sbatch options> <VAR=value...>
run_training() {
  local name=$1 script=$2 options=$3
  shift 3
  local out="$WORK/$name.out" run_dir="$WORK/$name" id result accuracy
  local attempt args a
  for attempt in 1 2 3; do
    submit_and_wait "$name" "$script" "$options" "$@"
    # A port picked free can still be bound by a test running beside this
    # one before the job binds it: that is the test's luck, not Tessera's
    # failure, so the job runs again on other ports (PORT_BASE is global).
    [ "$result" != "COMPLETED 0:0" ] &&
      grep -qs 'is in use by another process' "$run_dir"/rank-*.log || break
    PORT_BASE=$(slurm_free_port_base 5)
    say "$name: a port was taken by another process; again on $PORT_BASE"
    args=()
    for a in "$@"; do
      case "$a" in PORT_BASE=*) a="PORT_BASE=$PORT_BASE" ;; esac
      args+=("$a")
    done
    set -- "${args[@]}"
    mv "$run_dir" "$run_dir.port-taken-$attempt"
  done
  check "$name: job $id COMPLETED with exit code 0:0" \
    test "$result" = "COMPLETED 0:0"
  accuracy=$(final_accuracy "$out")
  say "$name: coordinator: $(grep 'final test accuracy' "$out" || echo none)"
  check "$name: final test accuracy ${accuracy:-missing} > $MIN_ACCURACY" \
    above "${accuracy:-0}" "$MIN_ACCURACY"
  check "$name: 2 epochs in $run_dir/metrics.jsonl" \
    test "$(wc -l <"$run_dir/metrics.jsonl" 2>/dev/null || echo 0)" -eq 2
  if [ "$result" != "COMPLETED 0:0" ] || [ -z "$accuracy" ]; then
    say "$name: job output:"
    sed 's/^/    /' "$out" || true
    for log in "$run_dir"/rank-*.log; do
      [ -f "$log" ] || continue
      say "$name: last lines of $log:"
      tail -n 5 "$log" | sed 's/^/    /'
    done
  fi
}

# Each rank of a --print_cluster output $1 (srun --label) as
# "<rank> <node Slurm ran it on> <task> <address>", sorted by rank.
ranks_of() {
  [ -f "$1" ] || return 0
  awk '
    match($0, /^ *[0-9]+: /) {
      rank = substr($0, 1, RLENGTH) + 0
      if (match($0, / task=[^ ]+/)) task[rank] = substr($0, RSTART + 6, RLENGTH - 6)
      if (match($0, / address=[^ ]+/)) address[rank] = substr($0, RSTART + 9, RLENGTH - 9)
      if (match($0, / node=[^ ]+/)) node[rank] = substr($0, RSTART + 6, RLENGTH - 6)
    }
    END { for (r in task) print r, node[r], task[r], address[r] }' "$1" |
    sort -n
}

# The cluster part of every rank's TF_CONFIG line in $1, one per rank.
clusters_of() {
  sed -n 's/^ *[0-9]*: \({"cluster":.*\),"task":{[^}]*}}$/\1}/p' "$1"
}

# Runs tessera_slurm_task --print_cluster under `srun $1` (jobs $JOBS) and
# checks every rank against the expected "rank node task address" lines in
# $2, and that all ranks resolved one cluster, equal to $3.
check_print_cluster() {
  local layout=$1 expected=$2 cluster=$3
  local out="$WORK/print-${layout// /_}.txt" ranks distinct
  say "srun $layout --label tessera_slurm_task --slurm_jobs=$JOBS --print_cluster"
  # shellcheck disable=SC2086  # layout holds several srun options.
  if ! timeout 60 srun $layout --label "$TASK_BIN" --slurm_jobs="$JOBS" \
    --port_base="$PORT_BASE" --listen_host=cluster --print_cluster \
    >"$out" 2>&1; then
    say "  FAIL srun $layout failed:"
    sed 's/^/    /' "$out"
    FAILURES=$((FAILURES + 1))
    return
  fi
  sort -s -n -k1,1 "$out" | sed 's/^/    /'
  ranks=$(ranks_of "$out")
  while read -r rank node task address; do
    check "rank $rank ran on $node and is $task at $address" \
      grep -qxF "$rank $node $task $address" <<<"$ranks"
  done <<<"$expected"
  check "$(wc -l <<<"$ranks") ranks answered, as expected" \
    test "$ranks" = "$(sort -n <<<"$expected")"
  distinct=$(clusters_of "$out" | sort -u)
  check "all $(clusters_of "$out" | wc -l) ranks resolved one cluster" \
    test "$(clusters_of "$out" | wc -l)" -eq 4 -a \
    "$(printf '%s\n' "$distinct" | wc -l)" -eq 1
  check "that cluster is $cluster" test "$distinct" = "$cluster"
  check "every rank passes --listen_host=cluster on" \
    test "$(grep -c ': rank=.* exec=.* --listen_host=cluster' "$out")" -eq 4
}

START=$SECONDS

# ---- (a) one node -------------------------------------------------------------
say "(a) one node"
start_cluster 1
PORT_BASE=$(slurm_free_port_base 5)
run_training single deploy/slurm/train.sbatch "" \
  NUM_PS=2 NUM_WORKERS=2 PORT_BASE="$PORT_BASE"
P=$PORT_BASE
check "single: ranks 0-4 are chief, ps 0-1, workers 0-1 at node1:$P-$((P + 4))" \
  test "$(ranks_of "$WORK/single/cluster.txt")" = "0 node1 chief:0 node1:$P
1 node1 ps:0 node1:$((P + 1))
2 node1 ps:1 node1:$((P + 2))
3 node1 worker:0 node1:$((P + 3))
4 node1 worker:1 node1:$((P + 4))"
slurm_stop

# ---- (b) two nodes ------------------------------------------------------------
say "(b) two nodes"
start_cluster 2
PORT_BASE=$(slurm_free_port_base 5)
P=$PORT_BASE
JOBS=chief:1,ps:1,worker:2
# 3,1: ranks 0-2 on node1 (local 0-2), rank 3 on node2.
check_print_cluster "-N2 -n4" "0 node1 chief:0 node1:$P
1 node1 ps:0 node1:$((P + 1))
2 node1 worker:0 node1:$((P + 2))
3 node2 worker:1 node2:$P" \
  "{\"cluster\":{\"chief\":[\"node1:$P\"],\"ps\":[\"node1:$((P + 1))\"],\"worker\":[\"node1:$((P + 2))\",\"node2:$P\"]},\"rpc_layer\":\"grpc\"}"
# 2(x2): ranks 0-1 on node1, 2-3 on node2.
check_print_cluster "-N2 --ntasks-per-node=2" "0 node1 chief:0 node1:$P
1 node1 ps:0 node1:$((P + 1))
2 node2 worker:0 node2:$P
3 node2 worker:1 node2:$((P + 1))" \
  "{\"cluster\":{\"chief\":[\"node1:$P\"],\"ps\":[\"node1:$((P + 1))\"],\"worker\":[\"node2:$P\",\"node2:$((P + 1))\"]},\"rpc_layer\":\"grpc\"}"

# 5 tasks on 2 nodes, laid out by Slurm (3,2 here). Every rank must sit at
# an address on the node Slurm ran it on, and some port is then used on both
# 127.0.0.1 and 127.0.0.2: only --listen_host=cluster keeps them apart.
for script in train.sbatch train_multiprog.sbatch; do
  name=two-nodes-${script%.sbatch}
  run_training "$name" "deploy/slurm/$script" "--nodes=2 --ntasks=5" \
    NUM_PS=2 NUM_WORKERS=2 PORT_BASE="$PORT_BASE" TASK_FLAGS=--listen_host=cluster
  ranks=$(ranks_of "$WORK/$name/cluster.txt")
  printf '%s\n' "$ranks" | sed 's/^/    /'
  check "$name: all 5 ranks listen on the node Slurm ran them on" test \
    "$(awk '$4 ~ "^" $2 ":" { n++ } END { print n + 0 }' <<<"$ranks")" -eq 5
  check "$name: node2 ran tasks, on ports node1 uses too" \
    test -n "$(awk '{ sub(/.*:/, "", $4); print $4 }' <<<"$ranks" |
      sort | uniq -d)"
done
slurm_stop

say "$FAILURES failed check(s); $((SECONDS - START)) s"
[ "$FAILURES" -eq 0 ]
