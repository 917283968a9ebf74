#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for tests: Debian's slurm-wlm and munge, run as
# root, with everything (munge socket, state, spool, logs, pid files) under one folder so
# it does not touch a system Slurm or munge.
#
#   scripts/slurm/local-cluster.sh start DIR   # prints the SLURM_CONF to export
#   SLURM_CONF=DIR/slurm.conf sbatch --array=0-2 --wait ...
#   scripts/slurm/local-cluster.sh stop DIR
#
# Needs root (slurmd runs jobs as their users; munged needs the key) and the packages
# slurm-wlm and munge (`make slurm-test` installs them).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[[ ( $cmd == start || $cmd == stop ) && -n $dir ]] || {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}

stop_pidfile() {
  local f=$1
  [[ -s $f ]] || return 0
  local pid
  pid=$(cat "$f")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$f"
}

if [[ $cmd == stop ]]; then
  stop_pidfile "$dir/slurmd.pid"
  stop_pidfile "$dir/slurmctld.pid"
  stop_pidfile "$dir/munged.pid"
  exit 0
fi

[[ $(id -u) -eq 0 ]] || { echo "$0: needs root" >&2; exit 1; }
for b in munged slurmctld slurmd sbatch sinfo; do
  command -v "$b" >/dev/null || { echo "$0: $b not found (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
[[ -r /etc/munge/munge.key ]] || { echo "$0: no /etc/munge/munge.key (the munge package creates it)" >&2; exit 1; }

mkdir -p "$dir/state" "$dir/spool"
dir=$(cd "$dir" && pwd)
chmod 755 "$dir"
host=$(hostname)
# Ports unlikely to clash with a system Slurm or another test's cluster.
port=$(( 20000 + ($$ % 20000) * 2 ))

# munged checks that its socket folder is not writable by others.
mkdir -p "$dir/munge"
chmod 700 "$dir/munge"
munged --force --socket="$dir/munge/munge.sock" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed" --key-file=/etc/munge/munge.key

cat > "$dir/slurm.conf" <<CONF
ClusterName=memsimtest
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF

export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
    echo "$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "$0: the node did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
exit 1
