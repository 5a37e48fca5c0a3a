#!/usr/bin/env bash
# bench/transport across a delayed link (issue #18): bench_transport's
# server half (--serve) in one network namespace, its client half
# (--connect) in another, joined by a veth pair whose addresses exist only
# inside them, and every packet delayed 1 ms with a uniform jitter of
# +-250 us on its way out of either namespace (so a round trip is 2 ms
# plus): tc netem on each eth0 where the kernel has sch_netem, otherwise a
# tessera_packet_delay (tests/tools/) in each namespace behind an iptables
# NFQUEUE rule. Every column of the table, raw TCP included, crosses that
# link, so tcp-plane / tcp still compares like with like. No loss.
#
#   bash bench/transport_netns.sh [build dir, default build] [bench_transport flags...]
#
# The flags go to both ends after the defaults (--sizes_mb=1,16 --rounds=3
# --reps_scale=0.5), so they override them. DELAY_US and JITTER_US change
# the delay. TLS uses a throwaway CA and a certificate for the server's
# address made here with openssl (--notls without openssl).
#
# Prints the namespaces' TCP buffer limits, the ping RTT, the
# bandwidth-delay product, the table, and what the delay tools did; the
# kernel's TCP settings are left as they are. Removes the namespaces and
# its files on exit, also on failure. Needs root; builds nothing (build
# bench_transport, and tessera_packet_delay where there is no netem,
# first: bash deploy/build.sh --target bench_transport tessera_packet_delay).
set -euo pipefail

BUILD_ARG=${1:-build}
shift || true
DELAY_US=${DELAY_US:-1000}
JITTER_US=${JITTER_US:-250}
FLAGS=(--sizes_mb=1,16 --rounds=3 --reps_scale=0.5 "$@")

say() { echo "transport_netns: $*" >&2; }
die() {
  say "$*"
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, iptables)"
for tool in ip tc ping; do
  command -v "$tool" >/dev/null ||
    die "$tool is not installed (deploy/install.sh installs iproute2 and iputils-ping)"
done
[ -d "$BUILD_ARG" ] || die "build folder $BUILD_ARG not found"
BUILD=$(cd "$BUILD_ARG" && pwd)
BENCH=$BUILD/bench/bench_transport
PACKET_DELAY=${PACKET_DELAY:-$BUILD/tests/tessera_packet_delay}
[ -x "$BENCH" ] || die "$BENCH not built (bash deploy/build.sh --target bench_transport)"

P="tbn$$"
SERVER="$P-server"
CLIENT="$P-client"
declare -A ADDR=([$SERVER]=10.214.0.1 [$CLIENT]=10.214.0.2)
PORT=40100
WORK=$(mktemp -d /tmp/tessera-transport-netns.XXXXXX)
MADE=()
declare -A DELAY_PID=()

