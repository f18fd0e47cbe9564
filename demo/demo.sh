#!/usr/bin/env bash
# The swe-ark demo, on data it makes itself: a small Python project with a real git history,
# one task instance built from a real fix (its tests run for real, before and after), packed
# into a bundle, listed, shown, verified, unpacked, tampered with and caught.
# Usage: demo/demo.sh [path/to/swe-ark]   (make demo builds it first)
set -euo pipefail

SWE_ARK=$(realpath "${1:-target/release/swe-ark}")
ROOT=$(realpath -m "${DEMO_DIR:-target/demo}")
rm -rf "$ROOT"
mkdir -p "$ROOT"
cd "$ROOT"
START=$(date +%s.%N)

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*" >&2; "$@"; }

# Hermetic git: no user config, fixed identity and dates, so every hash below is the same on
# every machine.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
# The demo folder may sit inside another checkout (this one): git must not see it.
export GIT_CEILING_DIRECTORIES="$ROOT"
export GIT_AUTHOR_NAME="Demo Author" GIT_AUTHOR_EMAIL=author@example.com
export GIT_COMMITTER_NAME="Demo Committer" GIT_COMMITTER_EMAIL=committer@example.com
commit() { GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1" git commit -q -m "$2"; }

step "1. An upstream repository with a history (made by code)"
git init -q -b main upstream
cd upstream
mkdir -p calc tests
cat > calc/__init__.py <<'PY'
PY
cat > calc/ops.py <<'PY'
def add(a, b):
    return a + b


def mean(xs):
    return sum(xs) / len(xs)
PY
cat > tests/test_ops.py <<'PY'
import unittest

from calc.ops import add, mean


class TestOps(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)
PY
printf '#!/bin/sh\nexec python3 -m unittest -v "$@"\n' > run-tests.sh
chmod +x run-tests.sh
ln -s calc/ops.py ops-link.py
git add -A && commit "2024-01-01T10:00:00Z" "calc: add and mean"
git tag v1.0
echo "# calc" > README.md
git add -A && commit "2024-02-01T10:00:00Z" "docs: readme"
BASE=$(git rev-parse HEAD)
# The fix for "mean([]) raises ZeroDivisionError", with its test, as a pull request would have it.
git checkout -q -b fix-empty-mean
cat > calc/ops.py <<'PY'
def add(a, b):
    return a + b


def mean(xs):
    if not xs:
        return 0.0
    return sum(xs) / len(xs)
PY
git add -A && commit "2024-02-10T10:00:00Z" "ops: mean of nothing is 0.0 (fixes #7)"
cat >> tests/test_ops.py <<'PY'

    def test_mean_empty(self):
        self.assertEqual(mean([]), 0.0)
PY
git add -A && commit "2024-02-10T11:00:00Z" "tests: mean of nothing"
GOLD=$(git diff "$BASE" HEAD -- calc)
TESTP=$(git diff "$BASE" HEAD -- tests)
git checkout -q main
cd ..
echo "base commit $BASE ($(git -C upstream rev-list --count HEAD) commits on main, tag v1.0)"

step "2. The task instance (SWE-bench fields; the test lists come from the runs in step 3)"
python3 - "$BASE" <<PY > instance.json
import json, sys
print(json.dumps({
    "instance_id": "demo__calc-7",
    "repo": "demo/calc",
    "base_commit": sys.argv[1],
    "patch": """$GOLD
""",
    "test_patch": """$TESTP
""",
    "problem_statement": "mean([]) raises ZeroDivisionError\nIt should return 0.0.\n",
    "hints_text": "",
    "created_at": "2024-02-10T10:00:00Z",
    "version": "1.0",
    "environment_setup_commit": sys.argv[1],
}, indent=1))
PY
echo "instance.json: $(wc -c < instance.json) bytes"

step "3. The codebase at the base commit, and real test runs before and after the fix"
mkdir codebase
git -C upstream archive "$BASE" | tar -x -C codebase
cp -r codebase work
(cd work && git apply <(python3 -c 'import json;print(json.load(open("../instance.json"))["test_patch"],end="")') \
  && python3 -m unittest -v tests.test_ops > ../pre.log 2>&1 || true)
(cd work && git apply <(python3 -c 'import json;print(json.load(open("../instance.json"))["patch"],end="")') \
  && python3 -m unittest -v tests.test_ops > ../post.log 2>&1)
# Logs name files as SWE-bench's do (/testbed/...), so the bundle is the same wherever the demo runs.
# Durations ("Ran 3 tests in 0.001s") vary from run to run: fixed, so the demo's bundle id is too.
sed -i -e "s#$ROOT/work/#/testbed/#g" -e 's/^\(Ran [0-9]* tests\? in \)[0-9.]*s$/\10.000s/' pre.log post.log
grep -E "test_mean_empty" pre.log post.log
cat > spec.toml <<'TOML'
# The executable context of demo/calc 1.0 (manifests/ will hold these per repository).
python = "3"
install = ""
test_cmd = "python3 -m unittest -v"
log_parser = "unittest"
TOML
python3 - <<'PY' > results.json
import json, re
def parse(path):
    out = {}
    for line in open(path):
        m = re.match(r"^(\w+) \(([\w.]+)\)(?: \.\.\.)? (ok|FAIL|ERROR|skipped)", line)
        if m:
            out[f"{m.group(1)} ({m.group(2)})"] = {"ok": "PASSED", "FAIL": "FAILED", "ERROR": "ERROR"}.get(m.group(3), "SKIPPED")
    return out
pre, post = parse("pre.log"), parse("post.log")
print(json.dumps({"pre": pre, "post": post,
    "FAIL_TO_PASS": sorted(t for t in post if post[t] == "PASSED" and pre.get(t) != "PASSED"),
    "PASS_TO_PASS": sorted(t for t in post if post[t] == "PASSED" and pre.get(t) == "PASSED")}, indent=1, sort_keys=True))
PY
# FAIL_TO_PASS / PASS_TO_PASS go into the instance as JSON strings, as the published data has them.
python3 - <<'PY'
import json
inst, r = json.load(open("instance.json")), json.load(open("results.json"))
inst["FAIL_TO_PASS"], inst["PASS_TO_PASS"] = json.dumps(r["FAIL_TO_PASS"]), json.dumps(r["PASS_TO_PASS"])
json.dump(inst, open("instance.json", "w"), indent=1)
print("FAIL_TO_PASS", r["FAIL_TO_PASS"])
print("PASS_TO_PASS", r["PASS_TO_PASS"])
PY

step "4. Mirror the repository (every ref, full history) and pack straight from the mirror"
run "$SWE_ARK" --ark ark mirror add "$ROOT/upstream" --name demo/calc
ID=$(run "$SWE_ARK" --ark ark pack --repo demo/calc --instance instance.json \
  --spec spec.toml --pre-log pre.log --post-log post.log --results results.json)
echo "bundle id: $ID"
git --git-dir=ark/mirrors/demo__calc.git for-each-ref --format='pinned: %(refname) %(objectname:short)' refs/swe-ark

step "5. The same inputs from a plain directory, another place, mtimes and umask: the same bytes"
cp -r codebase elsewhere-codebase
touch -d "2030-01-01" elsewhere-codebase/calc/ops.py
ID2=$( (umask 077 && "$SWE_ARK" --ark ark2 -q pack --instance instance.json --codebase elsewhere-codebase \
  --spec spec.toml --pre-log pre.log --post-log post.log --results results.json) )
"$SWE_ARK" --ark ark -q export-bundle "$ID" -o exported > /dev/null
"$SWE_ARK" --ark ark2 -q export-bundle "$ID2" -o exported2 > /dev/null
cmp "exported/$ID.tar.zst" "exported2/$ID2.tar.zst" && echo "identical bundle files: $ID2"
cmp ark/packs/*.pack ark2/packs/*.pack && echo "identical stored packs: $(basename ark/packs/*.pack)"
echo "git's tree id of the base commit: $(git -C upstream rev-parse "$BASE^{tree}")"

step "6. List, show, verify"
run "$SWE_ARK" --ark ark ls
run "$SWE_ARK" --ark ark show demo__calc-7 | head -n 14
run "$SWE_ARK" --ark ark verify
run "$SWE_ARK" --ark ark ls --stats
echo "by hand: $(zstd -dc "exported/$ID.tar.zst" | sha256sum | cut -c1-64)"

step "7. Unpack and compare with the repository"
run "$SWE_ARK" --ark ark unpack "${ID:0:12}" -o unpacked > /dev/null
diff -r codebase unpacked/codebase && echo "unpacked/codebase is exactly the tree at $BASE"

step "8. Tamper with a copy: verify names the member and fails with exit 1"
mkdir -p tampered/bundles
zstd -dc "exported/$ID.tar.zst" | sed 's/return a + b/return a - b/' | zstd -q -o "tampered/$ID.tar.zst"
set +e
"$SWE_ARK" verify "tampered/$ID.tar.zst"
code=$?
"$SWE_ARK" -q unpack "tampered/$ID.tar.zst" -o tampered/out
code2=$?
set -e
echo "verify exit code: $code; unpack exit code: $code2; tampered/out exists: $([ -e tampered/out ] && echo yes || echo no)"
[ "$code" -eq 1 ] && [ "$code2" -eq 2 ] && [ ! -e tampered/out ]

step "9. Carry the mirror across an air gap as one git bundle, and check it there"
run "$SWE_ARK" --ark ark mirror export demo/calc -o calc.bundle > /dev/null
run "$SWE_ARK" --ark ark3 mirror import calc.bundle --name demo/calc
run "$SWE_ARK" --ark ark3 mirror verify
ID3=$("$SWE_ARK" --ark ark3 -q pack --repo demo/calc --instance instance.json \
  --spec spec.toml --pre-log pre.log --post-log post.log --results results.json)
[ "$ID3" = "$ID" ] && echo "packed again on the other side: $ID3 (the same bundle)"

END=$(date +%s.%N)
step "Summary"
printf 'instance      demo__calc-7 (FAIL_TO_PASS %s, PASS_TO_PASS %s)\n' \
  "$(python3 -c 'import json;print(len(json.load(open("results.json"))["FAIL_TO_PASS"]))')" \
  "$(python3 -c 'import json;print(len(json.load(open("results.json"))["PASS_TO_PASS"]))')"
printf 'bundle        %s\n' "$ID"
printf 'size          %s bytes as a bundle file, %s bytes stored in ark/packs, %s bytes of tar\n' \
  "$(stat -c %s "exported/$ID.tar.zst")" "$(cat ark/packs/*.pack | wc -c)" \
  "$(zstd -dc "exported/$ID.tar.zst" | wc -c)"
printf 'took          %.1f s\n' "$(echo "$END - $START" | bc -l 2>/dev/null || python3 -c "print($END - $START)")"
printf 'archives in   %s (ark: the main one, ark2: packed from a directory, ark3: across the gap)\n' "$ROOT"
