#!/usr/bin/env bash
# One chaos run (issues #31, #48): a real job on loopback (tessera_local, 2
# parameter servers, 2 workers, the chief) and a seeded random schedule of
# events at chosen moments: kill -9 of any role at start-up,
# configuration, training, evaluation, checkpoint saves, parameter-server
# recovery, a chief restart and after the chief's summary; SIGSTOP/SIGCONT
# pauses; and, in the modes that can change their membership, a worker
# that joins (tessera_local --join) and one that drains (tessera_ctl
# drain). Then checks the job: it completed; every epoch trained every
# example exactly once (by identity); a sync or hybrid:sync job's epochs
# equal its undisturbed run's bit for bit, another mode's final accuracy
# (AUC) is within noise (0.05) of its undisturbed run's or better.
#
#   chaos_run.sh BUILD_DIR WORK_DIR SCENARIO EVENTS SEED [BIN_DIR]
#
# SCENARIO: MODE_DATA, MODE one of sync, async, ssp2 (ssp:2), hybrid,
# hybridsync (hybrid:sync), hybridssp2 (hybrid:ssp:2), mirrored (no
# parameter servers), DATA one of idx (Fashion-MNIST IDX files), tfrecord
# (streamed gzipped TFRecord files), table (the click model with growing
# embedding tables): sync_idx, async_table, hybridsync_table,
# mirrored_idx, ...
# Joins and drains are drawn in every mode: in mirrored and hybrid jobs
# the all-reduce ring re-forms between rounds (TESSERA_CHAOS_RING_JOINS=0
# leaves them out there), and a chief restarted after a ring join puts
# the workers back on its cluster spec's ring. A ring join changes the
# parts of a round, so hybrid:sync is then checked as the other modes
# (every example once, the accuracy within noise). A drain drains a
# worker that joined (joining one first if none is in the job): a drained
# worker of the start-up would hold up a restarted chief, which waits for
# every worker of its cluster spec (docs/operations.md).
# The schedule follows from SEED alone, so a run is replayed by giving the
# same SEED (the moments are found again by what the job logs, so the
# replay hits the same phases, not the same microsecond). BIN_DIR: where
# tessera_ps, tessera_worker and tessera_coordinator are (default: the
# build's), to replay a seed against other binaries.
#
# Writes WORK_DIR/SCENARIO-SEED/kills.tsv (one line per event that landed:
# scenario, seed, role, moment, signal (KILL, STOP, JOIN, DRAIN), outcome)
# and prints one line
#   chaos SCENARIO seed=SEED kills=N outcome=OUTCOME
# OUTCOME is ok, or job_lost, epoch_differs, example_missed, epoch_missing,
# accuracy_off. Exit status: 0 when the outcome is ok and every event of
# the schedule landed; 3 when the outcome is ok but fewer events landed
# (the job ended first); 1 otherwise; 77 when the data set is not
# installed.
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
# A data tool of the build: worker/NAME, or where tools/ holds it.
tool() {
  local found
  found=$(find "$BUILD/tools" "$BUILD/worker" -maxdepth 2 -name "$1" -type f \
    -perm -u+x 2> /dev/null | head -1)
  echo "${found:-$BUILD/worker/$1}"
}
DATA_FLAGS=""
# The scenario is MODE_DATA: the mode's tag (sync, async, ssp2, hybrid,
# hybridsync, hybridssp2) and the data (idx, tfrecord, table).
case ${SCENARIO%%_*} in
  sync | async | hybrid | mirrored) MODE=${SCENARIO%%_*} ;;
  ssp2) MODE=ssp:2 ;;
  hybridsync) MODE=hybrid:sync ;;
  hybridssp2) MODE=hybrid:ssp:2 ;;
  *) echo "chaos: unknown mode in scenario $SCENARIO" >&2; exit 2 ;;
esac
# Mirrored keeps every variable in the workers' replicas: no servers.
NUM_PS=2
[ "$MODE" = mirrored ] && NUM_PS=0
# Whether the schedule draws joins and drains (tessera_local --elastic):
# every mode, mirrored and hybrid unless TESSERA_CHAOS_RING_JOINS=0.
ELASTIC=1
case $MODE in
  sync | async | ssp:2) ;;
  *) [ "${TESSERA_CHAOS_RING_JOINS:-1}" = 0 ] && ELASTIC=0 ;;
