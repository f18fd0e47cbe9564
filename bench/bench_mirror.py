#!/usr/bin/env python3
"""Times swe-ark's mirrors: `mirror add`, `pack --repo` and `mirror update`, against plain git.

The upstream is a generated git repository that stands in for a large project: >= 20,000
files of Python-like text (nested packages, a few executables and symlinks) and >= 2,000
commits that each change a handful of files, plus release tags and a maintenance branch.
It is written by `git fast-import` from a stream made with a seeded PRNG, so every machine
gets the same commits (and the same bundle id), and it is kept between runs (a marker file
records the generator's parameters). `--real DIR --real-commit SHA` repeats the
measurements on an existing bare repository, such as a real project's snapshot (when it
lacks objects that some refs reach, on a copy of the other refs).

Each command gets one untimed warm-up run, then --runs timed runs, alternating with its
baseline. Only the standard library is used. Exit status: 0 when the measurement completed
(even if a target is missed: it is a measurement, not a test), 1 when a command failed or a
correctness check did not hold, 2 on bad usage.

Usage: python3 bench/bench_mirror.py --swe-ark target/release/swe-ark [--runs 5]
           [--workdir DIR] [--real BARE_REPO --real-commit SHA]
"""

import argparse
import array
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import benchlib
from benchlib import (
    CODE_WORDS, PROSE_WORDS, BenchError, Scratch, check_bundle, decompressed_digest, log, mb,
    run, shell,
)

# Bump when the generator's output changes, so an old repository on disk is not reused.
GENERATOR_VERSION = 1

# The floor the bench promises; smaller repositories are allowed for quick tries.
MIN_FILES = 20_000
MIN_COMMITS = 2_000

# pack: swe-ark / baseline, on median wall time. mirror update with nothing new: seconds,
# on the median (the maximum is reported next to it).
PACK_TARGET = 1.2
UPDATE_TARGET_SECONDS = 1.0

# The mirror names in the ark, and the instance ids packed from them.
SYNTH_NAME = "bench/repo"
REAL_NAME = "bench/real"

# Fixed identities and dates: the generated commits must hash the same everywhere.
AUTHOR = "Bench Author <author@example.com>"
COMMITTER = "Bench Committer <committer@example.com>"
EPOCH = 1_600_000_000
COMMIT_SPACING = 3_607  # seconds between commits; odd, so times of day vary


def git_env(home):
    """The environment of every command: no system or user git configuration leaks in.

    swe-ark gets it too: libgit2 reads ~/.gitconfig, and HOME points at the workdir.
    """
    env = dict(os.environ)
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", HOME=home,
               LC_ALL="C")
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
              "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
              "XDG_CONFIG_HOME"):
        env.pop(k, None)
    return env


# --------------------------------------------------------------------------------------------
# The generated upstream repository
# --------------------------------------------------------------------------------------------

# Line templates; {i} {j} {k} are identifiers, {C} a class name, {n} a number, {s} prose.
CODE_LINES = [
    "def {i}(self, {j}, {k}=None):", "def {i}({j}):", "class {C}({C}Base):", "return {j}.{k}",
    "if {j} is None:", "if not {j}:", "for {j} in {k}:", "{j} = {k}.{i}({n})",
    "self.{j} = {k}", "raise {C}Error({s!r})", "# {s}", "from {i}.{j} import {C}",
    "import {i}", "{j} += {n}", "logger.debug({s!r}, {j})", "except {C}Error as exc:",
    '"""{s}."""', "{j}[{k!r}] = {i}", "@{i}", "yield {j}", "with {i}({j}) as {k}:",
    "assert {j} == {n}, {s!r}", "return [{j} for {j} in {k} if {j}]", "{j}, {k} = {i}()",
    "elif {j} in {k}:", "{j} = {{{k!r}: {n}, {i!r}: {j}}}", "return {C}({j}={k}, {i}=True)",
]
INDENTS = [0, 4, 4, 8, 8, 8, 12, 12, 16]

POOL_BITS = 14
POOL = 1 << POOL_BITS


