#!/usr/bin/env python3
"""The real-data trial: the whole swe-ark pipeline on a dataset file (SWE-bench's rows or
Multi-SWE-bench's) and a folder of repository mirrors, with a table of what happened to every
instance.

For every instance of --data whose repository has a mirror in --mirrors:
  1. `import` of the dataset, then `mirror add` (from the local mirror: no network; a
     snapshot that lacks objects with `--allow-missing-objects`; submodules the instances'
     commits name from --git-base);
  2. `env lock` of every (repository, version) the instances use, as `import` gave them (a
     Multi-SWE-bench row names none: swe-ark's manifests choose) — the one online step (PyPI,
     crates.io, npm, Debian, as of the dataset's environments date);
  3. `validate`: the tests before and after the gold patch, offline; kept only when
     FAIL_TO_PASS and PASS_TO_PASS are reproduced exactly;
  4. `pack --all-validated`, `release create`, `export` to one file;
  5. `import-archive` into an empty archive with an empty HOME, then `replay --gold` there
     inside a network namespace (`unshare -n`, when the machine allows it);
  6. `release verify` there.
Then it writes --out (JSON) and prints two Markdown tables that docs/RESULTS.md quotes: per
(repository, version) context (locked, built offline, instances validated exactly / covering /
differing, gold resolved offline, lock and validation times) and per instance (lock,
validation, gold replay, times, sizes). "Covering": the computed lists hold every published
test and more (the published list may be incomplete); "cannot run here": kept, the published
lists coming out but for tests that need the network or a conda-only package (replay grades
them with and without those: "resolved here"); "differing": a published test is missing
or in the other list.

Mirrors are found as MIRRORS/OWNER+NAME/repo, MIRRORS/OWNER+NAME.git or MIRRORS/OWNER__NAME.git
(bare repositories, or `git clone --mirror` of the real ones).

Exit 0 when the pipeline ran (instances may still fail: the table says why), 1 when a step of
the pipeline itself failed. Standard library only.

Usage: python3 scripts/trial.py --swe-ark target/release/swe-ark --mirrors DIR
           --data swe-bench-lite-dev.jsonl [--work target/trial]
           [--repos OWNER/NAME,...] [--jobs 2] [--runs 3] [--out FILE]
           [--environments-as-of WHEN|commit] [--dataset NAME] [--git-base URL]

Multi-SWE-bench's file, a few repositories at a time (submodules, such as jq's oniguruma, from
a folder of snapshots laid out as OWNER/NAME under --git-base):

    python3 scripts/trial.py --mirrors DIR --data multi-swe-bench-dev.jsonl \
        --repos tokio-rs/bytes,jqlang/jq --runs 1 --git-base file:///path/to/snapshots
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


def repo_of(row):
    """OWNER/NAME of a SWE-bench row (`repo`) or a Multi-SWE-bench row (`org`, `repo`)."""
    return row["repo"] if "/" in row["repo"] else f'{row["org"]}/{row["repo"]}'


def base_of(row):
    """The base commit of a SWE-bench row, or of a Multi-SWE-bench row (`base.sha`)."""
    return row.get("base_commit") or row["base"]["sha"]


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
    commits = sorted({c for r in records if repo_of(r) == repo
                      for c in (base_of(r), r.get("environment_setup_commit")) if c})
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
        # One commit at a time: those whose history is complete come in, the others are
        # named (their instances then fail with the missing commit, not the whole repository).
        fetched = 0
        for c, spec in zip(commits, refspecs):
            q = subprocess.run(["git", "--git-dir", dest, "fetch", "-q", "--no-tags", snapshot,
                                spec], capture_output=True, text=True, env=env)
            if q.returncode == 0:
                fetched += 1
            else:
                log(f"partial mirror of {repo}: commit {c} left out: {q.stderr.strip()[:200]}")
        if fetched == 0:
            return None
    # The tags of that history too: versions computed from git (setuptools_scm, versioneer)
    # need them, as SWE-bench's clones have them.
    tags = subprocess.run(["git", "--git-dir", snapshot, "for-each-ref", "refs/tags",
                           "--format=%(refname) %(objectname) %(*objectname)"],
                          capture_output=True, text=True, env=env).stdout.split("\n")
    wanted = []
    for line in tags:
        parts = line.split()
        if len(parts) < 2:
            continue
        peeled = parts[2] if len(parts) > 2 else parts[1]
        inside = subprocess.run(["git", "--git-dir", dest, "cat-file", "-e", peeled + "^{commit}"],
                                capture_output=True, env=env).returncode == 0
        if inside:
            wanted.append(f"{parts[0]}:{parts[0]}")
    for i in range(0, len(wanted), 200):
        subprocess.run(["git", "--git-dir", dest, "fetch", "-q", "--no-tags", snapshot]
                       + wanted[i:i + 200], capture_output=True, env=env)
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--swe-ark", default=os.path.join(ROOT, "target", "release", "swe-ark"))
    ap.add_argument("--mirrors", required=True)
    ap.add_argument("--data", required=True, help="a SWE-bench dataset file (JSON Lines)")
    ap.add_argument("--work", default=os.path.join(ROOT, "target", "trial"))
    ap.add_argument("--repos", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3,
                    help="passed to `validate --runs` (runs after the gold patch)")
    ap.add_argument("--git-base", default="",
                    help="passed to `mirror add --git-base`: where submodules are found")
    ap.add_argument("--out")
    ap.add_argument("--dataset", default="",
                    help="passed to `import --dataset` (default: swe-ark's, swe-bench)")
    ap.add_argument("--environments-as-of", default="",
                    help="passed to `import --environments-as-of`")
    ap.add_argument("--seed-objects", default="",
                    help="an archive's objects/ folder whose files are hard-linked into the "
                         "trial's archive first: locks then download only what it lacks")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # The binary and the manifests are frozen for the whole run: a rebuild or an edit of the
    # source tree while it runs changes nothing.
    sa_bin = os.path.join(work, "bin", "swe-ark")
    os.makedirs(os.path.dirname(sa_bin))
    shutil.copy2(os.path.abspath(args.swe_ark), sa_bin)
    manifests = os.path.join(work, "manifests")
    shutil.copytree(os.environ.get("SWE_ARK_MANIFESTS", os.path.join(ROOT, "manifests")),
                    manifests)
    os.environ["SWE_ARK_MANIFESTS"] = manifests
    ark, offline = os.path.join(work, "ark"), os.path.join(work, "offline-ark")
    if args.seed_objects:
        os.makedirs(ark)
        subprocess.run(["cp", "-al", os.path.abspath(args.seed_objects),
                        os.path.join(ark, "objects")], check=True)
    times = {}

    def sa(name, argv, ok=(0,), env=None, wrap=()):
        log(f"$ swe-ark {' '.join(argv)}")
        t = time.time()
        p = subprocess.run(list(wrap) + [sa_bin, "--no-progress"] + argv, cwd=work,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        sys.stderr.write(p.stderr)
        times[name] = times.get(name, 0.0) + time.time() - t
        if p.returncode not in ok:
            # The error line first: a long failure's tail would cut it off.
            said = [l for l in p.stderr.splitlines() if "swe-ark: error" in l]
            raise StepFailed(f"{name}: exit {p.returncode}\n{chr(10).join(said)}\n"
                             f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return p.returncode, p.stdout

    records = [json.loads(l) for l in open(args.data) if l.strip()]
    wanted = {r for r in args.repos.split(",") if r}
    rows = {r["instance_id"]: {"repo": repo_of(r), "version": r.get("version") or "-"}
            for r in records if not wanted or repo_of(r) in wanted}
    repos = sorted({v["repo"] for v in rows.values()})

    # 1. The dataset (the rows of repositories with a mirror), then the mirrors: `mirror add`
    # mirrors the submodules the imported instances' commits name.
    found = {repo: find_mirror(args.mirrors, repo) for repo in repos}
    for row in rows.values():
        if not found[row["repo"]]:
            row["mirror"] = "no mirror"
    data = os.path.join(work, "dataset.jsonl")
    with open(data, "w") as f:
        for r in records:
            if r["instance_id"] in rows and found[repo_of(r)]:
                f.write(json.dumps(r) + "\n")
    import_args = ["--ark", ark, "import", data]
    if args.dataset:
        import_args += ["--dataset", args.dataset]
    if args.environments_as_of:
        import_args += ["--environments-as-of", args.environments_as_of]
    sa("import", import_args)
    _, out = sa("ls", ["--ark", ark, "ls", "--json"])
    for r in json.loads(out):
        if r["instance_id"] in rows:
            rows[r["instance_id"]]["version"] = r["version"]
    base_args = ["--git-base", args.git_base] if args.git_base else []
    mirrored = []
    for repo in repos:
        path = found[repo]
        if not path:
            continue
        add = ["--ark", ark, "mirror", "add", path, "--name", repo] + base_args
        code, out = sa(f"mirror {repo}", add, ok=(0, 1, 2))
        how = "ok"
        if code != 0:
            # A snapshot that lacks objects somewhere in its history (large files left out):
            # every object it has, the missing ones listed; else only the history of the
            # commits the instances need, when that is complete.
            code, out = sa(f"mirror {repo}", add + ["--allow-missing-objects"], ok=(0, 1, 2))
            how = "ok (a snapshot that lacks objects: --allow-missing-objects)"
        if code != 0:
            partial = partial_mirror(path, repo, records, os.path.join(work, "partial"))
            if partial:
                code, out = sa(f"mirror {repo}", ["--ark", ark, "mirror", "add", partial,
                                                  "--name", repo] + base_args, ok=(0, 1, 2))
                how = "ok (history of the needed commits only)"
        if code != 0 and os.path.isdir(os.path.join(ark, "mirrors",
                                                    repo.replace("/", "__") + ".git")):
            # The mirror is there but something it names is not (a submodule no registry
            # serves): its versions are locked all the same, and `validate` names each row
            # whose commit needs what is missing.
            code, how = 0, how + "; not whole (see validate's reasons)"
        for row in rows.values():
            if row["repo"] == repo:
                row["mirror"] = how if code == 0 else "incomplete snapshot"
        if code == 0:
            mirrored.append(repo)

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
            lines = [l for l in str(e).splitlines()[1:] if l.strip()]
            why = next((l for l in lines if "swe-ark: error" in l), lines[0] if lines else str(e))
            locks[(repo, version)] = {"ok": False, "error": why[:300],
                                      "seconds": round(time.time() - t, 1)}
    for row in rows.values():
        lk = locks.get((row["repo"], row["version"]))
        if lk:
            row["lock"] = "ok" if lk["ok"] else lk["error"]
            row["lock_seconds"] = lk["seconds"]

    # 3. Validation.
    _, out = sa("validate", ["--ark", ark, "validate", "--jobs", str(args.jobs),
                             "--runs", str(args.runs), "--json"], ok=(0, 2))
    for v in json.loads(out)["validated"]:
        row = rows.get(v["instance_id"])
        if row is not None:
            d = v.get("published_differences") or {}
            if v["verdict"] == "kept" and v["reason_kind"] == "covers-published":
                row["match"] = "covering"
            elif v["verdict"] == "kept" and v["reason_kind"] == "cannot-run-here":
                row["match"] = "cannot run here"
            elif v["verdict"] == "kept":
                row["match"] = "exact"
            elif v["reason_kind"] == "differs-from-published" and not d.get(
                    "fail_to_pass_missing") and not d.get("pass_to_pass_missing"):
                row["match"] = "covering"
            elif v["reason_kind"] == "differs-from-published":
                row["match"] = "differing"
            else:
                row["match"] = "not validated"
            row["validation"] = v["verdict"] if v["verdict"] == "kept" else \
                f'{v["verdict"]}: {v["reason_kind"]}: {v["reason"][:300]}'
            row["validate_seconds"] = round(v.get("seconds") or 0.0, 1)
            row["f2p"], row["p2p"] = v["FAIL_TO_PASS"], v["PASS_TO_PASS"]
            row["differences"] = d

    # 4. Bundles, the release, one file.
    _, out = sa("pack", ["--ark", ark, "pack", "--all-validated", "--json"], ok=(0, 2))
    for p in json.loads(out or "[]"):
        row = rows.get(p["instance_id"])
        if row is not None:
            row["bundle"], row["bundle_bytes"] = p["id"], p["file_size"]
    if not any(r.get("bundle") for r in rows.values()):
        log("trial: nothing was validated, so nothing was packed or replayed")
        return report(args, rows, locks, "", False, False, 0, times)
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
    # Graded again without the tests that cannot run here (the network, conda-only packages).
    for iid in summary.get("resolved_here_ids", []):
        if rows[iid].get("gold") != "resolved":
            rows[iid]["gold"] = "resolved here"
    for iid, e in summary.get("errors", {}).items():
        rows[iid]["gold"] = e["reason"]
    for iid, s in summary.get("overhead_seconds", {}).items():
        rows[iid]["replay_overhead"] = round(s, 1)
    for iid, s in summary.get("test_seconds", {}).items():
        rows[iid]["replay_tests"] = round(s, 1)
    code, _ = sa("release verify", ["--ark", offline, "release", "verify", release],
                 ok=(0, 1), env=env)

    return report(args, rows, locks, root, code == 0, cut, os.path.getsize(exported), times)


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    m = len(xs) // 2
    return round(xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2, 1)


def report(args, rows, locks, root, verified, cut, export_bytes, times):
    """Writes --out and prints the per-context and per-instance tables."""
    contexts = {}
    for iid, r in rows.items():
        c = contexts.setdefault((r["repo"], r["version"]), {"instances": []})
        c["instances"].append(iid)
    for key, c in contexts.items():
        lk = locks.get(key, {})
        ids = c["instances"]
        c["mirror"] = rows[ids[0]].get("mirror", "-")
        c["locked"] = lk.get("ok")
        c["lock_error"] = lk.get("error", "")
        c["lock_seconds"] = lk.get("seconds")
        c["lock_id"] = lk.get("id", "")
        c["built_offline"] = bool(lk.get("ok")) and not any(
            rows[i].get("gold") == "env-build-failed" for i in ids)
        for m in ("exact", "covering", "cannot run here", "differing", "not validated"):
            c[m] = sum(1 for i in ids if rows[i].get("match") == m)
        c["gold_resolved"] = sum(1 for i in ids if rows[i].get("gold") == "resolved")
        c["gold_resolved_here"] = sum(1 for i in ids if rows[i].get("gold") == "resolved here")
        c["validate_seconds_median"] = median(
            [rows[i]["validate_seconds"] for i in ids if "validate_seconds" in rows[i]])
    result = {
        "instances": rows, "contexts": {f"{k[0]} {k[1]}": v for k, v in contexts.items()},
        "release_root": root, "release_verified": verified,
        "network_cut": cut, "export_bytes": export_bytes,
        "seconds": {k: round(v, 1) for k, v in times.items()},
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2, sort_keys=True)
    print("| repository | version | instances | locked | built offline | exact | covering | "
          "cannot run here | differing | not validated | gold resolved offline (here) | lock s | "
          "validate s (median) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (repo, version), c in sorted(contexts.items(), key=lambda kv: (kv[0][0], [
            int(x) if x.isdigit() else x for x in kv[0][1].split(".")])):
        locked = "yes" if c["locked"] else ("no" if c["locked"] is False else c["mirror"])
        print(f'| {repo} | {version} | {len(c["instances"])} | {locked} | '
              f'{"yes" if c["built_offline"] else "no"} | {c["exact"]} | {c["covering"]} | '
              f'{c["cannot run here"]} | {c["differing"]} | {c["not validated"]} | '
              f'{c["gold_resolved"]}{" (+%d)" % c["gold_resolved_here"] if c["gold_resolved_here"] else ""} | '
              f'{c["lock_seconds"] if c["lock_seconds"] is not None else "-"} | '
              f'{c["validate_seconds_median"] if c["validate_seconds_median"] is not None else "-"} |')
    print()
    print("| instance | mirror | lock | validation (F2P/P2P) | gold replay offline | "
          "validate s | replay tests s / overhead s | bundle |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for iid in sorted(rows):
        r = rows[iid]
        val = r.get("validation", "-")
        if val == "kept":
            val = f'kept, {r.get("match", "exact")} ({r["f2p"]}/{r["p2p"]})'
        print(f'| {iid} | {r.get("mirror", "-")} | {r.get("lock", "-")} | {val} | '
              f'{r.get("gold", "-")} | {r.get("validate_seconds", "-")} | '
              f'{r.get("replay_tests", "-")} / {r.get("replay_overhead", "-")} | '
              f'{r.get("bundle_bytes", 0) // 1024} KiB |')
    kept = sum(1 for r in rows.values() if r.get("validation") == "kept")
    gold = sum(1 for r in rows.values() if r.get("gold") == "resolved")
    here = sum(1 for r in rows.values() if r.get("gold") == "resolved here")
    lock_times = [c["lock_seconds"] for c in contexts.values()
                  if c["locked"] and c["lock_seconds"] is not None]
    print(f"\n{len(rows)} instances, {len(contexts)} contexts ({len(lock_times)} locked, median "
          f"lock {median(lock_times)} s); kept {kept}; gold resolved offline {gold} "
          f"of {kept}{f' (and {here} more without tests that cannot run here)' if here else ''}; "
          f"release root {root or '-'}; release verify "
          f"{'ok' if verified else 'FAILED or not run'}; exported file {export_bytes} bytes; "
          f"network cut: {cut}")
    print("times: " + ", ".join(f"{k} {v:.0f} s" for k, v in result["seconds"].items()))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except StepFailed as e:
        log(f"trial: step failed: {e}")
        sys.exit(1)