esac
case ${SCENARIO#*_} in
  idx)
    DATA_FLAGS="--train_examples=$TRAIN --test_examples=$TEST"
    # A mirrored step is an all-reduce on loopback, 40,000 examples/s
    # with the default batch: small batches of a wider model leave the
    # events time to land in.
    [ "$MODE" = mirrored ] &&
      DATA_FLAGS+=" --batch_size=16 --hidden_units=256" ;;
  tfrecord)
    tf="$WORK/tfrecord_data"
    if [ ! -f "$tf/job.textproto" ]; then
      mkdir -p "$tf"
      "$(tool tessera_to_tfrecord)" --from=idx \
        --images="$DATA/train-images-idx3-ubyte.gz" \
        --labels="$DATA/train-labels-idx1-ubyte.gz" --examples="$TRAIN" \
        --prefix="$tf/train" --shards=6 --gzip > "$tf/convert.log" 2>&1 &&
        "$(tool tessera_to_tfrecord)" --from=idx \
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
      "$(tool tessera_ctr_gen)" --out_dir="$ctr" \
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

BIN=()
[ -n "$BIN_DIR" ] && BIN=(--bin_dir="$BIN_DIR")
# Runs the job in $1 (a fresh folder) in the background; sets LAUNCHER.
start_job() {
  local dir=$1 faults=()
  rm -rf "$dir"
  mkdir -p "$dir"
  # $2: a folder for the job's fault points (common/process/fault_point.h);
  # the chief stops itself once its summary is printed (the schedule's
  # end lets it go on, after_summary kills meanwhile).
  if [ -n "${2:-}" ]; then
    mkdir -p "$2"
    echo stop > "$2/chief-0.summary"
    faults=(env "TESSERA_FAULT_POINTS=$2")
  fi
  local elastic=()
  [ "$ELASTIC" = 1 ] && elastic=(--elastic)
  # A restart budget no schedule exhausts: the test is about recovery.
  "${faults[@]}" "$BUILD/deploy/local/tessera_local" --num_ps="$NUM_PS" \
    --num_workers=2 \
    --max_restarts=1000 "${BIN[@]}" "${elastic[@]}" --run_dir="$dir/run" \
    -- --mode="$MODE" \
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
# The chaos run's fault points (after_summary lays its file when drawn).
FAULTS="$DIR/faults"
if [ "${TESSERA_CHAOS_DRY:-0}" != 1 ]; then
  start_job "$DIR" "$FAULTS"
fi
: > "$DIR/kills.tsv.part"

# TESSERA_CHAOS_DRY=1 prints the seed's schedule without running a job.
DRY=${TESSERA_CHAOS_DRY:-0}
# The job runs and its chief has not reached its summary (where it stops
# itself, fault point "summary", until the schedule is over).
alive() {
  [ "$DRY" = 1 ] ||
    { kill -0 "$LAUNCHER" 2> /dev/null && [ ! -e "$FAULTS/chief-0.summary.hit" ]; }
}
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
ROLES=(worker-0 worker-1 chief-0)
SERVERS=()
[ "$NUM_PS" = 2 ] && SERVERS=(ps-0 ps-1) && ROLES=(ps-0 ps-1 "${ROLES[@]}")
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
  # (after_summary aims there on purpose.)
  [ "$moment" != after_summary ] &&
    grep -q "$SUMMARY" "$CHIEF" 2> /dev/null && return 1
  if [ "$sig" = STOP ]; then
    kill -STOP "$pid" 2> /dev/null || return 1
    sleep "$((1 + RANDOM % 3))"
    kill -CONT "$pid" 2> /dev/null
  else
    kill -9 "$pid" 2> /dev/null || return 1
  fi
  landed "$role" "$moment" "$sig"
}

# Records an event that landed: role $1, moment $2, signal $3.
landed() {
  printf '%s\t%s\t%s\t%s\t%s\n' "$SCENARIO" "$SEED" "$1" "$2" "$3" \
    >> "$DIR/kills.tsv.part"
  echo "chaos: $(date +%T.%N | cut -c1-12) $3 $1 during $2"
}

