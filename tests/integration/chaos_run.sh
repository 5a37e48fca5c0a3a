#!/usr/bin/env bash
# One chaos run (issue #31): a real job on loopback (tessera_local, 2
# parameter servers, 2 workers, the chief) and a seeded random schedule of
# kill -9 of any role at chosen moments: start-up, configuration, training,
# evaluation, checkpoint saves, parameter-server recovery and a chief
# restart; some kills are SIGSTOP/SIGCONT pauses instead. Then checks the
# job: it completed; every epoch trained every example exactly once; a
# synchronous job's epochs equal its undisturbed run's bit for bit, an
# asynchronous job's accuracy is within noise (0.05) of its undisturbed
# run's or better.
#
#   chaos_run.sh BUILD_DIR WORK_DIR SCENARIO KILLS SEED [BIN_DIR]
#
# SCENARIO: MODE_DATA, MODE one of sync, async, ssp2 (ssp:2), hybrid,
# hybridsync (hybrid:sync), hybridssp2 (hybrid:ssp:2), DATA one of idx
# (Fashion-MNIST IDX files), tfrecord (streamed gzipped TFRecord files),
# table (the click model with growing embedding tables): sync_idx,
# async_table, hybridsync_table, ... sync and hybrid:sync must repeat the
# undisturbed run bit for bit; every mode trains the undisturbed run's
# examples (by their digest) in every epoch.
# The schedule follows from SEED alone, so a run is replayed by giving the
# same SEED (the moments are found again by what the job logs, so the
# replay hits the same phases, not the same microsecond). BIN_DIR: where
# tessera_ps, tessera_worker and tessera_coordinator are (default: the
# build's), to replay a seed against other binaries.
#
# Writes WORK_DIR/SCENARIO-SEED/kills.tsv (one line per kill: scenario,
# seed, role, moment, signal, outcome) and prints one line
#   chaos SCENARIO seed=SEED kills=N outcome=OUTCOME
# and exits 0 when the outcome is ok and every kill of the schedule landed,
# 3 when the outcome is ok but fewer kills landed (the job ended first),
# 1 otherwise (77: no data).
# OUTCOME is ok, or job_lost, epoch_differs, example_missed, epoch_missing,
# accuracy_off. Exit status: 0 for ok, 1 otherwise, 77 when the data set
# is not installed.
set -uo pipefail

BUILD=$1
WORK=$2
SCENARIO=$3
KILLS=$4
SEED=$5
BIN_DIR=${6:-}
DATA=${TESSERA_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
HERE=$(cd "$(dirname "$0")" && pwd)

if [ ! -d "$DATA" ]; then
  # TESSERA_REQUIRE_DATA=1 (deploy/test.sh): a missing data set fails.
  [ "${TESSERA_REQUIRE_DATA:-}" = 1 ] && {
    echo "chaos: $DATA is not installed (TESSERA_REQUIRE_DATA=1)"; exit 1; }
  echo "chaos: $DATA is not installed; skipped"; exit 77
fi

# The job: small enough that CI's schedule takes seconds per kill, long
# enough (several epochs of many steps) that kills land inside epochs.
EPOCHS=${TESSERA_CHAOS_EPOCHS:-5}
TRAIN=${TESSERA_CHAOS_TRAIN:-12000}
TEST=${TESSERA_CHAOS_TEST:-5000}

mkdir -p "$WORK"
DATA_FLAGS=""
# The scenario is MODE_DATA: the mode's tag (sync, async, ssp2, hybrid,
# hybridsync, hybridssp2) and the data (idx, tfrecord, table).
case ${SCENARIO%%_*} in
  sync | async | hybrid) MODE=${SCENARIO%%_*} ;;
  ssp2) MODE=ssp:2 ;;
  hybridsync) MODE=hybrid:sync ;;
  hybridssp2) MODE=hybrid:ssp:2 ;;
  *) echo "chaos: unknown mode in scenario $SCENARIO" >&2; exit 2 ;;
