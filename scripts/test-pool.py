#!/usr/bin/env python3
"""Runs cargo's test binaries several at a time, the slowest first (`make test`).

Most of the suite's binaries spend their time waiting on the processes they start (pip, uv,
git, pytest in a sandbox), one after another: one binary at a time left the machine's cores
idle about half the time. This runs JOBS binaries side by side (SWE_ARK_TEST_JOBS, default
the number of CPUs, at most 4), each as `cargo test` runs it (from the package root, with
its own threads). It prints a line as each starts, and each binary's whole output when it
ends, after the line cargo prints before it ("     Running tests/x.rs (target/debug/deps/x-…)"):
the output reads as cargo's, and scripts/test-all.sh's summary reads it alike.

The order: longest first, by the times of the last run on this machine (target/test-times.tsv,
written at the end of each run), else by FIRST below (the slowest binaries as measured on a
2-core machine), then the rest in cargo's order.

Usage: test-pool.py ARTIFACTS.json [-- ARGS FOR EACH BINARY]
  ARTIFACTS.json: `cargo test --no-run --message-format=json` output (one JSON object a line).
Exit status: 0 when every binary passed, 101 otherwise (cargo test's).
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

# The slowest binaries first when no earlier run's times are at hand, longest first (seconds,
# two at a time on 2 cores, from a fresh clone: shard 398, env 284, validate 175, services 108,
# release 94, slurm 93, bucket 61, hostile 56, demo 39, vcs 34, taskrepo 33, submodules 33;
# rust 7 to 51, as cargo's registry cache here is warm or cold).
FIRST = [
    "tests/shard.rs",
    "tests/env.rs",
    "tests/validate.rs",
    "tests/services.rs",
    "tests/release.rs",
    "tests/slurm.rs",
    "tests/bucket.rs",
    "tests/hostile.rs",
    "tests/rust.rs",
    "tests/demo.rs",
    "tests/vcs.rs",
    "tests/taskrepo.rs",
    "tests/submodules.rs",
    "tests/node.rs",
]


def binaries(artifacts_path, root):
    """(name as cargo prints it, executable) of each test binary, in cargo's order."""
    out = []
    with open(artifacts_path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
                continue
            if not msg.get("profile", {}).get("test"):
                continue
            target = msg["target"]
            src = os.path.relpath(target["src_path"], root)
            name = f"unittests {src}" if "lib" in target["kind"] else src
            out.append((name, msg["executable"]))
    return out


def read_times(times_path):
    """{binary: seconds} of the earlier runs here."""
    known = {}
    try:
        with open(times_path) as f:
            for line in f:
                name, _, secs = line.rstrip("\n").rpartition("\t")
                try:
                    known[name] = float(secs)
                except ValueError:
                    pass
    except FileNotFoundError:
        pass
    return known


def ordered(bins, known):
    """`bins`, longest first by `known` (the earlier runs' times), else by FIRST."""
    if known:
        # Unknown binaries (new ones) first: they may be slow.
        return sorted(bins, key=lambda b: -known.get(b[0], float("inf")))
    rank = {n: i for i, n in enumerate(FIRST)}
    return sorted(bins, key=lambda b: rank.get(b[0], len(FIRST)))


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    if len(argv) != 1:
        sys.exit(__doc__)
    root = os.getcwd()
    bins = binaries(argv[0], root)
    times_path = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "test-times.tsv")
    known = read_times(times_path)
    queue = ordered(bins, known)
    # At most 4 by default: each binary's tests write archives and environments of their own,
    # and more side by side multiply the disk they take at once (18 GB at the peak with 2).
    jobs = int(os.environ.get("SWE_ARK_TEST_JOBS") or min(os.cpu_count() or 1, 4))
    jobs = max(1, min(jobs, len(queue)))
    print(f"== {len(queue)} test binaries, {jobs} at a time", flush=True)

    lock = threading.Lock()
    failed = []
    took = {}

    def run(name, exe):
        with lock:
            # A line as each starts: the output of a binary comes only when it ends.
            print(f"== started {name}", flush=True)
        with tempfile.TemporaryFile() as log:
            started = time.monotonic()
            # As cargo runs a test binary: from the package root, CARGO_MANIFEST_DIR set.
            env = dict(os.environ, CARGO_MANIFEST_DIR=root)
            rc = subprocess.call(
                [exe, *extra], cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env
            )
            secs = time.monotonic() - started
            log.seek(0)
            text = log.read()
        with lock:
            took[name] = secs
            if rc != 0:
                failed.append(name)
            sys.stdout.write(f"     Running {name} ({os.path.relpath(exe, root)})\n")
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
            if rc != 0 and b"test result:" not in text:
                sys.stdout.write(f"(exit status {rc})\n")
            sys.stdout.write(f"== {name}: {secs:.1f} s\n\n")
            sys.stdout.flush()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                name, exe = queue.pop(0)
            run(name, exe)

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    # The times, for the next run's order: merged into the last ones (a run of some binaries
    # keeps the others'), not when the binaries were given a filter (their times would mislead).
    if not extra:
        known.update(took)
        os.makedirs(os.path.dirname(times_path) or ".", exist_ok=True)
        tmp = times_path + ".tmp"
        with open(tmp, "w") as f:
            for name, secs in sorted(known.items()):
                f.write(f"{name}\t{secs:.1f}\n")
        os.replace(tmp, times_path)
    sys.exit(101 if failed else 0)


if __name__ == "__main__":
    main()