# The chief's summary line (its job's result is complete), or a restarted
# chief's for a job with every epoch trained.
SUMMARY='final test \|no epoch left to train'
JOINERS=()     # the pids of the joining launchers
JOINED=()      # the indices of the workers that joined, newest last
JOIN_EPOCH=-1  # the chief restarts counted when the last one joined

# Waits until file $1 holds more than $3 lines matching $2 or more than $5
# matching $4: true for the first, false for the second, the job's end or
# 120 s.
wait_either() {
  local i
  for ((i = 0; i < 12000; ++i)); do
    [ "$(count "$1" "$2")" -gt "$3" ] && return 0
    [ "$(count "$1" "$4")" -gt "$5" ] && return 1
    alive || return 1
    sleep 0.01
  done
  return 1
}

# Holds the job: the next worker to start a step stops itself there (fault
# point "step"), so the job cannot end while an event lands (a join takes
# seconds, a job of CI's schedule one). False when the job ends first.
hold_job() {
  rm -f "$FAULTS"/worker-[01].step.hit
  echo stop > "$FAULTS/worker-0.step"
  echo stop > "$FAULTS/worker-1.step"
  local i
  for ((i = 0; i < 12000; ++i)); do
    if [ -e "$FAULTS/worker-0.step.hit" ] || [ -e "$FAULTS/worker-1.step.hit" ]; then
      # One stopped worker holds its step, and so its epoch; the other
      # trains on (a file it claims meanwhile is released too).
      rm -f "$FAULTS/worker-0.step" "$FAULTS/worker-1.step"
      return 0
    fi
    alive || break
    sleep 0.01
  done
  rm -f "$FAULTS/worker-0.step" "$FAULTS/worker-1.step"
  release_job
  return 1
}

# Lets the held workers go on.
release_job() {
  local h
  for h in "$FAULTS"/worker-[01].step.hit; do
    [ -e "$h" ] || continue
    kill -CONT "$(sed -n 's/^hit by pid \([0-9]*\)$/\1/p' "$h")" 2> /dev/null
    rm -f "$h"
  done
}

# A worker joins (tessera_local --join) while the job is held: landed once
# the chief says it joined. Sets JOINED. A join while the chief is down is
# refused by tessera_local (the job's coordinator must run): tried again,
# 3 times.
join_one() {
  local moment=$1 try n c out idx
  for try in 1 2 3; do
    alive || return 1
    grep -q "$SUMMARY" "$CHIEF" 2> /dev/null && return 1
    n=$(count "$CHIEF" "^worker [0-9]* (.*) joined on")
    c=$(count "$CHIEF" "^worker [0-9]* (.*) could not join")
    out="$DIR/join-${#JOINERS[@]}.out"
    "$BUILD/deploy/local/tessera_local" --join="$RUN" --num_workers=1 \
      "${BIN[@]}" > "$out" 2>&1 &
    JOINERS+=($!)
    if wait_either "$CHIEF" "^worker [0-9]* (.*) joined on" "$n" \
      "^worker [0-9]* (.*) could not join" "$c"; then
      idx=$(grep "^worker [0-9]* (.*) joined on" "$CHIEF" | tail -1 |
        sed 's/^worker \([0-9]*\) .*/\1/')
      JOINED+=("$idx")
      JOIN_EPOCH=$(count "$CHIEF" "=== restart")
      landed "worker-$idx" "$moment" JOIN
      return 0
    fi
    sleep 0.5
  done
  return 1
}

