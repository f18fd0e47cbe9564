#!/usr/bin/env bash
# A real one-node Slurm cluster on 127.0.0.1, everything under one state directory, for tests
# (and for trying contrib/slurm/ on one machine).
#
#   slurm-local.sh start DIR   writes DIR/slurm.conf, starts a munged of its own (own key,
#                              pid and log under DIR/munge; its socket in a directory made for
#                              it, /run/swe-ark-munge.XXXXXX, so that DIR may be anywhere, under
#                              a 0700 mktemp -d too), then slurmctld and slurmd
#                              with -f DIR/slurm.conf; waits (up to SLURM_LOCAL_TIMEOUT
#                              seconds, 60 by default) until sinfo shows the node idle. Its last
#                              line on stdout is `export SLURM_CONF=DIR/slurm.conf` (the rest
#                              goes to stderr), so: eval "$(slurm-local.sh start DIR)".
#                              State and spool are cleared at each start: no job survives a
#                              restart. When the cluster is already up, it only prints the line.
#   slurm-local.sh stop DIR    cancels its jobs and stops the daemons it started (from their
#                              pid files). Idempotent: never fails when nothing runs.
#   slurm-local.sh available   exit 0 when slurmctld, slurmd, sbatch and munged are installed
#                              and we are root; otherwise the reason on stderr and exit 1.
#
# The node is this machine's short hostname (NodeAddr 127.0.0.1) with CPUs = nproc; jobs run
# as root; no cgroups (proctrack/linuxproc, task/none), no accounting; cons_tres with CR_Core,
# so 1-CPU array tasks run side by side. Ports: a free pair derived from a hash of DIR, in
# 20000-31999 (below the usual ephemeral range). One cluster per DIR; several DIRs can run at
# once. DIR's path must be short (unix sockets live under it).
set -euo pipefail

export PATH="$PATH:/usr/sbin:/sbin"
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}

say() { echo "slurm-local: $*" >&2; }
die() { say "$*"; exit 1; }

usage() {
  echo "usage: $0 start DIR | stop DIR | available" >&2
  exit 2
}

