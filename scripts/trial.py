#!/usr/bin/env python3
"""The real-data trial: the whole swe-ark pipeline on a SWE-bench dataset file and a folder of
repository mirrors, with a table of what happened to every instance.

For every instance of --data whose repository has a mirror in --mirrors:
  1. `mirror add` (from the local mirror: no network) and `import` of the dataset;
  2. `env lock` of every (repository, version) the instances use — the one online step (PyPI,
     as of the environment setup commit's date);
  3. `validate`: the tests before and after the gold patch, offline; kept only when
     FAIL_TO_PASS and PASS_TO_PASS are reproduced exactly;
  4. `pack --all-validated`, `release create`, `export` to one file;
  5. `import-archive` into an empty archive with an empty HOME, then `replay --gold` there
     inside a network namespace (`unshare -n`, when the machine allows it);
  6. `release verify` there.
Then it writes --out (JSON) and prints a Markdown table (per instance: lock, validation,
gold replay, times, sizes) that docs/RESULTS.md quotes.

Mirrors are found as MIRRORS/OWNER+NAME/repo, MIRRORS/OWNER+NAME.git or MIRRORS/OWNER__NAME.git
(bare repositories, or `git clone --mirror` of the real ones).

Exit 0 when the pipeline ran (instances may still fail: the table says why), 1 when a step of
the pipeline itself failed. Standard library only.

Usage: python3 scripts/trial.py --swe-ark target/release/swe-ark --mirrors DIR
           [--data ../shared/data/swe-bench-lite-dev.jsonl] [--work target/trial]
           [--repos OWNER/NAME,...] [--jobs 2] [--out FILE]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Contexts whose era's pins are yanked on PyPI today (docs/ENVIRONMENTS.md, --allow-yanked).
ALLOW_YANKED = {"sqlfluff/sqlfluff"}


class StepFailed(Exception):
    pass


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def find_mirror(mirrors, repo):
    owner, name = repo.split("/")
    for rel in (f"{owner}+{name}/repo", f"{owner}+{name}.git", f"{owner}__{name}.git"):
        p = os.path.join(mirrors, rel)
        if os.path.isdir(p):
            return p
    return None


def partial_mirror(snapshot, repo, records, into):
    """A bare repository with the history of the base and environment setup commits of
    `repo`'s instances only, fetched from `snapshot`; None when that history is incomplete."""
    commits = sorted({c for r in records if r["repo"] == repo
                      for c in (r["base_commit"], r["environment_setup_commit"])})
    dest = os.path.join(into, repo.replace("/", "__") + ".git")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    subprocess.run(["git", "init", "-q", "--bare", dest], check=True, env=env)
    refspecs = [f"{c}:refs/heads/trial/{c[:12]}" for c in commits]
    p = subprocess.run(["git", "--git-dir", dest, "fetch", "-q", "--no-tags", snapshot] + refspecs,
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        log(f"partial mirror of {repo}: {p.stderr.strip()[:300]}")
        return None
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--swe-ark", default=os.path.join(ROOT, "target", "release", "swe-ark"))
    ap.add_argument("--mirrors", required=True)
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data",
                                                   "swe-bench-lite-dev.jsonl"))
    ap.add_argument("--work", default=os.path.join(ROOT, "target", "trial"))
    ap.add_argument("--repos", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    sa_bin = os.path.abspath(args.swe_ark)
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ark, offline = os.path.join(work, "ark"), os.path.join(work, "offline-ark")
    times = {}

    def sa(name, argv, ok=(0,), env=None, wrap=()):
        log(f"$ swe-ark {' '.join(argv)}")
        t = time.time()
        p = subprocess.run(list(wrap) + [sa_bin, "--no-progress"] + argv, cwd=work,
                           stdout=subprocess.PIPE, text=True, env=env)
        times[name] = times.get(name, 0.0) + time.time() - t
        if p.returncode not in ok:
            raise StepFailed(f"{name}: exit {p.returncode}\n{p.stdout[-3000:]}")
        return p.returncode, p.stdout

    records = [json.loads(l) for l in open(args.data) if l.strip()]
    wanted = {r for r in args.repos.split(",") if r}
    rows = {r["instance_id"]: {"repo": r["repo"], "version": r["version"]} for r in records
            if not wanted or r["repo"] in wanted}
    repos = sorted({v["repo"] for v in rows.values()})

    # 1. Mirrors and the dataset.
    mirrored = []
    for repo in repos:
        path = find_mirror(args.mirrors, repo)
        if not path:
            for row in rows.values():
                if row["repo"] == repo:
                    row["mirror"] = "no mirror"
            continue
        code, out = sa(f"mirror {repo}", ["--ark", ark, "mirror", "add", path, "--name", repo],
                       ok=(0, 1, 2))
        how = "ok"
        if code != 0:
            # A snapshot that lacks objects somewhere in its history (large files left out):
            # mirror only the history of the commits the instances need, when that is complete.
            partial = partial_mirror(path, repo, records, os.path.join(work, "partial"))
            if partial:
                code, out = sa(f"mirror {repo}", ["--ark", ark, "mirror", "add", partial,
                                                  "--name", repo], ok=(0, 1, 2))
                how = "ok (history of the needed commits only)"
        for row in rows.values():
            if row["repo"] == repo:
                row["mirror"] = how if code == 0 else "incomplete snapshot"
        if code == 0:
            mirrored.append(repo)
    data = os.path.join(work, "dataset.jsonl")
    with open(data, "w") as f:
        for r in records:
            if r["repo"] in mirrored and r["instance_id"] in rows:
                f.write(json.dumps(r) + "\n")
    sa("import", ["--ark", ark, "import", data])

    # 2. A lock per (repository, version).
    locks = {}
    for repo, version in sorted({(v["repo"], v["version"]) for v in rows.values()
                                 if v["repo"] in mirrored}):
        argv = ["--ark", ark, "env", "lock", repo, version, "--json"]
        if repo in ALLOW_YANKED:
            argv.append("--allow-yanked")
        t = time.time()
        try:
            _, out = sa(f"lock {repo} {version}", argv)
            lock = json.loads(out)
            locks[(repo, version)] = {"ok": True, "id": lock.get("id", ""),
                                      "seconds": round(time.time() - t, 1),
                                      "bytes": lock.get("bytes")}
        except StepFailed as e:
            locks[(repo, version)] = {"ok": False, "error": str(e).splitlines()[0][:200],
                                      "seconds": round(time.time() - t, 1)}
    for row in rows.values():
        lk = locks.get((row["repo"], row["version"]))
        if lk:
            row["lock"] = "ok" if lk["ok"] else lk["error"]
            row["lock_seconds"] = lk["seconds"]

    # 3. Validation.
    _, out = sa("validate", ["--ark", ark, "validate", "--jobs", str(args.jobs), "--json"],
                ok=(0, 2))
    for v in json.loads(out)["validated"]:
        row = rows.get(v["instance_id"])
        if row is not None:
            row["validation"] = v["verdict"] if v["verdict"] == "kept" else \
                f'{v["verdict"]}: {v["reason_kind"]}: {v["reason"][:160]}'
            row["validate_seconds"] = round(v.get("seconds") or 0.0, 1)
            row["f2p"], row["p2p"] = v["FAIL_TO_PASS"], v["PASS_TO_PASS"]

    # 4. Bundles, the release, one file.
    _, out = sa("pack", ["--ark", ark, "pack", "--all-validated", "--json"])
    for p in json.loads(out):
        row = rows.get(p["instance_id"])
        if row is not None:
            row["bundle"], row["bundle_bytes"] = p["id"], p["file_size"]
    release = os.path.join(work, "trial.json")
    _, out = sa("release create", ["--ark", ark, "release", "create", "trial",
                                   "--all-validated", "-o", release, "--json"])
    root = json.loads(out).get("root", "")
    exported = os.path.join(work, "trial.ark")
    sa("export", ["--ark", ark, "export", "--release", release, "-o", exported])

    # 5. The other side: an empty archive, an empty HOME, no network.
    home = os.path.join(work, "empty-home")
    os.makedirs(home)
    env = dict(os.environ, HOME=home)
    sa("import-archive", ["--ark", offline, "import-archive", exported], env=env)
    cut = subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    wrap = ("unshare", "-n", "--") if cut else ()
    sa("replay --gold", ["--ark", offline, "replay", "--gold", "--run-id", "trial",
                         "--jobs", str(args.jobs)], ok=(0, 2), env=env, wrap=wrap)
    summary = json.load(open(os.path.join(offline, "runs", "trial", "gold.trial.json")))
    for iid in summary.get("resolved_ids", []):
        rows[iid]["gold"] = "resolved"
    for iid in summary.get("unresolved_ids", []):
        rows[iid]["gold"] = "unresolved"
    for iid, e in summary.get("errors", {}).items():
        rows[iid]["gold"] = e["reason"]
    for iid, s in summary.get("overhead_seconds", {}).items():
        rows[iid]["replay_overhead"] = round(s, 1)
    for iid, s in summary.get("test_seconds", {}).items():
        rows[iid]["replay_tests"] = round(s, 1)
    code, _ = sa("release verify", ["--ark", offline, "release", "verify", release],
                 ok=(0, 1), env=env)

    result = {
        "instances": rows, "release_root": root, "release_verified": code == 0,
        "network_cut": cut, "export_bytes": os.path.getsize(exported),
        "seconds": {k: round(v, 1) for k, v in times.items()},
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2, sort_keys=True)
    print("| instance | mirror | lock | validation (F2P/P2P) | gold replay offline | "
          "validate s | replay tests s / overhead s | bundle |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for iid in sorted(rows):
        r = rows[iid]
        val = r.get("validation", "-")
        if val == "kept":
            val = f'kept, exact ({r["f2p"]}/{r["p2p"]})'
        print(f'| {iid} | {r.get("mirror", "-")} | {r.get("lock", "-")} | {val} | '
              f'{r.get("gold", "-")} | {r.get("validate_seconds", "-")} | '
              f'{r.get("replay_tests", "-")} / {r.get("replay_overhead", "-")} | '
              f'{r.get("bundle_bytes", 0) // 1024} KiB |')
    kept = sum(1 for r in rows.values() if r.get("validation") == "kept")
    gold = sum(1 for r in rows.values() if r.get("gold") == "resolved")
    print(f"\n{len(rows)} instances; validated exactly {kept}; gold resolved offline {gold} of "
          f"{kept}; release root {root}; release verify {'ok' if code == 0 else 'FAILED'}; "
          f"exported file {result['export_bytes']} bytes; network cut: {cut}")
    print("times: " + ", ".join(f"{k} {v:.0f} s" for k, v in result["seconds"].items()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except StepFailed as e:
        log(f"trial: step failed: {e}")
        sys.exit(1)
