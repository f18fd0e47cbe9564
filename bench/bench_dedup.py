#!/usr/bin/env python3
"""The archive's size on a real repository: many instances, deduplicated, against git's floor.

Takes a bare git repository (a real project's snapshot; `--repo`, or SWE_ARK_BENCH_REPO),
chooses `--commits` commits spread evenly over the first-parent history of its HEAD (a commit
whose tree the snapshot lacks blobs of is replaced by the nearest earlier complete one), and
packs one instance per commit. It prints side by side:

  (a) the sum of the self-contained bundle files (`pack --output`, the exchange form),
  (b) what swe-ark's archive stores for the same bundles (`ls --stats`: its pack files),
  (c) the floor: `git pack-objects` of exactly those commits' trees and blobs, no history,
  (d) pack and unpack time, storing into the archive against writing / reading the
      self-contained files, summed over the commits,
  (e) the release of those bundles as one file: `export` (the store form) against (b),
      `export --self-contained` against it, the file imported into an empty archive, and an
      incremental file for one more commit on top (imported there too).

Targets: (b) <= 2 x (c); (a) >= 5 x (b); pack and unpack at most 1.3 x the self-contained
path; the file at most 1.05 x (b), the self-contained file at least 5 x the file. The snapshot is never changed: the chosen trees are copied (with that same
`git pack-objects`) into a scratch repository with one linear commit per tree, which swe-ark
mirrors; the trees, and so the bundles' codebases, are the original commits' trees.

Exit status: 0 when the measurement completed (a missed target is reported, not an error) or
was skipped because the repository is absent, 1 when a command or a check failed, 2 on bad
usage. Only the standard library is used.

Usage: python3 bench/bench_dedup.py --swe-ark target/release/swe-ark [--repo BARE_REPO]
           [--name OWNER/NAME] [--commits 60] [--workdir DIR] [--json FILE]
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

import benchlib
from benchlib import BenchError, Scratch, decompressed_digest, log, mb, run

TARGETS = {"stored_vs_floor": 2.0, "self_contained_vs_stored": 5.0, "pack": 1.3, "unpack": 1.3,
           "file_vs_stored": 1.05, "self_contained_file_vs_file": 5.0}


def git_env(home):
    env = dict(os.environ)
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", HOME=home, LC_ALL="C",
               GIT_AUTHOR_NAME="Bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="Bench", GIT_COMMITTER_EMAIL="bench@example.com")
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
              "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS"):
        env.pop(k, None)
    return env


def git(repo, args, env, stdin=None):
    p = subprocess.run(["git", "--git-dir", repo, *args], input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env)
    if p.returncode != 0:
        raise BenchError(f"git {' '.join(args)} in {repo} failed: "
                         f"{p.stderr.decode(errors='replace').strip()}")
    return p.stdout


def complete(repo, commit, env):
    """Whether the snapshot holds every tree and blob of `commit` (partial clones do not)."""
    out = git(repo, ["rev-list", "--objects", "--no-walk", "--missing=print", commit], env)
    return not any(line.startswith(b"?") for line in out.splitlines())


def choose_commits(repo, n, env):
    """`n` commits spread evenly over HEAD's first-parent history, among those whose trees the
    snapshot holds whole: 4n commits are sampled evenly, the incomplete ones dropped, and `n`
    taken evenly from the rest."""
    history = git(repo, ["rev-list", "--first-parent", "--reverse", "HEAD"], env).split()
    history = [c.decode() for c in history]
    if len(history) < n:
        raise BenchError(f"{repo} has {len(history)} first-parent commits, fewer than {n}")
    samples = min(len(history), 4 * n)
    sampled = sorted({i * (len(history) - 1) // (samples - 1) for i in range(samples)})
    whole = [history[i] for i in sampled if complete(repo, history[i], env)]
    if len(whole) < n:
        raise BenchError(f"only {len(whole)} of {len(sampled)} sampled commits are complete in "
                         f"{repo}: the snapshot lacks too many objects for {n}")
    if len(whole) < len(sampled):
        log(f"note: {len(sampled) - len(whole)} of {len(sampled)} sampled commits lack objects "
            "in the snapshot and are left out")
    chosen = [whole[i * (len(whole) - 1) // (n - 1)] for i in range(n)]
    # One more, for an incremental release: the newest complete sample not chosen.
    extra = [c for c in whole if c not in chosen][-1:]
    if not extra:
        raise BenchError(f"no complete commit left in {repo} for the incremental release")
    return chosen, extra[0]


def objects_of(repo, commits, env):
    """The trees and blobs of `commits`, with their paths (as `rev-list --objects` gives them,
    which pack-objects uses to find delta bases), commits left out."""
    out = git(repo, ["rev-list", "--objects", "--no-walk", *commits], env)
    wanted = set(commits)
    return b"".join(line + b"\n" for line in out.splitlines()
                    if line.split(b" ", 1)[0].decode() not in wanted)


def bench(args):
    repo = args.repo
    swe_ark = benchlib.require(args.swe_ark, ("git", "zstd"))
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    scratch = Scratch(os.path.join(workdir, "dedup-run"))
    env = git_env(scratch.root)

    log(f"choosing {args.commits} commits of {repo}")
    commits, extra = choose_commits(repo, args.commits, env)
    objects = objects_of(repo, commits, env)
    log("the floor: git pack-objects of exactly those trees and blobs")
    started = time.perf_counter()
    floor_pack = git(repo, ["pack-objects", "--stdout", "-q"], env, stdin=objects)
    floor_seconds = time.perf_counter() - started
    floor_fresh = len(git(repo, ["pack-objects", "--stdout", "-q", "--no-reuse-delta"], env,
                          stdin=objects))

    # A complete scratch repository with those trees, one linear commit each.
    upstream = os.path.join(scratch.root, "upstream.git")
    subprocess.run(["git", "init", "-q", "--bare", upstream], check=True, env=env)
    git(upstream, ["index-pack", "--stdin"], env, stdin=floor_pack)
    new_commits, parent = [], None
    for i, c in enumerate(commits):
        tree = git(repo, ["rev-parse", f"{c}^{{tree}}"], env).decode().strip()
        date = f"{1_600_000_000 + i * 86_400} +0000"
        cenv = dict(env, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        argv = ["commit-tree", tree, "-m", f"{c} of {args.name}"]
        if parent:
            argv += ["-p", parent]
        parent = git(upstream, argv, cenv).decode().strip()
        new_commits.append(parent)
    git(upstream, ["update-ref", "refs/heads/main", parent], env)
    git(upstream, ["symbolic-ref", "HEAD", "refs/heads/main"], env)

    ark = os.path.join(scratch.root, "ark")
    files = os.path.join(scratch.root, "files")
    os.makedirs(files)
    run([swe_ark, "--ark", ark, "-q", "mirror", "add", f"file://{upstream}", "--name",
         args.name], "mirror add", env)

    times = {"pack": [], "pack-file": [], "unpack": [], "unpack-file": []}
    ids = []
    order_of_packing = list(enumerate(new_commits))
    if args.order == "shuffled":
        # SWE-bench's instances are not in history order; a fixed seed keeps runs comparable.
        random.Random(1).shuffle(order_of_packing)
    for i, c in order_of_packing:
        inst = os.path.join(scratch.root, f"inst-{i}.json")
        benchlib.write_instance(inst, f"{args.name.replace('/', '__')}-{i}", args.name, c, "src")
        store = [swe_ark, "--ark", ark, "-q", "pack", "--repo", args.name, "--instance", inst]
        to_file = store + ["--output", files]
        # Alternate which goes first, so neither always reads a warmer mirror.
        order = [("pack", store), ("pack-file", to_file)]
        if i % 2:
            order.reverse()
        printed = {}
        for name, argv in order:
            os.sync()
            seconds, out = run(argv, f"{name} of commit {i}", env)
            times[name].append(seconds)
            printed[name] = out.strip().splitlines()[-1]
        if printed["pack"] != printed["pack-file"]:
            raise BenchError(f"commit {i}: the store says {printed['pack']}, the file "
                             f"{printed['pack-file']}")
        ids.append(printed["pack"])
        log(f"commit {i + 1} ({len(ids)}/{len(new_commits)}): pack {times['pack'][-1]:.2f} s, "
            f"pack --output {times['pack-file'][-1]:.2f} s")

    # (a) and (b)
    self_contained = 0
    for i, bid in enumerate(ids):
        path = os.path.join(files, f"{bid}.tar.zst")
        self_contained += os.path.getsize(path)
        if i % 10 == 0:
            digest, _ = decompressed_digest(path)
            if digest != bid:
                raise BenchError(f"{path} hashes to {digest}")
    _, out = run([swe_ark, "--ark", ark, "ls", "--stats", "--json"], "ls --stats", env)
    stats = json.loads(out)
    stored = stats["total"]["stored_bytes"]
    logical = stats["total"]["logical_bytes"]
    on_disk = sum(os.path.getsize(os.path.join(ark, "packs", f))
                  for f in os.listdir(os.path.join(ark, "packs")))
    if on_disk != stored:
        raise BenchError(f"ls --stats says {stored} bytes stored, the packs hold {on_disk}")

    # The store gives back exactly the self-contained files' bytes.
    exported = os.path.join(scratch.root, "exported")
    for bid in ids[:: max(1, len(ids) // 5)]:
        run([swe_ark, "--ark", ark, "-q", "export-bundle", bid, "-o", exported], "export", env)
        with open(os.path.join(exported, f"{bid}.tar.zst"), "rb") as a, \
                open(os.path.join(files, f"{bid}.tar.zst"), "rb") as b:
            if a.read() != b.read():
                raise BenchError(f"export-bundle of {bid} differs from pack --output's file")

    # (d) unpack: from the store against from the file.
    out_dir = os.path.join(scratch.root, "out")
    for i, bid in enumerate(ids):
        order = [("unpack", [swe_ark, "--ark", ark, "-q", "unpack", bid, "-o", out_dir]),
                 ("unpack-file", [swe_ark, "-q", "unpack",
                                  os.path.join(files, f"{bid}.tar.zst"), "-o", out_dir])]
        if i % 2:
            order.reverse()
        for name, argv in order:
            scratch.fresh(out_dir)
            seconds, out = run(argv, f"{name} of {bid}", env)
            if out.strip().splitlines()[-1:] != [bid]:
                raise BenchError(f"{name} printed `{out.strip()}`, expected {bid}")
            times[name].append(seconds)
    log("verify (every piece re-hashed, every bundle rebuilt and re-hashed)")
    verify_seconds, _ = run([swe_ark, "--ark", ark, "-q", "verify"], "verify", env)

    # (e) The release file: the 60 bundles as one file (the store form and the self-contained
    # one), imported into an empty archive; then one more commit and an incremental file.
    release = release_files(args, swe_ark, ark, scratch, env, repo, upstream, parent, extra)
    scratch.remove()

    def ratio(a, b):
        return a / b if b else float("inf")

    summary = {
        "machine": benchlib.machine(swe_ark, ("git", "zstd")),
        "repo": {"path": repo, "name": args.name, "commits": commits, "order": args.order,
                 "tree_and_blob_objects": objects.count(b"\n")},
        "sizes": {
            "logical_tar_bytes": logical,
            "self_contained_bytes": self_contained,
            "stored_bytes": stored,
            "git_floor_bytes": len(floor_pack),
            "git_floor_no_reuse_delta_bytes": floor_fresh,
            "git_floor_seconds": floor_seconds,
        },
        "ratios": {
            "stored_vs_floor": ratio(stored, len(floor_pack)),
            "self_contained_vs_stored": ratio(self_contained, stored),
        },
        "times": {k: {"total": sum(v), "median": statistics.median(v)} for k, v in times.items()},
        "verify_seconds": verify_seconds,
        "release": release,
    }
    t = summary["times"]
    summary["ratios"]["pack"] = ratio(t["pack"]["total"], t["pack-file"]["total"])
    summary["ratios"]["unpack"] = ratio(t["unpack"]["total"], t["unpack-file"]["total"])
    summary["targets"] = {
        "stored_vs_floor": summary["ratios"]["stored_vs_floor"] <= TARGETS["stored_vs_floor"],
        "self_contained_vs_stored":
            summary["ratios"]["self_contained_vs_stored"] >= TARGETS["self_contained_vs_stored"],
        "pack": summary["ratios"]["pack"] <= TARGETS["pack"],
        "unpack": summary["ratios"]["unpack"] <= TARGETS["unpack"],
        "file_vs_stored": release["file_vs_stored"] <= TARGETS["file_vs_stored"],
        "self_contained_file_vs_file":
            release["self_contained_file_vs_file"] >= TARGETS["self_contained_file_vs_file"],
    }
    return summary


def release_files(args, swe_ark, ark, scratch, env, repo, upstream, parent, extra):
    """(e): export the release of every packed bundle in both forms, import the store form into
    an empty archive, then pack `extra` as one more instance and export and import an
    incremental file on top."""
    sa = [swe_ark, "--ark", ark, "-q"]
    snap = os.path.join(scratch.root, "all.json")
    run(sa + ["release", "create", "all", "-o", snap], "release create", env)
    store_file = os.path.join(scratch.root, "all.ark")
    whole_file = os.path.join(scratch.root, "all-self-contained.ark")
    export_s, _ = run(sa + ["export", "--release", snap, "-o", store_file], "export", env)
    export_w, _ = run(sa + ["export", "--release", snap, "--self-contained", "-o", whole_file],
                      "export --self-contained", env)
    _, out = run(sa + ["ls", "--stats", "--json"], "ls --stats", env)
    stored = json.loads(out)["total"]["stored_bytes"]
    other = os.path.join(scratch.root, "other")
    import_s, out = run([swe_ark, "--ark", other, "-q", "import-archive", store_file],
                        "import-archive", env)
    run([swe_ark, "--ark", other, "-q", "release", "verify", snap], "release verify", env)
    size, whole = os.path.getsize(store_file), os.path.getsize(whole_file)

    # One more commit, as release N+1 would bring it.
    git(upstream, ["index-pack", "--stdin"], env,
        stdin=git(repo, ["pack-objects", "--stdout", "-q"], env,
                  stdin=objects_of(repo, [extra], env)))
    tree = git(repo, ["rev-parse", f"{extra}^{{tree}}"], env).decode().strip()
    date = f"{1_600_000_000 + 1000 * 86_400} +0000"
    cenv = dict(env, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    new = git(upstream, ["commit-tree", tree, "-p", parent, "-m", f"{extra} of {args.name}"],
              cenv).decode().strip()
    git(upstream, ["update-ref", "refs/heads/main", new], env)
    run(sa + ["mirror", "update", args.name], "mirror update", env)
    inst = os.path.join(scratch.root, "inst-extra.json")
    benchlib.write_instance(inst, f"{args.name.replace('/', '__')}-extra", args.name, new, "src")
    run(sa + ["pack", "--repo", args.name, "--instance", inst], "pack", env)
    snap2 = os.path.join(scratch.root, "all-plus-one.json")
    run(sa + ["release", "create", "all-plus-one", "-o", snap2], "release create", env)
    inc_file = os.path.join(scratch.root, "plus-one.ark")
    run(sa + ["export", "--release", snap2, "--incremental", "--since", snap, "-o", inc_file],
        "export --incremental", env)
    import_i, _ = run([swe_ark, "--ark", other, "-q", "import-archive", inc_file],
                      "import-archive (incremental)", env)
    run([swe_ark, "--ark", other, "-q", "release", "verify", snap2], "release verify", env)
    inc = os.path.getsize(inc_file)
    return {
        "file_bytes": size,
        "self_contained_file_bytes": whole,
        "stored_bytes": stored,
        "file_vs_stored": size / stored,
        "self_contained_file_vs_file": whole / size,
        "incremental_file_bytes": inc,
        "incremental_vs_file": inc / size,
        "export_seconds": export_s,
        "export_self_contained_seconds": export_w,
        "import_seconds": import_s,
        "import_incremental_seconds": import_i,
    }


def report(s):
    if s.get("skipped"):
        return
    m, r, z, q, t = s["machine"], s["repo"], s["sizes"], s["ratios"], s["times"]
    ok = s["targets"]

    def verdict(key):
        return "met" if ok[key] else "TARGET MISSED"

    print()
    print("swe-ark bench: deduplicated storage")
    print(f"  machine    {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}")
    print(f"  tools      {m['swe_ark']}; {m['git']}; {m['zstd']}")
    print(f"  repository {r['name']} from {r['path']}: {len(r['commits'])} commits spread over "
          f"its history, {r['tree_and_blob_objects']:,} distinct trees and blobs; packed "
          f"{'oldest first' if r['order'] == 'history' else 'in a shuffled order'}")
    print()
    print(f"  {'':<44}{'bytes':>15}")
    print(f"  {'logical: the bundles uncompressed':<44}{z['logical_tar_bytes']:>15,}")
    print(f"  {'(a) self-contained bundle files, summed':<44}{z['self_contained_bytes']:>15,}")
    print(f"  {'(b) swe-ark stored (packs)':<44}{z['stored_bytes']:>15,}")
    print(f"  {'(c) git pack-objects, those trees and blobs':<44}{z['git_floor_bytes']:>15,}")
    print(f"  {'    the same with --no-reuse-delta':<44}"
          f"{z['git_floor_no_reuse_delta_bytes']:>15,}")
    print()
    print(f"  (b) / (c) = {q['stored_vs_floor']:.2f}  (target <= {TARGETS['stored_vs_floor']}: "
          f"{verdict('stored_vs_floor')})")
    print(f"  (a) / (b) = {q['self_contained_vs_stored']:.1f}  (target >= "
          f"{TARGETS['self_contained_vs_stored']}: {verdict('self_contained_vs_stored')})")
    print()
    print(f"  {'(d) seconds, summed over commits':<34}{'swe-ark store':>14}{'self-contained':>16}"
          f"{'ratio':>8}")
    for op, other in (("pack", "pack-file"), ("unpack", "unpack-file")):
        print(f"  {op:<34}{t[op]['total']:>13.2f}s{t[other]['total']:>15.2f}s"
              f"{q[op]:>7.2f}x  (target <= {TARGETS[op]}: {verdict(op)})")
    print(f"  verify of the whole archive: {s['verify_seconds']:.2f} s")
    print()
    e = s["release"]
    print()
    print(f"  (e) the release of those bundles as one file (`export`)")
    print(f"  {'store form (packs, the piece table)':<44}{e['file_bytes']:>15,}  "
          f"{e['file_vs_stored']:.3f}x (b) (target <= {TARGETS['file_vs_stored']}: "
          f"{verdict('file_vs_stored')})")
    print(f"  {'--self-contained (every bundle file)':<44}{e['self_contained_file_bytes']:>15,}  "
          f"{e['self_contained_file_vs_file']:.1f}x the store form (target >= "
          f"{TARGETS['self_contained_file_vs_file']}: {verdict('self_contained_file_vs_file')})")
    print(f"  {'--incremental, one more bundle on top':<44}{e['incremental_file_bytes']:>15,}  "
          f"{100 * e['incremental_vs_file']:.1f}% of the store form")
    print(f"  export {e['export_seconds']:.2f} s (--self-contained {e['export_self_contained_seconds']:.2f} s); "
          f"import into an empty archive {e['import_seconds']:.2f} s (every piece and bundle "
          f"checked); the incremental file {e['import_incremental_seconds']:.2f} s")
    print()
    print("  pack: `swe-ark pack --repo NAME --instance I` against the same with --output DIR;")
    print("  unpack: `swe-ark unpack ID -o DIR` against `swe-ark unpack DIR/ID.tar.zst -o DIR`")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--swe-ark", default="target/release/swe-ark", help="the swe-ark binary")
    p.add_argument("--repo", default=os.environ.get("SWE_ARK_BENCH_REPO"),
                   help="a bare git repository (default: $SWE_ARK_BENCH_REPO)")
    p.add_argument("--name", default=None,
                   help="OWNER/NAME for the mirror (default: from the repository's path, "
                        "`OWNER+NAME/repo` as snapshots are laid out, else bench/real)")
    p.add_argument("--commits", type=int, default=60, help="instances to pack (default 60)")
    p.add_argument("--order", choices=("history", "shuffled"), default="history",
                   help="pack the instances oldest first (default), or in a fixed shuffled "
                        "order, as a dataset lists them")
    p.add_argument("--workdir", default="target/bench", help="where scratch files go")
    p.add_argument("--json", metavar="FILE", help="write the JSON summary here instead of stdout")
    args = p.parse_args()
    if args.commits < 2:
        p.error("--commits must be at least 2")
    if not args.repo or not os.path.isdir(args.repo):
        print(f"bench_dedup: skipped: no repository at `{args.repo or ''}` (give --repo DIR or "
              "SWE_ARK_BENCH_REPO=DIR, a bare git repository)", file=sys.stderr)
        return 0
    if args.name is None:
        parent = os.path.basename(os.path.dirname(os.path.abspath(args.repo)))
        args.name = parent.replace("+", "/", 1) if "+" in parent else "bench/real"
    return benchlib.finish("bench_dedup", bench, report, args,
                           os.path.join(args.workdir, "dedup-run"))


if __name__ == "__main__":
    sys.exit(main())