esac
case ${SCENARIO#*_} in
  idx)
    DATA_FLAGS="--train_examples=$TRAIN --test_examples=$TEST" ;;
  tfrecord)
    tf="$WORK/tfrecord_data"
    if [ ! -f "$tf/job.textproto" ]; then
      mkdir -p "$tf"
      "$BUILD/worker/tessera_to_tfrecord" --from=idx \
        --images="$DATA/train-images-idx3-ubyte.gz" \
        --labels="$DATA/train-labels-idx1-ubyte.gz" --examples="$TRAIN" \
        --prefix="$tf/train" --shards=6 --gzip > "$tf/convert.log" 2>&1 &&
        "$BUILD/worker/tessera_to_tfrecord" --from=idx \
          --images="$DATA/t10k-images-idx3-ubyte.gz" \
          --labels="$DATA/t10k-labels-idx1-ubyte.gz" --examples="$TEST" \
          --prefix="$tf/test" --shards=2 --gzip >> "$tf/convert.log" 2>&1 ||
        { cat "$tf/convert.log"; exit 1; }
      cat > "$tf/job.textproto" <<EOF
model { kind: "mlp" input_dim: 784 hidden_units: 128 num_classes: 10 }
data { format: "tfrecord" train_files: "$tf/train-*" test_files: "$tf/test-*" label_feature: "label" }
EOF
    fi
    DATA_FLAGS="--job_file=$tf/job.textproto" ;;
  table)
    ctr="$WORK/ctr_data"
    if [ ! -f "$ctr/train.txt" ] && [ ! -d "$ctr/done" ]; then
      "$BUILD/worker/tessera_ctr_gen" --out_dir="$ctr" \
        --train_examples="$TRAIN" --test_examples="$TEST" --fields=8 \
        --dense=4 --vocab_size=2000 --threads=1 > "$WORK/ctr_gen.log" 2>&1 ||
        { cat "$WORK/ctr_gen.log"; exit 1; }
      mkdir -p "$ctr/done"
    fi
    # vocab_size=0: every table grows as new ids arrive.
    DATA_FLAGS="--model=ctr --data_dir=$ctr --num_fields=8 --num_dense=4"
    # Small batches: the model's steps are quick, and kills need time to
    # land in.
    DATA_FLAGS+=" --embedding_dim=8 --hidden_units=32,16 --batch_size=16"
    DATA_FLAGS+=" --optimizer=adam --learning_rate=0.002"
    DATA_FLAGS+=" --embedding_optimizer=adagrad --embedding_learning_rate=0.1"
    DATA_FLAGS+=" --vocab_size=0" ;;
  *)
    echo "chaos: unknown scenario $SCENARIO" >&2
    exit 2 ;;
esac

# Runs the job in $1 (a fresh folder) in the background; sets LAUNCHER.
start_job() {
  local dir=$1
  rm -rf "$dir"
  mkdir -p "$dir"
  local bin=()
  [ -n "$BIN_DIR" ] && bin=(--bin_dir="$BIN_DIR")
  # A restart budget no schedule exhausts: the test is about recovery.
  "$BUILD/deploy/local/tessera_local" --num_ps=2 --num_workers=2 \
    --max_restarts=1000 "${bin[@]}" --run_dir="$dir/run" -- --mode="$MODE" \
    --epochs="$EPOCHS" $DATA_FLAGS --checkpoint_dir="$dir/run/checkpoints" \
    > "$dir/launcher.out" 2>&1 &
  LAUNCHER=$!
}

# The undisturbed run, once per work folder and scenario.
BASE="$WORK/baseline-$SCENARIO"
if [ "${TESSERA_CHAOS_DRY:-0}" != 1 ] && [ ! -f "$BASE/done" ]; then
  start_job "$BASE"
  if ! wait "$LAUNCHER"; then
    echo "chaos: the undisturbed $SCENARIO run failed:"
    tail -30 "$BASE/launcher.out"
    exit 1
  fi
  touch "$BASE/done"
fi

