#!/usr/bin/env python3
"""Times swe-ark's pack, unpack and verify against plain `tar | zstd` on a generated tree.

The tree stands in for a large repository (>= 200 MB in >= 20,000 files of Python-like text,
nested packages, a few big files, executables and symlinks). It is made from a seeded PRNG,
so every machine packs the same bytes and gets the same bundle id, and it is kept between
runs (a marker file records the generator's parameters).

Each command gets one untimed warm-up run, then --runs timed runs, alternating with its
baseline. Only the standard library is used. Exit status: 0 when the measurement completed
(even if a target is missed: it is a measurement, not a test), 1 when a command failed or a
correctness check did not hold, 2 on bad usage.

Usage: python3 bench/bench.py --swe-ark target/release/swe-ark [--runs 5] [--workdir DIR]
"""

import argparse
import array
import hashlib
import itertools
import json
import os
import shlex
import shutil
import sys
import time

import benchlib
from benchlib import (
    CODE_WORDS, PROSE_WORDS, BenchError, Scratch, check_bundle, decompressed_digest, log, mb,
    shell,
)

# Bump when the generator's output changes, so an old tree on disk is not reused.
GENERATOR_VERSION = 1

# The floor the bench promises (see the Makefile); smaller trees are allowed for quick tries.
MIN_BYTES = 200 * 1024 * 1024
MIN_FILES = 20_000

# swe-ark / baseline, on median wall time.
TARGETS = {"pack": 1.3, "unpack": 1.3, "unpack-file": 1.3}


# --------------------------------------------------------------------------------------------
# The generated tree
# --------------------------------------------------------------------------------------------

SYLLABLES = """
ka lo mi ren tor val sen dar pel quo ix un ba cor fin gal hep jun kel lum mor nex ost pra rim
sul tev ulm vor wen yal zor ath bry cid dov esk fyl gor hax ion jex kyr lyn mav nol orp pim
""".split()

# Fixed-length pools of line heads and tails: a line is one head (indent included) and one
# tail, picked by PRNG bytes. The pools are 2**16 long so that two random bytes pick an
# entry, and big enough that zstd sees text about as compressible as real source.
POOL_BITS = 16
POOL = 1 << POOL_BITS

CODE_HEADS = [
    "def {f}(self, ", "def {f}(", "async def {f}(self, ", "class {C}(", "return ", "if ",
    "elif ", "while ", "for {v} in ", "{v} = ", "self.{v} = ", "{v}.{a} = ", "assert ",
    "yield ", "raise {C}Error(", "with {f}(", "# ", "from {m} import ", "import ", "{v} += ",
    "print(", "logger.debug(", "except {C}Error as ", '"""', "{v}[{k!r}] = ", "@{f}(",
    "{v}: {C} = ", "del ", "return {v}.{a}(", "{v}, {w} = ",
]
CODE_TAILS = [
    "{v}, {w}=None):", "{v}.{a}({w}, {x})", "{v}[{n}]", "not {v}:", "{v} is None:", "{s}",
    "{v} == {n}:", "len({v}) > {n}:", "{C}({v}={w})", "{v}", "{v}.{a}", "{s!r})",
    "{v}, {w}, *args, **kwargs):", "{v}.get({k!r}, {n})", "{m}", "{C}", "[{v} for {w} in {x}]",
    "{{{k!r}: {v}}}", "{v} and {w}.{a}():", '{s}."""', "{n} * {v} + {w}", "{f}({v}, {w}=True)",
    "{v}):", "e:", "{C}.{a}({v})", "{v}.{a}.{w}({x}, {n})", "{v} in {w}:", "{s!r}, {v})",
]
PROSE_HEADS = ["", "", "", "   ", "- ", "* ", "#. ", ".. note:: ", "    ", "`{v}` "]


def vocabulary(rng):
    """(words, identifiers): short names for paths, snake_case names for code."""
    made = {"".join(rng.choices(SYLLABLES, k=rng.choice((2, 2, 3)))) for _ in range(600)}
    # Sorted: set order depends on string hashing, which is randomized per process.
    words = CODE_WORDS + sorted(made)
    rng.shuffle(words)
    pick = CODE_WORDS * 3 + words
    idents = {"_".join(rng.choices(pick, k=rng.choice((1, 2, 2, 2, 3)))) for _ in range(8000)}
    idents = sorted(idents)
    rng.shuffle(idents)
    return words, idents


