#!/usr/bin/env bash
# The chaos test's long schedule (issues #31, #48): jobs of
# tests/integration/chaos_run.sh over every training mode in turn (async,
# ssp:2, sync, hybrid, hybrid:sync and hybrid:ssp:2 with growing embedding
# tables; mirrored on IDX files; sync and async on IDX and sync on streamed
# TFRecord files), each with a seeded schedule of EVENTS_PER_RUN events
# (kill -9 of any role at any moment, after the chief's summary too,
# SIGSTOP/SIGCONT, and joins and drains in every mode: in mirrored and
# hybrid the all-reduce ring re-forms, TESSERA_CHAOS_RING_JOINS=0 there
# leaves them out),
# until EVENTS events have landed; then bench/results/chaos_soak.md: a
# table per mode (events by kind, jobs, outcomes), the events by role and
# moment, and one line per failed job with its seed, for replaying it with
#   bash tests/integration/chaos_run.sh build /tmp/replay SCENARIO N SEED
#
#   bash bench/chaos_soak.sh EVENTS SEED [OUT]
#
# OUT: the report (default bench/results/chaos_soak.md); the runs are kept
# in $TESSERA_CHAOS_WORK (default /tmp/tessera_chaos_soak.SEED), the
# binaries come from $TESSERA_BUILD_DIR (default build). Prints one line
# per job as it ends (the events so far, the minutes).
# TESSERA_CHAOS_SCENARIOS overrides the list of scenarios.
set -uo pipefail
cd "$(dirname "$0")/.."
EVENTS=${1:?usage: chaos_soak.sh EVENTS SEED [OUT]}
SEED=${2:?usage: chaos_soak.sh EVENTS SEED [OUT]}
OUT=${3:-bench/results/chaos_soak.md}
BUILD=$(cd "${TESSERA_BUILD_DIR:-build}" && pwd)
PER_RUN=${EVENTS_PER_RUN:-10}
# Jobs long enough for their events (each recovery adds seconds).
export TESSERA_CHAOS_EPOCHS=${TESSERA_CHAOS_EPOCHS:-8}
WORK=${TESSERA_CHAOS_WORK:-${TMPDIR:-/tmp}/tessera_chaos_soak.$SEED}
mkdir -p "$WORK"
: > "$WORK/kills.tsv"
: > "$WORK/runs.tsv"
DEFAULT="async_table ssp2_table sync_table hybrid_table hybridsync_table"
DEFAULT+=" hybridssp2_table mirrored_idx sync_idx async_idx sync_tfrecord"
read -r -a SCENARIOS <<< "${TESSERA_CHAOS_SCENARIOS:-$DEFAULT}"

