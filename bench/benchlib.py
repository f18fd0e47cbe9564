"""What bench.py and bench_mirror.py share: the word lists of their generators, running and
timing commands, checking bundles, the scratch directory, the summary's machine description,
and printing the report and the JSON summary.

The scripts import it as `benchlib` (Python puts a script's own directory on sys.path).
Only the standard library is used.
"""

import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time


class BenchError(Exception):
    """A command failed or a correctness check did not hold: the bench exits 1."""


def log(msg):
    # Progress goes to stderr so stdout carries only the report (and the JSON summary).
    print(msg, file=sys.stderr, flush=True)


def mb(n):
    return f"{n / 1e6:,.1f} MB"


# --------------------------------------------------------------------------------------------
# Words for the generated text
# --------------------------------------------------------------------------------------------

# Both generators draw from these lists: a change here changes both the tree and the upstream
# repository, so bump GENERATOR_VERSION in both scripts.

CODE_WORDS = """
get set parse load save config request response handler value index item node tree path name
data cache token query field model user session client server error result buffer stream
event state context option param record table column schema message channel worker task
queue lock timer file line text word count size limit offset key hash match pattern format
render view form widget layout style color image frame point vector matrix graph edge weight
score rank level group order filter sort map reduce merge split join check validate build
update delete create find read write open close start stop run init reset apply resolve
register dispatch encode decode serialize convert compute process transform default local
remote base meta raw temp total max min first last next prev parent child root source target
""".split()

PROSE_WORDS = """
the a of to is and in for this that returns value if not given when with from be by an which
should can object default list set used it are or as on at may will each new other only also
function method class argument instance called must raise raised see note example
""".split()


# --------------------------------------------------------------------------------------------
# Setting up
# --------------------------------------------------------------------------------------------


def require(swe_ark, tools):
    """The absolute path of the swe-ark binary, once it and the `tools` are there."""
    path = os.path.abspath(swe_ark)
    if not os.access(path, os.X_OK):
        raise BenchError(f"`{swe_ark}` is not an executable (run `make build` first?)")
    for tool in tools:
        if shutil.which(tool) is None:
            raise BenchError(f"`{tool}` is not installed (`make tools` installs it)")
    return path


def require_space(workdir, need):
    """Fails unless `workdir` has `need` bytes free."""
    free = shutil.disk_usage(workdir).free
    if free < need:
        raise BenchError(f"{workdir} has {mb(free)} free; the bench needs about {mb(need)}")


def write_instance(path, instance_id, repo, commit, src):
    """A SWE-bench instance with valid fields; its patches change files under `src/`."""
    patch = (
        f"diff --git a/{src}/core.py b/{src}/core.py\n--- a/{src}/core.py\n+++ b/{src}/core.py\n"
        "@@ -1,2 +1,3 @@\n def run(x):\n+    x = x or 0\n     return x\n"
    )
    test_patch = (
        "diff --git a/tests/test_core.py b/tests/test_core.py\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/tests/test_core.py\n@@ -0,0 +1,2 @@\n"
        "+def test_run_none():\n+    assert run(None) == 0\n"
    )
    instance = {
        "instance_id": instance_id,
        "repo": repo,
        "base_commit": commit,
        "patch": patch,
        "test_patch": test_patch,
        "problem_statement": "run(None) raises TypeError.\n",
        "hints_text": "",
        "created_at": "2024-01-01T00:00:00Z",
        "version": "1.0",
        "environment_setup_commit": commit,
        "FAIL_TO_PASS": "[]",
        "PASS_TO_PASS": "[]",
    }
    with open(path, "w") as f:
        json.dump(instance, f, indent=2)
        f.write("\n")


# --------------------------------------------------------------------------------------------
# Running and timing
# --------------------------------------------------------------------------------------------


def run(argv, what, env=None):
    """Runs a command, returns (seconds, stdout); a failure ends the bench.

    env: the command's environment; None (the default) inherits the bench's own.
    """
    started = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - started
    if p.returncode != 0:
        raise BenchError(
            f"{what} failed (exit {p.returncode}): {shlex.join(argv)}\n"
            f"{p.stderr.decode(errors='replace').strip()}"
        )
    return elapsed, p.stdout.decode(errors="replace")


def shell(script):
    # pipefail: a failing tar or git archive must not hide behind a succeeding zstd.
    return ["bash", "-c", "set -o pipefail; " + script]


def decompressed_digest(path):
    """sha256 and length of `zstd -dc path`: what a bundle id is, computed independently."""
    h = hashlib.sha256()
    n = 0
    with subprocess.Popen(["zstd", "-dc", "-q", path], stdout=subprocess.PIPE) as p:
        while chunk := p.stdout.read(1 << 20):
            h.update(chunk)
            n += len(chunk)
    if p.returncode != 0:
        raise BenchError(f"zstd -dc {path} failed (exit {p.returncode})")
    return h.hexdigest(), n


