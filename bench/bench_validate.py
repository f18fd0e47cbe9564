#!/usr/bin/env python3
"""Times `swe-ark validate`: instances validated per hour on a generated fixture set, and the
share of the time spent outside the test commands.

The fixture set is made the way tests/validate.rs makes its own, scaled up: a Python project
(`tests/fixtures/mkdists.py --project`, build backend tinybuild) with a module of N bugs and
five test files of 32 to 48 passing tests that do some real work (each pytest run takes about
a second), committed with fixed names and dates (2021-06-01) and mirrored as `acme/bench`; a
manifest (Python 3.11 from pyenv, `pip_packages = ["pytest"]`, install `python -m pip install
-e .`, test command `pytest -rA`, log parser pytest) in a directory named by
`SWE_ARK_MANIFESTS`; its context locked (`swe-ark env lock`) from a package index that this
script serves on 127.0.0.1 (PEP 503 HTML: the tinybuild wheel and the pytest wheels that
scripts/fetch-test-wheels.sh keeps in .tools/test-wheels); N instances imported (`swe-ark
import`), instance i adding one failing test to one of the test files (its test patch) and
fixing bug i (its gold patch), with FAIL_TO_PASS and PASS_TO_PASS published, so that an
instance is kept only when validation finds exactly those lists.

Then `swe-ark validate --repo acme/bench --jobs J` runs for each J of `--jobs` (default 2, then
1, the later ones with `--force`), timed (wall time), and each instance's `results.json` gives
its per-step timings. Reported: instances per hour (N / wall time), the sum of each step over
the instances, and the share outside the test commands two ways, of the sum of `total`:
(a) everything but the test runs (`pre`, `post-*`): install and reinstall count as outside;
(b) swe-ark's own steps only: total - pre - post-* - install - reinstall (materialize,
environment, test-patch, gold-patch, parse and what no step names). The target is (b) under
10 % (the installs are the context's own command, which SWE-bench runs twice too); a missed
target prints `TARGET MISSED` and still exits 0.

Checks (exit 1): every instance is `kept` (the failing ones are named), its results.json has
every step's timing, the lock and the instances are where they should be.

It needs Python 3.11 from pyenv (`$PYENV_ROOT/versions/3.11.*`; without it the bench says so
and exits 0), git, bash, and the pytest wheels (`bash scripts/fetch-test-wheels.sh`, which
this script runs: it downloads them once). No other network. Only the standard library is
used. Exit status: 0 when the measurement completed (even if the target is missed), 1 when a
command or a check failed, 2 on bad usage.

Usage: python3 bench/bench_validate.py --swe-ark target/release/swe-ark [--instances 20]
           [--jobs 2,1] [--runs 3] [--workdir DIR] [--keep] [--json FILE]
"""

import argparse
import hashlib
import html
import http.server
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

import benchlib
from bench_env import clean_env, find_python311, find_uv
from benchlib import BenchError, Scratch, log, run

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MKDISTS = os.path.join(ROOT, "tests", "fixtures", "mkdists.py")
FETCH_WHEELS = os.path.join(ROOT, "scripts", "fetch-test-wheels.sh")
TEST_WHEELS = os.path.join(ROOT, ".tools", "test-wheels")

REPO = "acme/bench"
VERSION = "1.0"
PACKAGE = "abacus"
BASE_DATE = "2021-06-01T00:00:00Z"
TARGET = 10.0  # % of the total: swe-ark's own steps, definition (b)

# The existing tests of each test file (five files; instance i adds its test to file i % 5).
TESTS_PER_FILE = [32, 40, 48, 36, 44]

MANIFEST = f"""\
repo = "{REPO}"
source = "bench/bench_validate.py"
log_parser = "pytest"

[defaults]
python = "3.11"
pip_packages = ["pytest"]
install = "python -m pip install -e ."
test_cmd = "pytest -rA"

[versions."{VERSION}"]
"""