DIR="$WORK/$SCENARIO-$SEED"
RUN="$DIR/run"
mkdir -p "$DIR"
[ "${TESSERA_CHAOS_DRY:-0}" = 1 ] || start_job "$DIR"
: > "$DIR/kills.tsv.part"

# TESSERA_CHAOS_DRY=1 prints the seed's schedule without running a job.
DRY=${TESSERA_CHAOS_DRY:-0}
alive() { [ "$DRY" = 1 ] || kill -0 "$LAUNCHER" 2> /dev/null; }
count() {
  local c
  c=$(grep -c -- "$2" "$1" 2> /dev/null)
  echo "${c:-0}"
}
# Waits until file $1 holds more than $3 lines matching $2 (false when the
# job ends first, or after 120 s).
wait_more() {
  [ "$DRY" = 1 ] && return 0
  local i
  for ((i = 0; i < 12000; ++i)); do
    [ "$(count "$1" "$2")" -gt "$3" ] && return 0
    alive || return 1
    sleep 0.01
  done
  return 1
}
# Sleeps a random 0 to $1 milliseconds (from the seeded schedule).
# (Random draws stay out of $(...): a subshell reseeds RANDOM.)
pause_ms() {
  local ms=$((RANDOM % ($1 + 1)))
  [ "$DRY" = 1 ] && return 0
  sleep "$(printf '0.%03d' "$ms")"
}
ROLES=(ps-0 ps-1 worker-0 worker-1 chief-0)
# Sets PICKED to one of the arguments.
pick() {
  local a=("$@")
  PICKED=${a[RANDOM % ${#a[@]}]}
}

# Sends $2 (KILL, or STOP then CONT) to role $1 and records it as moment $3.
hit() {
  local role=$1 sig=$2 moment=$3 pid
  if [ "$DRY" = 1 ]; then
    [ "$sig" = STOP ] && : $((RANDOM))
    echo "chaos: $sig $role during $moment"
    return 0
  fi
  pid=$(cat "$RUN/pids/$role" 2> /dev/null) || return 1
  alive || return 1
  # Not once the job has trained: the launcher then shuts the cluster
  # down, and a task killed meanwhile fails the launcher although the job
  # is done (deploy/local/tessera_local.cc: "not restarted, since ps-0 had
  # already exited"), which is the launcher's to decide, not training's.
  grep -qE 'final test accuracy|no epoch left to train' "$CHIEF" 2> /dev/null &&
    return 1
  if [ "$sig" = STOP ]; then
    kill -STOP "$pid" 2> /dev/null || return 1
    sleep "$((1 + RANDOM % 3))"
    kill -CONT "$pid" 2> /dev/null
  else
    kill -9 "$pid" 2> /dev/null || return 1
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$SCENARIO" "$SEED" "$role" "$moment" \
    "$sig" >> "$DIR/kills.tsv.part"
  echo "chaos: $(date +%T.%N | cut -c1-12) $sig $role during $moment"
}

CHIEF="$RUN/chief.log"
# One kill at a moment drawn from the seeded schedule.
one_kill() {
  local moment
  pick configure training training evaluation checkpoint ps_recovery \
    chief_restart pause
  moment=$PICKED
  # The first kill lands in the start-up every other seed.
  [ "$1" = 0 ] && [ $((RANDOM % 2)) = 0 ] && moment=startup
  case $moment in
    startup)
      # Before the cluster is ready: the processes are still starting.
      pause_ms 400
      pick "${ROLES[@]}"
      hit "$PICKED" KILL startup ;;
    configure)
      # The chief probes, creates the variables and configures the workers
      # (or restores) right after every task answers.
      local n
      n=$(count "$CHIEF" "cluster ready")
      hit chief-0 KILL training || return 0
      wait_more "$CHIEF" "cluster ready" "$n" || return 0
      # Worker 0 reads the data sizes, then each worker is configured:
      # about a second and a half here.
      pause_ms 1500
      pick ps-0 ps-1 worker-0 worker-1 worker-1
      hit "$PICKED" KILL configure ;;
    training)
      wait_more "$CHIEF" "training on" 0 || return 0
      pause_ms 900
      # Workers twice as often: a step cut short is the subtle case (its
      # pushes may have reached some servers and not others).
      pick "${ROLES[@]}" worker-0 worker-1
      hit "$PICKED" KILL training ;;
    evaluation)
      pick worker-0 worker-1
      local w=$PICKED
      local log="$RUN/$w.log" n
      n=$(count "$log" "evaluating test examples")
      wait_more "$log" "evaluating test examples" "$n" || return 0
      pause_ms 60
      pick worker-0 worker-1 "$w" "$w"
      hit "$PICKED" KILL evaluation ;;
    checkpoint)
      # The epoch's line is printed, then its checkpoint is written.
      local n
      n=$(count "$CHIEF" "epoch [0-9]*/$EPOCHS:")
      wait_more "$CHIEF" "epoch [0-9]*/$EPOCHS:" "$n" || return 0
      pause_ms 20
      pick ps-0 ps-1 chief-0
      hit "$PICKED" KILL checkpoint ;;
    ps_recovery)
      local n
      n=$(count "$CHIEF" "training paused")
      wait_more "$CHIEF" "training on" 0 || return 0
      pause_ms 500
      pick ps-0 ps-1
      hit "$PICKED" KILL training || return 0
      wait_more "$CHIEF" "training paused" "$n" || return 0
      pause_ms 300
      pick "${ROLES[@]}"
      hit "$PICKED" KILL ps_recovery ;;
    chief_restart)
      # The issue's failure: the chief restarts, and a worker dies while
      # the new chief waits for the cluster and configures it.
      local n
      n=$(count "$CHIEF" "=== restart")
      pause_ms 500
      hit chief-0 KILL training || return 0
      wait_more "$CHIEF" "=== restart" "$n" || return 0
      pause_ms 300
      pick worker-0 worker-1 ps-0 ps-1
      hit "$PICKED" KILL chief_restart ;;
    pause)
      pause_ms 900
      pick ps-0 ps-1 worker-0 worker-1
      hit "$PICKED" STOP training ;;
  esac
}

