#!/usr/bin/env bash
# `make test`: builds every test binary (cargo test --no-run), then runs them all, several
# at a time and the slowest first (scripts/test-pool.py; SWE_ARK_TEST_JOBS, default the
# number of CPUs, at most 4), each even after another failed; then a summary of each
# binary's result, the failed tests named. Exit status: non-zero when any binary failed or
# the tests did not build.
#
# Usage: scripts/test-all.sh [CARGO TEST ARGS...] [-- ARGS FOR EACH BINARY]
#   (CARGO: the cargo to run, default cargo)
set -uo pipefail

log=$(mktemp "${TMPDIR:-/tmp}/swe-ark-test.XXXXXX")
free=$(mktemp "${TMPDIR:-/tmp}/swe-ark-free.XXXXXX")
artifacts=$(mktemp "${TMPDIR:-/tmp}/swe-ark-artifacts.XXXXXX")
# The least free space, every 2 s, of the filesystems the tests write (the target directory,
# the temporary directories): a run that fails with ENOSPC says how close it came.
places=(target "${TMPDIR:-/tmp}" /var/tmp)
mkdir -p target
( while :; do df -P -B1M "${places[@]}" 2>/dev/null | awk 'NR > 1 { print $6, $4, $2 }' >>"$free"; sleep 2; done ) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null; rm -f "$log" "$free" "$artifacts"' EXIT

cargo_args=()
binary_args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; binary_args=("$@"); break; fi
  cargo_args+=("$1"); shift
done

# The whole suite is built from scratch on a fresh clone (and by CI): incremental compilation
# only costs there (its caches are written, never read: 206 s against 250 s for this build on a
# 2-core machine). Its artifacts live beside the incremental ones of `cargo test`, under other
# names, so neither rebuilds the other's. CARGO_INCREMENTAL=1 keeps it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

started=$SECONDS
# The build's messages on the terminal (rendered), its artifacts' list for the pool.
"${CARGO:-cargo}" test --locked --no-run --message-format=json-render-diagnostics \
  ${cargo_args[@]+"${cargo_args[@]}"} >"$artifacts"
rc=$?
if [ "$rc" -eq 0 ]; then
  echo "== built in $((SECONDS - started)) s"
  # Each binary's results on stdout, in one stream, to the terminal and the log.
  python3 scripts/test-pool.py "$artifacts" ${binary_args[@]+-- "${binary_args[@]}"} 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  echo "== the tests ran in $((SECONDS - started)) s with the build"
fi
kill "$sampler" 2>/dev/null

# One line per binary: "ok" or "FAILED", its name, its counts and the tests that failed. A
# binary with no "test result" line died before it could report (a crash, a signal).
awk -v rc="$rc" '
  function close_binary() {
    if (name == "") return
    n++
    if (result == "") { status[n] = "FAILED"; detail[n] = "no result: it died before reporting" }
    else { status[n] = result; detail[n] = counts (failed != "" ? ": " failed : "") }
    names[n] = name
    if (status[n] != "ok") bad++
    name = ""
  }
  /^ +Running (unittests )?[^ ]+ \(.*\)$/ {
    close_binary()
    name = $2 == "unittests" ? $2 " " $3 : $2
    result = ""; failed = ""; counts = ""; listing = 0
    next
  }
  /^ +Doc-tests [^ ]+$/ {
    close_binary()
    name = "doc-tests " $2
    result = ""; failed = ""; counts = ""; listing = 0
    next
  }
  name != "" && /^failures:$/ { failed = ""; listing = 1; next }
  name != "" && listing && /^    [^ ]/ { sub(/^ +/, ""); failed = failed (failed == "" ? "" : ", ") $0; next }
  name != "" && /^test result: / {
    listing = 0
    result = $3; sub(/\.$/, "", result)
    counts = $4 " passed, " $6 " failed"
    next
  }
  END {
    close_binary()
    print ""
    print "== make test: each test binary"
    for (i = 1; i <= n; i++) printf "%-7s %-32s %s\n", status[i], names[i], detail[i]
    if (n == 0) print "no test binary ran (the build failed?)"
    else if (bad) printf "== %d of %d test binaries failed\n", bad, n
    else if (rc != 0) printf "== every test binary passed, but the run exited %d (above)\n", rc
    else printf "== all %d test binaries passed\n", n
  }
' "$log"
# Why each failed test failed, last: a run's tail (all that CI shows of it) then names the
# panic, not only the test. Per failed test, its panic message and up to 25 lines after it.
awk '
  /^---- .* stdout ----$/ { test = $2; keep = 0; next }
  /^failures:$/ || /^test result: / { test = ""; keep = 0; next }
  test != "" && /panicked at/ { if (!shown++) print "\n== why the failed tests failed"; print "-- " test; keep = 26 }
  keep > 0 { print; keep-- }
' "$log"
# Least free MiB per filesystem (by mount point) over the run.
awk '!($1 in least) || $2 < least[$1] { least[$1] = $2; size[$1] = $3 }
  END { for (m in least) printf "== disk: at least %d MiB of %d free on %s during the run\n", least[m], size[m], m }' "$free"
exit "$rc"
