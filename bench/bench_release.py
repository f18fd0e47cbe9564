#!/usr/bin/env python3
"""Times swe-ark's release export and import against tar and zstd on the same files.

The release: N instances (--instances, default 4) packed from one generated tree (bench.py's
generator, --bytes in --files), each with a lock (`pack --lock`) that names W wheels
(--wheels, default 30, sizes log-normal, --wheel-bytes in all) and a packed interpreter
(--interpreter-bytes); the wheels and the interpreter are seeded random bytes, as
incompressible as real zip wheels and a zstd-packed interpreter, written into the archive's
object store. `release create` makes the snapshot.

What is timed (wall time, one untimed warm-up run of each, then --runs rounds alternating
with the baseline):

  export  swe-ark --ark ARK -q export --release SNAP -o OUT.ark
          baseline: tar -cf - -C PARTS -T FILES | zstd -3 -T0 -q -o OUT.tar.zst
  import  swe-ark --ark NEW -q import-archive OUT.ark            (NEW does not exist)
          baseline: zstd -dc OUT.tar.zst | tar -xf - -C DIR

Then both again against baselines that end with `sync OUT.tar.zst` / `sync -f DIR`: swe-ark
syncs what it writes before renaming it into place, tar does not (no target; for reading).
FILES lists exactly the members of the exported file but its metadata (the packs and the
objects; the manifest, snapshot, index slice and piece table are a few kB); PARTS holds them
as files, extracted by tar from one untimed export. So the baseline is given for free what
`export` works out (which pieces, which packs) and writes. Targets: median ratio
(swe-ark / baseline) at most 1.3 for both.
Also reported: the exported file's size against the sum of its parts, against the store's
packs plus the objects, and the size of the `--self-contained` form; and how long
`zstd -dc | sha256sum` of every bundle's exchange file takes (the bundle hashing import does).
Checks (exit 1): every export is byte-identical, the file's members are those of FILES, and
the import prints the release's root and `release verify` passes there.

Exit 0 when the measurement completed (a missed target prints TARGET MISSED), 1 when a
command or check failed. Standard library only.

Usage: python3 bench/bench_release.py --swe-ark target/release/swe-ark [--runs 5]
           [--workdir target/bench/release] [--json FILE]
"""

import argparse
import hashlib
import json
import os
import random
import shlex
import subprocess
import sys
import tarfile

import bench
import benchlib
from benchlib import BenchError, Scratch, log, mb, run, shell

TARGETS = {"export": 1.3, "import": 1.3}
BASE = "0123456789abcdef0123456789abcdef01234567"


class Measure(benchlib.Measure):
    def judge(self, out):
        if self.name in TARGETS and "ratio_median" in out:
            out["target"] = TARGETS[self.name]
            out["target_met"] = out["ratio_median"] <= TARGETS[self.name]


def put_object(ark, data):
    """Writes `data` into ARK's object store; returns (sha256, size)."""
    sha = hashlib.sha256(data).hexdigest()
    d = os.path.join(ark, "objects", "sha256", sha[:2])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, sha[2:]), "wb") as f:
        f.write(data)
    return sha, len(data)