def check_bundle(out, ark, state, swe_ark, env=None):
    """Checks what `swe-ark pack` printed (`out`); returns (bundle id, file, tar size).

    The id must name a bundle in `ark` that `swe-ark export-bundle` writes as a file whose
    `zstd -dc` hashes to it (the file goes to `exported/` beside the ark), and be the id that
    earlier runs printed (kept in `state["id"]`).
    """
    lines = out.strip().splitlines()
    bundle_id = lines[-1].strip() if lines else ""
    exported = os.path.join(os.path.dirname(os.path.abspath(ark)), "exported")
    path = os.path.join(exported, f"{bundle_id}.tar.zst")
    if os.path.exists(path):
        os.remove(path)
    run([swe_ark, "--ark", ark, "-q", "export-bundle", bundle_id, "-o", exported],
        "export-bundle", env)
    if not os.path.isfile(path):
        raise BenchError(f"pack printed `{bundle_id}`, but export-bundle wrote no {path}")
    digest, tar_size = decompressed_digest(path)
    if digest != bundle_id:
        raise BenchError(
            f"pack printed id {bundle_id}, but `zstd -dc` of its bundle hashes to {digest}"
        )
    if state.setdefault("id", bundle_id) != bundle_id:
        # Same inputs (tree or commit, and instance), fresh archive: a different id means
        # packing is not deterministic.
        raise BenchError(f"pack is not deterministic: id {bundle_id}, earlier {state['id']}")
    return bundle_id, path, tar_size


class Scratch:
    """The run's scratch directory, and where earlier runs' outputs go.

    Outputs (unpacked trees, archives, mirrors, clones, bundles) are moved aside between
    runs, not deleted: deleting a few hundred megabytes or many files keeps some file
    systems busy for seconds afterwards (ext4 mounted with `discard` on a VM made the next
    unpack 2-5x slower, and by a different amount each time), which would be charged to
    the next timed command. It all goes at the end, outside the timing.
    """

    def __init__(self, root):
        self.root = root
        self.trash = os.path.join(root, "trash")
        self.moved = 0
        if os.path.lexists(root):
            shutil.rmtree(root)
        os.makedirs(self.trash)

    def fresh(self, path, create=False):
        """Clears `path` (a file or a directory) for a run; makes it an empty directory if asked."""
        if os.path.lexists(path):
            self.moved += 1
            os.rename(path, os.path.join(self.trash, str(self.moved)))
        if create:
            os.makedirs(path)
        # Flush the dirty pages earlier runs left, so that their write-back is not charged
        # to the next timed command. (This is not a cache drop: reads stay warm.)
        os.sync()

    def remove(self):
        log(f"removing the scratch files in {self.root}")
        shutil.rmtree(self.root)


class Measure:
    """One operation: a contender and a baseline, each with a prepare step outside the timing.

    A script subclasses it to judge its targets (`judge`) and, with `with_max`, to report
    each side's maximum time too.
    """

    with_max = False

    def __init__(self, name, contender, baseline, runs, label=None, env=None):
        self.label = label  # which repository, when there are several; None when there is one
        self.name = name
        self.contender = contender  # (prepare, argv, check) for swe-ark
        self.baseline = baseline  # the same for the baseline, or None
        self.runs = runs
        self.env = env  # the commands' environment; None inherits the bench's own
        self.times = {"swe-ark": [], "baseline": []}

    @property
    def what(self):
        return self.name if self.label is None else f"{self.label} {self.name}"

    def _one(self, side, spec, timed):
        prepare, argv, check = spec
        prepare()
        seconds, out = run(argv, f"{self.what} ({side})", self.env)
        check(out)
        if timed:
            self.times[side].append(seconds)
        return seconds

    def go(self):
        sides = [("swe-ark", self.contender)]
        if self.baseline:
            sides.append(("baseline", self.baseline))
        for side, spec in sides:
            s = self._one(side, spec, timed=False)
            log(f"{self.what}: warm-up {side} {s:.2f} s")
        for i in range(self.runs):
            # The order flips every round so neither side always follows the other.
            order = sides if i % 2 == 0 else sides[::-1]
            took = [f"{side} {self._one(side, spec, timed=True):.2f} s" for side, spec in order]
            log(f"{self.what}: run {i + 1}/{self.runs}: " + ", ".join(took))
        return self

    def summary(self):
        out = {}
        for side, ts in self.times.items():
            if ts:
                out[side] = {"min": min(ts), "median": statistics.median(ts)}
                if self.with_max:
                    out[side]["max"] = max(ts)
                out[side]["runs"] = ts
        if "baseline" in out:
            c, b = out["swe-ark"], out["baseline"]
            out["ratio_median"] = c["median"] / b["median"]
            out["ratio_min"] = c["min"] / b["min"]
        self.judge(out)
        return out

    def judge(self, out):
        """Adds `target` and `target_met` to the summary `out` when the operation has a target."""


# --------------------------------------------------------------------------------------------
# Summary and report
# --------------------------------------------------------------------------------------------


def tool_version(argv):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return p.stdout.strip().splitlines()[0].strip("* ")
    except (OSError, IndexError):
        return "unknown"


def machine(swe_ark, tools):
    """The summary's `machine`: cores, platform, and the versions of swe-ark and `tools`."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "cores": os.cpu_count(),
        "usable_cores": affinity,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "swe_ark": tool_version([swe_ark, "--version"]),
        **{tool: tool_version([tool, "--version"]) for tool in tools},
    }


def finish(prog, bench, report, args, scratch):
    """Runs `bench(args)`, prints the report and the JSON summary; returns the exit status."""
    try:
        summary = bench(args)
    except BenchError as e:
        print(f"{prog}: FAILED: {e}", file=sys.stderr)
        if os.path.isdir(scratch):
            print(f"{prog}: the scratch files are left in {scratch}", file=sys.stderr)
        return 1
    report(summary)
    text = json.dumps(summary, indent=2) + "\n"
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
        print(f"\nJSON summary written to {args.json}")
    else:
        print("\nJSON summary:")
        print(text, end="")
    return 0
