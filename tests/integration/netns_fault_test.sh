#!/usr/bin/env bash
# Network faults between hosts, for real (issue #18): the chief, 2
# parameter servers and 2 workers each in a Linux network namespace of
# their own, joined by veth pairs to a bridge in a "switch" namespace, on a
# private subnet that exists only inside those namespaces. Two runs of the
# same synchronous job (Fashion-MNIST MLP, EPOCHS epochs of TRAIN examples)
# go through that topology:
#   1. undisturbed: a clean network;
#   2. disturbed: every packet is delayed 1 ms with a uniform jitter of
#      +-250 us once on its way and 1% of them are dropped, and in the
#      middle of epoch 2 parameter server 1 is cut off from both workers for
#      PARTITION_S seconds (nftables drops every IPv4 packet between them in
#      the switch; the chief still reaches everything), then healed.
#      Delay and loss come from tc netem on every switch port where the
#      kernel has sch_netem. Where it has not (no module, as on kernels
#      built without it), each role namespace sends what leaves its eth0 to
#      an NFQUEUE queue (iptables mangle POSTROUTING) that a
#      tessera_packet_delay of its own (tests/tools/) holds 1 ms +- 250 us,
#      and nftables in the switch drops 1% of the frames it forwards. The
#      tools print how many packets they delayed and by how much on average.
# Checks: both jobs exit 0; every epoch of both trained each of the TRAIN
# examples exactly once (metrics.jsonl's count, and the step records of
# steps.jsonl summed per epoch); the partition began mid-epoch and really
# cut the workers off from ps 1 but not the chief; the disturbed run's final
# test accuracy is within TOLERANCE of the undisturbed one (synchronous
# training is reproducible: each step's examples and dropout follow from its
# step number); no namespace is left behind. No timing of the job is
# asserted; the emulation is: with the disturbance on, ping from w0 to ps0
# must average at least 1.8 ms (two one-way delays of 1 ms, less jitter),
# and where tessera_packet_delay delays, each of the 5 must have delayed
# packets by a mean in [900, 1100] us.
#
#   bash tests/integration/netns_fault_test.sh [build dir, default build]
#
# PARTITION_S=N tries another length by hand. A pull in flight when the
# partition begins loses its connection after 5 s ("ps 1 ... PullDense:
# recvmsg:Connection timed out": gRPC sets TCP_USER_TIMEOUT to the 5 s
# keepalive timeout of common/rpc/grpc_channel.cc); the worker still answers,
# so the coordinator runs that step again with backoff
# (--step_retry_timeout_s) and the job goes on ("N steps re-run"). Before
# that retry, a 10 s partition failed the job in 2 of 15 runs here and one
# of 12 s or more in every run; with it, 15 s passed with 3 steps re-run.
#
# Needs root and a kernel that lets it make network namespaces, and either
# sch_netem or NFQUEUE (iptables) with tessera_packet_delay built (it is
# where libnetfilter-queue-dev is installed; PACKET_DELAY=path names
# another); exits 77 (skipped) with the reason otherwise. Needs ip and tc
# (iproute2), nft (nftables), iptables and ping, which deploy/install.sh
# installs. KEEP_TEST_FILES=1 keeps the run folders (they are kept anyway
# when a check fails).
set -euo pipefail

BUILD_ARG=${1:-build}
DATA=/usr/share/datasets/fashion-mnist
EPOCHS=${EPOCHS:-3}
TRAIN=${TRAIN:-6000}
TEST=10000
BATCH=64
PARTITION_S=${PARTITION_S:-10}
TOLERANCE=0.005
JOB_TIMEOUT_S=${JOB_TIMEOUT_S:-300}
SKIP=77