def make_objects(ark, seed, wheels, wheel_bytes, interpreter_bytes):
    """Seeded random wheels (log-normal sizes) and one interpreter; returns the lock text."""
    rng = random.Random(seed)
    raw = [rng.lognormvariate(0, 1.0) for _ in range(wheels)]
    scale = wheel_bytes / sum(raw)
    lines = ['lock-version = "1.0"', 'requires-python = ">=3.11"',
             'created-by = "swe-ark bench"']
    for i, r in enumerate(raw):
        sha, size = put_object(ark, rng.randbytes(max(1000, int(r * scale))))
        name = f"pkg{i:03d}"
        lines += ["", "[[packages]]", f'name = "{name}"', 'version = "1.0"',
                  f'wheels = [{{ name = "{name}-1.0-py3-none-any.whl", size = {size}, '
                  f'hashes = {{ sha256 = "{sha}" }} }}]']
    isha, isize = put_object(ark, rng.randbytes(interpreter_bytes))
    lines += [
        "", "[tool.swe-ark]", 'repo = "bench/bench"', 'version = "1.0"', f'commit = "{BASE}"',
        'exclude-newer = "2024-01-01T00:00:00Z"', 'index = "https://pypi.org/simple"',
        'resolver = "pip 24.0"', "", "[tool.swe-ark.python]", 'version = "3.11.7"',
        'implementation = "cpython"', 'platform = "linux-x86_64"', f'sha256 = "{isha}"',
        f'packed = {{ name = "cpython-3.11.7-linux-x86_64.tar.zst", size = {isize}, '
        f'hashes = {{ sha256 = "{isha}" }} }}',
        "", "[tool.swe-ark.context]", 'python = "3.11"', "packages = []",
        'pip-packages = ["pytest"]', "pre-install = []", "skipped-pre-install = []",
        'install = "python -m pip install -e ."', "",
    ]
    return "\n".join(lines)


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def bench_release(args):
    swe_ark = benchlib.require(args.swe_ark, ("tar", "zstd", "bash"))
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    tree, tree_stats = bench.ensure_tree(workdir, args.seed, args.files, args.bytes,
                                         args.regenerate)
    need = (args.runs + 2) * 3 * (args.wheel_bytes + args.interpreter_bytes
                                  + args.instances * tree_stats["bytes"] // 3)
    benchlib.require_space(workdir, need)
    scratch = Scratch(os.path.join(workdir, "run"))
    ark = os.path.join(scratch.root, "ark")
    os.makedirs(ark)

    # The release ------------------------------------------------------------------------
    lock = make_objects(ark, args.seed, args.wheels, args.wheel_bytes, args.interpreter_bytes)
    lock_path = os.path.join(scratch.root, "pylock.toml")
    with open(lock_path, "w") as f:
        f.write(lock)
    # As `env lock` does: the lock is an object too (its id is the bundles' env/pylock.toml).
    lock_sha, _ = put_object(ark, lock.encode())
    sa = [swe_ark, "--ark", ark, "-q", "--no-progress"]
    for n in range(1, args.instances + 1):
        inst = os.path.join(scratch.root, f"instance-{n}.json")
        benchlib.write_instance(inst, f"bench__bench-{n}", "bench/bench", BASE, "bench")
        secs, _ = run(sa + ["pack", "--instance", inst, "--codebase", tree, "--lock", lock_path],
                      "pack")
        log(f"packed instance {n} in {secs:.1f} s")
    snap = os.path.join(scratch.root, "bench.json")
    run(sa + ["release", "create", "bench", "-o", snap], "release create")
    with open(snap) as f:
        release = json.load(f)
    root = release["root"]

    out = os.path.join(scratch.root, "bench.ark")
    # The files the exported file carries (the store's packs and the objects), for the
    # baseline: one export, untimed, extracted by tar. The baseline is given for free what
    # export works out (which pieces, which packs) and writes.
    parts_dir = os.path.join(scratch.root, "parts")
    os.makedirs(parts_dir)
    run(sa + ["export", "--release", snap, "-o", out], "export")
    with tarfile.open(out) as t:
        all_members = t.getnames()
    meta = ["swe-ark-archive.json", "release.json", "index.json", "pieces.bin"]
    members = [m for m in all_members if m not in meta]
    run(["tar", "-xf", out, "-C", parts_dir] + members, "tar -x")
    listing = os.path.join(scratch.root, "files.txt")
    with open(listing, "w") as f:
        f.write("\n".join(members) + "\n")
    parts = sum(os.path.getsize(os.path.join(parts_dir, m)) for m in members)
    packs = [m for m in members if m.startswith("packs/")]
    packs_bytes = sum(os.path.getsize(os.path.join(parts_dir, m)) for m in packs)
    objects = sorted({o for i in release["instances"] for o in i["objects"]})
    # The self-contained form, for its size; and each bundle's exchange file, for the time
    # that hashing every bundle's tar takes (what import checks).
    whole = os.path.join(scratch.root, "whole.ark")
    run(sa + ["export", "--release", snap, "--self-contained", "-o", whole], "export")
    whole_size = os.path.getsize(whole)
    os.remove(whole)
    bundle_files = os.path.join(scratch.root, "bundle-files")
    for i in release["instances"]:
        run(sa + ["export-bundle", i["bundle"], "-o", bundle_files], "export-bundle")
    bundles_bytes = sum(os.path.getsize(os.path.join(bundle_files, f))
                        for f in os.listdir(bundle_files))
    stored = json.loads(run(sa + ["ls", "--stats", "--json"], "ls --stats")[1])
    store_bytes = sum(r["pack_bytes"] + r["whole_file_bytes"] for r in stored["repos"])

    base_out = os.path.join(scratch.root, "baseline.tar.zst")
    target = os.path.join(scratch.root, "imported")
    base_dir = os.path.join(scratch.root, "extracted")
    q = shlex.quote
    state = {}

    def check_export(_out):
        sha = file_sha(out)
        if state.setdefault("sha", sha) != sha:
            raise BenchError("two exports of the same release differ")
        if "members" not in state:
            with tarfile.open(out) as t:
                names = t.getnames()
            state["members"] = names
            want = meta + members
            if sorted(names) != sorted(want):
                extra = sorted(set(names) ^ set(want))
                raise BenchError(f"the exported file's members differ from FILES: {extra[:5]}")

    def no_check(_out):
        pass

    export = Measure(
        "export",
        (lambda: scratch.fresh(out),
         sa + ["export", "--release", snap, "-o", out], check_export),
        (lambda: scratch.fresh(base_out),
         shell(f"tar -cf - -C {q(parts_dir)} -T {q(listing)} | zstd -3 -T0 -q -o {q(base_out)}"),
         no_check),
        args.runs,
    )
    export.go()

    def check_import(text):
        if text.strip().splitlines()[-1:] != [root]:
            raise BenchError(f"import-archive printed `{text.strip()}`, not the root {root}")
        if "verified" not in state:
            run([swe_ark, "--ark", target, "-q", "release", "verify", snap], "release verify")
            state["verified"] = True

    imp = Measure(
        "import",
        (lambda: scratch.fresh(target),
         [swe_ark, "--ark", target, "-q", "--no-progress", "import-archive", out], check_import),
        (lambda: scratch.fresh(base_dir, create=True),
         shell(f"zstd -dc -q {q(base_out)} | tar -xf - -C {q(base_dir)}"), no_check),
        args.runs,
    )
    imp.go()

    # The same, against baselines that also wait for their data to reach the disk, as swe-ark
    # does before it renames a file into place (no target: for reading the ones above).
    export_synced = Measure(
        "export-synced",
        (lambda: scratch.fresh(out),
         sa + ["export", "--release", snap, "-o", out], check_export),
        (lambda: scratch.fresh(base_out),
         shell(f"tar -cf - -C {q(parts_dir)} -T {q(listing)} | zstd -3 -T0 -q -o {q(base_out)} "
               f"&& sync {q(base_out)}"),
         no_check),
        args.runs,
    )
    export_synced.go()
    import_synced = Measure(
        "import-synced",
        (lambda: scratch.fresh(target),
         [swe_ark, "--ark", target, "-q", "--no-progress", "import-archive", out], check_import),
        (lambda: scratch.fresh(base_dir, create=True),
         shell(f"zstd -dc -q {q(base_out)} | tar -xf - -C {q(base_dir)} && sync -f {q(base_dir)}"),
         no_check),
        args.runs,
    )
    import_synced.go()

    # Where import's time goes: the bundles' uncompressed tars, hashed (zstd -dc | sha256sum).
    bundle_paths = " ".join(q(os.path.join(bundle_files, f)) for f in sorted(os.listdir(bundle_files)))
    hash_secs, _ = run(shell(f"for b in {bundle_paths}; do zstd -dc -q \"$b\" | sha256sum; done"),
                       "hash bundles")
    out_size = os.path.getsize(out)
    base_size = os.path.getsize(base_out)
    scratch.remove()
    return {
        "machine": benchlib.machine(swe_ark, ("tar", "zstd")),
        "runs": args.runs,
        "warm_up_runs": 1,
        "tree": {"path": tree, "seed": args.seed, **tree_stats},
        "release": {
            "instances": args.instances,
            "objects": len(objects) + 1,
            "bundle_files_bytes": bundles_bytes,
            "packs": len(packs),
            "packs_bytes": packs_bytes,
            "store_bytes": store_bytes,
            "objects_bytes": parts - packs_bytes,
            "root": root,
        },
        "size": {
            "parts": parts,
            "exported": out_size,
            "exported_vs_parts": out_size / parts,
            "exported_vs_store_and_objects": out_size / (store_bytes + parts - packs_bytes),
            "self_contained": whole_size,
            "self_contained_vs_exported": whole_size / out_size,
            "baseline_tar_zst": base_size,
            "baseline_vs_parts": base_size / parts,
        },
        "bundles_zstd_dc_sha256sum_seconds": hash_secs,
        "commands": {
            "export": {"swe-ark": "swe-ark --ark ARK -q export --release SNAP -o OUT.ark",
                       "baseline": "tar -cf - -C ARK -T FILES | zstd -3 -T0 -q -o OUT.tar.zst"},
            "import": {"swe-ark": "swe-ark --ark NEW -q import-archive OUT.ark",
                       "baseline": "zstd -dc OUT.tar.zst | tar -xf - -C DIR"},
            "export-synced": {"swe-ark": "(as export)",
                              "baseline": "(export's baseline) && sync OUT.tar.zst"},
            "import-synced": {"swe-ark": "(as import)",
                              "baseline": "(import's baseline) && sync -f DIR"},
        },
        "results": {m.name: m.summary()
                    for m in (export, imp, export_synced, import_synced)},
    }


def report(s):
    m, r, z = s["machine"], s["release"], s["size"]
    print()
    print("swe-ark release bench")
    print(f"  machine    {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}")
    print(f"  tools      {m['swe_ark']}; {m['tar']}; {m['zstd']}")
    print(f"  release    {r['instances']} bundles (one tree of {mb(s['tree']['bytes'])} in "
          f"{s['tree']['entries']:,} entries; {mb(r['bundle_files_bytes'])} as bundle files, "
          f"{mb(r['packs_bytes'])} in {r['packs']} packs), {r['objects']} objects "
          f"({mb(r['objects_bytes'])})")
    print(f"  size       exported {z['exported']:,} bytes = {z['exported_vs_parts']:.4f}x the "
          f"parts ({z['parts']:,}), {z['exported_vs_store_and_objects']:.4f}x the store's "
          f"packs and the objects; --self-contained {z['self_contained']:,} bytes "
          f"({z['self_contained_vs_exported']:.2f}x); baseline .tar.zst "
          f"{z['baseline_vs_parts']:.4f}x the parts")
    print(f"  bundles    zstd -dc | sha256sum of every bundle (what import checks): "
          f"{s['bundles_zstd_dc_sha256sum_seconds']:.2f} s")
    print()
    head = (f"{'operation':<14}{'swe-ark min':>12}{'median':>9}{'baseline min':>14}{'median':>9}"
            f"{'ratio med':>11}{'ratio min':>11}  target")
    print(head)
    print("-" * (len(head) + 16))
    missed = []
    for name, res in s["results"].items():
        c, bl = res["swe-ark"], res["baseline"]
        row = (f"{name:<14}{c['min']:>11.2f}s{c['median']:>8.2f}s{bl['min']:>13.2f}s"
               f"{bl['median']:>8.2f}s{res['ratio_median']:>10.2f}x{res['ratio_min']:>10.2f}x")
        if "target" not in res:
            print(row + "  (none)")
            continue
        verdict = "met" if res["target_met"] else "TARGET MISSED"
        if not res["target_met"]:
            missed.append(name)
        print(row + f"  <= {res['target']:.2f}x: {verdict}")
    print("ratio = swe-ark / baseline; a target is judged on the median ratio")
    print()
    for name, cmds in s["commands"].items():
        print(f"  {name:<14} swe-ark:  {cmds['swe-ark']}")
        print(f"  {'':<14} baseline: {cmds['baseline']}")
    print()
    if missed:
        print(f"TARGET MISSED: {', '.join(missed)} (median ratio above the target)")
    else:
        print("targets met: " + ", ".join(f"{n} <= {t:.2f}x" for n, t in TARGETS.items()))


def main():
    if sys.version_info < (3, 9):
        sys.exit("bench_release: needs Python 3.9 or newer (random.randbytes)")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--swe-ark", default="target/release/swe-ark", help="the swe-ark binary")
    p.add_argument("--workdir", default="target/bench/release",
                   help="where the tree and scratch files go")
    p.add_argument("--runs", type=int, default=5, help="timed runs per command (default 5)")
    p.add_argument("--regenerate", action="store_true", help="generate the tree again")
    p.add_argument("--json", metavar="FILE", help="write the JSON summary here instead of stdout")
    p.add_argument("--seed", type=int, default=7, help="the generators' seed")
    p.add_argument("--files", type=int, default=12_000, help="entries in the tree")
    p.add_argument("--bytes", type=int, default=120_000_000, help="bytes in the tree's files")
    p.add_argument("--instances", type=int, default=4, help="bundles in the release")
    p.add_argument("--wheels", type=int, default=30, help="wheel objects in the lock")
    p.add_argument("--wheel-bytes", type=int, default=150_000_000, help="the wheels' bytes")
    p.add_argument("--interpreter-bytes", type=int, default=40_000_000,
                   help="the packed interpreter's bytes")
    args = p.parse_args()
    if args.runs < 1 or args.instances < 1 or args.wheels < 1:
        p.error("--runs, --instances and --wheels must be at least 1")
    return benchlib.finish("bench_release", bench_release, report, args,
                           os.path.join(args.workdir, "run"))


if __name__ == "__main__":
    sys.exit(main())
