#!/usr/bin/env bash
# End to end against real PyPI: lock a SWE-bench Lite dev context, then build it offline.
#
# For each marshmallow-code/marshmallow instance of the Lite dev split (versions 3.0 and 2.20),
# in a fresh archive under target/e2e:
#   1. mirror the repository from a local snapshot and import the dataset (the instances name
#      the environment setup commits);
#   2. `swe-ark env lock marshmallow-code/marshmallow VERSION` with the shipped manifests: the
#      one step that uses the network (PyPI, as of the commit's date);
#   3. with no network at all (`unshare -n`, a network namespace with only a down loopback):
#      `env build LOCK --force` (cold), the instance's bundle packed from the mirror and
#      unpacked, `env build LOCK --copy-to DIR` (warm), the manifest's install in the copy
#      from the wheelhouse only, `pytest -rA tests/test_schema.py`, and the evaluation:
#      the test patch applied, FAIL_TO_PASS failing, the gold patch applied, FAIL_TO_PASS and
#      PASS_TO_PASS passing.
# It ends with a summary of results and times. Exit status: 0 when everything passed, 1 when a
# step failed, 0 with SKIPPED when the repository snapshot or the dataset is not given or not
# there.
#
# Usage: scripts/e2e.sh [path/to/swe-ark]   (make e2e builds it first)
# Environment:
#   E2E_REPO=DIR       the marshmallow repository (bare or not); none: SKIPPED
#   E2E_DATA=DIR       the folder of SWE-bench *.jsonl files; none: SKIPPED
#   E2E_VERSIONS="3.0" only these versions (default: every version the dataset has)
#   E2E_TEST_FILE=F    the test file run at the base commit (default tests/test_schema.py)
#   E2E_FALLBACK_EXCLUDE_NEWER=WHEN  when the faithful lock fails, lock again as of WHEN so
#                      that the offline steps still run (default 2022-07-10T00:00:00Z; empty:
#                      no retry). A fallback lock is not faithful and the run still fails.
#   E2E_DIR=DIR        where everything goes (default target/e2e; removed first)
#   SWE_ARK_UV         the uv swe-ark uses (make e2e sets it to .tools/bin/uv)
set -uo pipefail