say() { echo "netns_fault_test: $*"; }
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
[ "$(id -u)" -eq 0 ] || skip "needs root to make network namespaces, veth pairs and nftables rules (run as root, as CI does)"
[ -d "$DATA" ] || skip "$DATA is not installed (deploy/install.sh installs dataset-fashion-mnist)"
for tool in ip tc nft ping python3; do
  command -v "$tool" >/dev/null ||
    skip "$tool is not installed (deploy/install.sh installs iproute2, nftables and iputils-ping)"
done
[ -d "$BUILD_ARG" ] || {
  say "build folder $BUILD_ARG not found"
  exit 1
}
BUILD=$(cd "$BUILD_ARG" && pwd)
COORDINATOR=$BUILD/coordinator/tessera_coordinator
PS=$BUILD/ps_server/tessera_ps
WORKER=$BUILD/worker/tessera_worker
for bin in "$COORDINATOR" "$PS" "$WORKER"; do
  [ -x "$bin" ] || {
    say "$bin not built"
    exit 1
  }
done
# Only where the kernel has no netem.
PACKET_DELAY=${PACKET_DELAY:-$BUILD/tests/tessera_packet_delay}
DELAY_US=1000
JITTER_US=250

# Names carry this shell's pid, so runs side by side never meet; the
# addresses live only inside this run's namespaces, so they may repeat.
P="tsn$$"
SW="$P-sw"
ROLES=(chief ps0 ps1 w0 w1)
declare -A ADDR=([chief]=10.213.0.10 [ps0]=10.213.0.20 [ps1]=10.213.0.21
  [w0]=10.213.0.30 [w1]=10.213.0.31)
PORT=2222
declare -A PROBE=()
CLUSTER=(--chief_host="${ADDR[chief]}:$PORT"
  --ps_hosts="${ADDR[ps0]}:$PORT,${ADDR[ps1]}:$PORT"
  --worker_hosts="${ADDR[w0]}:$PORT,${ADDR[w1]}:$PORT"
  --listen_host=cluster)

probe_err=$(ip netns add "$P-probe" 2>&1) ||
  skip "cannot make a network namespace here: ip netns add: $probe_err"
ip netns del "$P-probe"

WORK=$(mktemp -d /tmp/tessera-netns-test.XXXXXX)
MADE=()  # namespaces this run made