# Helpers the existing tests exercise: plain Python loops, so that each test takes a few to
# twenty milliseconds, as unit tests of a real library do.
UTIL = '''\
"""Helpers with enough work in them for the tests to take a moment."""


def collatz_longest(limit):
    """The start below `limit` with the longest Collatz sequence, and its length."""
    best, arg = 0, 1
    for start in range(1, limit):
        n, steps = start, 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        if steps > best:
            best, arg = steps, start
    return arg, best


def levenshtein(a, b):
    """The edit distance between two strings."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def lcg_sorted_checksum(seed, n):
    """Sorts n pseudo-random numbers and folds them into a checksum."""
    x, values = seed, []
    for _ in range(n):
        x = (1103515245 * x + 12345) % 2147483648
        values.append(x)
    values.sort()
    h = 0
    for i, v in enumerate(values):
        h = (h * 31 + v * (i + 1)) % 1000000007
    return h


def word_counts(seed, n):
    """The three most frequent words of a generated text, with their counts."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]
    x, counts = seed, {}
    for _ in range(n):
        x = (x * 48271) % 2147483647
        w = words[x % len(words)] + words[(x >> 8) % len(words)]
        counts[w] = counts.get(w, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
'''

# The calls the existing tests make: (helper, argument template); `j` is the test's number.
CALLS = [
    ("collatz_longest", "({limit},)"),
    ("levenshtein", "({a!r}, {b!r})"),
    ("lcg_sorted_checksum", "({seed}, {n})"),
    ("word_counts", "({seed}, {n})"),
]


def test_call(j, k):
    """(helper, args) of test j of file k."""
    helper, _ = CALLS[(j + k) % len(CALLS)]
    if helper == "collatz_longest":
        return helper, (5000 + 90 * j,)
    if helper == "levenshtein":
        letters = "abcdefghijklmnopqrstuvwxyz"
        a = "".join(letters[(i * (j + 3)) % 26] for i in range(140 + j))
        b = "".join(letters[(i * (j + 5) + k) % 26] for i in range(130 + j))
        return helper, (a, b)
    if helper == "lcg_sorted_checksum":
        return helper, (j * 7919 + k, 30000 + 450 * j)
    return helper, (j * 104729 + k + 1, 22000 + 380 * j)


# The bugs: op_i does one of three things wrong; the gold patch of instance i fixes it.
BUGS = [
    ("    for v in values[1:]:\n", "    for v in values:\n"),
    ("    for v in values[:-1]:\n", "    for v in values:\n"),
    ("    return total * {m} + 1\n", "    return total * {m}\n"),
]


def op_source(i, fixed):
    m = i + 2
    loop, ret = "    for v in values:\n", f"    return total * {m}\n"
    bad, good = BUGS[i % len(BUGS)]
    line = (good if fixed else bad).format(m=m)
    if "return" in bad:
        ret = line
    else:
        loop = line
    return (f"def op_{i}(values):\n    \"\"\"The sum of `values`, times {m}.\"\"\"\n"
            f"    total = 0\n{loop}        total += v\n{ret}")


def ops_module(n, fixed=()):
    return '"""Operations, each with a bug to fix."""\n\n\n' + "\n\n".join(
        op_source(i, i in fixed) for i in range(n))


def test_file(k, expected):
    lines = [f"from {PACKAGE} import ops, util\n"]
    for j in range(TESTS_PER_FILE[k]):
        helper, args = test_call(j, k)
        lines.append(f"\n\ndef test_{helper}_{j}():\n"
                     f"    assert util.{helper}{args!r} == {expected[(helper, args)]!r}\n")
    return "".join(lines)


def new_test(i):
    m = i + 2
    return (f"\n\ndef test_op_{i}():\n"
            f"    assert ops.op_{i}([1, 2, 3, 4]) == {10 * m}\n"
            f"    assert ops.op_{i}([]) == 0\n")


