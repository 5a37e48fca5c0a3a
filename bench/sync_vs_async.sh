#!/usr/bin/env bash
# bench/sync_vs_async: does the learning-rate rule close the gap between
# the lockstep modes and async? (#44 targets: sync and hybrid:sync within
# 0.003 AUC of async on DLRM and DeepFM, on generated sets other than the
# README's.)
#
#   bash bench/sync_vs_async.sh [OUT_DIR]
#
# For each generated set (written once under DATA_ROOT, default
# /tmp/tessera_sync_vs_async) and each job file (deploy/jobs/dlrm, deepfm),
# trains with 2 parameter servers and 2 workers, EPOCHS (default 4, where
# every run of these sets has converged) epochs,
# the job's seed and 256 examples per worker in every mode: async, then
# sync and hybrid:sync (global batch 512) with today's defaults, then sync
# and hybrid:sync with the rule. Prints a markdown table of the final test
# AUC and each lockstep mode's gap to async (lockstep minus async), and
# writes it to OUT_DIR/table.md beside runs/ (each run's logs and metrics;
# default OUT_DIR: DATA_ROOT/out). Results: bench/results/sync_vs_async.md.
#
# The rule (lockstep modes only; async unchanged): SCALING=linear
# (--lr_scaling=linear: rates x global batch / one worker's batch = x2),
# SCALING=sqrt (the same flag with --lr_reference_batch=362: x1.414) or
# none, and a
# linear warm-up over WARMUP global steps (default 200, about an epoch)
# from the unscaled
# rate to the scaled one, for the dense and the table optimizers
# (--lr_schedule, --embedding_lr_schedule with
# warmup_initial_learning_rate = the job's rate).
# SETS, MODELS narrow the runs (SETS may name "readme", the README's 1 M set:
# about a minute a run); REUSE=1 keeps a run whose flags are unchanged
# (async, when only the rule changes). TESSERA_BUILD_DIR picks the build
# folder; TESSERA_NO_BUILD=1 uses the binaries already there.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
BUILD="${TESSERA_BUILD_DIR:-build}"
DATA_ROOT="${DATA_ROOT:-/tmp/tessera_sync_vs_async}"
OUT="${1:-$DATA_ROOT/out}"
EPOCHS="${EPOCHS:-4}"
SETS="${SETS:-s7 s13 s29}"
MODELS="${MODELS:-dlrm deepfm}"
SCALING="${SCALING:-linear}"
WARMUP="${WARMUP:-200}"
WORKERS=2
BATCH=256  # per worker, every mode

# The sets: 26 categorical fields (C1, C2 multi-hot) and 13 integer
# features, as the job files read; seeds, vocabularies, skew, interactions,
# click rates and missing ids differ.
declare -A GEN=(
  [s7]="--seed=7 --train_examples=100000 --test_examples=20000 --vocab_size=50000 --zipf_s=1.05 --interaction_fields=12 --interaction_scale=2 --weight_decay_rank=5"
  [s13]="--seed=13 --train_examples=100000 --test_examples=20000 --vocab_size=5000 --zipf_s=1.4 --interaction_fields=4 --interaction_scale=3 --dense_cross=0.5 --base_ctr=0.1 --weight_decay_rank=5"
  [s29]="--seed=29 --train_examples=100000 --test_examples=20000 --vocab_size=200000 --zipf_s=1.2 --missing=0.1 --interaction_fields=8 --interaction_scale=2.5 --weight_scale=0.8 --weight_decay_rank=20"
  [readme]="--train_examples=1000000 --test_examples=100000 --interaction_fields=8 --interaction_scale=2 --zipf_s=1.2 --vocab_size=20000 --weight_decay_rank=5"
)
case "$SCALING" in linear | sqrt | none) ;; *) echo "SCALING must be linear, sqrt or none, got '$SCALING'" >&2; exit 2 ;; esac
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "WARMUP must be a number of global steps, got '$WARMUP'" >&2; exit 2; }
for s in $SETS; do
  [ -n "${GEN[$s]:-}" ] || { echo "unknown set '$s' (known: ${!GEN[*]})" >&2; exit 2; }
done
for m in $MODELS; do
  [ -f "deploy/jobs/$m.textproto" ] || { echo "no job file deploy/jobs/$m.textproto" >&2; exit 2; }
done

if [ -z "${TESSERA_NO_BUILD:-}" ]; then
  bash deploy/build.sh --target tessera_local tessera_ps tessera_worker \
    tessera_coordinator tessera_ctr_gen >/dev/null
fi

# The job file's rate of `optimizer` or `embedding_optimizer`.
rate_of() {  # JOB FIELD
  sed -n "s/^$2 *{ *learning_rate: *\([0-9.eE+-]*\).*/\1/p" "$1" | head -1
}