# Ends every process still inside this run's namespaces (only this test's
# own processes live there) and removes the namespaces.
teardown() {
  local ns pid
  for ns in "${MADE[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      kill -9 "$pid" 2>/dev/null || true
    done
  done
  for ns in "${MADE[@]}"; do
    ip netns del "$ns" 2>/dev/null || true
  done
  MADE=()
}
on_exit() {
  local rc=$?
  teardown
  if { [ "$rc" -ne 0 ] && [ "$rc" -ne "$SKIP" ]; } || [ "${KEEP_TEST_FILES:-0}" = 1 ]; then
    say "run folders kept in $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 1' INT TERM

# ---- Topology ---------------------------------------------------------------
# nft in the switch namespace (never the host's own tables).
sw_nft() { ip netns exec "$SW" nft "$@"; }

# switch namespace: bridge br0 with one port per role (the port is named
# after the role); role namespace: eth0 with the role's address, and lo.
make_topology() {
  ip netns add "$SW"
  MADE+=("$SW")
  ip -n "$SW" link add br0 type bridge
  ip -n "$SW" link set br0 up
  local role
  for role in "${ROLES[@]}"; do
    ip netns add "$P-$role"
    MADE+=("$P-$role")
    ip -n "$SW" link add "$role" type veth peer name eth0 netns "$P-$role"
    ip -n "$SW" link set "$role" master br0 up
    ip -n "$P-$role" addr add "${ADDR[$role]}/24" dev eth0
    ip -n "$P-$role" link set eth0 up
    ip -n "$P-$role" link set lo up
  done
  # The switch's filter: a chain for the partition, then the loss (when
  # nftables makes it), each rule counting what it drops.
  sw_nft -f - <<EOF
    table bridge tessera {
      chain partition {
      }
      chain loss {
      }
      chain forward {
        type filter hook forward priority 0; policy accept;
        counter jump partition
        jump loss
      }
    }
EOF
}

# Whether `from` can open a TCP connection to `to`'s port (3 s at most).
reaches() { # reaches <from role> <to role>
  ip netns exec "$P-$1" timeout 3 bash -c "exec 3<>/dev/tcp/${ADDR[$2]}/$PORT" \
    2>/dev/null
}

# How run 2 delays and drops packets, decided before run 1 so that a
# machine that can do neither skips at once: "netem" (tc netem on every
# switch port) or "nfqueue" (tessera_packet_delay in every role namespace,
# loss by nftables in the switch). Sets EMULATION_KIND, and IPTABLES and
# NETEM_MISSING for the second.
EMULATION_KIND=""
IPTABLES=""
NETEM_MISSING=""
choose_emulation() {
  local err
  if err=$(tc -n "$SW" qdisc add dev chief root netem delay 1ms 2>&1); then
    tc -n "$SW" qdisc del dev chief root
    EMULATION_KIND=netem
    return
  fi
  NETEM_MISSING=${err//$'\n'/ }
  [ -x "$PACKET_DELAY" ] ||
    skip "the kernel has no netem (tc: $NETEM_MISSING) and $PACKET_DELAY is not built (it is where libnetfilter-queue-dev is installed: deploy/install.sh)"
  local ipt probe="$P-chief"
  for ipt in iptables iptables-legacy; do
    command -v "$ipt" >/dev/null || continue
    if ip netns exec "$probe" "$ipt" -t mangle -A POSTROUTING -o eth0 \
      -j NFQUEUE --queue-num 0 2>/dev/null; then
      ip netns exec "$probe" "$ipt" -t mangle -D POSTROUTING -o eth0 \
        -j NFQUEUE --queue-num 0
      IPTABLES=$ipt
      break
    fi
  done
  [ -n "$IPTABLES" ] ||
    skip "the kernel has no netem (tc: $NETEM_MISSING) and iptables cannot add an NFQUEUE rule here (deploy/install.sh installs iptables; the kernel needs the NFQUEUE target)"
  # The tool binds the queue once here, so a kernel without nfnetlink_queue
  # skips now rather than failing in run 2.
  if ! err=$(ip netns exec "$probe" timeout 0.5 "$PACKET_DELAY" --queue_num=0 2>&1) &&
    ! grep -q " bound:" <<<"$err"; then
    skip "the kernel has no netem (tc: $NETEM_MISSING) and $PACKET_DELAY cannot bind a queue: ${err//$'\n'/ }"
  fi
  EMULATION_KIND=nfqueue
}

# Starts tessera_packet_delay in role namespace `role` on queue 0 and, once
# it has bound the queue, sends every packet leaving eth0 there: without a
# process on the queue the kernel would drop them (the rule has no
# --queue-bypass), so the tool comes first.
declare -A DELAY_PID=()
start_packet_delay() { # start_packet_delay <role>
  local role=$1 log=$WORK/delay-$1.log waited=0
  ip netns exec "$P-$role" "$PACKET_DELAY" --queue_num=0 \
    --delay_us="$DELAY_US" --jitter_us="$JITTER_US" >"$log" 2>&1 &
  DELAY_PID[$role]=$!
  until grep -q " bound:" "$log"; do
    if ! kill -0 "${DELAY_PID[$role]}" 2>/dev/null || [ "$waited" -ge 100 ]; then
      say "tessera_packet_delay in $role did not bind its queue: $(tr '\n' ' ' <"$log")"
      exit 1
    fi
    sleep 0.05
    waited=$((waited + 1))
  done
  ip netns exec "$P-$role" "$IPTABLES" -t mangle -A POSTROUTING -o eth0 \
    -j NFQUEUE --queue-num 0
}

# Stops every tessera_packet_delay (SIGTERM: each lets its held packets go
# and prints what it did), reports them and checks that each delayed
# packets by the mean asked for.
stop_packet_delays() {
  local role line n mean
  for role in "${ROLES[@]}"; do
    [ -n "${DELAY_PID[$role]:-}" ] || continue
    ip netns exec "$P-$role" "$IPTABLES" -t mangle -F POSTROUTING
    kill -TERM "${DELAY_PID[$role]}" 2>/dev/null || true
    wait "${DELAY_PID[$role]}" 2>/dev/null || true
    line=$(grep -m1 "delayed" "$WORK/delay-$role.log" || true)
    n=$(sed -n 's/.*delayed \([0-9]*\) packets.*/\1/p' <<<"$line")
    mean=$(sed -n 's/.*mean \([0-9.]*\) us.*/\1/p' <<<"$line")
    say "delay: $role: ${line#*: queue 0: }"
    check "delay: tessera_packet_delay in $role delayed packets, by a mean in [900, 1100] us" \
      awk -v n="${n:-0}" -v m="${mean:-0}" 'BEGIN {exit !(n > 0 && m >= 900 && m <= 1100)}'
  done
  DELAY_PID=()
}

# Average ping RTT from `from` to `to`, ms ("" when no reply came back).
ping_rtt() { # ping_rtt <from role> <to role>
  ip netns exec "$P-$1" ping -q -c 20 -i 0.05 "${ADDR[$2]}" 2>/dev/null |
    sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p' || true
}

# 1 ms delay with jitter on every packet once, and 1% loss.
EMULATION=""
disturb_links() {
  local role
  FORWARDED_BEFORE=$(counter_of forward "jump partition")
  if [ "$EMULATION_KIND" = netem ]; then
    for role in "${ROLES[@]}"; do
      tc -n "$SW" qdisc add dev "$role" root netem delay 1ms 250us loss 1%
    done
    EMULATION="tc netem on every switch port: delay 1 ms, jitter 250 us (uniform), 1% loss"
  else
    for role in "${ROLES[@]}"; do start_packet_delay "$role"; done
    sw_nft add rule bridge tessera loss numgen random mod 100 '<' 1 counter drop
    EMULATION="netem missing in this kernel (tc: $NETEM_MISSING): delay $DELAY_US us, jitter +-$JITTER_US us (uniform) by tessera_packet_delay on the way out of every role namespace ($IPTABLES -t mangle -A POSTROUTING -o eth0 -j NFQUEUE); 1% loss by nftables in the switch (numgen random mod 100 < 1 drop on every frame it forwards)"
  fi
  say "emulation: $EMULATION"
  DISTURBED_RTT=$(ping_rtt w0 ps0)
  say "ping w0 -> ps0 (${ADDR[ps0]}), 20 packets: rtt avg ${DISTURBED_RTT:-none} ms with the disturbance (undisturbed ${UNDISTURBED_RTT:-none} ms)"
  check "ping w0 -> ps0 averages at least 1.8 ms (two one-way delays of 1 ms)" \
    awk -v r="${DISTURBED_RTT:-0}" 'BEGIN {exit !(r >= 1.8)}'
}

partition() { # partition <role> <roles it is cut off from...>
  local from=$1
  shift
  local others=() role
  for role in "$@"; do others+=("${ADDR[$role]}"); done
  local set
  set=$(IFS=,; echo "${others[*]}")
  sw_nft add rule bridge tessera partition ip saddr "${ADDR[$from]}" ip daddr "{ $set }" counter drop
  sw_nft add rule bridge tessera partition ip saddr "{ $set }" ip daddr "${ADDR[$from]}" counter drop
}

heal() { sw_nft flush chain bridge tessera partition; }

# The packet count of the first rule of `chain` that holds `pattern` and a
# counter.
counter_of() { # counter_of <chain> <pattern>
  sw_nft list chain bridge tessera "$1" | grep -- "$2" | grep -m1 packets |
    sed -n 's/.*packets \([0-9]*\) bytes.*/\1/p'
}

# ---- One job ----------------------------------------------------------------
# Starts ps, workers and the chief in their namespaces; with
# `with_partition` 1 cuts ps 1 off from the workers mid-epoch 2. Leaves the
# chief's exit code in RUN_EXIT.
lines_of() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

run_job() { # run_job <name> <with_partition>
  local name=$1 with_partition=$2
  local run=$WORK/$name
  mkdir -p "$run"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$run/job.token"
  chmod 600 "$run/job.token"
  local common=("${CLUSTER[@]}" --job_token_file="$run/job.token")
  local pids=() i fp=()
  if [ "$with_partition" = 1 ]; then
    # Each worker stops itself (SIGSTOP) at a fault point in its step 20
    # of epoch 2 (common/process/fault_point.h); the partition begins while
    # they are stopped, and they go on inside it: mid-epoch 2 whatever the
    # machine's load, where a count of steps.jsonl lines (written in
    # blocks) could land anywhere.
    mkdir -p "$run/faults"
    local per_worker=$(((TRAIN + BATCH - 1) / BATCH))
    echo "stop $((per_worker + 19))" >"$run/faults/worker-0.step"
    echo "stop $((per_worker + 19))" >"$run/faults/worker-1.step"
    fp=(env "TESSERA_FAULT_POINTS=$run/faults")
  fi
  for i in 0 1; do
    ip netns exec "$P-ps$i" "$PS" "${common[@]}" --task_type=ps \
      --task_index="$i" >"$run/ps-$i.log" 2>&1 &
    pids+=($!)
    ip netns exec "$P-w$i" "${fp[@]}" "$WORKER" "${common[@]}" --task_type=worker \
      --task_index="$i" --device=cpu >"$run/worker-$i.log" 2>&1 &
    pids+=($!)
  done
  ip netns exec "$P-chief" timeout "$JOB_TIMEOUT_S" "$COORDINATOR" \
    "${common[@]}" --task_type=chief --task_index=0 --mode=sync \
    --epochs="$EPOCHS" --batch_size="$BATCH" --train_examples="$TRAIN" \
    --test_examples="$TEST" --run_dir="$run" \
    --checkpoint_dir="$run/checkpoints" >"$run/chief.out" 2>&1 &
  local chief=$!

  if [ "$with_partition" = 1 ]; then
    # Mid-epoch 2: both workers stopped at their fault point, epoch 1
    # reported, epoch 2 not.
    local waited=0
    until [ -e "$run/faults/worker-0.step.hit" ] &&
      [ -e "$run/faults/worker-1.step.hit" ] &&
      [ "$(lines_of "$run/metrics.jsonl")" -ge 1 ]; do
      kill -0 "$chief" 2>/dev/null || break
      sleep 0.02
      waited=$((waited + 1))
      [ "$waited" -lt $((JOB_TIMEOUT_S * 50)) ] || break
    done
    partition ps1 w0 w1
    # The workers go on, into the partition (the .hit files name them).
    # shellcheck disable=SC2046  # two pids
    kill -CONT $(sed -n 's/^hit by pid \([0-9]*\)$/\1/p' \
      "$run/faults/worker-0.step.hit" "$run/faults/worker-1.step.hit") \
      2>/dev/null || true
    local cut_at
    cut_at=$(date +%s.%N)
    PART_EPOCHS_DONE=$(lines_of "$run/metrics.jsonl")
    PART_STEP_LINES=$(lines_of "$run/steps.jsonl")
    say "partition: ps1 (${ADDR[ps1]}) cut off from w0 and w1 at" \
      "$(date +%T.%N | cut -c1-12): $PART_EPOCHS_DONE epoch(s) reported," \
      "$PART_STEP_LINES step records written"
    # Probes, side by side, while the partition holds.
    local probe
    for probe in w0:ps1 w1:ps1 chief:ps1 w0:ps0; do
      (if reaches "${probe%:*}" "${probe#*:}"; then echo open; else echo blocked; fi \
        >"$run/probe-${probe/:/-}") &
    done
    wait_for_probes=(w0-ps1 w1-ps1 chief-ps1 w0-ps0)
    sleep "$(awk -v a="$cut_at" -v b="$(date +%s.%N)" -v s="$PARTITION_S" \
      'BEGIN {r = s - (b - a); print (r > 0 ? r : 0)}')"
    PART_DROPPED=$(sw_nft list chain bridge tessera partition |
      sed -n 's/.*packets \([0-9]*\) bytes.*/\1/p' | awk '{n += $1} END {print n + 0}')
    heal
    PART_CHIEF_ALIVE=0
    kill -0 "$chief" 2>/dev/null && PART_CHIEF_ALIVE=1
    say "partition: healed $(awk -v a="$cut_at" -v b="$(date +%s.%N)" \
      'BEGIN {printf "%.1f", b - a}') s after it began:" \
      "$(lines_of "$run/metrics.jsonl") epoch(s) reported," \
      "$(lines_of "$run/steps.jsonl") step records written;" \
      "the switch dropped $PART_DROPPED packets between ps1 and the workers"
    for probe in "${wait_for_probes[@]}"; do
      PROBE[$probe]=$(cat "$run/probe-$probe" 2>/dev/null || echo "no answer")
    done
    say "partition: while it held, w0->ps1 ${PROBE[w0-ps1]}," \
      "w1->ps1 ${PROBE[w1-ps1]}, chief->ps1 ${PROBE[chief-ps1]}," \
      "w0->ps0 ${PROBE[w0-ps0]}"
  fi

  RUN_EXIT=0
  RUN_LEFTOVER=0
  wait "$chief" || RUN_EXIT=$?
  # The chief tells the others to exit; give them 30 s.
  local pid deadline=$((SECONDS + 30))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "  a process of $name (pid $pid) did not exit; killing it"
      kill -9 "$pid" 2>/dev/null || true
      RUN_LEFTOVER=1
    fi
    wait "$pid" 2>/dev/null || true
  done
}

# Per epoch of a run, one line each: epoch, examples (metrics.jsonl),
# examples in its step records (steps.jsonl), test accuracy, late shards,
# examples/s.
epoch_table() { # epoch_table <run dir>
  python3 - "$1" <<'EOF'
import json, sys, collections
run = sys.argv[1]
step_examples = collections.Counter()
with open(run + "/steps.jsonl") as f:
    for line in f:
        s = json.loads(line)
        step_examples[s["epoch"]] += s["examples"]
with open(run + "/metrics.jsonl") as f:
    for line in f:
        m = json.loads(line)
        print(m["epoch"], m["examples"], step_examples[m["epoch"]],
              "%.4f" % m["test_accuracy"], m.get("late_shards", 0),
              "%.0f" % m["examples_per_second"])
EOF
}

report_and_check_run() { # report_and_check_run <name>
  local name=$1 run=$WORK/$1
  local table
  table=$(epoch_table "$run" 2>&1 || true)
  say "$name: chief exit $RUN_EXIT; $(grep -m1 '^final' "$run/chief.out" || echo 'no final line')"
  local epoch examples from_steps accuracy late rate epochs=0 exact=1
  while read -r epoch examples from_steps accuracy late rate; do
    [[ "$epoch" =~ ^[0-9]+$ ]] || continue
    say "  $name epoch $epoch: $examples examples (metrics.jsonl)," \
      "$from_steps in its step records, test accuracy $accuracy," \
      "$late late shards, $rate examples/s"
    epochs=$((epochs + 1))
    [ "$epoch" -eq "$epochs" ] && [ "$examples" -eq "$TRAIN" ] &&
      [ "$from_steps" -eq "$TRAIN" ] || exact=0
  done <<<"$table"
  check "$name: the job exits 0" [ "$RUN_EXIT" -eq 0 ]
  check "$name: every parameter server and worker exits when the job ends" \
    [ "$RUN_LEFTOVER" -eq 0 ]
  check "$name: $EPOCHS epochs reported" [ "$epochs" -eq "$EPOCHS" ]
  check "$name: every epoch trained each of the $TRAIN examples exactly once" \
    [ "$exact" -eq 1 ]
  if [ "$RUN_EXIT" -ne 0 ] || [ "$epochs" -ne "$EPOCHS" ]; then
    say "--- $name chief.out (last 30 lines) ---"
    tail -30 "$run/chief.out" || true
  fi
  FINAL_ACCURACY=$(python3 -c "
import json
lines = open('$run/metrics.jsonl').read().split()
print(json.loads(lines[-1])['test_accuracy'] if lines else -1)" 2>/dev/null || echo -1)
}

# ---- The test -----------------------------------------------------------------
START=$SECONDS
make_topology
choose_emulation
UNDISTURBED_RTT=$(ping_rtt w0 ps0)
say "topology: namespaces $SW (bridge br0) and $P-{${ROLES[*]// /,}}, one" \
  "veth pair each (eth0 <-> switch port); chief ${ADDR[chief]}, ps0" \
  "${ADDR[ps0]}, ps1 ${ADDR[ps1]}, w0 ${ADDR[w0]}, w1 ${ADDR[w1]} (/24), port $PORT"
say "job: sync, $EPOCHS epochs of $TRAIN Fashion-MNIST examples, batch $BATCH," \
  "$TEST test examples, 2 ps, 2 workers (CPU)"

say "run 1: undisturbed"
run_job undisturbed 0
report_and_check_run undisturbed
BASELINE=$FINAL_ACCURACY

say "run 2: disturbed links and a ${PARTITION_S} s partition of ps1 from the workers"
disturb_links
run_job disturbed 1
report_and_check_run disturbed
DISTURBED=$FINAL_ACCURACY
stop_packet_delays

check "the partition began mid-epoch 2 (epoch 1 reported, epoch 2 not)" \
  [ "$PART_EPOCHS_DONE" -eq 1 ]
check "the job was still running when the partition healed" \
  [ "$PART_CHIEF_ALIVE" -eq 1 ]
check "during the partition the workers could not reach ps1" \
  [ "${PROBE[w0-ps1]}/${PROBE[w1-ps1]}" = blocked/blocked ]
check "during the partition the chief reached ps1 and w0 reached ps0" \
  [ "${PROBE[chief-ps1]}/${PROBE[w0-ps0]}" = open/open ]
LOSS_DROPPED=$(counter_of loss drop)
if [ -n "$LOSS_DROPPED" ]; then
  FORWARDED=$(($(counter_of forward "jump partition") - FORWARDED_BEFORE))
  say "loss: nftables dropped $LOSS_DROPPED of the $FORWARDED frames the switch" \
    "forwarded during run 2 ($(awk "BEGIN {printf \"%.2f\", 100 * $LOSS_DROPPED / ($FORWARDED + 0.001)}")%)"
else
  for role in "${ROLES[@]}"; do
    say "loss: netem on port $role: $(tc -s -n "$SW" qdisc show dev "$role" | grep -o 'Sent.*dropped [0-9]*')"
  done
fi
say "accuracy: undisturbed $BASELINE, disturbed $DISTURBED (tolerance $TOLERANCE)"
check "the disturbed run's accuracy is within $TOLERANCE of the undisturbed run's" \
  python3 -c "import sys; sys.exit(0 if abs($DISTURBED - $BASELINE) <= $TOLERANCE and $BASELINE > 0 else 1)"

teardown
LEFT=$(ip netns list | grep -c "^$P-" || true)
check "no namespace of this run is left behind" [ "$LEFT" -eq 0 ]
say "wall time $((SECONDS - START)) s"

if [ "$FAILURES" -ne 0 ]; then
  say "$FAILURES check(s) failed"
  exit 1
fi
say "all checks passed"