cleanup() {
  local rc=$? ns pid
  for ns in "${MADE[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      kill -9 "$pid" 2>/dev/null || true
    done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

echo "load average at start (script): $(cat /proc/loadavg)"
for ns in "$SERVER" "$CLIENT"; do
  ip netns add "$ns"
  MADE+=("$ns")
  ip -n "$ns" link set lo up
done
ip link add eth0 netns "$SERVER" type veth peer name eth0 netns "$CLIENT"
for ns in "$SERVER" "$CLIENT"; do
  ip -n "$ns" addr add "${ADDR[$ns]}/24" dev eth0
  ip -n "$ns" link set eth0 up
done

# The delay, on the way out of each namespace.
if err=$(tc -n "$SERVER" qdisc add dev eth0 root netem delay "${DELAY_US}us" "${JITTER_US}us" 2>&1); then
  tc -n "$CLIENT" qdisc add dev eth0 root netem delay "${DELAY_US}us" "${JITTER_US}us"
  EMULATION="tc netem on eth0 of both namespaces: delay $DELAY_US us, jitter $JITTER_US us"
else
  [ -x "$PACKET_DELAY" ] ||
    die "the kernel has no netem (tc: ${err//$'\n'/ }) and $PACKET_DELAY is not built (needs libnetfilter-queue-dev: deploy/install.sh)"
  IPTABLES=""
  for ipt in iptables iptables-legacy; do
    command -v "$ipt" >/dev/null && IPTABLES=$ipt && break
  done
  [ -n "$IPTABLES" ] || die "the kernel has no netem and iptables is not installed (deploy/install.sh)"
  for ns in "$SERVER" "$CLIENT"; do
    ip netns exec "$ns" "$PACKET_DELAY" --queue_num=0 --delay_us="$DELAY_US" \
      --jitter_us="$JITTER_US" >"$WORK/delay-$ns.log" 2>&1 &
    DELAY_PID[$ns]=$!
    for _ in $(seq 100); do
      grep -q " bound:" "$WORK/delay-$ns.log" && break
      kill -0 "${DELAY_PID[$ns]}" 2>/dev/null || break
      sleep 0.05
    done
    grep -q " bound:" "$WORK/delay-$ns.log" ||
      die "tessera_packet_delay did not bind its queue in $ns: $(tr '\n' ' ' <"$WORK/delay-$ns.log")"
    # After the tool is bound: the rule has no --queue-bypass.
    ip netns exec "$ns" "$IPTABLES" -t mangle -A POSTROUTING -o eth0 \
      -j NFQUEUE --queue-num 0
  done
  EMULATION="netem missing in this kernel (tc: ${err//$'\n'/ }): tessera_packet_delay in both namespaces ($IPTABLES -t mangle -A POSTROUTING -o eth0 -j NFQUEUE): delay $DELAY_US us, jitter +-$JITTER_US us (uniform)"
fi
echo "link: veth pair, server ${ADDR[$SERVER]} in $SERVER, client ${ADDR[$CLIENT]} in $CLIENT"
echo "emulation: $EMULATION; no loss"

RTT=$(ip netns exec "$CLIENT" ping -q -c 20 -i 0.05 "${ADDR[$SERVER]}" |
  sed -n 's|.*= \([0-9.]*\)/\([0-9.]*\)/\([0-9.]*\)/.*|min \1 / avg \2 / max \3|p')
RTT_AVG=$(sed -n 's|.*avg \([0-9.]*\).*|\1|p' <<<"$RTT")
echo "ping client -> server, 20 packets: rtt $RTT ms"
# What one TCP connection can keep in flight bounds it at window / RTT.
RMEM=$(ip netns exec "$CLIENT" cat /proc/sys/net/ipv4/tcp_rmem)
WMEM=$(ip netns exec "$CLIENT" cat /proc/sys/net/ipv4/tcp_wmem)
echo "tcp_rmem (min default max) $RMEM; tcp_wmem $WMEM (as set, not tuned)"
awk -v rtt="$RTT_AVG" -v rmem="$(awk '{print $3}' <<<"$RMEM")" \
  -v wmem="$(awk '{print $3}' <<<"$WMEM")" 'BEGIN {
  w = rmem < wmem ? rmem : wmem
  printf "bandwidth-delay product at rtt %.2f ms: %.1f MB at 1 GB/s, %.1f MB at 2.5 GB/s; a connection whose window reaches min(tcp_rmem, tcp_wmem) max = %.1f MB moves at most %.2f GB/s\n",
    rtt, 1e9 * rtt / 1e3 / 1e6, 2.5e9 * rtt / 1e3 / 1e6, w / 1e6, w / (rtt / 1e3) / 1e9
}'

TLS=()
if command -v openssl >/dev/null; then
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)
  (cd "$WORK" &&
    openssl req -x509 "${ec[@]}" -nodes -days 1 -keyout ca.key -out ca.pem \
      -subj /CN=bench-ca -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign,cRLSign &&
    printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth,clientAuth\n' \
      "${ADDR[$SERVER]}" >node.ext &&
    openssl req "${ec[@]}" -nodes -keyout node.key -out node.csr -subj /CN=node &&
    openssl x509 -req -days 1 -in node.csr -CA ca.pem -CAkey ca.key \
      -CAcreateserial -out node.pem -extfile node.ext) >/dev/null 2>&1 ||
    die "openssl could not make the TLS certificates"
  TLS=(--tls_cert="$WORK/node.pem" --tls_key="$WORK/node.key" --tls_ca="$WORK/ca.pem")
else
  TLS=(--notls)
fi

ip netns exec "$SERVER" "$BENCH" --serve="${ADDR[$SERVER]}:$PORT" "${TLS[@]}" \
  "${FLAGS[@]}" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 200); do
  grep -q "serving on" "$WORK/server.log" && break
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.05
done
grep -q "serving on" "$WORK/server.log" ||
  die "the server half did not start: $(tail -5 "$WORK/server.log")"
echo "command: ip netns exec $SERVER $BENCH --serve=${ADDR[$SERVER]}:$PORT ${FLAGS[*]}"
echo "         ip netns exec $CLIENT $BENCH --connect=${ADDR[$SERVER]}:$PORT ${FLAGS[*]}"
echo
CLIENT_RC=0
ip netns exec "$CLIENT" "$BENCH" --connect="${ADDR[$SERVER]}:$PORT" "${TLS[@]}" \
  "${FLAGS[@]}" || CLIENT_RC=$?
wait "$SERVER_PID" || say "the server half exited $?: $(tail -3 "$WORK/server.log")"

echo
for ns in "${!DELAY_PID[@]}"; do
  kill -TERM "${DELAY_PID[$ns]}" 2>/dev/null || true
  wait "${DELAY_PID[$ns]}" 2>/dev/null || true
  echo "delay, ${ns#"$P"-}: $(grep -m1 delayed "$WORK/delay-$ns.log" | sed 's/.*queue 0: //')"
done
echo "load average at end (script): $(cat /proc/loadavg)"
exit "$CLIENT_RC"