class TextMaker:
    """Python-like (or prose-like) lines, fast: all per-line work happens in C."""

    def __init__(self, rng, idents, code):
        self.rng = rng
        # Code reuses a small set of local names much more than the rest, as real code does.
        hot = idents[:1200]
        modules = [".".join(rng.sample(idents, rng.randint(1, 3))) for _ in range(1000)]
        classes = ["".join(w.capitalize() for w in i.split("_")) for i in idents[:2000]]
        prose = PROSE_WORDS * 8 + idents[:1500]

        def sentence(lo, hi):
            return " ".join(rng.choices(prose, k=rng.randint(lo, hi)))

        def fill(template):
            return template.format(
                f=rng.choice(idents), v=rng.choice(hot), w=rng.choice(hot),
                x=rng.choice(hot), a=rng.choice(idents), C=rng.choice(classes),
                m=rng.choice(modules), k=rng.choice(hot), n=rng.randint(0, 4096),
                s=sentence(3, 9),
            )

        if code:
            # Indentation as in real Python: mostly one to three levels deep.
            indents = rng.choices([0, 4, 8, 12, 16, 20], weights=[14, 30, 30, 16, 7, 3], k=POOL)
            self.heads = [(" " * i + fill(rng.choice(CODE_HEADS))).encode() for i in indents]
            tails = [fill(rng.choice(CODE_TAILS)) for _ in range(POOL)]
        else:
            self.heads = [fill(rng.choice(PROSE_HEADS)).encode() for _ in range(POOL)]
            tails = [sentence(4, 14) for _ in range(POOL)]
        # About one line in six is followed by a blank line.
        self.tails = [(t + ("\n\n" if rng.random() < 0.17 else "\n")).encode() for t in tails]
        avg = (sum(map(len, self.heads)) + sum(map(len, self.tails))) / POOL
        self.avg_line = max(8.0, avg)

    def text(self, size):
        """Exactly `size` bytes of lines, ending with a newline."""
        if size <= 0:
            return b""
        n = int(size / self.avg_line * 1.25) + 4
        while True:
            idx = array.array("H", self.rng.randbytes(4 * n))
            if sys.byteorder == "big":
                idx.byteswap()  # same tree on every machine
            heads = map(self.heads.__getitem__, idx[0::2])
            lines = zip(heads, map(self.tails.__getitem__, idx[1::2]))
            body = b"".join(itertools.chain.from_iterable(lines))
            if len(body) >= size:
                return body[: size - 1] + b"\n"
            n *= 2


# Extensions by top-level directory: (extension, code-like?) with weights.
EXTENSIONS = {
    "docs": ([(".rst", False), (".md", False), (".txt", False), (".py", True)], [6, 3, 1, 1]),
    "default": (
        [(".py", True), (".pyi", True), (".txt", False), (".json", True), (".cfg", True),
         (".html", False), (".js", True)],
        [80, 4, 3, 4, 2, 3, 4],
    ),
}


