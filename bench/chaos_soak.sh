#!/usr/bin/env bash
# The chaos test's long schedule (issue #31): jobs of tests/integration/
# chaos_run.sh, synchronous and asynchronous in turn (IDX files, streamed
# TFRecord files, growing embedding tables, async and sync), each with a seeded schedule of
# KILLS_PER_RUN kills, until KILLS kills in all; then a markdown table of
# the kills by role and moment against the outcome of their job, and one
# line per job with its seed, for replaying a failure with
#   bash tests/integration/chaos_run.sh build /tmp/replay SCENARIO K SEED
#
#   bash bench/chaos_soak.sh KILLS SEED [OUT]
#
# OUT: the report (default bench/results/chaos_soak.md); the runs are kept
# in $TESSERA_CHAOS_WORK (default /tmp/tessera_chaos_soak.SEED), the
# binaries come from $TESSERA_BUILD_DIR (default build).
# TESSERA_CHAOS_SYNC_TABLES=0 leaves synchronous jobs with tables out.
set -uo pipefail
cd "$(dirname "$0")/.."
KILLS=${1:?usage: chaos_soak.sh KILLS SEED [OUT]}
SEED=${2:?usage: chaos_soak.sh KILLS SEED [OUT]}
OUT=${3:-bench/results/chaos_soak.md}
BUILD=$(cd "${TESSERA_BUILD_DIR:-build}" && pwd)
PER_RUN=${KILLS_PER_RUN:-8}
# Jobs long enough for their kills (each recovery adds seconds).
export TESSERA_CHAOS_EPOCHS=${TESSERA_CHAOS_EPOCHS:-8}
WORK=${TESSERA_CHAOS_WORK:-${TMPDIR:-/tmp}/tessera_chaos_soak.$SEED}
mkdir -p "$WORK"
: > "$WORK/kills.tsv"
: > "$WORK/runs.tsv"
SCENARIOS=(sync_idx async_idx ssp2_idx sync_tfrecord async_table hybrid_table
  hybridsync_table hybridssp2_table)
[ "${TESSERA_CHAOS_SYNC_TABLES:-1}" = 1 ] && SCENARIOS+=(sync_table)

total=0
run=0
start=$(date +%s)
while [ "$total" -lt "$KILLS" ]; do
  scenario=${SCENARIOS[run % ${#SCENARIOS[@]}]}
  seed=$((SEED + run))
  line=$(bash tests/integration/chaos_run.sh "$BUILD" "$WORK" "$scenario" \
    "$PER_RUN" "$seed" 2>&1 | tee "$WORK/$scenario-$seed.out" |
    grep '^chaos [a-z_]* seed=')
  echo "$line"
  if [ -f "$WORK/$scenario-$seed/kills.tsv" ]; then
    cat "$WORK/$scenario-$seed/kills.tsv" >> "$WORK/kills.tsv"
    n=$(wc -l < "$WORK/$scenario-$seed/kills.tsv")
  else
    n=0
  fi
  outcome=$(sed -n 's/.*outcome=\([a-z_]*\).*/\1/p' <<< "$line")
  printf '%s\t%s\t%s\t%s\n' "$scenario" "$seed" "$n" "${outcome:-no_result}" \
    >> "$WORK/runs.tsv"
  total=$((total + n))
  run=$((run + 1))
done
minutes=$((($(date +%s) - start + 59) / 60))

python3 - "$WORK/kills.tsv" "$WORK/runs.tsv" "$SEED" "$minutes" > "$OUT" <<'PY'
import collections
import sys

kills_path, runs_path, seed, minutes = sys.argv[1:5]
kills = [l.rstrip("\n").split("\t") for l in open(kills_path) if l.strip()]
runs = [l.rstrip("\n").split("\t") for l in open(runs_path) if l.strip()]
outcomes = sorted({k[5] for k in kills} | {"ok"})
table = collections.Counter()
for scenario, _, role, moment, signal, outcome in kills:
    kind = "SIGSTOP" if signal == "STOP" else "kill -9"
    table[(role.split("-")[0], moment, kind, outcome)] += 1
print(f"# Chaos soak: {len(kills)} kills in {len(runs)} jobs "
      f"(seed {seed}, {minutes} min)\n")
print("Kills by role and moment against the outcome of their job "
      "(`bench/chaos_soak.sh`; a job's outcome is that of all its "
      "kills).\n")
print("| role | moment | signal | " + " | ".join(outcomes) + " |")
print("|---|---|---|" + "---|" * len(outcomes))
keys = sorted({k[:3] for k in table})
for key in keys:
    cells = [str(table[key + (o,)]) for o in outcomes]
    print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
print("\nJobs by scenario and outcome:\n")
print("| scenario | jobs | kills | " + " | ".join(outcomes) + " |")
print("|---|---|---|" + "---|" * len(outcomes))
for scenario in sorted({r[0] for r in runs}):
    rs = [r for r in runs if r[0] == scenario]
    cells = [str(sum(1 for r in rs if r[3] == o)) for o in outcomes]
    print(f"| {scenario} | {len(rs)} | {sum(int(r[2]) for r in rs)} | "
          + " | ".join(cells) + " |")
failed = [r for r in runs if r[3] != "ok"]
if failed:
    print("\nFailed jobs (replay: `bash tests/integration/chaos_run.sh build "
          "/tmp/replay SCENARIO KILLS_PER_RUN SEED`):\n")
    for r in failed:
        print(f"- {r[0]} seed {r[1]}: {r[3]} ({r[2]} kills)")
PY
cat "$OUT"