# The newest joined worker drains (tessera_ctl drain) while the job is
# held: landed once tessera_ctl says the coordinator took it. A chief that
# restarted since the join does not know the joined worker (it exited):
# one joins first.
drain_one() {
  local moment=$1 try addr idx
  for try in 1 2 3; do
    if [ "${#JOINED[@]}" = 0 ] ||
      [ "$JOIN_EPOCH" != "$(count "$CHIEF" "=== restart")" ]; then
      JOINED=()
      join_one "$moment" || return 1
    fi
    alive || return 1
    grep -q "$SUMMARY" "$CHIEF" 2> /dev/null && return 1
    idx=${JOINED[${#JOINED[@]} - 1]}
    addr=$(grep -A1 '"chief"' "$RUN/cluster.json" | tail -1 | tr -d ' ",')
    if "$BUILD/coordinator/tessera_ctl" --coordinator="$addr" \
      --job_token_file="$RUN/job.token" drain "$idx" \
      >> "$DIR/drain.out" 2>&1; then
      unset 'JOINED[${#JOINED[@]}-1]'
      JOINED=("${JOINED[@]}")
      landed "worker-$idx" "$moment" DRAIN
      return 0
    fi
    JOINED=()
  done
  return 1
}

# A membership event ($1: join_one or drain_one) inside a hold of the job.
membership_event() {
  if [ "$DRY" = 1 ]; then
    echo "chaos: ${1%_one} worker during training"
    return 0
  fi
  hold_job || return 1
  "$1" training
  local rc=$?
  release_job
  return $rc
}

CHIEF="$RUN/chief.log"
# Waits until file $1 exists (false when the job ends first, or after
# 120 s).
wait_file() {
  local i
  for ((i = 0; i < 12000; ++i)); do
    [ -e "$1" ] && return 0
    alive || return 1
    sleep 0.01
  done
  return 1
}

# One event at a moment drawn from the seeded schedule ($1: its number).
# False when it did not land (the job ended first, or its moment never
# came); a moment that kills two processes landed when the second did.
one_kill() {
  local moment moments=(configure training training evaluation checkpoint
    chief_restart pause)
  [ "$NUM_PS" = 2 ] && moments+=(ps_recovery)
  [ "$ELASTIC" = 1 ] && moments+=(join drain)
  pick "${moments[@]}"
  moment=$PICKED
  # The first kill lands in the start-up every other seed, the last one
  # after the chief's summary every other seed.
  [ "$1" = 0 ] && [ $((RANDOM % 2)) = 0 ] && moment=startup
  [ "$1" = $((KILLS - 1)) ] && [ "$1" != 0 ] && [ $((RANDOM % 2)) = 0 ] &&
    moment=after_summary
  # TESSERA_CHAOS_MOMENTS="drain after_summary": the first events' moments
  # given (the test's way to cover each kind every run); the draws above
  # still happen, so the rest of the schedule is the seed's.
  local given=(${TESSERA_CHAOS_MOMENTS:-})
  [ -n "${given[$1]:-}" ] && moment=${given[$1]}
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
      hit chief-0 KILL training || return 1
      wait_more "$CHIEF" "cluster ready" "$n" || return 1
      # Worker 0 reads the data sizes, then each worker is configured:
      # about a second and a half here.
      pause_ms 1500
      pick "${SERVERS[@]}" worker-0 worker-1 worker-1
      hit "$PICKED" KILL configure ;;
    training)
      wait_more "$CHIEF" "training on" 0 || return 1
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
      wait_more "$log" "evaluating test examples" "$n" || return 1
      pause_ms 60
      pick worker-0 worker-1 "$w" "$w"
      hit "$PICKED" KILL evaluation ;;
    checkpoint)
      # The epoch's line is printed, then its checkpoint is written.
      local n
      n=$(count "$CHIEF" "epoch [0-9]*/$EPOCHS:")
      wait_more "$CHIEF" "epoch [0-9]*/$EPOCHS:" "$n" || return 1
      pause_ms 20
      pick "${SERVERS[@]}" chief-0
      hit "$PICKED" KILL checkpoint ;;
    ps_recovery)
      local n
      n=$(count "$CHIEF" "training paused")
      wait_more "$CHIEF" "training on" 0 || return 1
      pause_ms 500
      pick ps-0 ps-1
      hit "$PICKED" KILL training || return 1
      wait_more "$CHIEF" "training paused" "$n" || return 1
      pause_ms 300
      pick "${ROLES[@]}"
      hit "$PICKED" KILL ps_recovery ;;
    chief_restart)
      # The issue's failure: the chief restarts, and a worker dies while
      # the new chief waits for the cluster and configures it.
      local n
      n=$(count "$CHIEF" "=== restart")
      pause_ms 500
      hit chief-0 KILL training || return 1
      wait_more "$CHIEF" "=== restart" "$n" || return 1
      pause_ms 300
      pick worker-0 worker-1 "${SERVERS[@]}"
      hit "$PICKED" KILL chief_restart ;;
    pause)
      pause_ms 900
      pick "${SERVERS[@]}" worker-0 worker-1
      hit "$PICKED" STOP training ;;
    join)
      pause_ms 900
      membership_event join_one ;;
    drain)
      pause_ms 900
      membership_event drain_one ;;
    after_summary)
      # The chief stops itself once its summary is printed (fault point
      # "summary", laid at the start), so every process is still up
      # whichever is picked; then it goes on. The kill must not lose the
      # job's result (the launcher's shutdown of a finished job).
      pick "${ROLES[@]}"
      if [ "$DRY" = 1 ]; then
        echo "chaos: KILL $PICKED during after_summary"
        return 0
      fi
      local i
      for ((i = 0; i < 30000; ++i)); do
        [ -e "$FAULTS/chief-0.summary.hit" ] && break
        kill -0 "$LAUNCHER" 2> /dev/null || return 1
        sleep 0.01
      done
      [ -e "$FAULTS/chief-0.summary.hit" ] || return 1
      kill -9 "$(cat "$RUN/pids/$PICKED")" 2> /dev/null || return 1
      landed "$PICKED" after_summary KILL ;;
    *)
      echo "chaos: no moment $moment (TESSERA_CHAOS_MOMENTS?)" >&2
      return 1 ;;
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
LANDED=0
for ((k = 0; k < KILLS; ++k)); do
  # (An after_summary event still comes once the chief waits there.)
  [ "$DRY" = 1 ] || kill -0 "$LAUNCHER" 2> /dev/null || break
  one_kill "$k" && LANDED=$((LANDED + 1))
  # Let the job get somewhere before the next one.
  pause_ms 999
