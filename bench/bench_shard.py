#!/usr/bin/env python3
"""Times the distributed commands (docs/DISTRIBUTED.md) side by side in one run: N shards on a
Slurm cluster against one, `merge` of the shard files against `import-archive` of the same
content, and `remote put`/`remote get` on S3 against a plain file copy.

1. **Shards** (on the one-node Slurm cluster of scripts/slurm-local.sh: CPUs = nproc). The
   fixture set is bench_validate.py's (its functions are imported): the `abacus` project
   (build backend tinybuild) mirrored as `acme/bench`, a manifest with --contexts versions
   (`[versions."1.0"]`, `[versions."1.1"]`, ..., the same defaults: Python 3.11 from pyenv,
   `pip_packages = ["pytest"]`, install `python -m pip install -e .`, `pytest -rA`) in a
   directory named by SWE_ARK_MANIFESTS, and --instances instances imported, instance i in
   context i % contexts. The seed archive holds the mirror and the instances and **no lock**:
   each shard locks its own contexts (`env lock` from a PEP 503 index this script serves on
   127.0.0.1 with tinybuild and the pytest wheels of .tools/test-wheels, reached through
   SWE_ARK_INDEX_URL), as the nodes of a real cluster would. Then, for N = --shards (default
   2) and N = 1, in that order (so any warm cache favours the single shard): `swe-ark plan
   --shards N --all`, `contrib/slurm/submit.sh PLAN SEED DEST MERGED bench` with
   `SBATCH_EXTRA="--cpus-per-task=1"`, `SHARD_ARGS="--runs 1 --timeout 300"` and `JOBS=1`
   (one instance at a time per task, so N tasks use N cores), and the wall time from
   the submission to the merge job seen COMPLETED (polled every 0.2 s with `scontrol show
   job`). Reported: both times, the speedup t(1) / t(N), from Slurm's own records (whole
   seconds) each task's run time, the wait before the first task started and between the last
   task's end and the merge's start, and the merge job's run time, and from the task logs the
   median validation time of an instance. Each shard runs in a fresh archive in
   `${TMPDIR:-/tmp}` (shard.sbatch removes it; --node-tmp DIR sets the tasks' TMPDIR, e.g.
   /dev/shm to take the shared disk out of the comparison). Checks (exit 1): every
   task and the merge end COMPLETED with exit 0, every instance has a bundle in each merged
   archive (`ls --json`), both merged archives hold the same bundle ids, and the release
   `bench` that merge registers has the same root in both.
   Without Slurm (`scripts/slurm-local.sh available` fails) this part is skipped, with the
   reason; the shard files part 2 needs are then made by `swe-ark shard run` directly.
2. **Merge against import** (--runs alternating rounds after one untimed warm-up, medians):
   `swe-ark --ark NEW merge --plan PLAN FILES...` of the N-shard run's shard files into an
   empty archive, against `swe-ark --ark NEW import-archive R.ark`, R.ark being `release
   create all --all-validated` and `export --release` in the single shard's merged archive:
   the same bundles as one release file (made once, untimed). Reported: the merge's total,
   per shard (total / N), the import, and merge / import. Checks: both hold every instance's
   bundle, with the ids of part 1, and merge prints the release root the one-shard run had.
3. **S3 against a file copy**: a --s3-mib (default 256) MiB file of seeded random bytes, a
   moto_server (.tools/bin/moto_server, which `make tools` installs; without it this part is
   skipped) on 127.0.0.1 with one bucket. `swe-ark remote put FILE s3://bench/put/` and
   `swe-ark remote get s3://bench/put/NAME OUT` (which checks the download against the
   `.sha256` put writes beside it) against `cp FILE NEW && sync NEW`, each pair --s3-runs
   alternating rounds after an untimed warm-up. Reported: MB/s (10^6 bytes) of each on the
   medians, and put / cp and get / cp as time ratios. Checks: put prints the URL, and what
   get writes is the file, byte for byte.
4. **The archive in a bucket** (with parts 1 and 3): the one-shard run's merged archive copied,
   given `store_url` (a new prefix each round), and `swe-ark remote push` of its objects,
   packs and mirrors timed against `cp -r` of the same directories + sync; then, the local
   copies dropped (`remote push --drop-local`, untimed), `swe-ark verify` fetching every pack
   and object from the bucket against `verify` of a local copy. --s3-runs alternating rounds
   after a warm-up; reported: the medians and their ratios. Checks: push sends something,
   both verifies pass.

There are no targets: the bench reports. It needs Python 3.11 from pyenv for parts 1 and 2
(without it they are skipped, with the reason), git and bash; Slurm (`slurmctld slurmd
slurm-client munge`, as root) for part 1; moto for part 3. No network but 127.0.0.1. Only the
standard library is used. Exit status: 0 when the measurements completed or were skipped, 1
when a command or a check failed, 2 on bad usage.

Usage: python3 bench/bench_shard.py --swe-ark target/release/swe-ark [--instances 8]
           [--contexts 4] [--shards 2] [--runs 5] [--s3-mib 256] [--s3-runs 3]
           [--node-tmp DIR] [--workdir DIR] [--keep] [--json FILE]
"""

