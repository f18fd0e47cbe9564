#!/usr/bin/env python3
"""Reproducibility by hash between two builders, measured on real data (issue 19).

Builds the same SWE-bench instances twice, as two archivists would, in two archives that
differ in every way a builder can: the archive's path, HOME, TMPDIR, the working directory,
`validate --jobs`, and the order of the instances on the command line. Each build runs
`mirror add` → `import` → `env lock` → `validate` → `pack --all-validated` → `release create`
with the same dataset rows and mirrors. Then it compares lock ids, bundle ids and the
release files, and for each bundle that differs names the members that differ.

Usage:
  python3 scripts/build_twice.py --data FILE --instances ID,ID,... --mirrors DIR \\
      --work DIR [--swe-ark BIN] [--out FILE.json]

`--mirrors DIR` holds one git directory per repository, named as scripts/trial.py finds
them (`owner+name/repo`, `owner+name.git` or `owner__name.git`). The figures go to stdout
as a table and, with --out, as JSON.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trial import find_mirror, log  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(name, args, rows, jobs, reverse, user):
    """One builder: its own directory tree, HOME, TMPDIR and user name; returns what it made."""
    top = os.path.join(args.work, name)
    shutil.rmtree(top, ignore_errors=True)
    ark, home, tmp = (os.path.join(top, d) for d in ("ark", "home", "tmp"))
    for d in (home, tmp):
        os.makedirs(d)
    env = dict(os.environ, HOME=home, TMPDIR=tmp, USER=user, LOGNAME=user)

    def sa(*cmd, ok=(0,)):
        log(f"[{name}] swe-ark {' '.join(cmd)}")
        p = subprocess.run([args.swe_ark, "--ark", ark, "--no-progress", *cmd], cwd=top,
                           env=env, capture_output=True, text=True)
        if p.returncode not in ok:
            sys.exit(f"[{name}] swe-ark {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
        return p

    ordered = list(reversed(rows)) if reverse else rows
    for repo in sorted({r["repo"] for r in ordered}):
        path = find_mirror(args.mirrors, repo)
        if not path:
            sys.exit(f"no mirror of {repo} under {args.mirrors}")
        sa("mirror", "add", path, "--name", repo)
    data = os.path.join(top, "dataset.jsonl")
    with open(data, "w") as f:
        for r in ordered:
            f.write(json.dumps(r) + "\n")
    sa("import", data)
    locks = {}
    for repo, version in sorted({(r["repo"], r["version"]) for r in ordered},
                                reverse=reverse):
        p = sa("env", "lock", repo, version, ok=(0, 1, 2))
        locks[f"{repo} {version}"] = (p.stdout.strip().splitlines() or ["(failed)"])[-1] \
            if p.returncode == 0 else "(failed)"
    ids = [r["instance_id"] for r in ordered]
    sa("validate", "--instance-ids", ",".join(ids), "--jobs", str(jobs), ok=(0, 1))
    packed = sa("pack", "--all-validated", ok=(0, 1)).stdout
    bundles = {}
    for line in packed.splitlines():
        parts = line.split()
        if len(parts) >= 2 and len(parts[1]) == 64:
            bundles[parts[0]] = parts[1]
    snapshot = os.path.join(top, "release.json")
    sa("release", "create", "twice", "-o", snapshot, ok=(0, 1, 2))
    release = open(snapshot, "rb").read() if os.path.exists(snapshot) else b""
    members = {}
    for iid, bid in bundles.items():
        out = os.path.join(top, "unpacked", iid)
        sa("unpack", bid, "-o", out)
        manifest = json.load(open(os.path.join(out, "bundle.json")))
        members[iid] = {m.get("path", m.get("path_hex")): m["sha256"]
                        for m in manifest["members"] if not
                        m.get("path", "").startswith("codebase/")}
        members[iid]["codebase_tree"] = manifest["codebase_tree"]
    return {"locks": locks, "bundles": bundles, "release": release, "members": members,
            "unpacked": os.path.join(top, "unpacked"), "ark": ark, "snapshot": snapshot}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--instances", required=True)
    ap.add_argument("--mirrors", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--swe-ark", default=os.path.join(ROOT, "target/release/swe-ark"))
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    args.work = os.path.abspath(args.work)
    wanted = [i for i in args.instances.split(",") if i]
    rows = [json.loads(l) for l in open(args.data) if l.strip()]
    rows = [r for r in rows if r["instance_id"] in wanted]
    missing = set(wanted) - {r["instance_id"] for r in rows}
    if missing:
        sys.exit(f"not in {args.data}: {', '.join(sorted(missing))}")
    a = build("alice", args, rows, jobs=1, reverse=False, user="alice")
    b = build(os.path.join("elsewhere", "bob-builds", "deeper"), args, rows, jobs=2,
              reverse=True, user="bob")
    report = {"instances": [], "locks": [], "release_equal": a["release"] == b["release"]}
    for ctx in sorted(a["locks"]):
        report["locks"].append({"context": ctx, "alice": a["locks"][ctx],
                                "bob": b["locks"].get(ctx), "equal":
                                a["locks"][ctx] == b["locks"].get(ctx)})
    for iid in wanted:
        ba, bb = a["bundles"].get(iid), b["bundles"].get(iid)
        diff = []
        if ba and bb and ba != bb:
            ma, mb = a["members"][iid], b["members"][iid]
            diff = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
        report["instances"].append({"instance_id": iid, "alice": ba, "bob": bb,
                                    "equal": bool(ba) and ba == bb, "differing_members": diff})
    print("| context | lock equal |\n| --- | --- |")
    for l in report["locks"]:
        print(f"| {l['context']} | {'yes' if l['equal'] else 'no'} |")
    print("\n| instance | bundle equal | members that differ |\n| --- | --- | --- |")
    for i in report["instances"]:
        state = "yes" if i["equal"] else ("not packed" if not (i["alice"] and i["bob"]) else "no")
        print(f"| {i['instance_id']} | {state} | {', '.join(i['differing_members'])} |")
    n = sum(i["equal"] for i in report["instances"])
    print(f"\n{n} of {len(wanted)} bundle ids equal; release files "
          f"{'equal' if report['release_equal'] else 'differ'}")
    if not report["release_equal"] and a["release"] and b["release"]:
        # What `release diff` says, reading both archives: the reason for each difference.
        p = subprocess.run([args.swe_ark, "--ark", a["ark"], "--no-progress", "release", "diff",
                            a["snapshot"], b["snapshot"], "--other-ark", b["ark"]],
                           capture_output=True, text=True)
        print("\n`release diff` alice bob:\n" + p.stdout)
        report["release_diff"] = p.stdout
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