done
[ "$DRY" = 1 ] && exit 0
# The chief waits at its summary's fault point: it goes on now.
while kill -0 "$LAUNCHER" 2> /dev/null; do
  if [ -e "$FAULTS/chief-0.summary.hit" ]; then
    kill -CONT "$(sed -n 's/^hit by pid \([0-9]*\)$/\1/p' \
      "$FAULTS/chief-0.summary.hit")" 2> /dev/null
    break
  fi
  sleep 0.01
done
wait "$LAUNCHER"
EXIT=$?
# The joined workers exit at the job's end (the coordinator tells them, or
# they find it gone); their launchers are given 30 s, then stopped.
for pid in "${JOINERS[@]}"; do
  for ((i = 0; i < 300; ++i)); do
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  kill "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
done

# The checks.
# A join or drain in a mirrored or hybrid job changes the ring's size, so
# the parts of a round: hybrid:sync is then checked as the other modes.
CHECK_MODE=$MODE
[ "$NUM_PS" != 2 ] || [ "${MODE#hybrid}" = "$MODE" ] ||
  ! grep -qP '\t(JOIN|DRAIN)$' "$DIR/kills.tsv.part" || CHECK_MODE=ring_changed
OUTCOME=$(python3 "$HERE/chaos_check.py" "$CHECK_MODE" \
  "$BASE/run/metrics.jsonl" "$RUN/metrics.jsonl" "$EPOCHS" "$EXIT" 2>&1 |
  tail -1)
awk -v o="${OUTCOME%% *}" '{ print $0 "\t" o }' "$DIR/kills.tsv.part" \
  > "$DIR/kills.tsv"
done_kills=$(wc -l < "$DIR/kills.tsv")
echo "chaos $SCENARIO seed=$SEED kills=$done_kills outcome=$OUTCOME"
if [ "${OUTCOME%% *}" != ok ]; then
  echo "chaos: the launcher's last lines:"
  tail -25 "$DIR/launcher.out"
  exit 1
fi
# An event that missed (the job had ended, or the moment never came)
# proves nothing: a job with fewer events than its schedule is not a pass.
# Exit 3 tells chaos_test.sh to draw again on a longer job.
if [ "$LANDED" -lt "$KILLS" ]; then
  echo "chaos: only $LANDED of $KILLS events landed in $SCENARIO seed $SEED"
  exit 3
fi
exit 0