PROJECT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SWE_ARK=$(realpath "${1:-$PROJECT/target/release/swe-ark}")
ROOT=$(realpath -m "${E2E_DIR:-$PROJECT/target/e2e}")
NAME=marshmallow-code/marshmallow
TEST_FILE=${E2E_TEST_FILE:-tests/test_schema.py}
FALLBACK=${E2E_FALLBACK_EXCLUDE_NEWER-2022-07-10T00:00:00Z}

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
note() { printf '%s\n' "$*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# --- what it needs -------------------------------------------------------------------------
if [ ! -x "$SWE_ARK" ]; then
  note "e2e: $SWE_ARK is not an executable (run make build first)"
  exit 2
fi
REPO=${E2E_REPO:-}
if [ -z "$REPO" ] || [ ! -d "$REPO" ]; then
  echo "e2e: SKIPPED: no marshmallow repository at '$REPO' (set E2E_REPO=DIR to a clone or a" \
       "bare mirror of https://github.com/marshmallow-code/marshmallow)"
  exit 0
fi
REPO=$(realpath "$REPO")
DATA=${E2E_DATA:-}
if [ -z "$DATA" ] || ! compgen -G "$DATA/*.jsonl" >/dev/null; then
  echo "e2e: SKIPPED: no SWE-bench *.jsonl files in '$DATA' (set E2E_DATA=DIR)"
  exit 0
fi
DATA=$(realpath "$DATA")
for tool in git python3 unshare; do
  command -v "$tool" >/dev/null || { note "e2e: $tool is not installed"; exit 2; }
done

# swe-ark and git see no user configuration; swe-ark uses its shipped manifests.
unset SWE_ARK_MANIFESTS SWE_ARK_HOME GIT_DIR GIT_WORK_TREE
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_CEILING_DIRECTORIES="$ROOT"
if [ -z "${SWE_ARK_UV:-}" ] && [ -x "$PROJECT/.tools/bin/uv" ]; then
  export SWE_ARK_UV=$PROJECT/.tools/bin/uv
fi

rm -rf "$ROOT"
mkdir -p "$ROOT/home"
cd "$ROOT"
ARK=$ROOT/ark
START=$(now)
sa() { "$SWE_ARK" --ark "$ARK" --no-progress "$@"; }

# No network: a new network namespace (root, or user namespaces). Checked once.
OFFLINE=(unshare -n --)
if ! unshare -n -- true 2>"$ROOT/unshare.err"; then
  OFFLINE=()
  note "e2e: unshare -n does not work here ($(head -1 "$ROOT/unshare.err")): the offline steps" \
       "are SKIPPED, because nothing would prove they use no network"
fi
offline() { "${OFFLINE[@]}" "$@"; }
if [ ${#OFFLINE[@]} -gt 0 ] && unshare -n -- python3 -c \
    'import socket; socket.create_connection(("pypi.org", 443), timeout=5)' 2>/dev/null; then
  note "e2e: pypi.org is reachable inside unshare -n: the namespace does not cut the network"
  exit 1
fi

# A clean environment for what runs in an instance's environment: its bin first, pip and uv
# reading no machine settings (PIP_FIND_LINKS and such), the wheelhouse as the only source.
in_venv() { # VENV WHEELHOUSE DIR COMMAND...
  local venv=$1 wh=$2 dir=$3
  shift 3
  (cd "$dir" && offline env -i PATH="$venv/bin:/usr/local/bin:/usr/bin:/bin" HOME="$ROOT/home" \
    LANG=C.UTF-8 LC_ALL=C.UTF-8 VIRTUAL_ENV="$venv" PYTHONNOUSERSITE=1 \
    PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
    PIP_NO_INDEX=1 PIP_FIND_LINKS="$wh" UV_OFFLINE=1 UV_NO_INDEX=1 UV_FIND_LINKS="$wh" "$@")
}

# pytest -rA's short summary: "STATUS test-id" lines → a JSON map test id → status.
parse_pytest() { # LOG
  python3 - "$1" <<'PY'
import json, re, sys
status = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", line)
    if m:
        status[m.group(2)] = m.group(1)
print(json.dumps(status))
PY
}
counts() { # LOG: the last line of pytest ("== 225 passed, 1 warning in 0.56s ==")
  grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$1" | tail -1 | sed -E 's/^=+ //; s/ =+$//'
}

# --- 1. the archive: mirror and instances --------------------------------------------------
step "1. A fresh archive: the repository mirrored from $REPO, the dataset imported"
t=$(now)
if ! sa mirror add "$REPO" --name "$NAME" >"$ROOT/mirror.log" 2>&1; then
  tail -20 "$ROOT/mirror.log"
  note "e2e: FAILED: mirror add"
  exit 1
fi
tail -1 "$ROOT/mirror.log"
MIRROR_S=$(since "$t")
for f in "$DATA"/*.jsonl; do
  sa import "$f" || { note "e2e: FAILED: import $f"; exit 1; }
done
# The repository's instances: id, version, environment setup commit, base commit.
python3 - "$NAME" "$DATA"/*.jsonl >"$ROOT/instances.tsv" <<'PY'
import json, sys
name, files = sys.argv[1], sys.argv[2:]
for f in files:
    for line in open(f):
        if line.strip():
            i = json.loads(line)
            if i.get("repo") == name:
                print("\t".join([i["instance_id"], i["version"],
                                 i["environment_setup_commit"], i["base_commit"]]))
PY
if [ ! -s "$ROOT/instances.tsv" ]; then
  echo "e2e: SKIPPED: the dataset in $DATA has no $NAME instance"
  exit 0
fi
echo "the $NAME instances of $DATA:"
sed 's/^/  /' "$ROOT/instances.tsv"

# --- 2-3. each instance: lock online, everything else offline -------------------------------
declare -a SUMMARY
FAILED=0
fail() { FAILED=1; note "e2e: FAILED: $*"; }

while IFS=$'\t' read -r IID VERSION SETUP_COMMIT BASE_COMMIT; do
  if [ -n "${E2E_VERSIONS:-}" ] && ! [[ " $E2E_VERSIONS " == *" $VERSION "* ]]; then
    continue
  fi
  W=$ROOT/$IID
  mkdir -p "$W"
  row="$IID (version $VERSION)"

  step "2. $IID: env lock $NAME $VERSION (online: PyPI as of ${SETUP_COMMIT:0:12}'s date)"
  t=$(now)
  LOCK=
  FAITHFUL=yes
  if sa env lock "$NAME" "$VERSION" >"$W/lock.out" 2>"$W/lock.log"; then
    LOCK=$(tail -1 "$W/lock.out")
    LOCK_S=$(since "$t")
    grep -v '^  |' "$W/lock.log"
  else
    LOCK_S=$(since "$t")
    FAITHFUL=no
    # What swe-ark said, and the installer's own errors.
    grep -v '^  |' "$W/lock.log" | tail -5
    grep -E '^  \| +ERROR' "$W/lock.log" | head -5
    fail "$IID: env lock $NAME $VERSION failed after ${LOCK_S} s (log: $W/lock.log)"
    row+=$'\n'"  lock (faithful, as of the commit's date): FAILED in ${LOCK_S} s: $(grep -E '^  \| +ERROR' "$W/lock.log" | head -1 | sed -E 's/^  \| +//')"
    if [ -n "$FALLBACK" ]; then
      note "e2e: locking again as of $FALLBACK (--exclude-newer; NOT faithful) so that the" \
           "offline steps run"
      t=$(now)
      if sa env lock "$NAME" "$VERSION" --exclude-newer "$FALLBACK" \
          >"$W/lock-fallback.out" 2>"$W/lock-fallback.log"; then
        LOCK=$(tail -1 "$W/lock-fallback.out")
        LOCK_S=$(since "$t")
        grep -v '^  |' "$W/lock-fallback.log"
      else
        LOCK_S=$(since "$t")
        grep -v '^  |' "$W/lock-fallback.log" | tail -5
        fail "$IID: the fallback lock failed too (log: $W/lock-fallback.log)"
        row+=$'\n'"  lock as of $FALLBACK (fallback): FAILED in ${LOCK_S} s"
      fi
    fi
  fi
  if [ -z "$LOCK" ]; then
    SUMMARY+=("$row")
    continue
  fi
  LOCKSUM=$(grep -h -E '^locked ' "$W"/lock*.log | tail -1 | sed -E 's/^locked //')
  if [ "$FAITHFUL" = yes ]; then
    row+=$'\n'"  lock: ${LOCK:0:12} in ${LOCK_S} s (online): $LOCKSUM"
  else
    row+=$'\n'"  lock as of $FALLBACK (fallback, NOT faithful): ${LOCK:0:12} in ${LOCK_S} s: $LOCKSUM"
  fi
  sa env show "$LOCK" >"$W/pylock.toml"
  INSTALL=$(python3 - "$W/pylock.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
try:
    import tomllib
    print(tomllib.loads(text)["tool"]["swe-ark"]["context"]["install"])
except ImportError:  # Python < 3.11: the line as written
    m = re.search(r'^install = "(.*)"$', text, re.M)
    print(m.group(1).replace('\\"', '"').replace("\\\\", "\\") if m else "")
PY
)

  if [ ${#OFFLINE[@]} -eq 0 ]; then
    row+=$'\n'"  offline steps: SKIPPED (unshare -n does not work here)"
    SUMMARY+=("$row")
    continue
  fi

  step "3. $IID: offline (unshare -n): cold build, bundle, warm copy, install, tests"
  t=$(now)
  if offline "$SWE_ARK" --ark "$ARK" -q env build "$LOCK" --force --json >"$W/build.json" \
      2>"$W/build.log"; then
    COLD_S=$(since "$t")
    read -r INSTALLER INSTALLED BUILD_S WH < <(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["installer"].replace(" ", "-"), j["installed"], "%.2f" % j["seconds"], j["wheelhouse"])
' "$W/build.json")
    echo "cold build: $INSTALLED distributions with $INSTALLER in ${COLD_S} s (swe-ark says ${BUILD_S} s)"
    row+=$'\n'"  cold build (env build --force): ${COLD_S} s, $INSTALLED distributions, $INSTALLER"
  else
    cat "$W/build.log"
    fail "$IID: env build --force with no network"
    row+=$'\n'"  cold build: FAILED: $(grep -m1 'error' "$W/build.log")"
    SUMMARY+=("$row")
    continue
  fi

  # The instance's bundle, packed from the mirror's objects, unpacked and checked.
  jq_inst() {
    python3 - "$IID" "$DATA"/*.jsonl <<'PY'
import json, sys
iid, files = sys.argv[1], sys.argv[2:]
for f in files:
    for line in open(f):
        if line.strip() and json.loads(line).get("instance_id") == iid:
            sys.stdout.write(line)
            raise SystemExit
PY
  }
  jq_inst >"$W/instance.json"
  BUNDLE=$(offline "$SWE_ARK" --ark "$ARK" -q pack --repo "$NAME" --instance "$W/instance.json" \
    2>"$W/pack.log" | tail -1)
  if [ -z "$BUNDLE" ] || ! offline "$SWE_ARK" --ark "$ARK" -q unpack "$BUNDLE" -o "$W/unpacked" \
      >/dev/null 2>"$W/unpack.log"; then
    cat "$W/pack.log" "$W/unpack.log" 2>/dev/null
    fail "$IID: pack/unpack of the instance"
    row+=$'\n'"  bundle: FAILED"
    SUMMARY+=("$row")
    continue
  fi
  SRC=$W/unpacked/codebase

  t=$(now)
  if ! offline "$SWE_ARK" --ark "$ARK" -q env build "$LOCK" --copy-to "$W/venv" >/dev/null \
      2>"$W/copy.log"; then
    cat "$W/copy.log"
    fail "$IID: env build --copy-to"
    SUMMARY+=("$row")
    continue
  fi
  COPY_S=$(since "$t")
  t=$(now)
  if ! in_venv "$W/venv" "$WH" "$SRC" bash -c "$INSTALL" >"$W/install.log" 2>&1; then
    tail -20 "$W/install.log"
    fail "$IID: the install \`$INSTALL\` with no network"
    row+=$'\n'"  warm: copy ${COPY_S} s; install \`$INSTALL\`: FAILED"
    SUMMARY+=("$row")
    continue
  fi
  INSTALL_S=$(since "$t")
  echo "warm: copy ${COPY_S} s, then \`$INSTALL\` from the wheelhouse in ${INSTALL_S} s"
  row+=$'\n'"  warm: copy (env build --copy-to) ${COPY_S} s + \`$INSTALL\` offline ${INSTALL_S} s"

  # One test file at the base commit.
  t=$(now)
  if [ -f "$SRC/$TEST_FILE" ]; then
    in_venv "$W/venv" "$WH" "$SRC" python -m pytest -rA -p no:cacheprovider "$TEST_FILE" \
      >"$W/test-file.log" 2>&1
    rc=$?
    TEST_S=$(since "$t")
    res=$(counts "$W/test-file.log")
    echo "pytest -rA $TEST_FILE: ${res:-no summary} (exit $rc, ${TEST_S} s)"
    if [ $rc -ne 0 ]; then
      tail -15 "$W/test-file.log"
      fail "$IID: pytest $TEST_FILE (exit $rc)"
      row+=$'\n'"  pytest $TEST_FILE: FAILED (exit $rc): ${res:-no summary}"
    else
      row+=$'\n'"  pytest $TEST_FILE: ${res} (${TEST_S} s)"
    fi
  else
    row+=$'\n'"  pytest $TEST_FILE: not in this commit"
  fi

  # The evaluation, as SWE-bench's harness does it: test patch, tests; gold patch, tests.
  TESTS=$(python3 - "$W/unpacked/patches/test.diff" <<'PY'
import re, sys
skip = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")
files = re.findall(r"^diff --git a/(\S+) b/", open(sys.argv[1]).read(), re.M)
print(" ".join(f for f in dict.fromkeys(files) if not f.endswith(skip)))
PY
)
  ok_eval=1
  if ! (cd "$SRC" && git apply "$W/unpacked/patches/test.diff"); then
    fail "$IID: the test patch does not apply"
    ok_eval=0
  fi
  if [ $ok_eval -eq 1 ]; then
    # shellcheck disable=SC2086
    in_venv "$W/venv" "$WH" "$SRC" python -m pytest -rA -p no:cacheprovider $TESTS \
      >"$W/eval-before.log" 2>&1
    if ! (cd "$SRC" && git apply "$W/unpacked/patches/gold.diff"); then
      fail "$IID: the gold patch does not apply"
      ok_eval=0
    fi
  fi
  if [ $ok_eval -eq 1 ]; then
    t=$(now)
    # shellcheck disable=SC2086
    in_venv "$W/venv" "$WH" "$SRC" python -m pytest -rA -p no:cacheprovider $TESTS \
      >"$W/eval-after.log" 2>&1
    EVAL_S=$(since "$t")
    verdict=$(python3 - "$W/instance.json" <(parse_pytest "$W/eval-before.log") \
      <(parse_pytest "$W/eval-after.log") <<'PY'
import json, sys
inst = json.load(open(sys.argv[1]))
before, after = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def tests(field):
    v = inst[field]
    return json.loads(v) if isinstance(v, str) else v
f2p, p2p = tests("FAIL_TO_PASS"), tests("PASS_TO_PASS")
ok = lambda s: s in ("PASSED", "XFAIL")
f2p_before = sum(1 for t in f2p if ok(before.get(t, "missing")))
f2p_after = sum(1 for t in f2p if ok(after.get(t, "missing")))
p2p_after = sum(1 for t in p2p if ok(after.get(t, "missing")))
bad = [t for t in f2p + p2p if not ok(after.get(t, "missing"))]
good = f2p_before == 0 and not bad
print(("RESOLVED" if good else "NOT RESOLVED") +
      f": FAIL_TO_PASS {f2p_after}/{len(f2p)} pass with the gold patch "
      f"({f2p_before} before it), PASS_TO_PASS {p2p_after}/{len(p2p)}" +
      ("" if not bad else "; not passing: " + ", ".join(bad[:5])))
PY
)
    echo "evaluation ($TESTS): $verdict (${EVAL_S} s)"
    row+=$'\n'"  evaluation ($TESTS): $verdict"
    [[ $verdict == RESOLVED* ]] || fail "$IID: evaluation: $verdict"
  else
    row+=$'\n'"  evaluation: FAILED (a patch does not apply)"
  fi
  SUMMARY+=("$row")
done <"$ROOT/instances.tsv"

# --- summary -------------------------------------------------------------------------------
step "Summary ($(since "$START") s in all; the mirror in ${MIRROR_S} s)"
echo "swe-ark: $("$SWE_ARK" --version); uv: ${SWE_ARK_UV:+$("$SWE_ARK_UV" --version 2>/dev/null)}"
echo "network for everything after the lock: ${OFFLINE[*]:-(none: unshare -n failed)}"
for r in "${SUMMARY[@]}"; do
  printf '%s\n' "$r"
done
sa env ls
if [ $FAILED -ne 0 ]; then
  echo "e2e: FAILED (see above; logs in $ROOT)"
  exit 1
fi
echo "e2e: passed"