# available: the reason on stderr and 1 when this machine cannot run the cluster.
check_available() {
  local missing=() tool
  for tool in slurmctld slurmd slurmstepd sbatch sinfo scontrol scancel munged; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  if [ ${#missing[@]} -ne 0 ]; then
    say "not installed: ${missing[*]} (Debian: apt-get install slurmctld slurmd slurm-client munge)"
    return 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    say "needs root (SlurmUser=root, and slurmd runs jobs as their user)"
    return 1
  fi
}

# The pid in FILE when that process is alive and its name is NAME.
live_pid() {
  local file=$1 name=$2 pid
  [ -s "$file" ] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
  echo "$pid"
}

# Waits up to 10 s for the process to end, then KILLs it.
wait_pid() {
  local pid=$1 name=$2
  for _ in $(seq 1 100); do
    [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 0
    sleep 0.1
  done
  say "$name ($pid) did not stop on TERM; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

stop_pid() {
  kill -TERM "$1" 2>/dev/null || return 0
  wait_pid "$1" "$2"
}

port_busy() {
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

# Two consecutive free ports, from a hash of DIR.
pick_ports() {
  local hash base i
  hash=$(printf '%s' "$1" | cksum | awk '{print $1}')
  for i in $(seq 0 199); do
    base=$((20000 + ((hash + i * 7919) % 5999) * 2))
    if ! port_busy "$base" && ! port_busy $((base + 1)); then
      echo "$base"
      return 0
    fi
  done
  return 1
}

tails() {
  local f
  for f in "$DIR"/log/*.log "$DIR"/log/*.err "$DIR"/munge/munged.log; do
    [ -s "$f" ] || continue
    echo "---- tail of $f" >&2
    tail -n 25 "$f" >&2
  done
}

node_state() {
  timeout 10 sinfo -h -N -n "$NODE" -o '%t' 2>/dev/null | head -n 1 || true
}

do_stop() {
  local pid
  # Jobs first, while slurmctld and slurmd can still end them; then any step daemon of this
  # cluster that is left (slurmd passes SLURM_CONF on to them).
  if live_pid "$DIR/run/slurmctld.pid" slurmctld >/dev/null &&
    live_pid "$DIR/run/slurmd.pid" slurmd >/dev/null; then
    timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 1 50); do
      [ -z "$(timeout 5 squeue -h -t R,CG -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  if pid=$(live_pid "$DIR/run/slurmd.pid" slurmd); then stop_pid "$pid" slurmd; fi
  for pid in $(pgrep -x slurmstepd 2>/dev/null || true); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$CONF"; then
      stop_pid "$pid" slurmstepd
    fi
  done
  # slurmctld and munged together: each takes a second or two to stop.
  local ctld munged
  ctld=$(live_pid "$DIR/run/slurmctld.pid" slurmctld) || ctld=
  munged=$(live_pid "$DIR/munge/munged.pid" munged) || munged=
  [ -z "$ctld" ] || kill -TERM "$ctld" 2>/dev/null || true
  [ -z "$munged" ] || kill -TERM "$munged" 2>/dev/null || true
  [ -z "$ctld" ] || wait_pid "$ctld" slurmctld
  [ -z "$munged" ] || wait_pid "$munged" munged
  rm -f "$DIR/run/slurmctld.pid" "$DIR/run/slurmd.pid" "$DIR/munge/munged.pid"
  local sock_dir
  if sock_dir=$(recorded_socket_dir); then rm -rf -- "$sock_dir"; fi
  rm -f "$DIR/munge/socket-dir"
}

# The directory of munged's socket when DIR's is recorded (a start before) and was ours.
recorded_socket_dir() {
  local d
  [ -s "$DIR/munge/socket-dir" ] || return 1
  d=$(cat "$DIR/munge/socket-dir")
  case ${d##*/} in swe-ark-munge.*) [ -d "$d" ] && echo "$d" ;; *) return 1 ;; esac
}

# A munged of our own: key, seed, pid and log under DIR/munge. munged refuses a socket below a
# directory that others cannot search (DIR under a 0700 mktemp -d, say: "Socket is
# inaccessible: execute permissions for all required"), so the socket gets a directory of its
# own under /run (root's; else /tmp), recorded in DIR/munge/socket-dir for stop to remove.
# Sets MUNGE_SOCKET.
start_munge() {
  local m=$DIR/munge base sock_dir=
  mkdir -p "$m"
  for base in /run /tmp; do
    [ -d "$base" ] && [ -w "$base" ] || continue
    sock_dir=$(mktemp -d -p "$base" swe-ark-munge.XXXXXX) && break
  done
  if [ -z "$sock_dir" ]; then
    echo "munged: no directory for its socket could be made under /run or /tmp" >"$m/munged.err"
    return 1
  fi
  chmod 755 "$sock_dir"
  echo "$sock_dir" >"$m/socket-dir"
  MUNGE_SOCKET=$sock_dir/munge.socket
  if [ ! -s "$m/munge.key" ]; then
    if command -v mungekey >/dev/null 2>&1; then
      mungekey --create --keyfile="$m/munge.key" --bits=1024 >/dev/null
    else
      (umask 077 && dd if=/dev/urandom of="$m/munge.key" bs=128 count=1 status=none)
    fi
  fi
  chmod 600 "$m/munge.key"
  munged --socket="$MUNGE_SOCKET" --key-file="$m/munge.key" --pid-file="$m/munged.pid" \
    --log-file="$m/munged.log" --seed-file="$m/munged.seed" 2>"$m/munged.err" || return 1
  for _ in $(seq 1 50); do
    if munge -n --socket="$MUNGE_SOCKET" 2>/dev/null |
      unmunge --socket="$MUNGE_SOCKET" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

do_start() {
  local cpus mem_mb real_mem port munge_info
  check_available || exit 1
  [ ${#DIR} -le 80 ] || die "state directory path too long for unix sockets (${#DIR} > 80 chars): $DIR"

  # Already up: just print the line.
  if live_pid "$DIR/run/slurmctld.pid" slurmctld >/dev/null &&
    live_pid "$DIR/run/slurmd.pid" slurmd >/dev/null &&
    [ "$(SLURM_CONF=$CONF node_state)" = idle ]; then
    say "already running in $DIR"
    echo "export SLURM_CONF=$CONF"
    return 0
  fi
  do_stop

  local started=$SECONDS
  rm -rf "$DIR/state" "$DIR/spool" "$DIR/run"
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/run" "$DIR/log"

  # Munge: our own daemon; else the system's, when one answers on the default socket.
  if start_munge; then
    munge_info="AuthInfo=socket=$MUNGE_SOCKET"
  elif munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "own munged did not start ($(tail -n 1 "$DIR/munge/munged.err" 2>/dev/null)); using the system's munged"
    munge_info="# AuthInfo: the system's munged, on its default socket"
  else
    tails
    do_stop
    die "munged did not start, and no system munged answers on the default socket"
  fi

  cpus=$(nproc)
  mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
  # A bit under what the machine has: slurmd drains a node that has less than configured.
  real_mem=$((mem_mb - mem_mb / 20 - 64))
  [ "$real_mem" -ge 100 ] || real_mem=100
  port=$(pick_ports "$DIR") || die "no two free consecutive ports found in 20000-31999"

  : >"$DIR/plugstack.conf"
  cat >"$CONF" <<EOF
# Written by scripts/slurm-local.sh: a one-node test cluster under $DIR.
ClusterName=swearklocal
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
$munge_info
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmdTimeout=300
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$cpus RealMemory=$real_mem State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

  slurmctld -f "$CONF" 2>"$DIR/log/slurmctld.err" || {
    tails
    do_stop
    die "slurmctld did not start"
  }
  slurmd -f "$CONF" -N "$NODE" 2>"$DIR/log/slurmd.err" || {
    tails
    do_stop
    die "slurmd did not start"
  }

  local state=
  while [ $((SECONDS - started)) -lt "$TIMEOUT" ]; do
    state=$(node_state)
    case $state in
      idle) break ;;
      # slurmd registers with its real layout; a node down or drained stays so.
      down* | drain* | drng* | fail* | inval*)
        if [ $((SECONDS - started)) -ge 10 ]; then break; fi ;;
    esac
    sleep 0.5
  done
  if [ "$state" != idle ]; then
    tails
    timeout 10 scontrol show node "$NODE" >&2 2>/dev/null || true
    do_stop
    die "node $NODE not idle after $((SECONDS - started)) s (state: ${state:-none})"
  fi
  say "up in $((SECONDS - started)) s: node $NODE ($cpus CPUs), slurmctld port $port, slurmd port $((port + 1))"
  echo "export SLURM_CONF=$CONF"
}

[ $# -ge 1 ] || usage
case $1 in
  available)
    [ $# -eq 1 ] || usage
    check_available
    exit $?
    ;;
  start | stop)
    [ $# -eq 2 ] || usage
    cmd=$1
    if [ "$cmd" = stop ] && [ ! -d "$2" ]; then exit 0; fi
    mkdir -p "$2"
    DIR=$(cd "$2" && pwd -P)
    CONF=$DIR/slurm.conf
    export SLURM_CONF=$CONF
    NODE=$(hostname -s)
    if [ "$cmd" = start ]; then do_start; else do_stop; fi
    ;;
  *) usage ;;
esac