total=0
run=0
start=$(date +%s)
while [ "$total" -lt "$EVENTS" ]; do
  scenario=${SCENARIOS[run % ${#SCENARIOS[@]}]}
  seed=$((SEED + run))
  line=$(bash tests/integration/chaos_run.sh "$BUILD" "$WORK" "$scenario" \
    "$PER_RUN" "$seed" 2>&1 | tee "$WORK/$scenario-$seed.out" |
    grep '^chaos [a-z0-9_]* seed=')
  if [ -f "$WORK/$scenario-$seed/kills.tsv" ]; then
    cat "$WORK/$scenario-$seed/kills.tsv" >> "$WORK/kills.tsv"
    n=$(wc -l < "$WORK/$scenario-$seed/kills.tsv")
  else
    n=0
  fi
  outcome=$(sed -n 's/.*outcome=\([a-z_]*\).*/\1/p' <<< "$line")
  bitwise=$(sed -n 's/.*bit for bit: \([a-z]*\)).*/\1/p' <<< "$line")
  grep -q "bit for bit$" <<< "$line" && bitwise=required
  missed=$(sed -n 's/^chaos: only \([0-9]*\) of \([0-9]*\) events.*/\1 \2/p' \
    "$WORK/$scenario-$seed.out" | awk '{ print $2 - $1 }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$scenario" "$seed" "$n" \
    "${outcome:-no_result}" "${bitwise:--}" "${missed:-0}" >> "$WORK/runs.tsv"
  total=$((total + n))
  run=$((run + 1))
  echo "soak: job $run $scenario seed $seed: $n events, ${outcome:-no_result};" \
    "$total of $EVENTS events, $((($(date +%s) - start) / 60)) min"
done
minutes=$((($(date +%s) - start + 59) / 60))

python3 - "$WORK/kills.tsv" "$WORK/runs.tsv" "$SEED" "$minutes" "$PER_RUN" \
  "$TESSERA_CHAOS_EPOCHS" > "$OUT" <<'PY'
import collections
import sys

kills_path, runs_path, seed, minutes, per_run, epochs = sys.argv[1:7]
kills = [l.rstrip("\n").split("\t") for l in open(kills_path) if l.strip()]
runs = [l.rstrip("\n").split("\t") for l in open(runs_path) if l.strip()]
MODES = {"async": "async", "ssp2": "ssp:2", "sync": "sync",
         "hybrid": "hybrid", "hybridsync": "hybrid:sync",
         "hybridssp2": "hybrid:ssp:2", "mirrored": "mirrored"}
ORDER = list(MODES.values())


def mode_of(scenario):
    return MODES[scenario.split("_")[0]]


def kind_of(kill):
    signal, moment = kill[4], kill[3]
    if signal == "STOP":
        return "SIGSTOP"
    if signal in ("JOIN", "DRAIN"):
        return signal.lower()
    return "kill after summary" if moment == "after_summary" else "kill -9"


KINDS = ["kill -9", "kill after summary", "SIGSTOP", "join", "drain"]
outcomes = sorted({r[3] for r in runs} | {"ok"})
print(f"# Chaos soak: {len(kills)} events in {len(runs)} jobs "
      f"(seed {seed}, {minutes} min)\n")
print(f"`bash bench/chaos_soak.sh EVENTS {seed}`: jobs of "
      f"`tests/integration/chaos_run.sh` ({epochs} epochs, {per_run} "
      "scheduled events each) in every mode in turn. A sync or hybrid:sync "
      "job is `ok` only if every epoch equals its undisturbed run's bit for "
      "bit (a hybrid:sync job whose ring re-formed for a join or a drain is "
      "checked as the other modes: its rounds then average another number "
      "of parts); every job only if it completed and every epoch trained the "
      "undisturbed run's examples (by their digest), and the final "
      "accuracy (AUC) is within 0.05 of the undisturbed run's.\n")
print("## Per mode\n")
print("| mode | jobs | " + " | ".join(KINDS) + " | events | "
      + " | ".join(outcomes) + " | epochs exactly once | bit for bit "
      "| events missed |")
print("|---|---:|" + "---:|" * (len(KINDS) + 1 + len(outcomes))
      + "---:|---|---:|")
# The outcomes whose every epoch trained the undisturbed run's examples
# once (chaos_check.py checks that first).
ONCE = ("ok", "epoch_differs", "accuracy_off")
for mode in ORDER:
    rs = [r for r in runs if mode_of(r[0]) == mode]
    if not rs:
        continue
    ks = [k for k in kills if mode_of(k[0]) == mode]
    by_kind = collections.Counter(kind_of(k) for k in ks)
    cells = [str(by_kind[k]) for k in KINDS]
    outs = [str(sum(1 for r in rs if r[3] == o)) for o in outcomes]
    bits = collections.Counter(r[4] for r in rs)
    once = sum(int(epochs) for r in rs if r[3] in ONCE)
    if mode in ("sync", "hybrid:sync"):
        # A hybrid:sync job whose ring re-formed (a join or a drain) has
        # rounds of another number of parts: not required, shown apart.
        changed = bits["yes"] + bits["no"]
        bit = f"required: {bits['required']} of {len(rs) - changed} jobs"
        if changed:
            bit += f"; ring changed: {bits['yes']} of {changed} jobs"
    else:
        bit = f"{bits['yes']} of {len(rs)} jobs"
    missed = sum(int(r[5]) for r in rs)
    print(f"| {mode} | {len(rs)} | " + " | ".join(cells) + f" | {len(ks)} | "
          + " | ".join(outs) + f" | {once} of {len(rs) * int(epochs)} | "
          f"{bit} | {missed} |")
print("\n## By scenario\n")
print("| scenario | jobs | events | " + " | ".join(outcomes) + " |")
print("|---|---:|---:|" + "---:|" * len(outcomes))
for scenario in sorted({r[0] for r in runs}):
    rs = [r for r in runs if r[0] == scenario]
    cells = [str(sum(1 for r in rs if r[3] == o)) for o in outcomes]
    print(f"| {scenario} | {len(rs)} | {sum(int(r[2]) for r in rs)} | "
          + " | ".join(cells) + " |")
print("\n## Events by role and moment\n")
table = collections.Counter()
for scenario, _, role, moment, signal, outcome in kills:
    table[(role.split("-")[0], moment, signal, outcome)] += 1
print("| role | moment | signal | " + " | ".join(outcomes) + " |")
print("|---|---|---|" + "---:|" * len(outcomes))
for key in sorted({k[:3] for k in table}):
    cells = [str(table[key + (o,)]) for o in outcomes]
    print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
failed = [r for r in runs if r[3] != "ok"]
if failed:
    print(f"\nFailed jobs (replay: `TESSERA_CHAOS_EPOCHS={epochs} bash "
          "tests/integration/chaos_run.sh build "
          f"/tmp/replay SCENARIO {per_run} SEED`):\n")
    for r in failed:
        print(f"- {r[0]} seed {r[1]}: {r[3]} ({r[2]} events)")
PY
cat "$OUT"
