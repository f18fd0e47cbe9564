#!/usr/bin/env python3
"""Locks contexts that no instance at hand uses: for each REPO VERSION, the release tag of that
version in a mirror (the first of vX.Y.0, X.Y.0, vX.Y, X.Y, then the newest vX.Y.* / X.Y.*) is
the commit, and the cutoff is --exclude-newer (default: the `swe-bench` dataset's environments
date). It answers "does the lock policy hold on a context nobody tried?" before instances of it
arrive, and prints a Markdown table (locked or why not, seconds, packages, notes).

Usage: python3 scripts/lock_versions.py --mirrors DIR [--swe-ark target/release/swe-ark]
           [--work target/lock-versions] [--exclude-newer WHEN] [--seed-objects DIR]
           [--out FILE] REPO=VERSION[,VERSION...] ...

What each lock printed is kept in WORK/logs/OWNER__NAME-VERSION.err.
Mirrors are found as in scripts/trial.py (MIRRORS/OWNER+NAME/repo, …); a snapshot that lacks
objects is mirrored with the history of the chosen tags only. Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trial import find_mirror, log  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWE_BENCH_DATE = "2024-01-26T00:00:00Z"


def git(git_dir, *args):
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True,
                          env=env)


def release_tag(git_dir, version):
    """The tag of a release version, or None."""
    tags = git(git_dir, "tag", "-l").stdout.split()
    for t in (f"v{version}.0", f"{version}.0", f"v{version}", version):
        if t in tags:
            return t
    pat = re.compile(rf"^v?{re.escape(version)}\.(\d+)$")
    patches = sorted((int(m.group(1)), t) for t in tags if (m := pat.match(t)))
    return patches[-1][1] if patches else None


def tag_mirror(snapshot, repo, tags, into):
    """A bare repository holding the history of `tags` only (and those tags)."""
    dest = os.path.join(into, repo.replace("/", "__") + ".git")
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", dest], check=True)
    kept = []
    for t in tags:
        if git(dest, "fetch", "-q", "--no-tags", snapshot,
               f"refs/tags/{t}:refs/tags/{t}").returncode == 0:
            kept.append(t)
        else:
            log(f"{repo}: the history of {t} is incomplete in the snapshot")
    return dest, kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--swe-ark", default=os.path.join(ROOT, "target", "release", "swe-ark"))
    ap.add_argument("--mirrors", required=True)
    ap.add_argument("--work", default=os.path.join(ROOT, "target", "lock-versions"))
    ap.add_argument("--exclude-newer", default=SWE_BENCH_DATE)
    ap.add_argument("--seed-objects", default="")
    ap.add_argument("--out")
    ap.add_argument("contexts", nargs="+", metavar="REPO=VERSION[,VERSION...]")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sa_bin = os.path.join(work, "swe-ark")
    shutil.copy2(os.path.abspath(args.swe_ark), sa_bin)
    manifests = os.path.join(work, "manifests")
    shutil.copytree(os.environ.get("SWE_ARK_MANIFESTS", os.path.join(ROOT, "manifests")),
                    manifests)
    env = dict(os.environ, SWE_ARK_MANIFESTS=manifests)
    ark = os.path.join(work, "ark")
    if args.seed_objects:
        os.makedirs(ark)
        subprocess.run(["cp", "-al", os.path.abspath(args.seed_objects),
                        os.path.join(ark, "objects")], check=True)

    def sa(*argv):
        log(f"$ swe-ark {' '.join(argv)}")
        return subprocess.run([sa_bin, "--no-progress", "--ark", ark, *argv], cwd=work,
                              capture_output=True, text=True, env=env)

    rows = []
    for spec in args.contexts:
        repo, _, versions = spec.partition("=")
        versions = [v for v in versions.split(",") if v]
        snapshot = find_mirror(args.mirrors, repo)
        if not snapshot:
            rows += [(repo, v, "", "no mirror", None, None, []) for v in versions]
            continue
        tags = {v: release_tag(snapshot, v) for v in versions}
        mirror, kept = tag_mirror(snapshot, repo, [t for t in tags.values() if t],
                                  os.path.join(work, "mirrors"))
        p = sa("mirror", "add", mirror, "--name", repo)
        if p.returncode != 0:
            rows += [(repo, v, tags[v] or "", "mirror: " + p.stderr.strip()[:200], None, None,
                      []) for v in versions]
            continue
        for v in versions:
            tag = tags[v]
            if not tag or tag not in kept:
                rows.append((repo, v, tag or "", "no release tag with a complete history",
                             None, None, []))
                continue
            t = time.time()
            p = sa("env", "lock", repo, v, "--commit", tag, "--exclude-newer",
                   args.exclude_newer, "--json")
            secs = round(time.time() - t, 1)
            # The whole of what the lock said, for the failures the table cuts short.
            logs = os.path.join(work, "logs")
            os.makedirs(logs, exist_ok=True)
            with open(os.path.join(logs, f"{repo.replace('/', '__')}-{v}.err"), "w") as f:
                f.write(p.stderr)
            if p.returncode == 0:
                lock = json.loads(p.stdout)
                rows.append((repo, v, tag, "locked", secs, lock.get("packages"),
                             lock.get("notes", [])))
            else:
                err = [l for l in p.stderr.splitlines() if "error" in l]
                rows.append((repo, v, tag, (err[0] if err else p.stderr[-300:])[:400], secs,
                             None, []))
    if args.out:
        with open(args.out, "w") as f:
            json.dump([dict(zip(("repo", "version", "tag", "result", "seconds", "packages",
                                 "notes"), r)) for r in rows], f, indent=2)
    print("| repository | version | commit | result | lock s | packages | notes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for repo, v, tag, result, secs, pkgs, notes in rows:
        print(f"| {repo} | {v} | {tag} | {result} | {secs if secs is not None else '-'} | "
              f"{pkgs if pkgs is not None else '-'} | {len(notes)} |")
    ok = sum(1 for r in rows if r[3] == "locked")
    print(f"\n{ok} of {len(rows)} contexts locked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
