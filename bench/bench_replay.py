#!/usr/bin/env python3
"""Per-instance overhead of `swe-ark replay` with a warm environment cache, on a codebase of
more than 5,000 files: everything but the test command itself (unpacking and checking the
bundle, the git work tree, the environment (under a private layer, or a copy) as the kept
installed state has it, applying the patch, the test patch, parsing), printed beside the test
command's own time, and beside the same replay installing at every run as before installed
states (`--no-installed-states`, interleaved: the baseline, in the same run). Target: at most
1 s (median).

The fixture is generated: a Python project built with the `tinybuild` backend
(tests/fixtures/mkdists.py) with FILES generated modules, a buggy function, a test file of 40
tests, one instance whose test patch adds a failing test and whose gold patch fixes the bug.
It is mirrored, its context locked from a local package index on 127.0.0.1 (tinybuild and the
pytest wheels that scripts/fetch-test-wheels.sh keeps in .tools/test-wheels), validated and
packed; then `replay --gold --force` runs --runs times confined (the default) and --runs times
with `--unconfined`, interleaved (confined, unconfined, confined, ...), after one untimed
warm-up of each (the first fills the environment cache), and each report's `timings` give the
figures: the overhead of the confined runs, and the confinement's cost (issue 21) per
instance and per command that went through the sandbox (target: at most 50 ms per command):
the difference of the medians, confined less unconfined, of the time of the steps that hold
those commands (install, test; setup when the context has a pre-install), shown beside the
difference of the medians of the instance's total (test command and overhead), which carries
the noise of the steps that run the same code in both modes. No network is used.

The commands are counted in the warm-ups' work directories (kept with --keep-workdir): the
harness writes one logs/<step>.log per command it runs through the sandbox (pre-install when
the context has one, install when it has one, test); replay's report.json records no exit
codes. As root (with uid 65534 mapped) the writable trees are shown to uid 65534 through
idmapped mounts; where the filesystem cannot be idmapped (the confined warm-up's debug log
says so) the cost includes swe-ark's hand-over walks (the trees given to uid 65534 before each
command and taken back after it), and the output says which. As any other user, `unshare -r`
included, there is neither.

Exit 0 when the measurement completed (a missed target prints TARGET MISSED), 1 when a
command or check failed. Standard library only.

Usage: python3 bench/bench_replay.py --swe-ark target/release/swe-ark [--runs 5]
           [--files 5000] [--workdir DIR] [--json FILE]
"""

import argparse
import functools
import glob
import hashlib
import http.server
import json
import os
import statistics
import shlex
import subprocess
import sys
import threading

import benchlib
from benchlib import BenchError, log, run

TARGET = 1.0  # seconds of overhead per instance, median (issue 42)
CONFINE_TARGET = 0.050  # seconds the confinement costs per sandboxed command, from the medians
SANDBOX_ID = 65534  # who a confined command is outside when swe-ark runs as root
DATE = "2021-06-01T00:00:00Z"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CORE = "def add(a, b):\n    return a - b\n"
TESTS = "".join(f"def test_{i}():\n    assert {i} + 1 == {i + 1}\n\n\n" for i in range(40))
GOLD = ("diff --git a/bench/core.py b/bench/core.py\n--- a/bench/core.py\n+++ b/bench/core.py\n"
        "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n")


def test_patch():
    n = TESTS.count("\n")
    added = "\n\ndef test_add():\n    from bench.core import add\n    assert add(1, 2) == 3\n"
    lines = "".join(f"+{l}\n" for l in added.split("\n")[:-1])
    return ("diff --git a/tests/test_core.py b/tests/test_core.py\n"
            "--- a/tests/test_core.py\n+++ b/tests/test_core.py\n"
            f"@@ -{n},0 +{n + 1},{added.count(chr(10))} @@\n{lines}")


def python311():
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", "3.11*", "bin", "python3.11")))
    return found[-1] if found else None