class TextMaker:
    """Python-like text from a pool of lines, picked by PRNG bytes (fast: the loop is in C)."""

    def __init__(self, rng):
        self.rng = rng
        made = {"".join(rng.choices("bcdfghklmnprstvz", k=2)) + rng.choice("aeiou")
                + rng.choice(CODE_WORDS) for _ in range(400)}
        pick = CODE_WORDS * 2 + sorted(made)  # sorted: set order changes between processes
        self.idents = sorted({"_".join(rng.choices(pick, k=rng.choice((1, 2, 2, 3))))
                              for _ in range(4000)})
        rng.shuffle(self.idents)
        classes = ["".join(w.capitalize() for w in i.split("_")) for i in self.idents[:800]]
        hot = self.idents[:600]

        def line():
            t = rng.choice(CODE_LINES)
            s = " ".join(rng.choices(PROSE_WORDS + hot[:100], k=rng.randint(3, 9)))
            body = t.format(i=rng.choice(self.idents), j=rng.choice(hot), k=rng.choice(hot),
                            C=rng.choice(classes), n=rng.randint(0, 999), s=s)
            blank = "\n" if rng.random() < 0.15 else ""
            return (" " * rng.choice(INDENTS) + body + "\n" + blank).encode()

        self.pool = [line() for _ in range(POOL)]
        self.avg = sum(map(len, self.pool)) / POOL

    def lines(self, n):
        idx = array.array("H", self.rng.randbytes(2 * n))
        if sys.byteorder == "big":
            idx.byteswap()  # the same repository on every machine
        return b"".join(self.pool[i & (POOL - 1)] for i in idx)

    def text(self, size):
        """About `size` bytes of whole lines (at least one)."""
        return self.lines(max(1, round(size / self.avg)))