# --------------------------------------------------------------------------------------------
# The package index
# --------------------------------------------------------------------------------------------


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def dist_project(filename):
    """The normalized project of a wheel or sdist file name, or None."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        return normalize(parts[0]) if len(parts) >= 5 else None
    for ext in (".tar.gz", ".zip"):
        if filename.endswith(ext):
            name, _, version = filename[: -len(ext)].rpartition("-")
            return normalize(name) if name and version else None
    return None


class Index:
    """PEP 503 HTML pages for the wheels of one directory, on 127.0.0.1, one thread per
    connection, HTTP/1.1 keep-alive. Listings give no upload times (the lock says the cutoff
    could not apply); files are served from /files/<name> with their sha256 in the link."""

    def __init__(self, directory):
        self.dir = directory
        self.files = {}  # file name -> (project, sha256)
        for fn in sorted(os.listdir(directory)):
            project = dist_project(fn)
            if project and os.path.isfile(os.path.join(directory, fn)):
                with open(os.path.join(directory, fn), "rb") as f:
                    self.files[fn] = (project, hashlib.sha256(f.read()).hexdigest())
        self.requests = 0
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.answer(head=True)

            def do_GET(self):
                self.answer(head=False)

            def answer(self, head):
                index.requests += 1
                status, ctype, body = index.page(urllib.parse.unquote(
                    self.path.split("?")[0].split("#")[0]))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def page(self, path):
        text = "text/html; charset=utf-8"
        if path in ("/simple", "/simple/"):
            names = sorted({p for p, _ in self.files.values()})
            links = "".join(f'<a href="/simple/{n}/">{n}</a><br/>\n' for n in names)
            return 200, text, (f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"
                               ).encode()
        m = re.fullmatch(r"/simple/([^/]+)/?", path)
        if m:
            project = normalize(m.group(1))
            files = [(fn, sha) for fn, (p, sha) in self.files.items() if p == project]
            if not files:
                return 404, "text/plain", b"not found\n"
            links = "".join(
                f'<a href="/files/{urllib.parse.quote(fn)}#sha256={sha}">{html.escape(fn)}</a>'
                "<br/>\n" for fn, sha in files)
            return 200, text, (f"<!DOCTYPE html>\n<html><head><title>Links for {project}"
                               f"</title></head><body>\n{links}</body></html>\n").encode()
        m = re.fullmatch(r"/files/([^/]+)", path)
        if m and m.group(1) in self.files:
            with open(os.path.join(self.dir, m.group(1)), "rb") as f:
                return 200, "application/octet-stream", f.read()
        return 404, "text/plain", b"not found\n"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------------------------
# The fixture set
# --------------------------------------------------------------------------------------------


def run_err(argv, what, env):
    """Like benchlib.run, and returns stderr too: (seconds, stdout, stderr)."""
    started = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - started
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    if p.returncode != 0:
        raise BenchError(f"{what} failed (exit {p.returncode}): {shlex.join(argv)}\n"
                         f"{err.strip()}\n{out.strip()}")
    return elapsed, out, err


def git_env(env):
    return dict(env, GIT_AUTHOR_NAME="Bench Author", GIT_AUTHOR_EMAIL="author@example.com",
                GIT_COMMITTER_NAME="Bench Committer",
                GIT_COMMITTER_EMAIL="committer@example.com",
                GIT_AUTHOR_DATE=BASE_DATE, GIT_COMMITTER_DATE=BASE_DATE)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make_repo(python, repo, n, env):
    """The project at its base commit; returns (commit, {instance i: (test patch, gold patch,
    FAIL_TO_PASS, PASS_TO_PASS)})."""
    run([python, MKDISTS, "--project", repo, PACKAGE, "1.0", "[]"], "mkdists.py --project", env)
    util_ns = {}
    exec(compile(UTIL, "util.py", "exec"), util_ns)
    expected = {}
    for k in range(len(TESTS_PER_FILE)):
        for j in range(TESTS_PER_FILE[k]):
            helper, args = test_call(j, k)
            if (helper, args) not in expected:
                expected[(helper, args)] = util_ns[helper](*args)
    write(os.path.join(repo, PACKAGE, "util.py"), UTIL)
    write(os.path.join(repo, PACKAGE, "ops.py"), ops_module(n))
    tests = {}
    for k in range(len(TESTS_PER_FILE)):
        tests[k] = test_file(k, expected)
        write(os.path.join(repo, "tests", f"test_part{k}.py"), tests[k])
    genv = git_env(env)
    run(["git", "init", "-q", "-b", "main", repo], "git init", genv)
    run(["git", "-C", repo, "add", "-A"], "git add", genv)
    run(["git", "-C", repo, "commit", "-q", "-m", "abacus 1.0"], "git commit", genv)
    base = run(["git", "-C", repo, "rev-parse", "HEAD"], "git rev-parse", genv)[1].strip()

    def diff(path, text):
        full = os.path.join(repo, path)
        with open(full) as f:
            before = f.read()
        write(full, text)
        patch = run(["git", "-C", repo, "diff", "--", path], "git diff", genv)[1]
        write(full, before)
        return patch

    patches = {}
    for i in range(n):
        k = i % len(TESTS_PER_FILE)
        path = f"tests/test_part{k}.py"
        test_patch = diff(path, tests[k] + new_test(i))
        gold = diff(f"{PACKAGE}/ops.py", ops_module(n, fixed={i}))
        f2p = [f"{path}::test_op_{i}"]
        p2p = [f"{path}::test_{test_call(j, k)[0]}_{j}" for j in range(TESTS_PER_FILE[k])]
        patches[i] = (test_patch, gold, f2p, p2p)
    status = run(["git", "-C", repo, "status", "--porcelain"], "git status", genv)[1]
    if status.strip():
        raise BenchError(f"the repository is not clean after making the patches:\n{status}")
    return base, patches


def instance_id(i):
    return f"acme__bench-{i + 1}"


def write_instances(path, base, patches):
    with open(path, "w") as f:
        for i, (test_patch, gold, f2p, p2p) in sorted(patches.items()):
            f.write(json.dumps({
                "repo": REPO,
                "instance_id": instance_id(i),
                "base_commit": base,
                "patch": gold,
                "test_patch": test_patch,
                "problem_statement": f"op_{i} gives the wrong sum.\n",
                "hints_text": "",
                "created_at": "2021-07-01T00:00:00Z",
                "version": VERSION,
                "FAIL_TO_PASS": json.dumps(f2p),
                "PASS_TO_PASS": json.dumps(p2p),
                "environment_setup_commit": base,
            }) + "\n")


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------

TEST_STEPS = ("pre",)  # and post-1 .. post-K
INSTALL_STEPS = ("install", "reinstall")
OWN_STEPS = ("materialize", "worktree", "environment", "setup", "test-patch", "gold-patch",
             "test-patch-again", "parse")


def is_test_step(step):
    return step in TEST_STEPS or re.fullmatch(r"post-\d+", step) is not None


def validate_once(swe_ark, ark, jobs, args, env, force, n):
    argv = [swe_ark, "--ark", ark, "--no-progress", "validate", "--repo", REPO,
            "--jobs", str(jobs), "--runs", str(args.runs), "--timeout", str(args.timeout),
            "--json"]
    if force:
        argv.append("--force")
    log(f"validate: {n} instances, --jobs {jobs}: {shlex.join(argv[1:])}")
    os.sync()  # outside the timing: the setup's dirty pages are not charged to validate
    started = time.perf_counter()
    # stderr goes through: swe-ark prints a line per instance as it finishes.
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=None, env=env)
    wall = time.perf_counter() - started
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        raise BenchError(f"validate --jobs {jobs} failed (exit {p.returncode}): "
                         f"{shlex.join(argv)}\n{out.strip()}")
    summary = json.loads(out)
    if summary.get("errors"):
        raise BenchError(f"validate --jobs {jobs} reported errors: {summary['errors']}")

    _, rows_text = run([swe_ark, "--ark", ark, "-q", "ls", "--validated", "--json"],
                       "ls --validated", env)
    rows = {r["instance_id"]: r for r in json.loads(rows_text)}
    want = [instance_id(i) for i in range(n)]
    missing = [i for i in want if i not in rows]
    if missing:
        raise BenchError(f"--jobs {jobs}: no verdict for {', '.join(missing)}")
    not_kept = [f"{i} ({rows[i]['verdict']}, {rows[i]['reason_kind']}: "
                f"{rows[i]['reason'].splitlines()[0] if rows[i]['reason'] else ''})"
                for i in want if rows[i]["verdict"] != "kept"]
    if not_kept:
        raise BenchError(f"--jobs {jobs}: not kept: " + "; ".join(not_kept))

    steps = {}
    totals, per_instance = [], {}
    expected_steps = (["materialize", "worktree", "environment", "setup", "install",
                       "test-patch", "pre", "gold-patch", "reinstall", "test-patch-again"]
                      + [f"post-{k}" for k in range(1, args.runs + 1)] + ["parse", "total"])
    for iid in want:
        h = rows[iid]["results"]
        path = os.path.join(ark, "objects", "sha256", h[:2], h[2:])
        with open(path, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != h:
            raise BenchError(f"{iid}: the object {path} does not hash to its id")
        results = json.loads(data)
        if results.get("verdict") != "kept":
            raise BenchError(f"{iid}: results.json says {results.get('verdict')}")
        if results.get("network") != "isolated":
            raise BenchError(f"{iid}: the tests ran with network `{results.get('network')}`, "
                             "not isolated")
        t = results["timings"]
        lacking = [s for s in expected_steps if s not in t]
        if lacking:
            raise BenchError(f"{iid}: results.json has no timing for {', '.join(lacking)}: {t}")
        for s, v in t.items():
            steps[s] = steps.get(s, 0.0) + v
        totals.append(t["total"])
        per_instance[iid] = t

    total = steps["total"]
    tests = sum(v for s, v in steps.items() if is_test_step(s))
    installs = sum(steps.get(s, 0.0) for s in INSTALL_STEPS)
    own_named = sum(steps.get(s, 0.0) for s in OWN_STEPS)
    own = total - tests - installs
    pre_runs = [t["pre"] for t in per_instance.values()]
    post_runs = [v for t in per_instance.values() for s, v in t.items()
                 if re.fullmatch(r"post-\d+", s)]
    return {
        "jobs": jobs,
        "instances": n,
        "wall_seconds": wall,
        "instances_per_hour": n / wall * 3600,
        "steps": {s: steps[s] for s in sorted(steps, key=step_order)},
        "total": total,
        "tests": tests,
        "installs": installs,
        "own_named": own_named,
        "unnamed": own - own_named,
        "outside_a_percent": 100 * (total - tests) / total,
        "outside_b_percent": 100 * own / total,
        "target": f"(b) < {TARGET:.0f} %",
        "target_met": 100 * own / total < TARGET,
        "instance_total": {"min": min(totals), "median": statistics.median(totals),
                           "max": max(totals)},
        "test_run_seconds": {"median": statistics.median(pre_runs + post_runs),
                             "min": min(pre_runs + post_runs),
                             "max": max(pre_runs + post_runs)},
        # What the per-instance totals do not cover: recording the verdict, removing each work
        # directory, the command's own start and end. Exact for one job; with several, the
        # idle tail of the last instances counts too.
        "outside_totals_seconds": wall * jobs - total,
        "per_instance": per_instance,
    }


def step_order(s):
    order = ["materialize", "worktree", "environment", "setup", "install", "test-patch", "pre",
             "gold-patch", "reinstall", "test-patch-again"]
    if s in order:
        return (order.index(s), 0)
    m = re.fullmatch(r"post-(\d+)", s)
    if m:
        return (len(order), int(m.group(1)))
    return (len(order) + 1 + (s == "total"), 0) if s in ("parse", "total") else (99, 0)


def bench(args):
    swe_ark = benchlib.require(args.swe_ark, ("git", "bash"))
    python = args.python
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    scratch = Scratch(os.path.join(workdir, "validate"))
    root = scratch.root
    env = clean_env(root, find_uv())
    env["SWE_ARK_MANIFESTS"] = os.path.join(root, "manifests")
    write(os.path.join(root, "manifests", "acme__bench.toml"), MANIFEST)

    # The wheels: pytest and what it needs (downloaded once), and tinybuild.
    run(["bash", FETCH_WHEELS], "scripts/fetch-test-wheels.sh", None)
    dists = os.path.join(root, "dists")
    spec = os.path.join(root, "dists.spec.json")
    write(spec, json.dumps([{"name": "tinybuild", "version": "1.0", "kind": "wheel",
                             "backend": True}]))
    os.makedirs(dists)
    run([python, MKDISTS, dists, spec], "mkdists.py", env)
    for fn in os.listdir(TEST_WHEELS):
        if fn.endswith(".whl"):
            shutil.copy(os.path.join(TEST_WHEELS, fn), dists)

    setup_started = time.perf_counter()
    repo = os.path.join(root, "repo")
    base, patches = make_repo(python, repo, args.instances, env)
    ark = os.path.join(root, "ark")
    run([swe_ark, "--ark", ark, "-q", "mirror", "add", repo, "--name", REPO], "mirror add", env)

    index = Index(dists)
    try:
        lock_env = dict(env, SWE_ARK_INDEX_URL=index.url)
        log(f"locking {REPO} {VERSION} from the local index {index.url} ({len(index.files)} "
            "wheels)")
        lock_seconds, out, err = run_err(
            [swe_ark, "--ark", ark, "--no-progress", "env", "lock", REPO, VERSION,
             "--commit", base, "--python", python], "env lock", lock_env)
    finally:
        index.stop()
    lines = out.strip().splitlines()
    lock = lines[-1].strip() if lines else ""
    if not re.fullmatch(r"[0-9a-f]{64}", lock):
        raise BenchError(f"env lock printed `{lock}` last, not a lock id")
    # An HTML index gives no upload times: the lock says, for each project, that the cutoff
    # (the commit's date) could not apply.
    lock_notes = [line.strip() for line in err.splitlines() if "upload time" in line]
    log(f"locked: {lock[:12]} in {lock_seconds:.1f} s ({index.requests} index requests)")

    instances = os.path.join(root, "instances.jsonl")
    write_instances(instances, base, patches)
    run([swe_ark, "--ark", ark, "-q", "import", instances], "import", env)
    setup_seconds = time.perf_counter() - setup_started

    runs = []
    for k, jobs in enumerate(args.jobs):
        runs.append(validate_once(swe_ark, ark, jobs, args, env, force=k > 0,
                                  n=args.instances))
        r = runs[-1]
        log(f"validate --jobs {jobs}: {r['wall_seconds']:.1f} s, "
            f"{r['instances_per_hour']:.0f} instances/hour, outside the tests "
            f"(a) {r['outside_a_percent']:.1f} %, (b) {r['outside_b_percent']:.1f} %")
    packing = pack_once(swe_ark, ark, env, args.instances)
    log(f"pack --all-validated: {packing['seconds']:.2f} s for {packing['bundles']} bundles, "
        f"{packing['raw_log_bytes'] / 1e6:.1f} MB of raw logs normalized")
    if args.keep:
        log(f"the archive and the fixtures are kept in {root}")
    else:
        scratch.remove()

    return {
        "machine": benchlib.machine(swe_ark, ("git",)),
        "python": python,
        "python_version": benchlib.tool_version([python, "--version"]),
        "fixture": {
            "repo": REPO,
            "version": VERSION,
            "base_commit": base,
            "instances": args.instances,
            "test_files": len(TESTS_PER_FILE),
            "tests_per_file": TESTS_PER_FILE,
            "post_runs": args.runs,
            "lock": lock,
            "lock_seconds": lock_seconds,
            "lock_notes": lock_notes,
            "setup_seconds": setup_seconds,
        },
        "runs": runs,
        "pack": packing,
    }


def pack_once(swe_ark, ark, env, n):
    """`pack --all-validated`, timed: where a validation's record becomes a version 3 bundle
    (expected.json, the raw logs normalized: docs/BUNDLE-FORMAT.md), so the cost the
    normalization adds to validating an instance and packing it."""
    _, rows_text = run([swe_ark, "--ark", ark, "-q", "ls", "--validated", "--json"],
                       "ls --validated", env)
    raw = 0
    for r in json.loads(rows_text):
        for key in ("log_pre", "log_post"):
            h = r.get(key)
            if h:
                raw += os.path.getsize(os.path.join(ark, "objects", "sha256", h[:2], h[2:]))
    argv = [swe_ark, "--ark", ark, "--no-progress", "pack", "--all-validated", "--json"]
    os.sync()
    started = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    seconds = time.perf_counter() - started
    if p.returncode != 0:
        raise BenchError(f"pack --all-validated failed (exit {p.returncode}): "
                         f"{p.stderr.decode(errors='replace').strip()}")
    packed = json.loads(p.stdout)
    if len(packed) != n:
        raise BenchError(f"pack --all-validated packed {len(packed)} bundles, not {n}")
    for b in packed:
        _, shown = run([swe_ark, "--ark", ark, "-q", "show", b["id"], "--json"], "show", env)
        version = json.loads(shown)["manifest"]["version"]
        if version != 3:
            raise BenchError(f"bundle {b['id']} ({b['instance_id']}) is version {version}, not 3")
    return {"seconds": seconds, "bundles": len(packed), "raw_log_bytes": raw}


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def report(s):
    m, fx = s["machine"], s["fixture"]
    print()
    print("swe-ark validate bench")
    print(f"  machine    {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}")
    print(f"  tools      {m['swe_ark']}; {s['python_version']} ({s['python']})")
    print(f"  fixtures   {fx['instances']} instances of {fx['repo']} {fx['version']} (one base "
          f"commit), {fx['test_files']} test files of {min(fx['tests_per_file'])}-"
          f"{max(fx['tests_per_file'])} tests + the new one; {fx['post_runs']} post "
          f"run{'s' if fx['post_runs'] != 1 else ''}")
    print(f"  lock       {fx['lock'][:16]}, from a local PEP 503 index in "
          f"{fx['lock_seconds']:.1f} s; setup (repository, mirror, lock, import) "
          f"{fx['setup_seconds']:.1f} s")
    print()
    jobs = [r["jobs"] for r in s["runs"]]
    head = f"{'':<24}" + "".join(f"{'--jobs ' + str(j):>16}" for j in jobs)
    print(head)
    print("-" * len(head))

    def row(label, fn):
        print(f"{label:<24}" + "".join(f"{fn(r):>16}" for r in s["runs"]))

    row("wall time", lambda r: f"{r['wall_seconds']:.1f} s")
    row("instances / hour", lambda r: f"{r['instances_per_hour']:.0f}")
    row("instance total (median)", lambda r: f"{r['instance_total']['median']:.2f} s")
    row("test run (median)", lambda r: f"{r['test_run_seconds']['median']:.2f} s")
    print("sum over the instances (results.json `timings`), % of the sum of `total`:")
    steps = []
    for r in s["runs"]:
        for st in r["steps"]:
            if st not in steps:
                steps.append(st)
    def share(r, st):
        if st not in r["steps"]:
            return "-"
        return f"{r['steps'][st]:.1f} s {100 * r['steps'][st] / r['total']:4.1f}%"

    for st in steps:
        row(f"  {st}", lambda r, st=st: share(r, st))
    row("  (no step: total - all)", lambda r: f"{r['unnamed']:.1f} s "
        f"{100 * r['unnamed'] / r['total']:4.1f}%")
    row("outside the tests (a)", lambda r: f"{r['outside_a_percent']:.1f} %")
    row("swe-ark's own (b)", lambda r: f"{r['outside_b_percent']:.1f} %")
    row("not in any total", lambda r: f"{r['outside_totals_seconds']:.1f} s")
    print()
    print("(a) = total - pre - post-*: everything but the test runs, the installs included;")
    print("(b) = total - pre - post-* - install - reinstall: swe-ark's own steps (materialize,")
    print("    environment, test-patch, gold-patch, parse, and what no step names).")
    print("not in any total = jobs x wall - the sum of `total`: recording the verdicts, removing")
    print("    the work directories, start and end (with several jobs, the idle tail too).")
    if fx["lock_notes"]:
        print(f"env lock noted, for {len(fx['lock_notes'])} projects: {fx['lock_notes'][0]}")
    pk = s["pack"]
    fastest = min(r["wall_seconds"] for r in s["runs"])
    print(f"pack --all-validated (version 3: expected.json, logs normalized): "
          f"{pk['seconds']:.2f} s for {pk['bundles']} bundles "
          f"({pk['raw_log_bytes'] / 1e6:.1f} MB of raw logs), "
          f"{100 * pk['seconds'] / fastest:.1f} % of the fastest validate's wall time")
    print()
    for r in s["runs"]:
        if r["target_met"]:
            print(f"--jobs {r['jobs']}: target met: swe-ark's own steps (b) "
                  f"{r['outside_b_percent']:.1f} % < {TARGET:.0f} % of the total")
        else:
            print(f"--jobs {r['jobs']}: TARGET MISSED: swe-ark's own steps (b) "
                  f"{r['outside_b_percent']:.1f} % >= {TARGET:.0f} % of the total")


def main():
    if sys.version_info < (3, 9):
        sys.exit("bench_validate: needs Python 3.9 or newer")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--swe-ark", default="target/release/swe-ark", help="the swe-ark binary")
    p.add_argument("--workdir", default="target/bench",
                   help="where the scratch files go (WORKDIR/validate)")
    p.add_argument("--instances", type=int, default=20, help="instances (default 20)")
    p.add_argument("--jobs", default="2,1",
                   help="comma-separated --jobs values, one validate run each (default 2,1)")
    p.add_argument("--runs", type=int, default=3, help="validate's --runs (default 3)")
    p.add_argument("--timeout", type=int, default=120, help="validate's --timeout (default 120)")
    p.add_argument("--keep", action="store_true", help="keep the archive and the fixtures")
    p.add_argument("--json", metavar="FILE", help="write the JSON summary here instead of stdout")
    args = p.parse_args()
    if args.instances < 1:
        p.error("--instances must be at least 1")
    try:
        args.jobs = [int(j) for j in args.jobs.split(",")]
    except ValueError:
        p.error("--jobs takes numbers, comma-separated")
    if not args.jobs or min(args.jobs) < 1:
        p.error("--jobs values must be at least 1")
    if not 1 <= args.runs <= 20:
        p.error("--runs must be 1 to 20")
    args.python = find_python311()
    if args.python is None:
        print("bench_validate: SKIPPED: no Python 3.11 in pyenv ($PYENV_ROOT/versions/3.11.*); "
              "`pyenv install 3.11` and run it again")
        return 0
    return benchlib.finish("bench_validate", bench, report, args,
                           os.path.join(args.workdir, "validate"))


if __name__ == "__main__":
    sys.exit(main())