import argparse
import datetime
import glob
import hashlib
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

import benchlib
import bench_validate
from bench_env import clean_env, find_python311, find_uv
from bench_validate import REPO, Index, make_repo, write
from benchlib import BenchError, Scratch, log, run, shell

ROOT = bench_validate.ROOT
SUBMIT = os.path.join(ROOT, "contrib", "slurm", "submit.sh")
SLURM_LOCAL = os.path.join(ROOT, "scripts", "slurm-local.sh")
MOTO = os.path.join(ROOT, ".tools", "bin", "moto_server")

SBATCH_EXTRA = "--cpus-per-task=1"
SHARD_ARGS = "--runs 1 --timeout 300"
JOBS = "1"
RELEASE = "bench"
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "BOOT_FAIL", "DEADLINE")
WAIT_LIMIT = 1800  # seconds: a guard against a hang, not a limit on swe-ark
VALIDATED = re.compile(r"^\[\d+/\d+\] \S+: kept \(.*\) in (\d+) s$", re.M)


def versions(contexts):
    return [f"1.{k}" for k in range(contexts)]


def manifest(contexts):
    """bench_validate's manifest with `contexts` versions, all on the same defaults."""
    head = bench_validate.MANIFEST.split("[versions.")[0]
    head = head.replace('source = "bench/bench_validate.py"', 'source = "bench/bench_shard.py"')
    return head + "\n".join(f'[versions."{v}"]\n' for v in versions(contexts))


# --------------------------------------------------------------------------------------------
# The seed archive
# --------------------------------------------------------------------------------------------


def make_seed(swe_ark, python, root, env, args):
    """The dists directory for the index, and the seed: mirror + instances, no lock."""
    run(["bash", bench_validate.FETCH_WHEELS], "scripts/fetch-test-wheels.sh", None)
    dists = os.path.join(root, "dists")
    spec = os.path.join(root, "dists.spec.json")
    write(spec, json.dumps([{"name": "tinybuild", "version": "1.0", "kind": "wheel",
                             "backend": True}]))
    os.makedirs(dists)
    run([python, bench_validate.MKDISTS, dists, spec], "mkdists.py", env)
    for fn in os.listdir(bench_validate.TEST_WHEELS):
        if fn.endswith(".whl"):
            shutil.copy(os.path.join(bench_validate.TEST_WHEELS, fn), dists)

    repo = os.path.join(root, "repo")
    base, patches = make_repo(python, repo, args.instances, env)
    seed = os.path.join(root, "seed")
    run([swe_ark, "--ark", seed, "-q", "mirror", "add", repo, "--name", REPO], "mirror add", env)
    # bench_validate's instances, spread over the contexts.
    plain = os.path.join(root, "instances-1.0.jsonl")
    bench_validate.write_instances(plain, base, patches)
    with open(plain) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    vs = versions(args.contexts)
    for i, r in enumerate(rows):
        r["version"] = vs[i % len(vs)]
    instances = os.path.join(root, "instances.jsonl")
    write(instances, "".join(json.dumps(r) + "\n" for r in rows))
    run([swe_ark, "--ark", seed, "-q", "import", instances], "import", env)
    return dists, seed, base


def plan(swe_ark, seed, shards, path, env):
    run([swe_ark, "--ark", seed, "-q", "plan", "--shards", str(shards), "--all", "-o", path],
        f"plan --shards {shards}", env)
    with open(path) as f:
        p = json.load(f)
    return [{"index": s["index"], "cost": s["cost"],
             "contexts": [c["version"] for c in s["contexts"]],
             "instances": sum(len(c["instances"]) for c in s["contexts"])}
            for s in p["shards"]]


def bundles_of(swe_ark, ark, env, n, what):
    """{instance id: bundle id} of `ark`; every one of the n instances must have one bundle."""
    _, out = run([swe_ark, "--ark", ark, "-q", "ls", "--json"], f"ls --json ({what})", env)
    rows = {r["instance_id"]: r["bundles"] for r in json.loads(out)}
    want = [bench_validate.instance_id(i) for i in range(n)]
    missing = [i for i in want if not rows.get(i)]
    if missing:
        raise BenchError(f"{what}: no bundle for {', '.join(missing)}")
    extra = sorted(set(rows) - set(want))
    if extra:
        raise BenchError(f"{what}: instances that were not imported: {', '.join(extra)}")
    ids = {}
    for i in want:
        b = rows[i]
        if len(b) != 1:
            raise BenchError(f"{what}: {i} has {len(b)} bundles, not 1: {b}")
        ids[i] = b[0] if isinstance(b[0], str) else b[0].get("id")
    return ids