def plan_paths(rng, idents, files):
    """Package directories and `files` distinct file paths in them (deterministic order)."""
    top = ["src", "tests", "docs", "tools", "examples"]
    dirs = list(top)
    while len(dirs) < max(len(top), files // 12):
        parent = rng.choice(dirs)
        if parent.count("/") < 5:
            d = f"{parent}/{rng.choice(idents)}"
            if d not in dirs:
                dirs.append(d)
    paths, seen = [], set(dirs)
    while len(paths) < files:
        d = rng.choice(dirs)
        ext = ".rst" if d.startswith("docs") else rng.choice((".py",) * 12 + (".txt", ".cfg"))
        p = f"{d}/{rng.choice(idents)}{ext}"
        if p not in seen:
            seen.add(p)
            paths.append(p)
    return dirs, paths


class Stream:
    """Writes a fast-import stream to a pipe; marks number blobs and commits."""

    def __init__(self, out):
        self.out = out
        self.mark = 0

    def data(self, payload):
        self.out.write(b"data %d\n" % len(payload))
        self.out.write(payload)
        self.out.write(b"\n")

    def blob(self, payload):
        self.mark += 1
        self.out.write(b"blob\nmark :%d\n" % self.mark)
        self.data(payload)
        return self.mark

    def commit(self, ref, when, message, changes):
        """changes: ("M", mode, mark, path) or ("D", path); returns the commit's mark."""
        self.mark += 1
        self.out.write(b"commit %s\nmark :%d\n" % (ref.encode(), self.mark))
        self.out.write(b"author %s %d +0000\n" % (AUTHOR.encode(), when))
        self.out.write(b"committer %s %d +0000\n" % (COMMITTER.encode(), when))
        self.data(message.encode())
        for c in changes:
            if c[0] == "M":
                self.out.write(b"M %s :%d %s\n" % (c[1].encode(), c[2], c[3].encode()))
            else:
                self.out.write(b"D %s\n" % c[1].encode())
        self.out.write(b"\n")
        return self.mark

    def tag(self, name, commit_mark, when, message):
        self.out.write(b"tag %s\nfrom :%d\n" % (name.encode(), commit_mark))
        self.out.write(b"tagger %s %d +0000\n" % (COMMITTER.encode(), when))
        self.data(message.encode())

    def reset(self, ref, commit_mark):
        self.out.write(b"reset %s\nfrom :%d\n\n" % (ref.encode(), commit_mark))


def write_history(stream, seed, files, commits):
    """The whole history: one commit adding `files` files, then commits - 1 small ones."""
    import random  # seeded; only the generator draws from it

    rng = random.Random(seed)
    text = TextMaker(rng)
    idents = text.idents
    dirs, paths = plan_paths(rng, idents, files)

    def size():
        # Log-normal, as file sizes in source trees are: median ~3 kB, a long tail.
        return min(rng.lognormvariate(8.0, 1.0), 250_000)

    content = {}  # path -> current bytes, for edits that change a few lines
    changes = []
    executables = set(rng.sample(range(len(paths)), 12))
    for n, p in enumerate(paths):
        body = text.text(size())
        mode = "100644"
        if n in executables:
            body = b"#!/usr/bin/env python3\n" + body
            mode = "100755"
        content[p] = body
        changes.append(("M", mode, stream.blob(body), p))
    # Relative symlinks to files (and one to a directory), as repositories carry them.
    links = []
    while len(links) < 12:
        link_dir = rng.choice(dirs)
        # The first link points at a directory, the others at files.
        target = rng.choice(dirs[5:]) if not links else rng.choice(paths)
        if (link_dir + "/").startswith(target + "/"):
            continue  # a link to its own ancestor: a loop for whoever follows it
        links.append(f"{link_dir}/link_{len(links)}_{rng.choice(idents)}")
        target = os.path.relpath(target, link_dir).encode()
        changes.append(("M", "120000", stream.blob(target), links[-1]))
    modes = {c[3]: c[1] for c in changes}
    mark = stream.commit("refs/heads/main", EPOCH, "Initial import\n", changes)

    editable = [p for p in paths if modes[p] == "100644"]
    for i in range(1, commits):
        changes = []
        for _ in range(rng.choice((1, 1, 2, 2, 3, 4, 6))):
            p = rng.choice(editable)
            old = content[p]
            # Replace a few lines somewhere in the file with new ones.
            at = old.find(b"\n", rng.randrange(len(old))) + 1
            end = at
            for _ in range(rng.randint(0, 4)):
                nl = old.find(b"\n", end)
                end = len(old) if nl < 0 else nl + 1
            new = old[:at] + text.lines(rng.randint(1, 12)) + old[end:]
            content[p] = new
            changes.append(("M", modes[p], stream.blob(new), p))
        if rng.random() < 0.1:
            p = f"{rng.choice(dirs)}/{rng.choice(idents)}_{i}.py"
            content[p] = text.text(size())
            modes[p] = "100644"
            editable.append(p)
            changes.append(("M", "100644", stream.blob(content[p]), p))
        if rng.random() < 0.02 and len(editable) > files // 2:
            p = editable.pop(rng.randrange(len(editable)))
            changes = [c for c in changes if c[-1] != p]
            del content[p]
            changes.append(("D", p))
        touched = ", ".join(c[-1].rsplit("/", 1)[-1] for c in changes[:3])
        subject = f"{rng.choice(('Fix', 'Update', 'Refactor', 'Tidy', 'Speed up'))} {touched}"
        body = " ".join(rng.choices(PROSE_WORDS + idents[:200], k=rng.randint(8, 40)))
        mark = stream.commit("refs/heads/main", EPOCH + i * COMMIT_SPACING,
                             f"{subject}\n\n{body}.\n", changes)
        if i % 250 == 0:
            stream.tag(f"v1.{i // 250}.0", mark, EPOCH + i * COMMIT_SPACING,
                       f"Release 1.{i // 250}.0\n")
        if i == commits * 4 // 5:
            # A maintenance branch, as projects keep for their previous release.
            stream.reset("refs/heads/maint-1.x", mark)
    stream.out.write(b"done\n")


def git(args, env, what):
    p = subprocess.run(["git", *args], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise BenchError(f"{what} failed (exit {p.returncode}): git {shlex.join(args)}\n"
                         f"{p.stderr.decode(errors='replace').strip()}")
    return p.stdout.decode(errors="replace")


def repo_stats(git_dir, commit, env):
    """Counts at `commit`: files (regular), executables, symlinks; commits in its history."""
    stats = {"files": 0, "executables": 0, "symlinks": 0, "gitlinks": 0}
    out = git(["--git-dir", git_dir, "ls-tree", "-r", "-z", commit], env, "ls-tree")
    for entry in filter(None, out.split("\0")):
        mode = entry.split(" ", 1)[0]
        if mode == "120000":
            stats["symlinks"] += 1
        elif mode == "160000":
            stats["gitlinks"] += 1
        else:
            stats["files"] += 1
            stats["executables"] += mode == "100755"
    stats["entries"] = stats["files"] + stats["symlinks"] + stats["gitlinks"]
    stats["commits"] = int(git(["--git-dir", git_dir, "rev-list", "--count", commit], env,
                               "rev-list").strip())
    return stats


def refs_of(git_dir, env):
    """The refs a mirror copies (branches, tags, notes, pull-request heads), as one text."""
    out = git(["--git-dir", git_dir, "for-each-ref", "--format=%(objectname) %(refname)",
               "refs/heads", "refs/tags", "refs/notes", "refs/pull"], env, "for-each-ref")
    return "".join(line + "\n" for line in out.splitlines()
                   if not line.split(" ", 1)[1].startswith("refs/pull/")
                   or line.endswith("/head"))


def ensure_upstream(workdir, seed, files, commits, regenerate, env):
    """The bare repository at workdir/mirror-upstream, reused when its marker matches."""
    repo = os.path.join(workdir, "mirror-upstream")
    marker = os.path.join(workdir, "mirror-upstream.json")
    params = {"generator": GENERATOR_VERSION, "seed": seed, "files": files, "commits": commits}
    if not regenerate and os.path.isdir(repo) and os.path.isfile(marker):
        with open(marker) as f:
            recorded = json.load(f)
        # The refs catch a repository someone changed since it was made.
        if recorded.get("params") == params:
            try:
                same = recorded.get("refs") == refs_of(repo, env)
            except BenchError:
                same = False
            if same:
                log(f"reusing the generated repository in {repo}")
                return repo, recorded["head"], recorded["stats"]
        log("the repository on disk does not match its marker: generating it again")
    # The marker goes first and comes back last: an interrupted generation is never reused.
    if os.path.exists(marker):
        os.remove(marker)
    if os.path.lexists(repo):
        shutil.rmtree(repo)
    started = time.perf_counter()
    git(["-c", "init.defaultBranch=main", "init", "-q", "--bare", repo], env, "git init")
    # The generator writes while fast-import compresses and hashes: two cores, both busy.
    with open(os.path.join(workdir, "mirror-upstream.fast-import.log"), "wb") as err:
        p = subprocess.Popen(["git", "--git-dir", repo, "fast-import", "--quiet", "--done"],
                             stdin=subprocess.PIPE, stderr=err, env=env)
        try:
            out = p.stdin
            write_history(Stream(out), seed, files, commits)
            out.close()
        except BrokenPipeError:
            pass
        if p.wait() != 0:
            raise BenchError(f"git fast-import failed (exit {p.returncode}); see {err.name}")
    # fast-import stores each new version of a file whole; a full repack finds the deltas
    # between versions, so the upstream is packed the way a hosting service serves it.
    git(["--git-dir", repo, "repack", "-a", "-d", "-f", "-q"], env, "git repack")
    head = git(["--git-dir", repo, "rev-parse", "refs/heads/main"], env, "rev-parse").strip()
    stats = repo_stats(repo, head, env)
    log(f"generated {stats['commits']:,} commits, {stats['entries']:,} entries at the tip, "
        f"in {time.perf_counter() - started:.1f} s")
    with open(marker, "w") as f:
        json.dump({"params": params, "head": head, "stats": stats, "refs": refs_of(repo, env)},
                  f, indent=2)
        f.write("\n")
    return repo, head, stats


# --------------------------------------------------------------------------------------------
# A real repository
# --------------------------------------------------------------------------------------------


def complete_upstream(real, commit, dest, env):
    """`real`, or when it lacks objects its refs reach, a copy of the refs that reach none.

    Neither `git clone --mirror` nor `swe-ark mirror add` can copy a repository with holes,
    and snapshots often have them (large blobs left out). Returns (path, info).
    """
    listed = git(["--git-dir", real, "rev-list", "--objects", "--all", "--missing=print"], env,
                 f"listing the objects of {real}")
    missing = [line[1:] for line in listed.splitlines() if line.startswith("?")]
    refs = git(["--git-dir", real, "for-each-ref", "--format=%(refname)"], env,
               "for-each-ref").split()
    info = {"source": real, "source_refs": len(refs), "missing_objects": missing}
    if not missing:
        return real, info
    # Every ref whose history adds (or drops) a missing object reaches it: leave those out.
    # --find-object finds blobs and trees; a missing commit leaves no way round it.
    touching = set()
    for oid in missing:
        found = git(["--git-dir", real, "log", "--all", "--format=%H", f"--find-object={oid}"],
                    env, f"finding the commits that add {oid}").split()
        if not found:
            raise BenchError(f"{real} lacks object {oid}, and no commit adds it as a file or "
                             "directory: give a complete repository")
        touching.update(found)
    keep = git(["--git-dir", real, "for-each-ref", "--format=%(refname)",
                *(f"--no-contains={c}" for c in sorted(touching))], env, "for-each-ref").split()
    log(f"{real} lacks {len(missing)} objects that its refs reach; copying the "
        f"{len(keep):,} of its {len(refs):,} refs that reach none of them to {dest}")
    git(["-c", "init.defaultBranch=main", "init", "-q", "--bare", dest], env, "git init")
    p = subprocess.run(["git", "--git-dir", dest, "fetch", "-q", "--no-tags", f"file://{real}",
                        "--stdin"], input="".join(f"+{r}:{r}\n" for r in keep).encode(),
                       env=env, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise BenchError(f"copying the complete refs of {real} failed:\n"
                         f"{p.stderr.decode(errors='replace').strip()}")
    if not git(["--git-dir", dest, "for-each-ref", "--contains", commit, "--count=1"], env,
               "for-each-ref").strip():
        raise BenchError(f"commit {commit} is only reachable from refs that reach the objects "
                         f"{real} lacks")
    info["refs_kept"] = len(keep)
    return dest, info


# --------------------------------------------------------------------------------------------
# Running and timing
# --------------------------------------------------------------------------------------------


class Measure(benchlib.Measure):
    """One operation on one repository (see benchlib.Measure).

    pack has a target ratio, update a target time on its median.
    """

    # The summary and the report give each side's maximum time too (update's is shown next
    # to the median its target is judged on).
    with_max = True

    def judge(self, out):
        if self.name == "pack":
            out["target"] = f"ratio <= {PACK_TARGET:.2f}x"
            out["target_met"] = out["ratio_median"] <= PACK_TARGET
        elif self.name == "update":
            out["target"] = f"median < {UPDATE_TARGET_SECONDS:.0f} s"
            out["target_met"] = out["swe-ark"]["median"] < UPDATE_TARGET_SECONDS


def write_instance(path, name, commit):
    # Valid SWE-bench fields; only the repository and the commits matter to packing.
    owner, repo = name.split("/")
    benchlib.write_instance(path, f"{owner}__{repo}-1", name, commit, "src")


def pack_size(git_dir, env):
    """Bytes in the repository's object database (packs and loose objects)."""
    out = git(["--git-dir", git_dir, "count-objects", "-v"], env, "count-objects")
    kib = {k: int(v) for k, v in (line.split(": ") for line in out.splitlines())
           if k in ("size", "size-pack")}
    return 1024 * (kib.get("size", 0) + kib.get("size-pack", 0))


def measure_repo(label, upstream, commit, name, swe_ark, scratch, runs, env):
    """mirror add, pack --repo and mirror update on one upstream repository."""
    root = os.path.join(scratch.root, label)
    os.makedirs(root)
    url = "file://" + upstream
    ark = os.path.join(root, "ark")
    mirror = os.path.join(ark, "mirrors", name.replace("/", "__", 1) + ".git")
    clone = os.path.join(root, "clone.git")
    instance = os.path.join(root, "instance.json")
    base_zst = os.path.join(root, "baseline.tar.zst")
    tree = git(["--git-dir", upstream, "rev-parse", f"{commit}^{{tree}}"], env,
               "rev-parse").strip()
    write_instance(instance, name, commit)
    expected_refs = refs_of(upstream, env)
    q = shlex.quote
    state = {}

    def no_check(_out):
        pass

    def same_refs(git_dir, who):
        got = refs_of(git_dir, env)
        if got != expected_refs:
            ours, theirs = set(got.splitlines()), set(expected_refs.splitlines())
            raise BenchError(
                f"{who} does not hold the upstream's refs: {len(theirs - ours)} missing or "
                f"different, {len(ours - theirs)} extra, e.g. "
                f"{sorted(theirs ^ ours)[:3]}"
            )

    # mirror add ------------------------------------------------------------------------
    def check_baseline_clone(_out):
        if "clone_checked" not in state:
            same_refs(clone, "git clone --mirror")
            state["clone_checked"] = True

    add = Measure(
        "mirror add",
        (lambda: scratch.fresh(ark),
         [swe_ark, "--ark", ark, "-q", "mirror", "add", url, "--name", name],
         lambda _out: same_refs(mirror, f"swe-ark's mirror {mirror}")),
        (lambda: scratch.fresh(clone),
         ["git", "clone", "-q", "--mirror", url, clone],
         check_baseline_clone),
        runs, label=label, env=env,
    ).go()
    # The last run's mirror and clone stay: pack and update use them.
    sizes = {"upstream": pack_size(upstream, env), "swe-ark mirror": pack_size(mirror, env),
             "git clone --mirror": pack_size(clone, env)}

    # pack ------------------------------------------------------------------------------
    def prepare_pack():
        # Packing again into the same ark finds the bundle stored: remove it and collect its
        # pieces, so that every run really stores it.
        if "id" in state:
            run([swe_ark, "--ark", ark, "-q", "rm", state["id"]], "rm", env)
            run([swe_ark, "--ark", ark, "-q", "gc"], "gc", env)
        os.sync()

    def check_pack(out):
        bundle_id, path, tar_size = check_bundle(out, ark, state, swe_ark, env)
        _, shown = run([swe_ark, "--ark", ark, "show", "--json", bundle_id], "show", env)
        got = json.loads(shown)["manifest"]["codebase_tree"]
        if got != tree:
            raise BenchError(f"the bundle's codebase_tree is {got}, git says {commit}^{{tree}} "
                             f"is {tree}")
        state.update(bundle=path, tar_size=tar_size, file_size=os.path.getsize(path))

    pack = Measure(
        "pack",
        (prepare_pack,
         [swe_ark, "--ark", ark, "-q", "pack", "--repo", name, "--instance", instance],
         check_pack),
        (lambda: scratch.fresh(base_zst),
         shell(f"git --git-dir={q(mirror)} archive {q(commit)} "
               f"| zstd -3 -T0 -q -o {q(base_zst)}"),
         no_check),
        runs, label=label, env=env,
    ).go()
    _, base_tar_size = decompressed_digest(base_zst)

    # mirror update ---------------------------------------------------------------------
    def check_update(out):
        # Nothing is new upstream: no ref may change (the pins are not upstream refs).
        if "(+0 ~0 -0)" not in out:
            raise BenchError(f"mirror update changed refs although nothing was new:\n{out}")
        same_refs(mirror, f"swe-ark's mirror {mirror} after update")

    update = Measure(
        "update",
        (os.sync, [swe_ark, "--ark", ark, "-q", "mirror", "update", name], check_update),
        (os.sync, ["git", "--git-dir", clone, "fetch", "-q", "--prune", "origin"],
         lambda _out: same_refs(clone, "git clone --mirror after fetch")),
        runs, label=label, env=env,
    ).go()

    return {
        "upstream": upstream,
        "commit": commit,
        "tree": tree,
        **repo_stats(upstream, commit, env),
        "refs": len(expected_refs.splitlines()),
        "object_bytes": sizes,
        "bundle": {
            "id": state["id"],
            "tar_size": state["tar_size"],
            "file_size": state["file_size"],
        },
        "baseline_archive": {
            "tar_size": base_tar_size,
            "file_size": os.path.getsize(base_zst),
        },
        "results": {m.name: m.summary() for m in (add, pack, update)},
    }


COMMANDS = {
    "mirror add": {"swe-ark": "swe-ark --ark ARK -q mirror add file://UPSTREAM --name NAME",
                   "baseline": "git clone -q --mirror file://UPSTREAM CLONE"},
    "pack": {"swe-ark": "swe-ark --ark ARK -q pack --repo NAME --instance INSTANCE",
             "baseline": "git --git-dir=MIRROR archive COMMIT | zstd -3 -T0 -q -o OUT"},
    "update": {"swe-ark": "swe-ark --ark ARK -q mirror update NAME  (nothing new)",
               "baseline": "git --git-dir=CLONE fetch -q --prune origin  (nothing new)"},
}


def bench(args):
    swe_ark = benchlib.require(args.swe_ark, ("git", "zstd", "bash"))

    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    env = git_env(workdir)
    upstream, head, stats = ensure_upstream(workdir, args.seed, args.files, args.commits,
                                            args.regenerate, env)
    if stats["entries"] < MIN_FILES or stats["commits"] < MIN_COMMITS:
        log(f"note: the repository is below the bench's floor of {MIN_FILES:,} files "
            f"and {MIN_COMMITS:,} commits")
    repos = [("generated", upstream, head, SYNTH_NAME)]
    if args.real:
        real = os.path.abspath(args.real)
        # Checked before anything is timed; and a full id, as an instance's base_commit is.
        spec = f"{args.real_commit}^{{commit}}"
        commit = git(["--git-dir", real, "rev-parse", "--verify", spec], env,
                     f"finding commit {args.real_commit} in {real}").strip()
        repos.append(("real", real, commit, REAL_NAME))

    # Each run's mirror and clone stay on disk until the end (see Scratch).
    benchlib.require_space(workdir,
                           sum((args.runs + 1.5) * 2.5 * pack_size(r[1], env) for r in repos))
    scratch = Scratch(os.path.join(workdir, "mirror-run"))
    sources = {"generated": {"seed": args.seed}}
    if args.real:
        # Before anything is timed: a repository with holes fails here, not halfway.
        real_up, sources["real"] = complete_upstream(
            repos[1][1], repos[1][2], os.path.join(scratch.root, "real-upstream.git"), env)
        repos[1] = ("real", real_up, *repos[1][2:])
    results = {}
    for label, up, commit, name in repos:
        results[label] = {
            **sources[label],
            **measure_repo(label, up, commit, name, swe_ark, scratch, args.runs, env),
        }
    scratch.remove()

    return {
        "machine": benchlib.machine(swe_ark, ("git", "zstd")),
        "runs": args.runs,
        "warm_up_runs": 1,
        "commands": COMMANDS,
        "repositories": results,
    }


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def report(s):
    m = s["machine"]
    print()
    print("swe-ark mirror bench")
    print(f"  machine    {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}")
    print(f"  tools      {m['swe_ark']}; {m['git']}; {m['zstd']}")
    for label, r in s["repositories"].items():
        o, b, base = r["object_bytes"], r["bundle"], r["baseline_archive"]
        if "seed" in r:
            print(f"  {label:<10} {r['upstream']}, seed {r['seed']}")
        elif "refs_kept" in r:
            print(f"  {label:<10} {r['source']}: the {r['refs_kept']:,} refs (of "
                  f"{r['source_refs']:,}) that reach none of the "
                  f"{len(r['missing_objects'])} objects it lacks")
        else:
            print(f"  {label:<10} {r['upstream']}")
        print(f"  {'':<10} {r['commits']:,} commits to {r['commit'][:12]}, {r['refs']:,} refs; "
              f"{r['entries']:,} entries there ({r['executables']} executable, "
              f"{r['symlinks']} symlinks, {r['gitlinks']} gitlinks)")
        print(f"  {'':<10} objects: upstream {mb(o['upstream'])}, swe-ark mirror "
              f"{mb(o['swe-ark mirror'])}, git clone --mirror {mb(o['git clone --mirror'])}")
        print(f"  {'':<10} bundle {b['id'][:16]}: tar {mb(b['tar_size'])}, .tar.zst "
              f"{mb(b['file_size'])}; git archive: tar {mb(base['tar_size'])}, "
              f".tar.zst {mb(base['file_size'])}")
    runs = f"{s['runs']} timed run{'s' if s['runs'] != 1 else ''}"
    print(f"  method     wall time, {runs} of each command, alternating with its")
    print("             baseline, after one untimed warm-up run of each; the page cache is not")
    print("             dropped; dirty pages are flushed (sync) before each run, outside the")
    print("             timing")
    print()
    # Column widths match the rows below.
    head = (f"{'repository':<11}{'operation':<11}{'swe-ark min':>12}{'median':>9}{'max':>9}"
            f"{'git min':>10}{'median':>9}{'ratio med':>11}{'ratio min':>11}  target")
    print(head)
    print("-" * (len(head) + 23))
    missed = []
    for label, r in s["repositories"].items():
        for name, x in r["results"].items():
            c, bl = x["swe-ark"], x["baseline"]
            row = (f"{label:<11}{name:<11}{c['min']:>11.2f}s{c['median']:>8.2f}s"
                   f"{c['max']:>8.2f}s{bl['min']:>9.2f}s{bl['median']:>8.2f}s"
                   f"{x['ratio_median']:>10.2f}x{x['ratio_min']:>10.2f}x")
            if "target" in x:
                row += f"  {x['target']}: {'met' if x['target_met'] else 'TARGET MISSED'}"
                if not x["target_met"]:
                    missed.append(f"{label} {name}")
            else:
                row += "  (none)"
            print(row)
    print("ratio = swe-ark / git; pack's target is judged on the median ratio, update's on")
    print("the median time")
    print()
    for name, cmds in s["commands"].items():
        print(f"  {name:<10} swe-ark:  {cmds['swe-ark']}")
        print(f"  {'':<10} baseline: {cmds['baseline']}")
    print()
    if missed:
        print(f"TARGET MISSED: {', '.join(missed)}")
    else:
        print(f"targets met: pack <= {PACK_TARGET:.2f}x, "
              f"mirror update < {UPDATE_TARGET_SECONDS:.0f} s")


def main():
    if sys.version_info < (3, 9):
        sys.exit("bench_mirror: needs Python 3.9 or newer (random.randbytes)")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--swe-ark", default="target/release/swe-ark", help="the swe-ark binary")
    p.add_argument("--workdir", default="target/bench",
                   help="where the upstream repository and scratch files go")
    p.add_argument("--runs", type=int, default=5, help="timed runs per command (default 5)")
    p.add_argument("--regenerate", action="store_true",
                   help="generate the repository even if one is there")
    p.add_argument("--real", metavar="DIR",
                   help="also measure this bare git repository (needs --real-commit)")
    p.add_argument("--real-commit", metavar="SHA", help="the commit to pack from --real")
    p.add_argument("--json", metavar="FILE", help="write the JSON summary here instead of stdout")
    p.add_argument("--seed", type=int, default=1, help="the generator's seed")
    p.add_argument("--files", type=int, default=22_000,
                   help="files in the first commit (default 22,000)")
    p.add_argument("--commits", type=int, default=2_500, help="commits on main (default 2,500)")
    args = p.parse_args()
    if args.runs < 1:
        p.error("--runs must be at least 1")
    if args.files < 200 or args.commits < 10:
        p.error("--files must be at least 200 and --commits at least 10")
    if bool(args.real) != bool(args.real_commit):
        p.error("--real and --real-commit go together")
    return benchlib.finish("bench_mirror", bench, report, args,
                           os.path.join(args.workdir, "mirror-run"))


if __name__ == "__main__":
    sys.exit(main())