echo "chaos: $SCENARIO seed $SEED, $KILLS kills (replay: TESSERA_CHAOS_SEED=$SEED)"
# The schedule starts once every process has started (its pid is known).
for ((i = 0; i < 6000 && DRY == 0; ++i)); do
  n=0
  for role in "${ROLES[@]}"; do [ -s "$RUN/pids/$role" ] && n=$((n + 1)); done
  [ "$n" = "${#ROLES[@]}" ] && break
  sleep 0.01
done
RANDOM=$SEED
for ((k = 0; k < KILLS; ++k)); do
  alive || break
  one_kill "$k"
  # Let the job get somewhere before the next one.
  pause_ms 999
done
[ "$DRY" = 1 ] && exit 0
wait "$LAUNCHER"
EXIT=$?

# The checks.
OUTCOME=$(python3 "$HERE/chaos_check.py" "$MODE" "$BASE/run/metrics.jsonl" \
  "$RUN/metrics.jsonl" "$EPOCHS" "$EXIT" 2>&1 | tail -1)
awk -v o="${OUTCOME%% *}" '{ print $0 "\t" o }' "$DIR/kills.tsv.part" \
  > "$DIR/kills.tsv"
done_kills=$(wc -l < "$DIR/kills.tsv")
echo "chaos $SCENARIO seed=$SEED kills=$done_kills outcome=$OUTCOME"
if [ "${OUTCOME%% *}" != ok ]; then
  echo "chaos: the launcher's last lines:"
  tail -25 "$DIR/launcher.out"
  exit 1
fi
# A kill that missed (the job had ended, or the moment never came) proves
# nothing: a job with fewer kills than its schedule is not a pass. Exit 3
# tells chaos_test.sh to draw again on a longer job.
if [ "$done_kills" -lt "$KILLS" ]; then
  echo "chaos: only $done_kills of $KILLS kills landed in $SCENARIO seed $SEED"
  exit 3
fi
exit 0
