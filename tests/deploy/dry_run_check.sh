#!/usr/bin/env bash
# tessera_local's dry run and its check before anything starts, with the
# real binaries (issue #33, defects 3, 4, 5 and 9):
#  - a model with tables on a cluster without parameter servers is refused
#    once, exit 2, and no process starts;
#  - a mode the cluster changes (async without servers) or leaves servers
#    idle with (mirrored with servers) is said;
#  - `tessera_local -- --dry_run` prints the plan and starts nothing;
#  - the dry run reads the first example and the labels: a wrong input
#    shape and labels outside num_classes are refused naming the file, and
#    a server that would hold more than the machine's memory is warned of;
#  - issue #42: what the workers' count decides (sync's batch split and
#    backup workers), a launcher flag's typo and a table placed twice are
#    refused before anything starts.
set -uo pipefail
LOCAL="$1"
ROOT="$2"
MLP="$ROOT/deploy/jobs/mlp_fashion_mnist.textproto"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# run NAME LAUNCHER-FLAGS... -- COORDINATOR-FLAGS...: output in $tmp/NAME.out,
# exit code in $rc.
run() {
  local name="$1"; shift
  "$LOCAL" --run_dir="$tmp/$name" "$@" > "$tmp/$name.out" 2>&1
  rc=$?
  echo "---- $name (exit $rc)"; cat "$tmp/$name.out"
}
# Any one log counts (a cluster without parameter servers has no ps log).
no_process_started() {
  if compgen -G "$tmp/$1/ps-*.log" > /dev/null ||
    compgen -G "$tmp/$1/worker-*.log" > /dev/null ||
    [ -e "$tmp/$1/chief.log" ]; then
    fail "$1: processes were started"
  fi
}

run tables --num_ps=0 --num_workers=2 -- \
  --job_file="$ROOT/deploy/jobs/dlrm.textproto"
[ "$rc" -eq 2 ] || fail "tables without servers: exit $rc, expected 2"
grep -q 'embedding table' "$tmp/tables.out" || fail "the table is not named"
grep -q 'no parameter servers' "$tmp/tables.out" || fail "the cause is not said"
grep -q 'nothing was started' "$tmp/tables.out" || fail "not refused up front"
no_process_started tables

run async_to_mirrored --num_ps=0 --num_workers=2 -- --job_file="$MLP" \
  --mode=async --dry_run
[ "$rc" -eq 0 ] || fail "async without servers: exit $rc"
grep -q 'note: mode async becomes mirrored' "$tmp/async_to_mirrored.out" ||
  fail "the change of mode is not said"

run idle_servers --num_ps=2 --num_workers=2 -- --job_file="$MLP" \
  --mode=mirrored --dry_run
[ "$rc" -eq 0 ] || fail "mirrored with servers: exit $rc"
grep -q 'parameter servers of the cluster will hold nothing' \
  "$tmp/idle_servers.out" || fail "idle servers are not said"

run plan --num_ps=2 --num_workers=2 -- --job_file="$MLP" --dry_run
[ "$rc" -eq 0 ] || fail "dry run: exit $rc"
grep -q 'dense_0/kernel' "$tmp/plan.out" || fail "no shard table"
grep -q 'the first training and test examples fit the model' \
  "$tmp/plan.out" || fail "the data was not checked"
no_process_started plan

sed 's/shape: \[784\]/shape: [100]/' "$MLP" > "$tmp/shape.textproto"
run shape -- --job_file="$tmp/shape.textproto" --dry_run
[ "$rc" -eq 2 ] || fail "wrong input shape: exit $rc, expected 2"
grep -q 'wrong shape: images in .*train-images.* expects 100' \
  "$tmp/shape.out" || fail "the shape error names no file"

sed 's/num_classes: 10/num_classes: 5/; s/units: 10 }/units: 5 }/' "$MLP" \
  > "$tmp/classes.textproto"
run classes -- --job_file="$tmp/classes.textproto" --dry_run
[ "$rc" -eq 2 ] || fail "labels above num_classes: exit $rc, expected 2"
grep -q 'train-labels-idx1-ubyte.gz: example [0-9]*: label [5-9] is outside \[0, 5)' \
  "$tmp/classes.out" || fail "the label error names no file"

sed 's/units: 128/units: 100000000/' "$MLP" > "$tmp/huge.textproto"
run huge -- --job_file="$tmp/huge.textproto" --dry_run
[ "$rc" -eq 0 ] || fail "huge model dry run: exit $rc"
grep -q "warning: ps 0 .* more than this machine's" "$tmp/huge.out" ||
  fail "no memory warning"

# Issue #42, defects 5, 10, 11 and 14: refusals that came late (the cluster
# started, then the job failed) or blamed the wrong program come before
# anything starts, exit 2, naming the flag.
DLRM="$ROOT/deploy/jobs/dlrm.textproto"
refused() {  # NAME PATTERN: exit 2, the pattern said, nothing started
  [ "$rc" -eq 2 ] || fail "$1: exit $rc, expected 2"
  grep -q -- "$2" "$tmp/$1.out" || fail "$1: does not say '$2'"
  no_process_started "$1"
}
run sync_batch --num_ps=2 --num_workers=2 -- --job_file="$MLP" \
  --mode=sync --batch_size=255
refused sync_batch '--batch_size) 255 must split evenly over the 2 workers'
grep -q 'nothing was started' "$tmp/sync_batch.out" ||
  fail "sync_batch: not refused up front"
run sync_batch_dry --num_ps=2 --num_workers=2 -- --job_file="$MLP" \
  --mode=sync --batch_size=255 --dry_run
refused sync_batch_dry '--batch_size) 255 must split evenly'
run backup --num_ps=2 --num_workers=2 -- --job_file="$MLP" --mode=sync \
  --backup_workers=2
refused backup '--backup_workers) is 2 but there are only 2 workers'
run typo --num_workerz=2 -- --job_file="$MLP"
refused typo "unknown flag --num_workerz (neither tessera_local's nor the coordinator's"
grep -q "the coordinator's check of the job" "$tmp/typo.out" &&
  fail "typo: blamed on the coordinator's check"
run typo_dry --num_workerz=2 -- --job_file="$MLP" --dry_run
refused typo_dry "unknown flag --num_workerz (neither"
# After "--" the flag is the coordinator's, and the coordinator names it.
run coordinator_typo -- --job_file="$MLP" --epochz=2
refused coordinator_typo "unknown command line flag 'epochz'"
run placements -- --job_file="$DLRM" --mode=hybrid \
  --table_placements=table_C1:replicated,table_C1:sharded
refused placements '--table_placements names table "table_C1" twice'
echo PASS
