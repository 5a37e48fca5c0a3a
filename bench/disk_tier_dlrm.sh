#!/usr/bin/env bash
# bench/disk_tier_dlrm.sh: DLRM trained by tessera_local (2 parameter
# servers, 2 workers, async) on a Zipf(1.05) click set, twice in one run:
# every row in memory, then with each server's --row_memory_budget a
# quarter (1/MULTIPLE) of the bytes of rows the in-memory run's servers
# allocated, so the tables are MULTIPLE times the budget (issue #43 item
# 6). The budget bounds the whole server (rows, the disk tier's memory and
# the process' own). Prints each run's examples/s (the chief's summary),
# their ratio against the 0.5x target, and each server's peak resident
# memory (VmHWM, sampled every 0.2 s) against budget + 15%.
#
# The model is deploy/jobs/dlrm.textproto with DIM-float rows (default 64;
# the MLPerf reference has 128) and a bottom MLP ending in DIM units, one
# epoch. The data (tessera_ctr_gen, EXAMPLES examples of 26 fields with
# VOCAB ids each, Zipf 1.05) is made once under WORK and reused.
#
#   bash bench/disk_tier_dlrm.sh            # from the repository root
#   EXAMPLES=200000 bash bench/disk_tier_dlrm.sh   # a quick look
#   ROUNDS=2 bash bench/disk_tier_dlrm.sh   # in-memory, tiered, tiered,
#                                           # in-memory: mean rates
set -euo pipefail

BUILD=${BUILD:-build}
WORK=${WORK:-${TMPDIR:-/tmp}/tessera_disk_tier_dlrm}
EXAMPLES=${EXAMPLES:-1000000}
VOCAB=${VOCAB:-1000000}
DIM=${DIM:-64}
MULTIPLE=${MULTIPLE:-4}
ROUNDS=${ROUNDS:-1}
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
  echo "disk_tier_dlrm: ROUNDS must be a whole number >= 1, not \"$ROUNDS\"" >&2
  exit 2
fi

for tool in worker/tessera_ctr_gen deploy/local/tessera_local; do
  if [[ ! -x "$BUILD/$tool" ]]; then
    echo "disk_tier_dlrm: $BUILD/$tool is missing: build it first" >&2
    exit 2
  fi
done
mkdir -p "$WORK"
data="$WORK/data_${EXAMPLES}_${VOCAB}"
if [[ ! -f "$data/meta.json" ]]; then
  "$BUILD/worker/tessera_ctr_gen" --train_examples="$EXAMPLES" \
    --test_examples=10000 --vocab_size="$VOCAB" --zipf_s=1.05 \
    --out_dir="$data.tmp" >&2
  mv "$data.tmp" "$data"
fi
job="$WORK/dlrm_dim$DIM.textproto"
sed -e "s/dim: 16 }/dim: $DIM }/" \
  -e "s/\"bottom_0\" dense { units: 16 /\"bottom_0\" dense { units: $DIM /" \
  deploy/jobs/dlrm.textproto >"$job"

# run NAME [BUDGET]: one epoch; prints "<examples/s> <hwm ps-0 KB> <hwm
# ps-1 KB>" on stdout, the job's output in $WORK/NAME.log.
run() {
  local name=$1 budget=${2:-}
  local dir="$WORK/runs/$name"
  rm -rf "$dir"
  "$BUILD/deploy/local/tessera_local" --num_ps=2 --num_workers=2 \
    --run_dir="$dir" ${budget:+--row_memory_budget=$budget} -- \
    --job_file="$job" --data_dir="$data" --epochs=1 \
    >"$WORK/$name.log" 2>&1 &
  local launcher=$!
  local hwm=(0 0)
  while kill -0 "$launcher" 2>/dev/null; do
    for i in 0 1; do
      local pid kb
      pid=$(cat "$dir/pids/ps-$i" 2>/dev/null) || continue
      kb=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null) ||
        continue
      if [[ -n "$kb" && "$kb" -gt "${hwm[$i]}" ]]; then hwm[$i]=$kb; fi
    done
    sleep 0.2
  done
  if ! wait "$launcher"; then
    echo "disk_tier_dlrm: the $name run failed; see $WORK/$name.log" >&2
    tail -20 "$WORK/$name.log" >&2
    exit 1
  fi
  local rate
  rate=$(sed -n 's/.*training (\([0-9]*\) examples\/s).*/\1/p' \
    "$WORK/$name.log" | tail -1)
  echo "$rate ${hwm[0]} ${hwm[1]}"
}