def release_root(ark):
    with open(os.path.join(ark, "releases", f"{RELEASE}.json")) as f:
        return json.load(f)["root"]


# --------------------------------------------------------------------------------------------
# Slurm
# --------------------------------------------------------------------------------------------


def jobs(env, job_id):
    """`scontrol show job -o ID`: one dict per record (an array gives one per task)."""
    p = subprocess.run(["scontrol", "show", "job", "-o", job_id], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, text=True)
    if p.returncode != 0:
        return []
    records = []
    for line in p.stdout.splitlines():
        if not line.strip():
            continue
        rec = {}
        for word in line.split():
            key, eq, value = word.partition("=")
            if eq and key not in rec:
                rec[key] = value
        records.append(rec)
    return records


def stamp(value):
    """Seconds since the epoch of a Slurm time (YYYY-MM-DDTHH:MM:SS); None when unset."""
    try:
        return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()
    except (TypeError, ValueError):
        return None


def logs_text(logs):
    parts = []
    for fn in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        with open(os.path.join(logs, fn), errors="replace") as f:
            parts.append(f"== {fn}\n{f.read().strip()}")
    return "\n".join(parts)


def validation_seconds(logs):
    """The seconds (whole) that each task log gives each instance's validation."""
    found = []
    for fn in glob.glob(os.path.join(logs, "swe-ark-shard-*.out")):
        with open(fn, errors="replace") as f:
            found += [int(m.group(1)) for m in VALIDATED.finditer(f.read())]
    return found


def slurm_run(swe_ark, seed, plan_path, n, run_dir, env, slurm_env):
    """Submits the plan, waits for the merge job; returns the wall time and Slurm's records."""
    dest, merged, logs = (os.path.join(run_dir, d) for d in ("shards", "merged", "logs"))
    senv = dict(env, **slurm_env, SWE_ARK=swe_ark, SBATCH_EXTRA=SBATCH_EXTRA,
                SHARD_ARGS=SHARD_ARGS, JOBS=JOBS, LOGS=logs)
    senv.pop("KEEP", None)
    log(f"N={n}: submitting {plan_path}")
    os.sync()
    started = time.perf_counter()
    _, out = run(["bash", SUBMIT, plan_path, seed, dest, merged, RELEASE], "submit.sh", senv)
    ids = dict(line.split(None, 1) for line in out.strip().splitlines() if " " in line)
    array, merge = ids.get("shards", "").strip(), ids.get("merge", "").strip()
    if not array or not merge:
        raise BenchError(f"submit.sh printed no job ids:\n{out}")
    last = None
    while True:
        recs = jobs(senv, merge)
        state = recs[0].get("JobState", "") if recs else ""
        if state in FINAL:
            wall = time.perf_counter() - started
            break
        if state == "PENDING" and recs[0].get("Reason") == "DependencyNeverSatisfied":
            subprocess.run(["scancel", merge], env=senv)
            raise BenchError(f"N={n}: a shard task failed, the merge job {merge} will never "
                             f"run:\n{logs_text(logs)}")
        if not recs and last is not None:
            raise BenchError(f"N={n}: scontrol no longer knows job {merge}")
        if state != last:
            log(f"N={n}: merge job {merge} {state or '(not listed yet)'} after "
                f"{time.perf_counter() - started:.1f} s")
            last = state
        if time.perf_counter() - started > WAIT_LIMIT:
            raise BenchError(f"N={n}: the merge job is still {state} after {WAIT_LIMIT} s")
        time.sleep(0.2)
    m = recs[0]
    tasks = [r for r in jobs(senv, array) if r.get("ArrayJobId") == array]
    bad = [f"task {r.get('ArrayTaskId')}: {r.get('JobState')} {r.get('ExitCode')}"
           for r in tasks if (r.get("JobState"), r.get("ExitCode")) != ("COMPLETED", "0:0")]
    if (m.get("JobState"), m.get("ExitCode")) != ("COMPLETED", "0:0") or bad \
            or len(tasks) != n:
        raise BenchError(f"N={n}: merge job {m.get('JobState')} {m.get('ExitCode')}; "
                         f"{len(tasks)} task records; {'; '.join(bad)}\n{logs_text(logs)}")
    log(f"N={n}: merge job COMPLETED {wall:.1f} s after the submission")

    submit_t = min(stamp(r.get("SubmitTime")) for r in tasks)
    starts = [stamp(r.get("StartTime")) for r in tasks]
    ends = [stamp(r.get("EndTime")) for r in tasks]
    per_task = sorted(((int(r["ArrayTaskId"]), e - s)
                       for r, s, e in zip(tasks, starts, ends)), key=lambda x: x[0])
    m_start, m_end = stamp(m.get("StartTime")), stamp(m.get("EndTime"))
    validated = validation_seconds(logs)
    return {
        "shards": n,
        "wall_seconds": wall,
        "array_job": array,
        "merge_job": merge,
        "slurm": {
            # Whole seconds, from Slurm's records.
            "task_seconds": {str(k): v for k, v in per_task},
            "first_task_wait": min(starts) - submit_t,
            "tasks_span": max(ends) - min(starts),
            "merge_wait": m_start - max(ends),
            "merge_seconds": m_end - m_start,
        },
        # From the task logs (`kept (...) in N s`, whole seconds).
        "validation_seconds": {"median": statistics.median(validated) if validated else None,
                               "per_instance": validated},
        "dest": dest,
        "merged": merged,
    }