def maps_sandbox_id():
    """Whether a confined command is SANDBOX_ID outside, the writable trees root's: as root
    with that id mapped in its user namespace (`sandbox_ids` in src/sandbox/mod.rs); not as
    another user, nor as root of a namespace that maps only itself (`unshare -r`). swe-ark then
    idmaps the trees, or walks them where the filesystem cannot be idmapped (its debug log says
    so)."""
    def mapped(path):
        try:
            lines = open(path).read().splitlines()
        except OSError:
            return False
        for line in lines:
            v = [int(w) for w in line.split()]
            if len(v) == 3 and v[0] <= SANDBOX_ID < v[0] + v[2]:
                return True
        return False
    return os.geteuid() == 0 and mapped("/proc/self/uid_map") and mapped("/proc/self/gid_map")


def sandboxed_steps(work_root, before):
    """The commands that went through the sandbox in the one work directory under `work_root`
    that is not in `before` (a replay kept it): the names of its logs/<step>.log."""
    kept = sorted(set(os.listdir(work_root)) - before)
    if len(kept) != 1:
        raise BenchError(f"expected one kept work directory in {work_root}, found {kept}")
    logs = os.path.join(work_root, kept[0], "logs")
    return sorted(f[:-len(".log")] for f in os.listdir(logs) if f.endswith(".log"))


class Index(http.server.ThreadingHTTPServer):
    """A PEP 503 index of the files in one directory."""