# take NAME: one run of NAME (the tiered one under $budget), added to its
# sums: rate[NAME] (examples/s), hwm0/hwm1[NAME] (the highest), last[NAME].
declare -A rate=() hwm0=() hwm1=() last=()
take() {
  local name=$1 r h0 h1 limit=
  if [[ $name == tiered ]]; then limit=$budget; fi
  read -r r h0 h1 < <(run "$name" "$limit")
  rate[$name]=$((${rate[$name]:-0} + r))
  hwm0[$name]=$((h0 > ${hwm0[$name]:-0} ? h0 : ${hwm0[$name]:-0}))
  hwm1[$name]=$((h1 > ${hwm1[$name]:-0} ? h1 : ${hwm1[$name]:-0}))
  last[$name]=$r
}

echo "disk_tier_dlrm: every row in memory" >&2
take in_memory
# "ps 0 327.1 of 380.0 MB, ps 1 ...": each server's rows, allocated.
allocated=$(sed -n 's/.*(ps 0 [0-9.]* of \([0-9.]*\) MB, ps 1 [0-9.]* of \([0-9.]*\) MB).*/\1 \2/p' \
  "$WORK/runs/in_memory/chief.log" | tail -1)
budget_mb=$(echo "$allocated" |
  awk -v m="$MULTIPLE" '{a = $1 > $2 ? $1 : $2; printf "%d", a / m}')
budget=$((budget_mb * 1000000))
echo "disk_tier_dlrm: budget $budget bytes per server" >&2
take tiered
echo "disk_tier_dlrm: round 1 of $ROUNDS: in-memory ${last[in_memory]}," \
  "tiered ${last[tiered]} examples/s" >&2

# Later rounds take turns the other way each time (tiered first in round
# 2), so a drift of the machine's speed over minutes falls on both runs
# alike; the table shows each run's mean rate and highest memory.
for ((round = 2; round <= ROUNDS; ++round)); do
  if ((round % 2 == 0)); then
    take tiered
    take in_memory
  else
    take in_memory
    take tiered
  fi
  echo "disk_tier_dlrm: round $round of $ROUNDS: in-memory" \
    "${last[in_memory]}, tiered ${last[tiered]} examples/s" >&2
done
mem_rate=$((rate[in_memory] / ROUNDS)) mem_hwm0=${hwm0[in_memory]}
mem_hwm1=${hwm1[in_memory]}
tier_rate=$((rate[tiered] / ROUNDS)) tier_hwm0=${hwm0[tiered]}
tier_hwm1=${hwm1[tiered]}

echo "disk_tier_dlrm: DLRM (deploy/jobs/dlrm.textproto, dim $DIM), $EXAMPLES" \
  "examples x 26 Zipf(1.05) fields of $VOCAB ids, 2 ps, 2 workers, async"
echo "rows allocated per server in memory (MB): $allocated; budget" \
  "$budget_mb MB per server (1/$MULTIPLE)"
printf '%-10s %12s %14s %14s %12s\n' run examples/s ps0_hwm_MB ps1_hwm_MB \
  hwm/budget
awk -v r="$mem_rate" -v a="$mem_hwm0" -v b="$mem_hwm1" 'BEGIN {
  printf "%-10s %12d %14.1f %14.1f %12s\n", "in-memory", r, a * 1.024e-3,
    b * 1.024e-3, "-" }'
awk -v r="$tier_rate" -v a="$tier_hwm0" -v b="$tier_hwm1" \
  -v m="$budget" -v mr="$mem_rate" 'BEGIN {
  worst = (a > b ? a : b) * 1024 / m
  printf "%-10s %12d %14.1f %14.1f %11.2fx\n", "tiered", r, a * 1.024e-3,
    b * 1.024e-3, worst
  printf "tiered / in-memory examples/s: %.3fx (target >= 0.5x); tiered " \
    "peak resident memory %.2fx the budget (target <= 1.15x)\n", r / mr, worst
}'
grep -h "disk tier\|spill" "$WORK/runs/tiered/ps-"*.log | tail -4 || true