def local_run(swe_ark, seed, plan_path, n, run_dir, env):
    """Part 1's outputs without Slurm, for part 2: each shard by `shard run`, then merge."""
    dest, merged = os.path.join(run_dir, "shards"), os.path.join(run_dir, "merged")
    for k in range(n):
        secs, _ = run([swe_ark, "--ark", os.path.join(run_dir, f"node-{k}"), "-q",
                       "--no-progress", "shard", "run", plan_path, "--index", str(k),
                       "--from", seed, "--to", dest, "--jobs", JOBS] + SHARD_ARGS.split(),
                      f"shard run --index {k} (N={n})", env)
        log(f"N={n}: shard {k} run without Slurm in {secs:.1f} s")
    run([swe_ark, "--ark", merged, "-q", "merge", "--plan", plan_path, "--release", RELEASE]
        + sorted(glob.glob(os.path.join(dest, "shard-*-of-*.ark"))), f"merge (N={n})", env)
    return {"shards": n, "dest": dest, "merged": merged}


def part_shards(swe_ark, python, scratch, env, args):
    root = scratch.root
    if args.node_tmp:
        # shard.sbatch's scratch archive: ${TMPDIR:-/tmp}/swe-ark-JOB-TASK.
        env = dict(env, TMPDIR=os.path.abspath(args.node_tmp))
    write(os.path.join(root, "manifests", "acme__bench.toml"), manifest(args.contexts))
    setup_started = time.perf_counter()
    dists, seed, base = make_seed(swe_ark, python, root, env, args)
    setup = time.perf_counter() - setup_started
    plans = {}
    for n in (args.shards, 1):
        path = os.path.join(root, f"plan-{n}.json")
        plans[n] = {"path": path, "shards": plan(swe_ark, seed, n, path, env)}
    log(f"seed: {args.instances} instances in {args.contexts} contexts, no lock "
        f"({setup:.1f} s); plans: " + "; ".join(
            f"N={n}: " + ", ".join(f"{s['instances']} instance{'s' * (s['instances'] != 1)} "
                                   f"({'/'.join(s['contexts'])})"
                                   for s in p["shards"]) for n, p in plans.items()))

    avail = subprocess.run(["bash", SLURM_LOCAL, "available"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    slurm_skipped = None if avail.returncode == 0 else (avail.stderr.strip() or "unavailable")
    index = Index(dists)
    runs = {}
    slurm_dir = os.path.join(root, "slurm")
    try:
        env = dict(env, SWE_ARK_INDEX_URL=index.url)
        if slurm_skipped:
            log(f"Slurm: SKIPPED ({slurm_skipped}); making the shard files without it")
            for n in (args.shards, 1):
                runs[n] = local_run(swe_ark, seed, plans[n]["path"], n,
                                    os.path.join(root, f"run-{n}"), env)
        else:
            _, out = run(["bash", SLURM_LOCAL, "start", slurm_dir], "slurm-local.sh start",
                         None)
            last = out.strip().splitlines()[-1] if out.strip() else ""
            if not last.startswith("export SLURM_CONF="):
                raise BenchError(f"slurm-local.sh start printed `{last}`, not SLURM_CONF")
            slurm_env = {"SLURM_CONF": last.split("=", 1)[1]}
            for n in (args.shards, 1):
                runs[n] = slurm_run(swe_ark, seed, plans[n]["path"], n,
                                    os.path.join(root, f"run-{n}"), env, slurm_env)
    finally:
        index.stop()
        if not slurm_skipped:
            subprocess.run(["bash", SLURM_LOCAL, "stop", slurm_dir], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)

    bundles = {n: bundles_of(swe_ark, r["merged"], env, args.instances, f"merged (N={n})")
               for n, r in runs.items()}
    if bundles[1] != bundles[args.shards]:
        differ = [i for i in bundles[1] if bundles[1][i] != bundles[args.shards].get(i)]
        raise BenchError(f"N=1 and N={args.shards} merged other bundles for {', '.join(differ)}")
    roots = {n: release_root(r["merged"]) for n, r in runs.items()}
    if roots[1] != roots[args.shards]:
        raise BenchError(f"release {RELEASE}: root {roots[1]} (N=1), {roots[args.shards]} "
                         f"(N={args.shards})")
    log(f"both merged archives: {len(bundles[1])} instances, the same bundles, root "
        f"{roots[1][:16]}")
    out = {
        "fixture": {"repo": REPO, "base_commit": base, "instances": args.instances,
                    "contexts": args.contexts, "versions": versions(args.contexts),
                    "setup_seconds": setup},
        "plans": {str(n): p["shards"] for n, p in plans.items()},
        "slurm": None if slurm_skipped else {
            "sbatch_extra": SBATCH_EXTRA, "shard_args": SHARD_ARGS, "jobs": int(JOBS),
            "runs": {str(n): {k: v for k, v in r.items() if k not in ("dest", "merged")}
                     for n, r in runs.items()},
            "speedup": runs[1]["wall_seconds"] / runs[args.shards]["wall_seconds"],
        },
        "slurm_skipped": slurm_skipped,
        "node_tmp": env.get("TMPDIR") or "/tmp",
        "release_root": roots[1],
        "bundles": bundles[1],
    }
    return out, runs, plans, env


# --------------------------------------------------------------------------------------------
# Merge against import
# --------------------------------------------------------------------------------------------


def part_merge(swe_ark, scratch, env, args, runs, plans, want):
    root = os.path.join(scratch.root, "merge")
    os.makedirs(root)
    n = args.shards
    files = sorted(glob.glob(os.path.join(runs[n]["dest"], "shard-*-of-*.ark")))
    if len(files) != n:
        raise BenchError(f"N={n}: {len(files)} shard files in {runs[n]['dest']}, not {n}")
    one = runs[1]["merged"]
    snap, rel = os.path.join(root, "all.json"), os.path.join(root, "all.ark")
    run([swe_ark, "--ark", one, "-q", "release", "create", "all", "--all-validated", "-o", snap],
        "release create --all-validated", env)
    run([swe_ark, "--ark", one, "-q", "export", "--release", snap, "-o", rel], "export", env)
    merged, imported = os.path.join(root, "merged"), os.path.join(root, "imported")

    def check_merge(out):
        if out.strip() != want["release_root"]:
            raise BenchError(f"merge printed `{out.strip()}`, not the root "
                             f"{want['release_root']} of the one-shard run")

    m = benchlib.Measure(
        "merge / import",
        (lambda: scratch.fresh(merged),
         [swe_ark, "--ark", merged, "-q", "--no-progress", "merge", "--plan",
          plans[n]["path"], "--release", RELEASE] + files, check_merge),
        (lambda: scratch.fresh(imported),
         [swe_ark, "--ark", imported, "-q", "--no-progress", "import-archive", rel],
         lambda out: None),
        args.runs, env=env).go()
    for ark, what in ((merged, "merge"), (imported, "import-archive")):
        got = bundles_of(swe_ark, ark, env, args.instances, what)
        if got != want["bundles"]:
            raise BenchError(f"{what}: other bundles than part 1's")
    s = m.summary()
    return {
        "shard_files": len(files),
        "shard_files_bytes": sum(os.path.getsize(f) for f in files),
        "release_file_bytes": os.path.getsize(rel),
        "merge": s["swe-ark"],
        "merge_per_shard_median": s["swe-ark"]["median"] / n,
        "import": s["baseline"],
        "ratio_median": s["ratio_median"],
        "ratio_min": s["ratio_min"],
    }


# --------------------------------------------------------------------------------------------
# S3 against cp
# --------------------------------------------------------------------------------------------


class Moto:
    """moto_server on a free port of 127.0.0.1, killed by stop()."""

    def __init__(self, scratch_root):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = open(os.path.join(scratch_root, "moto.log"), "wb")
        self.proc = subprocess.Popen([MOTO, "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise BenchError(f"moto_server did not listen on {self.port}")
                time.sleep(0.1)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def make_bucket(self, name):
        # moto takes an unsigned request for it.
        req = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT", data=b"")
        with urllib.request.urlopen(req, timeout=30) as r:
            if r.status >= 300:
                raise BenchError(f"creating bucket {name}: HTTP {r.status}")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def part_store(swe_ark, scratch, env, args, source):
    """Part 4: archive `source` kept in the bucket: `remote push` against cp -r of its objects,
    packs and mirrors; `verify` fetching everything from the bucket against `verify` of the
    local archive."""
    root = os.path.join(scratch.root, "store")
    os.makedirs(root)
    ark = os.path.join(root, "ark")
    shutil.copytree(source, ark, symlinks=True)
    local = os.path.join(root, "local")
    shutil.copytree(source, local, symlinks=True)
    dirs = [d for d in ("objects", "packs", "mirrors") if os.path.isdir(os.path.join(ark, d))]

    def size_of(names):
        return sum(os.path.getsize(os.path.join(dp, f)) for d in names
                   for dp, _, fs in os.walk(os.path.join(ark, d)) for f in fs)
    size = size_of(dirs)
    config = os.path.join(ark, "config.toml")
    prefix = [0]

    def fresh_prefix():
        prefix[0] += 1
        with open(config, "w") as f:
            f.write(f'store_url = "s3://bench/store-{prefix[0]}"\n')

    def check_push(out):
        if json.loads(out)["sent"] == 0:
            raise BenchError(f"remote push sent nothing: {out.strip()}")

    copy = os.path.join(root, "copy")
    cp = (lambda: scratch.fresh(copy),
          shell(f"mkdir -p {copy} && cp -r " + " ".join(os.path.join(ark, d) for d in dirs)
                + f" {copy}/ && sync"), lambda out: None)
    push = benchlib.Measure(
        "store push", (fresh_prefix, [swe_ark, "--ark", ark, "-q", "--no-progress", "remote",
                                      "push"], check_push),
        cp, args.s3_runs, env=env).go().summary()

    def dropped():
        run([swe_ark, "--ark", ark, "-q", "--no-progress", "remote", "push", "--drop-local"],
            "remote push --drop-local", env)

    fetched = []

    def check_fetched(out):
        # What the verify brought back from the bucket into objects/ and packs/.
        fetched.append(size_of(["objects", "packs"]))

    verify = benchlib.Measure(
        "verify from the bucket",
        (dropped, [swe_ark, "--ark", ark, "-q", "--no-progress", "verify"], check_fetched),
        (lambda: None, [swe_ark, "--ark", local, "-q", "--no-progress", "verify"],
         lambda out: None),
        args.s3_runs, env=env).go().summary()
    return {
        "bytes": size,
        "dirs": dirs,
        "push": push["swe-ark"],
        "cp": push["baseline"],
        "push_vs_cp": push["ratio_median"],
        "verify_bucket": verify["swe-ark"],
        "verify_local": verify["baseline"],
        "verify_bucket_vs_local": verify["ratio_median"],
        "verify_fetched_bytes": min(fetched),
    }


def part_s3(swe_ark, scratch, args, store_source=None):
    if not os.access(MOTO, os.X_OK):
        return None, f"no {os.path.relpath(MOTO, ROOT)} (`make tools` installs it)"
    root = os.path.join(scratch.root, "s3")
    os.makedirs(root)
    size = args.s3_mib << 20
    benchlib.require_space(root, size * (4 * args.s3_runs + 8))
    src = os.path.join(root, "payload.bin")
    rng = random.Random(7)
    with open(src, "wb") as f:
        for _ in range(args.s3_mib):
            f.write(rng.randbytes(1 << 20))
    sha = file_sha(src)
    log(f"S3: {benchlib.mb(size)} of random bytes in {src}")
    moto = Moto(scratch.root)
    try:
        moto.make_bucket("bench")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ENDPOINT_URL=moto.endpoint, AWS_ACCESS_KEY_ID="testing",
                   AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        url = "s3://bench/put/payload.bin"
        copy, got = os.path.join(root, "copy.bin"), os.path.join(root, "got.bin")

        def check_put(out):
            if out.strip() != url:
                raise BenchError(f"remote put printed `{out.strip()}`, not {url}")

        def check_get(out):
            if file_sha(got) != sha:
                raise BenchError("remote get wrote other bytes than were put")

        def check_copy(out):
            if os.path.getsize(copy) != size:
                raise BenchError("cp wrote another size")

        cp = (lambda: scratch.fresh(copy), shell(f"cp {src} {copy} && sync {copy}"), check_copy)
        put = benchlib.Measure(
            "put", (lambda: os.sync(), [swe_ark, "-q", "remote", "put", src, "s3://bench/put/"],
                    check_put), cp, args.s3_runs, env=env).go().summary()
        get = benchlib.Measure(
            "get", (lambda: scratch.fresh(got), [swe_ark, "-q", "remote", "get", url, got],
                    check_get), cp, args.s3_runs, env=env).go().summary()
        store = None
        if store_source is not None:
            store = part_store(swe_ark, scratch, env, args, store_source)
    finally:
        moto.stop()
    cp_times = put["baseline"]["runs"] + get["baseline"]["runs"]
    cp_median = statistics.median(cp_times)
    return {
        "bytes": size,
        "put": put["swe-ark"],
        "get": get["swe-ark"],
        "cp": {"median": cp_median, "min": min(cp_times), "runs": cp_times},
        "mb_per_s": {"put": size / 1e6 / put["swe-ark"]["median"],
                     "get": size / 1e6 / get["swe-ark"]["median"],
                     "cp": size / 1e6 / cp_median},
        # Time ratios, each against the cp runs alternating with it.
        "put_vs_cp": put["ratio_median"],
        "get_vs_cp": get["ratio_median"],
        "store": store,
    }, None


# --------------------------------------------------------------------------------------------
# The bench
# --------------------------------------------------------------------------------------------


def bench(args):
    swe_ark = benchlib.require(args.swe_ark, ("git", "bash"))
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    # A cluster a failed earlier run left up under the same directory.
    subprocess.run(["bash", SLURM_LOCAL, "stop", os.path.join(workdir, "shard", "slurm")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scratch = Scratch(os.path.join(workdir, "shard"))
    summary = {"machine": benchlib.machine(swe_ark, ("git",))}
    if args.python is None:
        summary["shards_skipped"] = ("no Python 3.11 in pyenv ($PYENV_ROOT/versions/3.11.*); "
                                     "`pyenv install 3.11` and run it again")
        log(f"parts 1 and 2: SKIPPED: {summary['shards_skipped']}")
    else:
        env = clean_env(scratch.root, find_uv())
        shards, runs, plans, env = part_shards(swe_ark, args.python, scratch, env, args)
        summary["shards"] = shards
        summary["merge"] = part_merge(swe_ark, scratch, env, args, runs, plans, shards)
    store_source = None if args.python is None else runs[1]["merged"]
    summary["s3"], summary["s3_skipped"] = part_s3(swe_ark, scratch, args, store_source)
    if summary["s3_skipped"]:
        log(f"part 3: SKIPPED: {summary['s3_skipped']}")
    if args.keep:
        log(f"the archives and the fixtures are kept in {scratch.root}")
    else:
        scratch.remove()
    return summary


def report(s):
    m = s["machine"]
    print()
    print("swe-ark shard bench")
    print(f"  machine    {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}")
    print(f"  tools      {m['swe_ark']}; {m['git']}")
    if "shards_skipped" in s:
        print(f"\n1. shards, 2. merge: SKIPPED: {s['shards_skipped']}")
    else:
        sh, fx = s["shards"], s["shards"]["fixture"]
        print(f"  fixtures   {fx['instances']} instances of {fx['repo']} in {fx['contexts']} "
              f"contexts ({', '.join(fx['versions'])}); the seed has no lock")
        for n, shards in sorted(sh["plans"].items()):
            print(f"  plan N={n}  " + "; ".join(
                f"shard {x['index']}: {x['instances']} instance{'s' * (x['instances'] != 1)} "
                f"({', '.join(x['contexts'])})"
                for x in shards))
        print()
        if sh["slurm_skipped"]:
            print(f"1. shards on Slurm: SKIPPED: {sh['slurm_skipped']}")
        else:
            sl = sh["slurm"]
            ns = sorted(sl["runs"], key=int)
            print(f"1. shards on Slurm (one node; sbatch {sl['sbatch_extra']}, shard run "
                  f"{sl['shard_args']} --jobs {sl['jobs']}; scratch archives in "
                  f"{sh['node_tmp']})")
            head = f"{'':<34}" + "".join(f"{'N=' + n:>12}" for n in ns)
            print(head)
            print("-" * len(head))

            def row(label, fn):
                print(f"{label:<34}" + "".join(f"{fn(sl['runs'][n]):>12}" for n in ns))

            row("submit -> merge COMPLETED", lambda r: f"{r['wall_seconds']:.1f} s")
            row("  wait for the first task", lambda r: f"{r['slurm']['first_task_wait']:.0f} s")
            row("  tasks, first start -> last end", lambda r: f"{r['slurm']['tasks_span']:.0f} s")
            row("  each task", lambda r: "/".join(
                f"{v:.0f}" for _, v in sorted(r["slurm"]["task_seconds"].items(),
                                              key=lambda kv: int(kv[0]))) + " s")
            row("  wait for the merge job", lambda r: f"{r['slurm']['merge_wait']:.0f} s")
            row("  merge job", lambda r: f"{r['slurm']['merge_seconds']:.0f} s")
            row("validation per instance (median)",
                lambda r: f"{r['validation_seconds']['median']:.1f} s"
                if r["validation_seconds"]["median"] is not None else "-")
            big = max(ns, key=int)
            print(f"speedup t(N=1) / t(N={big}): {sl['speedup']:.2f}x")
            print("(the rows from `wait for the first task` to `merge job` are Slurm's records, "
                  "the last the task logs': whole seconds)")
        print(f"every instance bundled in both merged archives, the same {len(sh['bundles'])} "
              f"bundle ids, release root {sh['release_root'][:16]}")
        mg = s["merge"]
        print()
        print(f"2. merge of {mg['shard_files']} shard files "
              f"({benchlib.mb(mg['shard_files_bytes'])}) against import-archive of one release file of the same bundles "
              f"({benchlib.mb(mg['release_file_bytes'])}); medians of "
              f"{len(mg['merge']['runs'])}")
        print(f"   merge {mg['merge']['median']:.3f} s in all (min {mg['merge']['min']:.3f}), "
              f"{mg['merge_per_shard_median']:.3f} s per shard; import "
              f"{mg['import']['median']:.3f} s (min {mg['import']['min']:.3f}); "
              f"merge / import {mg['ratio_median']:.2f}x (on minimums {mg['ratio_min']:.2f}x)")
    print()
    if s["s3_skipped"]:
        print(f"3. S3: SKIPPED: {s['s3_skipped']}")
        return
    z = s["s3"]
    print(f"3. S3 (moto on 127.0.0.1) against cp + sync, {benchlib.mb(z['bytes'])} of random "
          f"bytes; medians of {len(z['put']['runs'])} (cp: {len(z['cp']['runs'])})")
    for what in ("put", "get", "cp"):
        print(f"   {what:<4}{z[what]['median']:>7.2f} s  {z['mb_per_s'][what]:>7.0f} MB/s")
    print(f"   time ratios: put / cp {z['put_vs_cp']:.2f}x, get / cp {z['get_vs_cp']:.2f}x")
    st = z.get("store")
    print()
    if st is None:
        print("4. the archive in a bucket: SKIPPED: needs part 1's merged archive")
        return
    print(f"4. the one-shard merged archive in a bucket ({benchlib.mb(st['bytes'])} of "
          f"{', '.join(st['dirs'])}); medians of {len(st['push']['runs'])}")
    print(f"   remote push {st['push']['median']:.2f} s against cp -r + sync "
          f"{st['cp']['median']:.2f} s: {st['push_vs_cp']:.2f}x")
    print(f"   verify fetching all from the bucket ({benchlib.mb(st['verify_fetched_bytes'])} "
          f"fetched) {st['verify_bucket']['median']:.2f} s against "
          f"verify of the local archive {st['verify_local']['median']:.2f} s: "
          f"{st['verify_bucket_vs_local']:.2f}x")


def main():
    if sys.version_info < (3, 9):
        sys.exit("bench_shard: needs Python 3.9 or newer")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--swe-ark", default="target/release/swe-ark", help="the swe-ark binary")
    p.add_argument("--workdir", default="target/bench",
                   help="where the scratch files go (WORKDIR/shard)")
    p.add_argument("--instances", type=int, default=8, help="instances (default 8)")
    p.add_argument("--contexts", type=int, default=4,
                   help="versions the instances are spread over (default 4)")
    p.add_argument("--shards", type=int, default=2,
                   help="the shard count compared with one (default 2)")
    p.add_argument("--runs", type=int, default=5, help="merge / import rounds (default 5)")
    p.add_argument("--s3-mib", type=int, default=256, help="the S3 file's size in MiB")
    p.add_argument("--s3-runs", type=int, default=3, help="S3 / cp rounds (default 3)")
    p.add_argument("--node-tmp", metavar="DIR",
                   help="TMPDIR of the shards, where their scratch archives go (default: "
                        "the inherited TMPDIR, else /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the archives and the fixtures")
    p.add_argument("--json", metavar="FILE", help="write the JSON summary here instead of stdout")
    args = p.parse_args()
    if args.contexts < 1 or args.instances < args.contexts:
        p.error("--contexts must be at least 1 and at most --instances")
    if args.shards < 2:
        p.error("--shards must be at least 2")
    if args.runs < 1 or args.s3_runs < 1 or args.s3_mib < 1:
        p.error("--runs, --s3-runs and --s3-mib must be at least 1")
    args.python = find_python311()
    return benchlib.finish("bench_shard", bench, report, args,
                           os.path.join(args.workdir, "shard"))


if __name__ == "__main__":
    sys.exit(main())
