#!/usr/bin/env bash
# A real, throw-away Slurm cluster on this machine, for tests. Source it:
#
#   source tests/slurm/local_slurm.sh
#   slurm_install          # Debian packages, only if missing
#   slurm_start 2          # munged + slurmctld + 2 slurmd; waits for idle
#   srun -N2 -n4 hostname
#   slurm_stop             # also run on exit: slurm_start sets the trap
#
# One node is "node1" (127.0.0.1); two nodes are node1 and "node2"
# (127.0.0.2), each its own slurmd on this machine with its own port, so
# tasks of node2 really see SLURMD_NODENAME=node2 and can listen on
# 127.0.0.2. The names are added to /etc/hosts when they are missing and
# removed again by slurm_stop (only the lines added here).
#
# Everything runs as root (the daemons, the install, the /etc/hosts edit).
# Everything else lives in a temporary folder ($SLURM_TEST_DIR): config,
# munge key and socket, state, logs, pid files. Nothing is installed as a
# service and nothing is started through init scripts. SLURM_CONF is
# exported, so srun/sbatch/scontrol of the calling script (and its jobs)
# talk to this cluster. Daemons are stopped by the PIDs in their own pid
# files, never by name.
#
# The config follows what is known to work on a 2-core Debian 12 VM
# (reference: local-slurm.md): munge auth, select/cons_tres with CR_CPU,
# 8 CPUs per node declared (config_overrides), OverSubscribe=FORCE,
# EnforcePartLimits=ALL so that impossible jobs fail instead of hanging,
# no accounting (sacct is unavailable; use scontrol show job).

SLURM_PACKAGES=(slurmctld slurmd slurm-client munge)
SLURM_TEST_DIR=""
SLURM_HOSTS_ADDED=()
SLURM_HOSTS_ADDED_EOL=0

_slurm_log() { echo "local_slurm: $*" >&2; }

_slurm_need_root() {
  [ "$(id -u)" -eq 0 ] && return 0
  _slurm_log "must run as root (Slurm daemons, packages, /etc/hosts)"
  return 1
}

