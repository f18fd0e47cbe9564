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
#   SBATCH_EXTRA  more sbatch options for both jobs, split on spaces
#                 (e.g. "--partition=cpu --account=lab --time=12:00:00 --cpus-per-task=8")
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
mkdir -p "$DEST" "$LOGS"

extra=()
read -r -a extra <<<"${SBATCH_EXTRA:-}"
array=0-$((n - 1))${THROTTLE:+%$THROTTLE}

# --parsable prints "ID" or "ID;CLUSTER".
shards=$(sbatch --parsable --array="$array" --export=ALL \
  --output="$LOGS/%x-%A_%a.out" ${extra[@]+"${extra[@]}"} "$here/shard.sbatch")
shards=${shards%%;*}
merge=$(sbatch --parsable --dependency="${MERGE_AFTER:-afterok}:$shards" --export=ALL \
  --output="$LOGS/%x-%j.out" ${extra[@]+"${extra[@]}"} "$here/merge.sbatch")
merge=${merge%%;*}

echo "submit.sh: $n shards of $PLAN: job array $shards; merge into $MERGED: job $merge (logs in $LOGS)" >&2
echo "shards $shards"
echo "merge $merge"