# The rule's coordinator flags for JOB.
rule_flags() {  # JOB
  local lr elr
  lr=$(rate_of "$1" optimizer)
  elr=$(rate_of "$1" embedding_optimizer)
  if [ -z "$lr" ] || [ -z "$elr" ]; then
    echo "no learning rates in $1" >&2
    exit 1
  fi
  local flags=""
  case "$SCALING" in
    linear) flags="--lr_scaling=linear" ;;
    # The linear rule against a reference of global batch / sqrt(workers):
    # setting --embedding_learning_rate instead would also replace the job
    # file's Adagrad by --optimizer's Adam.
    sqrt) flags="--lr_scaling=linear --lr_reference_batch=$(awk "BEGIN {printf \"%d\", $WORKERS * $BATCH / sqrt($WORKERS) + 0.5}")" ;;
  esac
  if [ "$WARMUP" -gt 0 ]; then
    flags="$flags --lr_schedule=constant,warmup_steps=$WARMUP,warmup_initial_learning_rate=$lr"
    flags="$flags --embedding_lr_schedule=constant,warmup_steps=$WARMUP,warmup_initial_learning_rate=$elr"
  fi
  echo "$flags"
}

# Trains one run; prints its final test AUC.
train() {  # DIR JOB DATA MODE BATCH FLAGS...
  local dir="$1" job="$2" data="$3" mode="$4" b="$5"
  shift 5
  local args="--job_file=$job --data_dir=$data --mode=$mode --batch_size=$b --epochs=$EPOCHS $*"
  if [ -n "${REUSE:-}" ] && [ -f "$dir/args" ] && [ "$(cat "$dir/args")" = "$args" ] &&
    grep -q "\"epoch\":$EPOCHS," "$dir/metrics.jsonl" 2>/dev/null; then
    :
  else
    rm -rf "$dir"
    mkdir -p "$dir"
    # shellcheck disable=SC2086  # the flags split on spaces
    "$BUILD/deploy/local/tessera_local" --num_ps=2 --num_workers=$WORKERS \
      --run_dir="$dir" -- $args >"$dir/launcher.out" 2>&1 ||
      { echo "failed: $args; see $dir/launcher.out" >&2; tail -5 "$dir/launcher.out" >&2; exit 1; }
    echo "$args" >"$dir/args"
  fi
  tail -1 "$dir/metrics.jsonl" | sed -n 's/.*"auc":\([0-9.]*\).*/\1/p'
}

# tools/ctr_gen since the offline tools left worker/ (older builds: there).
CTR_GEN=$(ls "$BUILD"/tools/ctr_gen/tessera_ctr_gen "$BUILD"/worker/tessera_ctr_gen \
  2>/dev/null | head -1 || true)

gap() { awk "BEGIN {printf \"%+.4f\", $1 - $2}"; }
auc4() { awk "BEGIN {printf \"%.4f\", $1}"; }

mkdir -p "$OUT/runs"
table="$OUT/table.md"
rule_desc="scaling $SCALING, warm-up $WARMUP global steps"
{
  echo "| set | model | async | sync | gap | hybrid:sync | gap | sync, rule | gap | hybrid:sync, rule | gap |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
} >"$table"
cat "$table"
start=$(date +%s)
worst=0
for s in $SETS; do
  data="$DATA_ROOT/$s"
  if [ ! -f "$data/meta.json" ]; then
    # shellcheck disable=SC2086
    "$CTR_GEN" ${GEN[$s]} --out_dir="$data" >"$DATA_ROOT.$s.gen.log" 2>&1 ||
      { echo "tessera_ctr_gen failed for $s; see $DATA_ROOT.$s.gen.log" >&2; exit 1; }
  fi
  for m in $MODELS; do
    job="deploy/jobs/$m.textproto"
    runs="$OUT/runs/$s/$m"
    rule=$(rule_flags "$job")
    a=$(train "$runs/async" "$job" "$data" async $BATCH)
    s0=$(train "$runs/sync" "$job" "$data" sync $((WORKERS * BATCH)))
    h0=$(train "$runs/hybridsync" "$job" "$data" hybrid:sync $((WORKERS * BATCH)))
    s1=$(train "$runs/sync_rule" "$job" "$data" sync $((WORKERS * BATCH)) "$rule")
    h1=$(train "$runs/hybridsync_rule" "$job" "$data" hybrid:sync $((WORKERS * BATCH)) "$rule")
    for v in "$s1" "$h1"; do
      worst=$(awk "BEGIN {d = $a - $v; if (d < 0) d = -d; print (d > $worst) ? d : $worst}")
    done
    row="| $s | $m | $(auc4 "$a") | $(auc4 "$s0") | $(gap "$s0" "$a") | $(auc4 "$h0") | $(gap "$h0" "$a") | $(auc4 "$s1") | $(gap "$s1" "$a") | $(auc4 "$h1") | $(gap "$h1" "$a") |"
    echo "$row" | tee -a "$table"
  done
done
{
  echo
  echo "rule: $rule_desc; $EPOCHS epochs, $WORKERS workers x $BATCH examples; largest |gap| with the rule $(auc4 "$worst"); $(( $(date +%s) - start )) s"
} | tee -a "$table"