def plan_tree(rng, files, total_bytes, words, idents):
    """Decides every path, kind and size. Returns (files, symlinks, dirs).

    files: list of (relpath, size, kind), kind one of code, prose, binary, exec;
    symlinks: list of (relpath, target relpath); dirs: list of relpaths.
    """
    top = ["bench", "tests", "docs", "examples", "tools", "benchmarks"]
    dirs = list(top)
    children = {d: set() for d in dirs}
    children[""] = set(top)
    by_depth = {1: list(top)}
    # Nested packages, mostly two to four levels deep, a few deeper: paths over 100 bytes
    # exist (as in big repositories) but are rare.
    n_dirs = max(len(top), files // 11)
    while len(dirs) < n_dirs:
        depth = rng.choices([2, 3, 4, 5, 6, 7, 8], weights=[25, 35, 22, 11, 5, 2, 1])[0]
        if not by_depth.get(depth - 1):
            continue
        parent = rng.choice(by_depth[depth - 1])
        name = rng.choice(words if depth < 6 else idents)
        if name in children[parent]:
            continue
        children[parent].add(name)
        path = f"{parent}/{name}"
        dirs.append(path)
        children[path] = set()
        by_depth.setdefault(depth, []).append(path)

    planned = []
    used = set()

    def add(path, size, kind):
        if path in used or path in children:
            return False
        used.add(path)
        planned.append((path, size, kind))
        return True

    # Every package directory has its __init__.py; most are empty, as in real projects.
    for d in dirs:
        if d.split("/")[0] in ("bench", "tests"):
            add(f"{d}/__init__.py", 0 if rng.random() < 0.6 else 1, "code")

    # A few big files (generated tables, vendored code, fixtures), about 15% of the bytes.
    big = [("bench/_generated_tables.py", "code"), ("docs/changelog.rst", "prose"),
           ("tests/fixtures/large_case.json", "code"), ("examples/data/corpus.txt", "prose"),
           ("tools/vendor/bundle.js", "code"), ("bench/_parser_states.py", "code")]
    big_share = [0.04, 0.03, 0.025, 0.025, 0.02, 0.015]
    for (path, kind), share in zip(big, big_share):
        add(path, int(total_bytes * share), kind)
    dirs.extend(["tests/fixtures", "examples/data", "tools/vendor"])

    # Executables: scripts at the top and in tools/, as repositories carry them.
    for i in range(12):
        add(f"tools/{idents[i]}" if i % 3 else f"{idents[i]}.py", rng.randint(300, 6000), "exec")
    # A few binary files (images, compiled fixtures): incompressible.
    for _ in range(40):
        add(f"{rng.choice(dirs)}/{rng.choice(idents)}.png", rng.randint(500, 60_000), "binary")

    # The rest: log-normal sizes (median ~5 kB, a long tail) scaled to the byte target.
    rest = files - len(planned) - 12  # 12 symlinks below count as files too
    fixed = sum(p[1] for p in planned)
    raw = []
    while len(raw) < rest:
        d = rng.choice(dirs)
        exts, weights = EXTENSIONS["docs" if d.startswith("docs") else "default"]
        ext, code = rng.choices(exts, weights)[0]
        path = f"{d}/{rng.choice(idents)}{ext}"
        if path in used or path in children:
            continue
        used.add(path)
        raw.append((path, min(rng.lognormvariate(8.5, 1.1), 300_000), "code" if code else "prose"))
    scale = max(0, total_bytes - fixed) / sum(r[1] for r in raw)
    planned.extend((p, int(s * scale), k) for p, s, k in raw)

    # Symlinks: relative, inside the tree; one to a directory (outside the link's own
    # ancestry, so there is no loop), the others to files.
    symlinks = []
    regular = [p for p, _, k in planned if k in ("code", "prose")]
    packages = [d for d in dirs if d.startswith("bench/")] or regular
    while len(symlinks) < 12:
        first = not symlinks
        link_dir = "docs" if first else rng.choice(dirs)
        target = rng.choice(packages) if first else rng.choice(regular)
        link = f"{link_dir}/link_{rng.choice(idents)}"
        if link in used:
            continue
        used.add(link)
        symlinks.append((link, os.path.relpath(target, link_dir)))
    return planned, symlinks, dirs


def generate_tree(root, seed, files, total_bytes):
    import random  # seeded; only the generator draws from it

    rng = random.Random(seed)
    started = time.perf_counter()
    words, idents = vocabulary(rng)
    code = TextMaker(rng, idents, code=True)
    prose = TextMaker(rng, idents, code=False)
    planned, symlinks, dirs = plan_tree(rng, files, total_bytes, words, idents)
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for path, size, kind in planned:
        full = os.path.join(root, path)
        if kind == "binary":
            data = rng.randbytes(size)
        elif kind == "exec":
            data = b"#!/usr/bin/env python3\n" + code.text(size)
        else:
            data = (prose if kind == "prose" else code).text(size)
        with open(full, "wb") as f:
            f.write(data)
        # Explicit modes: the umask must not decide which files are executable.
        os.chmod(full, 0o755 if kind == "exec" else 0o644)
    for link, target in symlinks:
        os.symlink(target, os.path.join(root, link))
    took = time.perf_counter() - started
    log(f"generated {len(planned) + len(symlinks):,} entries in {took:.1f} s")


def scan(root):
    """Counts what a codebase holds: regular files, executables, symlinks, bytes."""
    stats = {"files": 0, "executables": 0, "symlinks": 0, "bytes": 0, "other": 0}
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_symlink():
                    stats["symlinks"] += 1
                elif e.is_dir():
                    stack.append(e.path)
                elif e.is_file():
                    st = e.stat(follow_symlinks=False)
                    stats["files"] += 1
                    stats["bytes"] += st.st_size
                    stats["executables"] += bool(st.st_mode & 0o100)
                else:
                    stats["other"] += 1
    stats["entries"] = stats["files"] + stats["symlinks"]
    return stats


def ensure_tree(workdir, seed, files, total_bytes, regenerate):
    """The tree at workdir/tree, reused when its marker matches the generator's parameters."""
    tree = os.path.join(workdir, "tree")
    marker = os.path.join(workdir, "tree.json")
    params = {"generator": GENERATOR_VERSION, "seed": seed, "files": files, "bytes": total_bytes}
    if not regenerate and os.path.isdir(tree) and os.path.isfile(marker):
        with open(marker) as f:
            recorded = json.load(f)
        # The scan also catches a tree someone edited since it was made.
        if recorded.get("params") == params and recorded.get("stats") == scan(tree):
            log(f"reusing the generated tree in {tree}")
            return tree, recorded["stats"]
        log("the tree on disk does not match its marker: generating it again")
    # The marker goes first and comes back last: an interrupted generation is never reused.
    if os.path.exists(marker):
        os.remove(marker)
    if os.path.lexists(tree):
        shutil.rmtree(tree)
    os.makedirs(tree)
    generate_tree(tree, seed, files, total_bytes)
    stats = scan(tree)
    with open(marker, "w") as f:
        json.dump({"params": params, "stats": stats}, f, indent=2)
        f.write("\n")
    return tree, stats


def write_instance(path, seed):
    # Fixed, valid SWE-bench fields; the commit ids only need the right shape.
    commit = hashlib.sha1(f"bench-{seed}".encode()).hexdigest()
    benchlib.write_instance(path, "bench__bench-1", "bench/bench", commit, "bench")


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


class Measure(benchlib.Measure):
    """One operation (see benchlib.Measure); pack and unpack have a target ratio."""

    def judge(self, out):
        if self.name in TARGETS:
            out["target"] = TARGETS[self.name]
            out["target_met"] = out["ratio_median"] <= TARGETS[self.name]


def bench(args):
    swe_ark = benchlib.require(args.swe_ark, ("tar", "zstd", "bash", "sha256sum"))

    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    tree, tree_stats = ensure_tree(workdir, args.seed, args.files, args.bytes, args.regenerate)
    if tree_stats["bytes"] < MIN_BYTES or tree_stats["entries"] < MIN_FILES:
        log(f"note: the tree is below the bench's floor of {MIN_BYTES:,} bytes "
            f"in {MIN_FILES:,} files")

    # Each run's outputs stay on disk until the end (see Scratch): about two unpacked trees
    # and two archives per timed or warm-up round.
    benchlib.require_space(workdir, (args.runs + 1) * 2 * (tree_stats["bytes"] * 1.5))
    scratch = Scratch(os.path.join(workdir, "run"))
    instance = os.path.join(scratch.root, "instance.json")
    write_instance(instance, args.seed)
    ark = os.path.join(scratch.root, "ark")
    base_zst = os.path.join(scratch.root, "baseline.tar.zst")
    out_dir = os.path.join(scratch.root, "unpacked")
    base_dir = os.path.join(scratch.root, "unpacked-baseline")
    q = shlex.quote
    state = {}

    def no_check(_out):
        pass

    # pack ------------------------------------------------------------------------------
    def check_pack(out):
        _, path, tar_size = check_bundle(out, ark, state, swe_ark)
        state.update(bundle=path, tar_size=tar_size)

    pack = Measure(
        "pack",
        (lambda: scratch.fresh(ark, create=True),
         [swe_ark, "--ark", ark, "-q", "pack", "--instance", instance, "--codebase", tree],
         check_pack),
        (lambda: scratch.fresh(base_zst, create=False),
         shell(f"tar --sort=name -cf - -C {q(tree)} . | zstd -3 -T0 -q -o {q(base_zst)}"),
         no_check),
        args.runs,
    )
    pack.go()
    # The last pack's archive stays: unpack and verify read its bundle.
    bundle = state["bundle"]
    bundle_size = os.path.getsize(bundle)
    _, stats_out = benchlib.run([swe_ark, "--ark", ark, "ls", "--stats", "--json"], "ls --stats")
    stored_size = json.loads(stats_out)["total"]["stored_bytes"]
    base_zst_size = os.path.getsize(base_zst)
    _, base_tar_size = decompressed_digest(base_zst)

    # unpack ----------------------------------------------------------------------------
    def check_unpack(out):
        got = scan(os.path.join(out_dir, "codebase"))
        for key in ("entries", "symlinks", "executables", "bytes"):
            if got[key] != tree_stats[key]:
                raise BenchError(
                    f"unpack gave {got[key]:,} {key} in codebase/, the tree has {tree_stats[key]:,}"
                )
        if out.strip().splitlines()[-1:] != [state["id"]]:
            raise BenchError(
                f"unpack printed `{out.strip()}`, expected the bundle id {state['id']}"
            )

    def check_base_unpack(_out):
        if "base_checked" not in state:
            got = scan(base_dir)
            if got["entries"] != tree_stats["entries"]:
                raise BenchError(
                    f"the baseline unpacked {got['entries']:,} entries, "
                    f"the tree has {tree_stats['entries']:,}"
                )
            state["base_checked"] = True

    # From the archive's store (the bundle rebuilt from its pieces), and from the exported
    # self-contained file.
    unpack = Measure(
        "unpack",
        (lambda: scratch.fresh(out_dir, create=False),
         [swe_ark, "--ark", ark, "-q", "unpack", state["id"], "-o", out_dir],
         check_unpack),
        (lambda: scratch.fresh(base_dir, create=True),
         shell(f"zstd -dc -q {q(base_zst)} | tar -xf - -C {q(base_dir)}"),
         check_base_unpack),
        args.runs,
    )
    unpack.go()
    unpack_file = Measure(
        "unpack-file",
        (lambda: scratch.fresh(out_dir, create=False),
         [swe_ark, "-q", "unpack", bundle, "-o", out_dir],
         check_unpack),
        (lambda: scratch.fresh(base_dir, create=True),
         shell(f"zstd -dc -q {q(base_zst)} | tar -xf - -C {q(base_dir)}"),
         check_base_unpack),
        args.runs,
    )
    unpack_file.go()

    # verify ----------------------------------------------------------------------------
    def check_verify(out):
        if f"ok bundle {state['id']}" not in " ".join(out.split()):
            raise BenchError(f"verify did not report the bundle as ok:\n{out}")

    def check_hash(out):
        if out.split()[:1] != [state["id"]]:
            raise BenchError(
                f"`zstd -dc | sha256sum` printed `{out.strip()}`, expected {state['id']}"
            )

    verify = Measure(
        "verify",
        (os.sync, [swe_ark, "--ark", ark, "-q", "verify"], check_verify),
        (os.sync, shell(f"zstd -dc -q {q(bundle)} | sha256sum"), check_hash),
        args.runs,
    )
    verify.go()

    scratch.remove()

    return {
        "machine": benchlib.machine(swe_ark, ("tar", "zstd")),
        "runs": args.runs,
        "warm_up_runs": 1,
        "tree": {"path": tree, "seed": args.seed, **tree_stats},
        "bundle": {
            "id": state["id"],
            "tar_size": state["tar_size"],
            "file_size": bundle_size,
            "compression_ratio": state["tar_size"] / bundle_size,
            "stored_size": stored_size,
        },
        "baseline_archive": {
            "tar_size": base_tar_size,
            "file_size": base_zst_size,
            "compression_ratio": base_tar_size / base_zst_size,
        },
        "commands": {
            "pack": {"swe-ark": "swe-ark --ark ARK -q pack --instance INSTANCE --codebase TREE",
                     "baseline": "tar --sort=name -cf - -C TREE . | zstd -3 -T0 -q -o OUT"},
            "unpack": {"swe-ark": "swe-ark --ark ARK -q unpack ID -o DIR",
                       "baseline": "zstd -dc OUT | tar -xf - -C DIR"},
            "unpack-file": {"swe-ark": "swe-ark -q unpack BUNDLE.tar.zst -o DIR",
                            "baseline": "zstd -dc OUT | tar -xf - -C DIR"},
            "verify": {"swe-ark": "swe-ark --ark ARK -q verify",
                       "baseline": "zstd -dc BUNDLE | sha256sum"},
        },
        "results": {m.name: m.summary() for m in (pack, unpack, unpack_file, verify)},
    }


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def report(s):
    m, t, b, base = s["machine"], s["tree"], s["bundle"], s["baseline_archive"]
    print()
    print("swe-ark bench")
    print(f"  machine    {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}")
    print(f"  tools      {m['swe_ark']}; {m['tar']}; {m['zstd']}")
    print(f"  tree       {t['bytes']:,} bytes ({mb(t['bytes'])}) in {t['entries']:,} entries: "
          f"{t['files']:,} files ({t['executables']} executable), {t['symlinks']} symlinks")
    print(f"  tar        swe-ark {b['tar_size']:,} bytes, baseline {base['tar_size']:,} bytes "
          "(uncompressed)")
    print(f"  .tar.zst   swe-ark {b['file_size']:,} bytes ({b['compression_ratio']:.2f}x), "
          f"baseline {base['file_size']:,} bytes ({base['compression_ratio']:.2f}x)")
    print(f"  stored     {b['stored_size']:,} bytes in the archive's packs (one bundle: "
          "nothing to share, each file its own zstd frame)")
    print(f"  bundle id  {b['id']} (seed {t['seed']})")
    runs = f"{s['runs']} timed run{'s' if s['runs'] != 1 else ''}"
    print(f"  method     wall time, {runs} of each command, alternating with its")
    print("             baseline, after one untimed warm-up run of each; the page cache is not")
    print("             dropped (that needs root and adds noise), so the tree is read warm;")
    print("             dirty pages are flushed (sync) before each run, outside the timing")
    print()
    # Column widths match the rows below.
    head = (f"{'operation':<12}{'swe-ark min':>12}{'median':>9}{'baseline min':>14}{'median':>9}"
            f"{'ratio med':>11}{'ratio min':>11}  target")
    print(head)
    print("-" * (len(head) + 16))
    for name, r in s["results"].items():
        c, bl = r["swe-ark"], r.get("baseline")
        row = f"{name:<12}{c['min']:>11.2f}s{c['median']:>8.2f}s"
        if bl:
            row += f"{bl['min']:>13.2f}s{bl['median']:>8.2f}s"
            row += f"{r['ratio_median']:>10.2f}x{r['ratio_min']:>10.2f}x"
        if "target" in r:
            verdict = "met" if r["target_met"] else "TARGET MISSED"
            row += f"  <= {r['target']:.2f}x: {verdict}"
        else:
            row += "  (none)"
        print(row)
    print("ratio = swe-ark / baseline; a target is judged on the median ratio")
    print()
    for name, cmds in s["commands"].items():
        print(f"  {name:<7} swe-ark:  {cmds['swe-ark']}")
        print(f"  {'':<7} baseline: {cmds['baseline']}")
    print()
    missed = [n for n, r in s["results"].items() if r.get("target_met") is False]
    if missed:
        print(f"TARGET MISSED: {', '.join(missed)} (median ratio above the target)")
    else:
        print("targets met: " + ", ".join(f"{n} <= {t:.2f}x" for n, t in TARGETS.items()))


def main():
    if sys.version_info < (3, 9):
        sys.exit("bench: needs Python 3.9 or newer (random.randbytes)")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--swe-ark", default="target/release/swe-ark", help="the swe-ark binary")
    p.add_argument("--workdir", default="target/bench", help="where the tree and scratch files go")
    p.add_argument("--runs", type=int, default=5, help="timed runs per command (default 5)")
    p.add_argument("--regenerate", action="store_true",
                   help="generate the tree even if one is there")
    p.add_argument("--json", metavar="FILE", help="write the JSON summary here instead of stdout")
    p.add_argument("--seed", type=int, default=1, help="the generator's seed")
    p.add_argument("--files", type=int, default=24_000, help="entries in the tree (default 24,000)")
    p.add_argument("--bytes", type=int, default=230_000_000,
                   help="bytes in the tree's files (default 230e6)")
    args = p.parse_args()
    if args.runs < 1:
        p.error("--runs must be at least 1")
    if args.files < 200:
        p.error("--files must be at least 200")
    return benchlib.finish("bench", bench, report, args, os.path.join(args.workdir, "run"))


if __name__ == "__main__":
    sys.exit(main())
