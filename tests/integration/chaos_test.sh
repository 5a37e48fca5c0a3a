#!/usr/bin/env bash
# The chaos test of the suite (issues #31, #48; CTest label chaos): a short
# seeded schedule of events over real jobs on loopback, one per mode and
# data, each checked by chaos_run.sh: kill -9 (and SIGSTOP/SIGCONT) of any
# role at any moment, joins and drains in every mode (in mirrored and
# hybrid the all-reduce ring re-forms), and kills after the chief's
# summary. sync jobs, and hybrid:sync jobs whose ring did not change, must
# give every epoch's figures of their undisturbed runs bit for bit; every
# job must train every example once per epoch (by identity), with an
# accuracy (AUC) within noise. Every run covers each kind of event:
# async_idx joins, drains and is killed after its summary, sync_idx joins,
# mirrored_idx joins (a ring join) and hybridsync_table joins and drains
# (the ring grows and shrinks), each then killed after its summary; the
# other events are drawn from the seed.
#
#   chaos_test.sh BUILD_DIR
#
# Prints its seed; TESSERA_CHAOS_SEED=N replays that schedule. The events
# per job: TESSERA_CHAOS_KILLS (default 2). TESSERA_CHAOS_SYNC_TABLES=0
# leaves the synchronous job with tables out. The long schedule is
# bench/chaos_soak.sh.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SEED=${TESSERA_CHAOS_SEED:-$(($(date +%s%N) / 1000 % 1000000))}
KILLS=${TESSERA_CHAOS_KILLS:-2}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tessera_chaos.XXXXXX")
SCENARIOS="sync_idx async_idx ssp2_idx sync_tfrecord async_table"
SCENARIOS+=" hybrid_table hybridsync_table hybridssp2_table mirrored_idx"
[ "${TESSERA_CHAOS_SYNC_TABLES:-1}" = 1 ] && SCENARIOS+=" sync_table"
# Short jobs: the whole test takes a minute or two.
export TESSERA_CHAOS_EPOCHS=${TESSERA_CHAOS_EPOCHS:-3}
export TESSERA_CHAOS_TRAIN=${TESSERA_CHAOS_TRAIN:-8000}
export TESSERA_CHAOS_TEST=${TESSERA_CHAOS_TEST:-2000}

echo "chaos test: seed $SEED (replay: TESSERA_CHAOS_SEED=$SEED ctest -R '^chaos$')"
failed=0
i=0
for scenario in $SCENARIOS; do
  # Each job its own schedule, all following from SEED. A schedule whose
  # events did not all land (exit 3: the job ended first) is drawn again
  # on a job twice as long, twice; then the test fails.
  epochs=$TESSERA_CHAOS_EPOCHS
  # The moments given to this job's events (chaos_run.sh), so that every
  # run covers each kind.
  case $scenario in
    async_idx) moments="drain after_summary" ;;
    sync_idx) moments="join" ;;
    mirrored_idx) moments="join after_summary" ;;
    hybridsync_table) moments="drain after_summary" ;;
    *) moments="" ;;
  esac
  for attempt in 0 1 2; do
    TESSERA_CHAOS_EPOCHS=$epochs TESSERA_CHAOS_MOMENTS=$moments \
      bash "$HERE/chaos_run.sh" "$BUILD" \
      "$WORK/attempt$attempt" "$scenario" "$KILLS" \
      "$((SEED + i + 1000 * attempt))"
    rc=$?
    [ "$rc" = 3 ] || break
    epochs=$((epochs * 2))
  done
  [ "$rc" = 77 ] && exit 77
  [ "$rc" != 0 ] && failed=1
  i=$((i + 1))
done
if [ "$failed" = 0 ]; then
  rm -rf "$WORK"
else
  echo "chaos test: FAILED with seed $SEED; runs kept in $WORK"
  echo "replay: TESSERA_CHAOS_SEED=$SEED ctest -R '^chaos$' --output-on-failure"
fi
exit "$failed"
