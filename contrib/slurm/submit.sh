#!/usr/bin/env bash
# Submits a swe-ark plan to Slurm: one job array of N tasks (shard.sbatch, N = the plan's
# shard count), then the merge (merge.sbatch) once every task has succeeded.
#
# Usage: contrib/slurm/submit.sh PLAN SEED DEST MERGED [RELEASE]
#   PLAN     the plan file (`swe-ark --ark SEED plan --shards N --all -o PLAN`)
#   SEED     the archive the plan was made from; DEST the shard files' directory; MERGED the
#            merged archive. All on a filesystem every node sees.
#   RELEASE  the release merge registers (optional)
# Environment:
#   SWE_ARK       the swe-ark binary every node runs (default: swe-ark on PATH)
#   CPUS_PER_TASK the CPUs each shard asks for (sbatch --cpus-per-task; default: a
#                 --cpus-per-task in SBATCH_EXTRA, else shard.sbatch's 4). Checked against
#                 the partition's nodes first (sinfo): a number no node has is refused (the
#                 array would stay pending, reason PartitionConfig); the default is lowered
#                 to the largest node's CPUs, with a message.
#   SBATCH_EXTRA  more sbatch options for both jobs, split on spaces
#                 (e.g. "--partition=cpu --account=lab --time=12:00:00")
#   LOGS          the jobs' log directory (default ./logs; made here)
#   THROTTLE      at most this many shards at once (--array=0-(N-1)%THROTTLE)
#   MERGE_AFTER   the merge's dependency type: afterok (default: a shard that exits non-zero
#                 leaves the merge pending, DependencyNeverSatisfied) or afterany (merge
#                 whatever was written; it lists what is missing)
#   JOBS, KEEP, SHARD_ARGS  passed on to shard.sbatch
# Prints the two job ids on stdout: "shards ID" and "merge ID".
set -euo pipefail

if [ $# -lt 4 ] || [ $# -gt 5 ]; then
  echo "usage: $0 PLAN SEED DEST MERGED [RELEASE]" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

PLAN=$(realpath "$1")
SEED=$(realpath "$2")
DEST=$(realpath -m "$3")
MERGED=$(realpath -m "$4")
RELEASE=${5:-}
SWE_ARK=${SWE_ARK:-$(command -v swe-ark || true)}
[ -n "$SWE_ARK" ] || { echo "submit.sh: no swe-ark on PATH; set SWE_ARK" >&2; exit 2; }
SWE_ARK=$(realpath "$SWE_ARK")
LOGS=$(realpath -m "${LOGS:-logs}")
export SWE_ARK PLAN SEED DEST MERGED RELEASE

n=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["shards"]))' "$PLAN")
if ! [ "$n" -ge 1 ] 2>/dev/null; then
  echo "submit.sh: $PLAN has no shards" >&2
  exit 2
fi
extra=()
read -r -a extra <<<"${SBATCH_EXTRA:-}"
array=0-$((n - 1))${THROTTLE:+%$THROTTLE}

# The last value SBATCH_EXTRA gives option --LONG (or -SHORT), in any of sbatch's spellings.
extra_value() {
  local long=$1 short=$2 i v=
  for ((i = 0; i < ${#extra[@]}; i++)); do
    case ${extra[i]} in
      "--$long="*) v=${extra[i]#--"$long"=} ;;
      "--$long" | "-$short") v=${extra[i + 1]:-} ;;
      "-$short"?*) v=${extra[i]#-"$short"} ;;
    esac
  done
  echo "$v"
}

# The CPUs a shard asks for, and who asked (nobody: shard.sbatch's default, which may be
# lowered to fit). A --cpus-per-task in SBATCH_EXTRA is the merge's too.
extra_cpus=$(extra_value cpus-per-task c)
cpus=${CPUS_PER_TASK:-$extra_cpus}
if [ -n "${CPUS_PER_TASK:-}" ]; then
  asked="CPUS_PER_TASK=$cpus"
elif [ -n "$extra_cpus" ]; then
  asked="--cpus-per-task=$cpus in SBATCH_EXTRA"
else
  asked=
  cpus=$(sed -n 's/^#SBATCH --cpus-per-task=\([0-9][0-9]*\).*/\1/p' "$here/shard.sbatch" | head -n 1)
fi
for c in "$cpus" ${extra_cpus:+"$extra_cpus"}; do
  if ! [ "$c" -ge 1 ] 2>/dev/null; then
    echo "submit.sh: CPUs per task must be a whole number from 1, not \"$c\" (${asked:-shard.sbatch})" >&2
    exit 2
  fi
done
# A task asking for more CPUs than any node of its partition has is never scheduled, and
# Slurm says so only in squeue (reason PartitionConfig): check the partition's nodes first.
partition=$(extra_value partition p)
partition=${partition:-${SBATCH_PARTITION:-}}
if [ -z "$partition" ]; then
  partition=$(sinfo -h -o '%P' 2>/dev/null | sed -n 's/\*$//p' | head -n 1)
fi
most=
if [ -n "$partition" ]; then
  most=$(sinfo -h -N -p "$partition" -o '%c' 2>/dev/null | tr -dc '0-9\n' | sort -n | tail -n 1)
fi
too_many() {
  echo "submit.sh: $1, but the nodes of partition $partition have at most $most CPUs: the jobs would stay pending (reason PartitionConfig). Ask for fewer: CPUS_PER_TASK=$most $0 ...$2" >&2
  exit 2
}
if [ -z "$most" ]; then
  echo "submit.sh: no node of partition ${partition:-(the default)} listed by sinfo; $cpus CPU(s) per shard not checked" >&2
elif [ -n "$extra_cpus" ] && [ "$extra_cpus" -gt "$most" ]; then
  too_many "SBATCH_EXTRA asks for $extra_cpus CPUs per task (--cpus-per-task, both jobs)" \
    " (and no --cpus-per-task in SBATCH_EXTRA)"
elif [ "$cpus" -gt "$most" ]; then
  [ -z "$asked" ] || too_many "each shard asks for $cpus CPUs ($asked)" ""
  echo "submit.sh: the nodes of partition $partition have at most $most CPUs: each shard asks for $most, not shard.sbatch's $cpus (CPUS_PER_TASK=N to choose)" >&2
  cpus=$most
fi

mkdir -p "$DEST" "$LOGS"
# --parsable prints "ID" or "ID;CLUSTER".
shards=$(sbatch --parsable --array="$array" --export=ALL \
  --output="$LOGS/%x-%A_%a.out" ${extra[@]+"${extra[@]}"} --cpus-per-task="$cpus" \
  "$here/shard.sbatch")
shards=${shards%%;*}
merge=$(sbatch --parsable --dependency="${MERGE_AFTER:-afterok}:$shards" --export=ALL \
  --output="$LOGS/%x-%j.out" ${extra[@]+"${extra[@]}"} "$here/merge.sbatch")
merge=${merge%%;*}

echo "submit.sh: $n shards of $PLAN ($cpus CPU(s) each): job array $shards; merge into $MERGED: job $merge (logs in $LOGS)" >&2
echo "shards $shards"
echo "merge $merge"