# Installs the Slurm and munge packages that are missing. Package scripts
# must not start daemons: a policy-rc.d that says no is put in place for the
# install when the machine has none.
slurm_install() {
  _slurm_need_root || return 1
  local missing=() p
  for p in "${SLURM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  _slurm_log "installing ${missing[*]}"
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | tee "$policy" >/dev/null
    chmod 755 "$policy"
    added_policy=1
  fi
  local rc=0
  if ! apt-cache policy slurmd 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    apt-get update -qq || rc=$?
  fi
  if [ "$rc" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
  fi
  [ "$added_policy" -eq 1 ] && rm -f "$policy"
  [ "$rc" -eq 0 ] || _slurm_log "installing ${missing[*]} failed (exit $rc)"
  return "$rc"
}

# True when something accepts connections on 127.0.0.1:$1.
_slurm_port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a port base with $1 ports above it that nothing listens on, drawn
# below the kernel's ephemeral range: any connect() on the machine (a gRPC
# client of a test running beside this one) may take a port in that range
# between this check and the job's bind, which a listen check cannot see.
slurm_free_port_base() {
  local n=$1 low=20000 high base i busy
  high=$(awk '{ print $1 - 1 }' /proc/sys/net/ipv4/ip_local_port_range \
    2>/dev/null || echo 32767)
  [ "$high" -gt $((low + 100 + n)) ] || high=$((low + 10000))
  for _ in $(seq 1 50); do
    base=$((low + RANDOM % (high - low - n)))
    busy=0
    for ((i = 0; i < n; i++)); do
      if _slurm_port_busy $((base + i)); then busy=1; fi
    done
    [ "$busy" -eq 0 ] && echo "$base" && return 0
  done
  return 1
}

# Prints the first port from $1 up with nothing listening on it.
_slurm_free_port() {
  local port=$1
  while _slurm_port_busy "$port"; do port=$((port + 1)); done
  echo "$port"
}

# Adds "<addr> <name>" to /etc/hosts unless <name> already resolves there.
# Refuses when it resolves elsewhere: a real host of that name must not be
# shadowed by a test.
_slurm_add_host() {
  local addr=$1 name=$2 current
  current=$(getent hosts "$name" | awk '{print $1; exit}')
  if [ -n "$current" ]; then
    [ "$current" = "$addr" ] && return 0
    _slurm_log "$name resolves to $current, not $addr; not touching it"
    return 1
  fi
  local line="$addr $name  # tessera local_slurm $$"
  # A last line without its newline would swallow ours.
  if [ -s /etc/hosts ] && [ "$(tail -c 1 /etc/hosts | od -An -c | tr -d ' ')" != '\n' ]; then
    echo | tee -a /etc/hosts >/dev/null || return 1
    SLURM_HOSTS_ADDED_EOL=1
  fi
  echo "$line" | tee -a /etc/hosts >/dev/null || return 1
  SLURM_HOSTS_ADDED+=("$line")
}

# Removes exactly what _slurm_add_host added (its lines, and the newline it
# gave an unterminated last line). /etc/hosts is rewritten in place, not
# replaced, as containers often bind-mount it.
_slurm_remove_hosts() {
  [ ${#SLURM_HOSTS_ADDED[@]} -eq 0 ] && return 0
  local kept line format='%s\n'
  kept=$(cat /etc/hosts)
  for line in "${SLURM_HOSTS_ADDED[@]}"; do
    kept=$(printf '%s\n' "$kept" | grep -vxF -- "$line" || true)
  done
  [ "$SLURM_HOSTS_ADDED_EOL" = 1 ] && format='%s'
  # shellcheck disable=SC2059
  printf "$format" "$kept" | tee /etc/hosts >/dev/null
  SLURM_HOSTS_ADDED=()
  SLURM_HOSTS_ADDED_EOL=0
}

# Waits up to $2 seconds for the file $1 to exist.
_slurm_wait_file() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [ -e "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

_slurm_write_conf() {
  local dir=$1 nodes=$2 ctld_port=$3
  shift 3
  local host
  host=$(hostname -s)
  cat >"$dir/etc/slurm.conf" <<EOF
ClusterName=tesseratest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/run/munge.socket.2
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state/ctld
SlurmdSpoolDir=$dir/state/d-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
MinJobAge=600
EOF
  local i names=()
  for ((i = 1; i <= nodes; i++)); do
    echo "NodeName=node$i NodeAddr=127.0.0.$i NodeHostname=$host Port=$1" \
      "CPUs=8 State=UNKNOWN" >>"$dir/etc/slurm.conf"
    names+=("node$i")
    shift
  done
  local list
  list=$(
    IFS=,
    echo "${names[*]}"
  )
  echo "PartitionName=debug Nodes=$list Default=YES MaxTime=INFINITE" \
    "State=UP OverSubscribe=FORCE" >>"$dir/etc/slurm.conf"
}

# Starts munged, slurmctld and $1 (1 or 2) slurmd, and waits until every
# node is idle. Sets SLURM_TEST_DIR, exports SLURM_CONF, and sets an EXIT
# trap (and INT/TERM ones) that calls slurm_stop; a caller with its own EXIT
# trap must call slurm_stop from it.
slurm_start() {
  local nodes=${1:-1}
  if [ "$nodes" != 1 ] && [ "$nodes" != 2 ]; then
    _slurm_log "slurm_start takes 1 or 2 nodes, not $nodes"
    return 1
  fi
  _slurm_need_root || return 1
  [ -z "$SLURM_TEST_DIR" ] || slurm_stop
  trap slurm_stop EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  SLURM_TEST_DIR=$(mktemp -d /tmp/tessera-slurm.XXXXXX)
  local dir=$SLURM_TEST_DIR
  mkdir -p "$dir"/{etc,run,log,state/ctld,munge/run,munge/log,munge/lib}
  # munged wants every folder above its socket searchable by all.
  chmod 755 "$dir" "$dir/munge" "$dir/munge/run"

  local i
  for ((i = 1; i <= nodes; i++)); do
    _slurm_add_host "127.0.0.$i" "node$i" || return 1
  done

  # A fresh key, owned by root and private: munged refuses anything else.
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 600 "$dir/munge/munge.key"
  munged --key-file="$dir/munge/munge.key" \
    --socket="$dir/munge/run/munge.socket.2" \
    --pid-file="$dir/munge/run/munged.pid" \
    --log-file="$dir/munge/log/munged.log" \
    --seed-file="$dir/munge/lib/munged.seed" || {
    _slurm_log "munged did not start; see $dir/munge/log/munged.log"
    return 1
  }
  _slurm_wait_file "$dir/munge/run/munge.socket.2" 10 || {
    _slurm_log "munged made no socket in 10 s"
    return 1
  }

  local ctld_port node_ports=() port=16818
  ctld_port=$(_slurm_free_port 16817)
  for ((i = 1; i <= nodes; i++)); do
    port=$(_slurm_free_port $((port > ctld_port ? port : ctld_port + 1)))
    node_ports+=("$port")
    port=$((port + 1))
  done
  _slurm_write_conf "$dir" "$nodes" "$ctld_port" "${node_ports[@]}"
  export SLURM_CONF="$dir/etc/slurm.conf"

  slurmctld || {
    _slurm_log "slurmctld did not start; see $dir/log/slurmctld.log"
    return 1
  }
  for ((i = 1; i <= nodes; i++)); do
    slurmd -N "node$i" || {
      _slurm_log "slurmd node$i did not start; see $dir/log/slurmd-node$i.log"
      return 1
    }
  done
  slurm_wait_idle "$nodes" 30
}

# Waits up to $2 seconds until $1 nodes are idle.
slurm_wait_idle() {
  local nodes=$1 timeout=$2 idle i
  for ((i = 0; i < timeout * 5; i++)); do
    idle=$(sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$' || true)
    if [ "$idle" -ge "$nodes" ]; then
      _slurm_log "$nodes node(s) idle; SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  _slurm_log "nodes not idle after ${timeout}s:"
  sinfo -N >&2 || true
  tail -n 20 "$SLURM_TEST_DIR"/log/*.log >&2 || true
  return 1
}

# Sends SIGTERM to the process in pid file $1, waits up to 10 s, then
# SIGKILL.
_slurm_kill_pidfile() {
  local file=$1 pid i
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  _slurm_log "pid $pid ($file) ignored SIGTERM for 10 s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

# Cancels every job, stops the daemons by PID, removes the /etc/hosts lines
# added and the temporary folder (kept when KEEP_SLURM_DIR=1). Safe to call
# twice.
slurm_stop() {
  local dir=$SLURM_TEST_DIR
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    if [ -f "$dir/run/slurmctld.pid" ]; then
      local jobs i
      jobs=$(squeue -h -o %i 2>/dev/null || true)
      if [ -n "$jobs" ]; then
        # shellcheck disable=SC2086
        scancel $jobs 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
          [ -z "$(squeue -h -o %i 2>/dev/null || true)" ] && break
          sleep 0.2
        done
      fi
    fi
    local f
    for f in "$dir"/run/slurmd-*.pid; do _slurm_kill_pidfile "$f"; done
    _slurm_kill_pidfile "$dir/run/slurmctld.pid"
    _slurm_kill_pidfile "$dir/munge/run/munged.pid"
    if [ "${KEEP_SLURM_DIR:-0}" = 1 ]; then
      _slurm_log "kept $dir"
    else
      rm -rf "$dir"
    fi
  fi
  SLURM_TEST_DIR=""
  _slurm_remove_hosts
}