def serve(directory):
    files = sorted(os.listdir(directory))

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            path = self.path.split("?")[0]
            if path.startswith("/simple/"):
                name = path[len("/simple/"):].strip("/").lower().replace("_", "-")
                links = []
                for f in files:
                    if not f.endswith((".whl", ".tar.gz")):
                        continue
                    project = f.split("-")[0].lower().replace("_", "-")
                    if project == name:
                        digest = hashlib.sha256(open(os.path.join(directory, f), "rb").read()).hexdigest()
                        links.append(f'<a href="/files/{f}#sha256={digest}">{f}</a><br/>')
                if not links:
                    self.send_error(404)
                    return
                body = ("<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>").encode()
                ctype = "text/html"
            elif path.startswith("/files/"):
                f = os.path.join(directory, os.path.basename(path))
                if not os.path.isfile(f):
                    self.send_error(404)
                    return
                body = open(f, "rb").read()
                ctype = "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = Index(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--swe-ark", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--workdir", default=os.path.join(ROOT, "target", "bench", "replay"))
    ap.add_argument("--json")
    args = ap.parse_args()
    swe_ark = os.path.abspath(args.swe_ark)
    py = python311()
    if not py:
        print("SKIPPED: no Python 3.11 under $PYENV_ROOT/versions")
        return 0
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-test-wheels.sh")], check=True)
    work = os.path.abspath(args.workdir)
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    dists = os.path.join(work, "dists")
    os.makedirs(dists)
    spec = os.path.join(work, "spec.json")
    with open(spec, "w") as f:
        json.dump([{"name": "tinybuild", "version": "1.0", "kind": "wheel", "backend": True}], f)
    mkdists = os.path.join(ROOT, "tests", "fixtures", "mkdists.py")
    run([py, mkdists, dists, spec], "mkdists")
    for w in glob.glob(os.path.join(ROOT, ".tools", "test-wheels", "*.whl")):
        os.link(w, os.path.join(dists, os.path.basename(w)))
    server = serve(dists)
    index = f"http://127.0.0.1:{server.server_address[1]}/simple"

    repo = os.path.join(work, "repo")
    run([py, mkdists, "--project", repo, "bench", "1.0", "[]"], "mkdists --project")
    with open(os.path.join(repo, "bench", "core.py"), "w") as f:
        f.write(CORE)
    os.makedirs(os.path.join(repo, "tests"))
    with open(os.path.join(repo, "tests", "test_core.py"), "w") as f:
        f.write(TESTS)
    for i in range(args.files):
        d = os.path.join(repo, "bench", "gen", f"p{i // 100:03d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"m{i % 100:03d}.py"), "w") as f:
            f.write(f"VALUE_{i} = {i}\n\n\ndef f_{i}(x):\n    return x + {i}\n")
    genv = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
                GIT_COMMITTER_EMAIL="b@b", GIT_AUTHOR_DATE=DATE, GIT_COMMITTER_DATE=DATE,
                GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True, env=genv)
    subprocess.run(["git", "-C", repo, "add", "-A"], check=True, env=genv)
    subprocess.run(["git", "-C", repo, "commit", "-qm", "bench"], check=True, env=genv)
    base = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()

    manifests = os.path.join(work, "manifests")
    os.makedirs(manifests)
    with open(os.path.join(manifests, "acme__bench.toml"), "w") as f:
        f.write('repo = "acme/bench"\nsource = "bench"\nlog_parser = "pytest"\n\n[defaults]\n'
                'python = "3.11"\npip_packages = ["pytest"]\ninstall = "python -m pip install -e ."\n'
                'test_cmd = "pytest -rA"\n\n[versions."1.0"]\n')
    env = dict(os.environ, SWE_ARK_MANIFESTS=manifests, SWE_ARK_INDEX_URL=index)
    ark = os.path.join(work, "ark")
    sa = [swe_ark, "--ark", ark, "-q", "--no-progress"]
    run(sa + ["mirror", "add", repo, "--name", "acme/bench"], "mirror add", env=env)
    run(sa + ["env", "lock", "acme/bench", "1.0", "--commit", base], "env lock", env=env)
    inst = {"repo": "acme/bench", "instance_id": "acme__bench-1", "base_commit": base,
            "patch": GOLD, "test_patch": test_patch(), "problem_statement": "add subtracts",
            "hints_text": "", "created_at": DATE, "version": "1.0", "FAIL_TO_PASS": "[]",
            "PASS_TO_PASS": "[]", "environment_setup_commit": base}
    ipath = os.path.join(work, "instances.jsonl")
    with open(ipath, "w") as f:
        f.write(json.dumps(inst) + "\n")
    run(sa + ["import", ipath], "import", env=env)
    run(sa + ["validate", "--runs", "1"], "validate", env=env)
    rows = json.loads(run(sa + ["ls", "--validated", "--json"], "ls", env=env)[1])
    if [r["verdict"] for r in rows] != ["kept"]:
        raise BenchError(f"the fixture instance was not kept: {rows}")
    run(sa + ["pack", "--all-validated"], "pack", env=env)

    modes = [("confined", []), ("unconfined", ["--unconfined"])]

    walked = []

    def replay(run_id, mode, flags, verbose=False):
        argv = sa + (["-v"] if verbose else []) + ["replay", "--gold", "--run-id", run_id,
                                                   "--force"] + flags
        if verbose:
            # Its debug log names each writable tree the kernel could not idmap (walked).
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            if p.returncode != 0:
                raise BenchError(f"replay failed (exit {p.returncode}): {shlex.join(argv)}\n"
                                 f"{p.stderr.decode(errors='replace').strip()}")
            walked.extend(line for line in p.stderr.decode(errors="replace").splitlines()
                          if "cannot idmap" in line)
        else:
            run(argv, "replay", env=env)
        rep = os.path.join(ark, "runs", run_id, "gold", "acme__bench-1", "report.json")
        r = json.load(open(rep))["acme__bench-1"]
        if not r["resolved"]:
            raise BenchError(f"the gold patch did not resolve ({mode}): {r}")
        if r.get("confinement") != mode:
            raise BenchError(f"a replay meant {mode} reports confinement "
                             f"{r.get('confinement')!r}")
        return r

    # Untimed warm-ups, one per mode (the first fills the environment cache), their work
    # directories kept to count the commands that went through the sandbox.
    work_root = os.path.join(ark, "tmp")
    os.makedirs(work_root, exist_ok=True)
    commands = {}
    for mode, flags in modes:
        before = set(os.listdir(work_root))
        replay(f"bench-warm-{mode}", mode, flags + ["--keep-workdir"],
               verbose=mode == "confined")
        commands[mode] = sandboxed_steps(work_root, before)
    if commands["confined"] != commands["unconfined"] or not commands["confined"]:
        raise BenchError(f"the modes ran different commands: {commands}")
    commands = commands["confined"]
    # Interleaved run by run, so that the machine's noise hits both alike.
    runs = {mode: [] for mode, _ in modes}
    installing = []
    for k in range(args.runs):
        for mode, flags in modes:
            r = replay(f"bench-{k + 1}-{mode}", mode, flags)
            runs[mode].append(r)
            log(f"run {k + 1}/{args.runs} {mode}: total "
                f"{r['test_seconds'] + r['overhead_seconds']:.2f} s")
        r = replay(f"bench-{k + 1}-installing", "confined", ["--no-installed-states"])
        installing.append(r)
    kept = sorted({(r.get("installed_state") or {}).get("how", "none") for r in runs["confined"]})
    if kept != ["kept"]:
        raise BenchError(f"the timed replays did not all start from a kept installed state: {kept}")
    samples = runs["confined"]
    med = lambda key: statistics.median(s["timings"].get(key, 0.0) for s in samples)
    overhead = statistics.median(s["overhead_seconds"] for s in samples)
    test = statistics.median(s["test_seconds"] for s in samples)
    # worktree and environment run side by side; worktree+environment is their wall time.
    steps = ["unpack", "worktree+environment", "worktree", "environment",
             "installed-environment", "installed-tree", "patch", "install", "reinstall",
             "test-patch", "parse"]
    files = sum(len(fs) for d, _, fs in os.walk(repo) if "/.git" not in d + "/")
    print(f"replay of one instance, codebase of {files} files, warm environment cache, "
          f"median of {len(samples)} (confined, the default):")
    print(f"  test command        {test:6.2f} s")
    print(f"  overhead            {overhead:6.2f} s   (target <= {TARGET:.1f} s: "
          f"{'PASS' if overhead <= TARGET else 'TARGET MISSED'})")
    for s in steps:
        indent = "      " if s in ("worktree", "environment") else "    "
        print(f"{indent}{s:<20}  {med(s):6.2f} s")
    no_install = overhead - med("install")
    print(f"  overhead without the context's install  {no_install:6.2f} s")
    installing_overhead = statistics.median(r["overhead_seconds"] for r in installing)
    installing_install = statistics.median(r["timings"].get("install", 0.0) for r in installing)
    print(f"  baseline, installing at every replay (--no-installed-states), same run: overhead "
          f"{installing_overhead:6.2f} s (install {installing_install:.2f} s); "
          f"kept / installing = {overhead / installing_overhead:.2f}")

    # The confinement's cost. Everything but the commands through the sandbox runs the same
    # code in both modes, so the cost lies in the timings of the steps that hold them (the
    # `setup` step holds the pre-install, when the context has one): their sum is what is
    # judged. The instance's total (test command and overhead: the wall time of its replay)
    # is shown beside it, but its difference carries the noise of the unpack and the copies,
    # which on a busy machine is larger than the cost itself.
    lap = {"pre-install": "setup", "install": "install", "test": "test"}
    unknown = [c for c in commands if c not in lap]
    if unknown:
        raise BenchError(f"commands through the sandbox of no known step: {unknown}")
    figures = {
        "total": lambda r: r["test_seconds"] + r["overhead_seconds"],
        "overhead": lambda r: r["overhead_seconds"],
        "sandboxed steps": lambda r: sum(r["timings"].get(lap[c], 0.0) for c in commands),
    }
    for c in commands:
        figures[lap[c]] = lambda r, step=lap[c]: r["timings"].get(step, 0.0)
    medians = {mode: {name: statistics.median(f(r) for r in runs[mode])
                      for name, f in figures.items()} for mode, _ in modes}
    diff = {name: medians["confined"][name] - medians["unconfined"][name] for name in figures}
    cost = diff["sandboxed steps"]
    per_command = cost / len(commands)
    as_sandbox_id = maps_sandbox_id()
    walks = as_sandbox_id and bool(walked)
    if walks:
        who = ("root, but the filesystem cannot be idmapped: the cost includes the hand-over "
               f"walks (the writable trees to uid {SANDBOX_ID} before each command, back "
               f"after it): {walked[0].strip()}")
    elif as_sandbox_id:
        who = (f"root: the writable trees are shown to uid {SANDBOX_ID} through idmapped "
               "mounts, no walk")
    elif os.geteuid() == 0:
        who = ("root of a user namespace that maps only itself (as `unshare -r`): "
               "no hand-over walk")
    else:
        who = f"uid {os.geteuid()}, not root: no hand-over walk"
    print(f"confinement, median of {args.runs} runs each, interleaved confined/unconfined, "
          f"same warm cache:")
    print(f"  swe-ark ran as {who}")
    # Confined, the environment is under a private layer where the machine has overlays in
    # user namespaces; unconfined it is always a copy (docs/SANDBOX.md, "Layers"): the install
    # step's writes go to the layer in one mode and to the copy in the other.
    mounts = {mode: sorted({r.get("environment_mount", "") for r in runs[mode]})
              for mode, _ in modes}
    print(f"  environment: confined {'/'.join(mounts['confined'])}, "
          f"unconfined {'/'.join(mounts['unconfined'])}")
    print(f"  {'':<18}  {'confined':>9}  {'unconfined':>10}  {'difference':>10}")
    for name in figures:
        c, u = medians["confined"][name], medians["unconfined"][name]
        indent = "  " if name in ("total", "sandboxed steps") else "    "
        print(f"{indent}{name:<{20 - len(indent)}}  {c:7.3f} s  {u:8.3f} s  {diff[name]:+8.3f} s")
    print(f"  commands through the sandbox per instance: {len(commands)} "
          f"({', '.join(commands)}; the logs/<step>.log of the warm-ups' kept work directories)")
    print(f"  confinement's cost  {cost * 1000:6.0f} ms per instance (sandboxed steps; "
          f"{diff['total'] * 1000:.0f} ms by the totals), {per_command * 1000:.0f} ms per command"
          f"   (target <= {CONFINE_TARGET * 1000:.0f} ms per command: "
          f"{'PASS' if per_command <= CONFINE_TARGET else 'TARGET MISSED'})")
    summary = {"files": files, "runs": len(samples), "test_seconds": test,
               "overhead_seconds": overhead, "overhead_without_install": no_install,
               "installing_overhead_seconds": installing_overhead,
               "steps": {s: med(s) for s in steps}, "target": TARGET,
               "confinement": {
                   "runs": args.runs, "euid": os.geteuid(),
                   "idmapped": as_sandbox_id and not walks, "hand_over": walks,
                   "commands": len(commands), "sandboxed_steps": commands,
                   "confined": medians["confined"], "unconfined": medians["unconfined"],
                   "difference": diff, "cost_per_instance_seconds": cost,
                   "cost_per_instance_by_totals_seconds": diff["total"],
                   "cost_per_command_seconds": per_command,
                   "target_per_command_seconds": CONFINE_TARGET,
                   "target_met": per_command <= CONFINE_TARGET,
                   "per_run": {mode: {name: [f(r) for r in runs[mode]]
                                      for name, f in figures.items()} for mode, _ in modes}}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    else:
        print(json.dumps(summary, indent=2))
    server.shutdown()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"bench_replay: {e}", file=sys.stderr)
        sys.exit(1)
