#!/usr/bin/env python3
"""Times `swe-ark env build`: a locked environment rebuilt from objects with no network, cold
and warm, against `pip install --no-index --find-links DIR -r requirements.txt` of the same
wheels.

The context is a small generated repository (`acme/bench`: a setup.py and a requirements.txt
of common test and documentation tools, committed with fixed names and dates, 2024-06-01)
whose requirements give 41 distributions from PyPI as of that date. It is locked once
(`swe-ark env lock`, the one step that needs the network) and the archive is kept in
WORKDIR/env; a later run with the same inputs reuses it (`--relock` locks again).

Then, with no network used, each round times (wall time, one untimed warm-up round first,
the order of the sides rotating from round to round):

- cold, uv:   `swe-ark env build LOCK --force --installer uv --copy-to NEW`, then the instance
              install in NEW (the environment's directory is moved away first);
- cold, uv, empty uv cache: the same with the archive's uv cache moved away too;
- cold, pip:  the same with `--installer pip`;
- warm:       `swe-ark env build LOCK --copy-to NEW` (a copy of the cached environment), then
              the instance install in NEW; in a copy of the archive whose cache is built
              once, untimed, by the default installer (uv when there is one), so that the
              cold sides' rebuilds do not change what it copies;
- baseline:   `python3.11 -m venv NEW`, `NEW/bin/python -m pip install --no-index
              --find-links WHEELHOUSE -r requirements-pinned.txt` (`name==version` of the lock's
              runtime packages), then the instance install in NEW.

The instance install is `python -m pip install --no-index --find-links WHEELHOUSE
--no-build-isolation -e CHECKOUT` (a fresh clone of the repository each time). The
target is warm >= 5x faster than the baseline (median); the cold figures are reported too.
Checks (exit 1): every environment holds exactly the lock's runtime set plus the project
(`pip list --format=freeze`, the same text on every side), the lock has at least 30 runtime
packages, warm builds come from the cache and cold ones do not.

It needs Python 3.11 from pyenv (`$PYENV_ROOT/versions/3.11.*`; without it the bench says
so and exits 0), git and bash; uv for the uv rows (`SWE_ARK_UV`, else `.tools/bin/uv`, else
uv on PATH; `make tools` installs a pinned one). Only the standard library is used.
Exit status: 0 when the measurement completed (even if the target is missed), 1 when a
command or a check failed, 2 on bad usage.

Usage: python3 bench/bench_env.py --swe-ark target/release/swe-ark [--runs 5]
           [--workdir DIR] [--relock] [--json FILE]
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

import benchlib
from benchlib import BenchError, Scratch, log, mb, run

# Bump when the generated repository or manifest changes, so an old lock is not reused.
GENERATOR_VERSION = 1

REPO = "acme/bench"
VERSION = "1.0"
PROJECT = "bench"
PROJECT_VERSION = "1.0"
DATE = "2024-06-01T00:00:00Z"
MIN_RUNTIME = 30
WARM_TARGET = 5.0  # baseline / warm, medians: at least this many times faster

# Unpinned: the lock resolves them as PyPI had them on DATE (41 distributions with pip,
# setuptools and wheel of then). Mostly pure-Python wheels; a few with compiled ones
# (coverage, markupsafe, pyyaml, charset-normalizer) that have cp311 manylinux wheels.
REQUIREMENTS = """\
pytest
requests
hypothesis
attrs
jinja2
pygments
docutils
sphinx
coverage
python-dateutil
pyyaml
click
rich
tomli
toml
tqdm
"""

SETUP_PY = f"""\
from setuptools import setup

setup(name="{PROJECT}", version="{PROJECT_VERSION}", packages=["{PROJECT}"], install_requires=[])
"""

MANIFEST = f"""\
repo = "{REPO}"
source = "bench/bench_env.py"
log_parser = "pytest"

[defaults]
python = "3.11"
requirements = ["requirements.txt"]
install = "python -m pip install -e ."
test_cmd = "pytest -rA"

[versions."{VERSION}"]
"""


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pyenv_root():
    return os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")


def find_python311():
    root = pyenv_root()

    def patch(p):
        m = re.search(r"/versions/3\.11\.(\d+)/", p)
        return int(m.group(1)) if m else -1

    found = [p for p in glob.glob(os.path.join(root, "versions", "3.11*", "bin", "python3.11"))
             if os.access(p, os.X_OK) and patch(p) >= 0]
    return max(found, key=patch) if found else None


def find_uv():
    for p in (os.environ.get("SWE_ARK_UV"),
              os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".tools", "bin", "uv"),
              shutil.which("uv")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


def clean_env(workdir, uv):
    """The environment of every command: no pip or uv settings of this machine (such as
    PIP_FIND_LINKS) leak into either side, and no user git configuration."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_", "PYTHON", "GIT_", "SWE_ARK_"))
           and k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "XDG_CONFIG_HOME")}
    env.update(
        HOME=workdir, LC_ALL="C.UTF-8", LANG="C.UTF-8", PYTHONNOUSERSITE="1",
        PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
        GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
        SWE_ARK_MANIFESTS=os.path.join(workdir, "manifests"),
        # HOME moves: swe-ark must still find pyenv's interpreters (it looks in PYENV_ROOT,
        # else ~/.pyenv).
        PYENV_ROOT=pyenv_root(),
    )
    if uv:
        env["SWE_ARK_UV"] = uv
    else:
        # swe-ark would otherwise look for uv on PATH.
        env["SWE_ARK_UV"] = os.path.join(workdir, "no-uv")
    return env


# --------------------------------------------------------------------------------------------
# The repository and its lock
# --------------------------------------------------------------------------------------------


def make_repo(path, env):
    """The repository at `path` (made again from scratch); returns its commit."""
    if os.path.lexists(path):
        shutil.rmtree(path)
    os.makedirs(os.path.join(path, PROJECT))
    files = {
        "setup.py": SETUP_PY,
        "requirements.txt": REQUIREMENTS,
        f"{PROJECT}/__init__.py": f'__version__ = "{PROJECT_VERSION}"\n',
        "tests/test_bench.py": f"import {PROJECT}\n\n\ndef test_version():\n"
                               f"    assert {PROJECT}.__version__ == \"{PROJECT_VERSION}\"\n",
    }
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(path, rel)), exist_ok=True)
        with open(os.path.join(path, rel), "w") as f:
            f.write(text)
    genv = dict(env, GIT_AUTHOR_NAME="Bench Author", GIT_AUTHOR_EMAIL="author@example.com",
                GIT_COMMITTER_NAME="Bench Committer", GIT_COMMITTER_EMAIL="committer@example.com",
                GIT_AUTHOR_DATE=DATE, GIT_COMMITTER_DATE=DATE)
    for argv in (["git", "init", "-q", "-b", "main", path],
                 ["git", "-C", path, "add", "-A"],
                 ["git", "-C", path, "commit", "-q", "-m", "bench: requirements"]):
        run(argv, "making the repository", genv)
    return run(["git", "-C", path, "rev-parse", "HEAD"], "git rev-parse", genv)[1].strip()


def inputs_of(swe_ark, python, commit):
    return {
        "generator": GENERATOR_VERSION,
        "requirements": REQUIREMENTS,
        "manifest": MANIFEST,
        "commit": commit,
        "python": python,
        "python_version": benchlib.tool_version([python, "--version"]),
        "swe_ark": benchlib.tool_version([swe_ark, "--version"]),
    }


def runtime_set(python, lock_text):
    """The lock's runtime packages, (name, version) in the lock's order, read with tomllib."""
    code = (
        "import sys, tomllib, json\n"
        "d = tomllib.loads(sys.stdin.read())\n"
        "out = [(p['name'], p['version']) for p in d['packages']\n"
        "       if p.get('tool', {}).get('swe-ark', {}).get('role', 'runtime') == 'runtime']\n"
        "b = [(x['name'], x['version']) for x in d.get('tool', {}).get('swe-ark', {})"
        ".get('bundled', [])]\n"
        "print(json.dumps(out + b))\n"
    )
    p = subprocess.run([python, "-I", "-c", code], input=lock_text, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise BenchError(f"reading the lock with tomllib failed:\n{p.stderr.strip()}")
    return [tuple(x) for x in json.loads(p.stdout)]


def ensure_lock(swe_ark, python, workdir, relock, env):
    """The archive with the lock of acme/bench 1.0: reused, or made (online)."""
    base = os.path.join(workdir, "env")
    os.makedirs(base, exist_ok=True)
    os.makedirs(os.path.join(workdir, "manifests"), exist_ok=True)
    with open(os.path.join(workdir, "manifests", "acme__bench.toml"), "w") as f:
        f.write(MANIFEST)
    repo = os.path.join(base, "repo")
    ark = os.path.join(base, "ark")
    marker = os.path.join(base, "lock.json")
    commit = make_repo(repo, env)
    inputs = inputs_of(swe_ark, python, commit)
    if not relock and os.path.isfile(marker):
        with open(marker) as f:
            old = json.load(f)
        if old.get("inputs") == inputs:
            p = subprocess.run([swe_ark, "--ark", ark, "-q", "env", "ls", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            ids = [x.get("id") for x in json.loads(p.stdout or "[]")] if p.returncode == 0 else []
            if old.get("lock") in ids:
                log(f"reusing the lock {old['lock'][:12]} in {ark} (--relock locks again)")
                return repo, ark, old["lock"], old["lock_seconds"], True
            log(f"the archive in {base} no longer lists its lock: locking again")
        else:
            log("the inputs changed since the last lock: locking again")
    if os.path.lexists(ark):
        shutil.rmtree(ark)
    if os.path.exists(marker):
        os.remove(marker)
    run([swe_ark, "--ark", ark, "-q", "mirror", "add", repo, "--name", REPO],
        "mirror add", env)
    log(f"locking {REPO} {VERSION} from PyPI as of {DATE} (the only step that uses the network)")
    seconds, out = run([swe_ark, "--ark", ark, "env", "lock", REPO, VERSION, "--commit", commit,
                        "--python", python],
                       "env lock", env)
    lines = out.strip().splitlines()
    lock = lines[-1].strip() if lines else ""
    if not re.fullmatch(r"[0-9a-f]{64}", lock):
        raise BenchError(f"env lock printed `{lock}` last, not a lock id")
    with open(marker, "w") as f:
        json.dump({"inputs": inputs, "lock": lock, "lock_seconds": seconds}, f, indent=2)
        f.write("\n")
    log(f"locked: {lock[:12]} in {seconds:.1f} s")
    return repo, ark, lock, seconds, False


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


def freeze(venv, env):
    _, out = run([os.path.join(venv, "bin", "python"), "-m", "pip", "list", "--format=freeze"],
                 "pip list", env)
    return out


def bench(args):
    swe_ark = benchlib.require(args.swe_ark, ("git", "bash"))
    python = args.python
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    uv = find_uv()
    env = clean_env(workdir, uv)

    repo, ark, lock, lock_seconds, reused = ensure_lock(swe_ark, python, workdir, args.relock,
                                                        env)
    _, lock_text = run([swe_ark, "--ark", ark, "env", "show", lock], "env show", env)
    runtime = runtime_set(python, lock_text)
    if len(runtime) < MIN_RUNTIME:
        raise BenchError(f"the lock has {len(runtime)} runtime packages, fewer than "
                         f"{MIN_RUNTIME}")
    expected = sorted([(normalize(n), v) for n, v in runtime]
                      + [(normalize(PROJECT), PROJECT_VERSION)])

    scratch = Scratch(os.path.join(workdir, "env-run"))
    benchlib.require_space(workdir, 3e9 + 2e8 * 5 * (args.runs + 1))
    env_dir = os.path.join(ark, "envs", lock)
    uv_cache = os.path.join(ark, "cache", "uv")

    # The warm side has an archive of its own (a copy, without built environments or caches)
    # whose cached environment is built once, untimed, by the installer swe-ark picks by
    # default: the cold sides' rebuilds, with either installer, must not change what warm
    # copies.
    warm_ark = os.path.join(scratch.root, "ark-warm")
    shutil.copytree(ark, warm_ark, symlinks=True,
                    ignore=lambda d, names: [n for n in names if os.path.samefile(d, ark)
                                             and n in ("envs", "cache", "tmp")])
    _, out = run([swe_ark, "--ark", warm_ark, "-q", "env", "build", lock, "--json"],
                 "env build (the warm side's cache)", env)
    built = json.loads(out)
    log(f"the warm side's cached environment: built with {built['installer']} in "
        f"{built['seconds']:.2f} s")
    # The baseline gets its own copy of the wheelhouse: the two sides install the same files,
    # but neither reads the other's directory.
    wheelhouse = os.path.join(scratch.root, "wheelhouse")
    shutil.copytree(built["wheelhouse"], wheelhouse)
    wheels = sorted(os.listdir(wheelhouse))
    wheel_bytes = sum(os.path.getsize(os.path.join(wheelhouse, w)) for w in wheels)
    pinned = os.path.join(scratch.root, "requirements-pinned.txt")
    with open(pinned, "w") as f:
        f.write("".join(f"{n}=={v}\n" for n, v in runtime))

    state = {"n": 0}

    def fresh_dirs(side):
        """A new venv path and a fresh clone of the repository (outside the timing)."""
        state["n"] += 1
        venv = os.path.join(scratch.root, f"{side.replace(' ', '-').replace(',', '')}-"
                                          f"{state['n']}")
        checkout = venv + "-src"
        run(["git", "clone", "-q", repo, checkout], "git clone", env)
        return venv, checkout

    def instance_install(venv, checkout, wh):
        return ("install", [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                            "--no-index", "--find-links", wh, "--no-build-isolation", "-e",
                            checkout])

    def swe_ark_side(side, extra, cold, no_uv_cache=False):
        side_ark = ark if cold else warm_ark

        def prepare():
            venv, checkout = fresh_dirs(side)
            if cold:
                scratch.fresh(env_dir)  # a rebuild, without charging it the old one's deletion
            if no_uv_cache:
                scratch.fresh(uv_cache)
            build = [swe_ark, "--ark", side_ark, "-q", "env", "build", lock, *extra,
                     "--copy-to", venv, "--json"]
            wh = os.path.join(side_ark, "envs", lock, "wheelhouse")
            return venv, [("env build", build), instance_install(venv, checkout, wh)]

        def check(venv, outs):
            j = json.loads(outs[0])
            if j.get("cached") == cold:
                raise BenchError(f"{side}: env build said cached={j.get('cached')}")
            if os.path.realpath(j.get("copy") or "") != os.path.realpath(venv):
                raise BenchError(f"{side}: env build copied to {j.get('copy')}, not {venv}")
            return {"build_seconds": j["seconds"], "installer": j["installer"]}
        return side, prepare, check

    def baseline_side():
        def prepare():
            venv, checkout = fresh_dirs("baseline")
            py = os.path.join(venv, "bin", "python")
            return venv, [
                ("venv", [python, "-m", "venv", venv]),
                ("pip -r", [py, "-m", "pip", "install", "-q", "--no-index", "--find-links",
                            wheelhouse, "-r", pinned]),
                instance_install(venv, checkout, wheelhouse),
            ]
        return "baseline", prepare, lambda venv, outs: {}

    sides = []
    if uv:
        sides.append(swe_ark_side("cold uv", ["--force", "--installer", "uv"], cold=True))
        sides.append(swe_ark_side("cold uv, no cache", ["--force", "--installer", "uv"],
                                  cold=True, no_uv_cache=True))
    else:
        log("bench_env: no uv (SWE_ARK_UV, .tools/bin/uv, PATH): the uv rows are left out; "
            "`make tools` installs it")
    sides.append(swe_ark_side("cold pip", ["--force", "--installer", "pip"], cold=True))
    sides.append(swe_ark_side("warm", [], cold=False))
    sides.append(baseline_side())

    times = {name: [] for name, _, _ in sides}
    env_times = {name: [] for name, _, _ in sides}  # everything but the instance install
    install_times = {name: [] for name, _, _ in sides}
    extra = {name: [] for name, _, _ in sides}
    freezes = {}

    def one(name, prepare, check, timed):
        venv, steps = prepare()
        took, outs = {}, []
        for label, argv in steps:
            os.sync()  # outside the timing (see benchlib.Scratch)
            seconds, out = run(argv, f"{name}: {label}", env)
            took[label] = seconds
            outs.append(out)
        info = check(venv, outs)
        got = freeze(venv, env)
        pairs = sorted(tuple(normalize(x) if i == 0 else x for i, x in
                             enumerate(line.split("==", 1)))
                       for line in got.split())
        if pairs != expected:
            missing = sorted(set(expected) - set(pairs))
            extra_ = sorted(set(pairs) - set(expected))
            raise BenchError(f"{name}: the environment is not the lock's set plus the project: "
                             f"missing {missing}, not expected {extra_}")
        first = freezes.setdefault("text", (name, got))
        if first[1] != got:
            raise BenchError(f"{name}'s `pip list --format=freeze` differs from {first[0]}'s:\n"
                             f"{got}\nagainst\n{first[1]}")
        total = sum(took.values())
        if timed:
            times[name].append(total)
            install_times[name].append(took["install"])
            env_times[name].append(total - took["install"])
            if info:
                extra[name].append(info)
        return total

    for name, prep, check in sides:
        s = one(name, prep, check, timed=False)
        log(f"env: warm-up {name} {s:.2f} s")
    for i in range(args.runs):
        k = i % len(sides)
        order = sides[k:] + sides[:k]
        took = [f"{name} {one(name, prep, check, True):.2f} s" for name, prep, check in order]
        log(f"env: run {i + 1}/{args.runs}: " + ", ".join(took))
    scratch.remove()

    results = {}
    base_med = statistics.median(times["baseline"])
    base_min = min(times["baseline"])
    base_env = statistics.median(env_times["baseline"])
    for name, ts in times.items():
        r = {"min": min(ts), "median": statistics.median(ts), "max": max(ts), "runs": ts,
             "env_median": statistics.median(env_times[name]),
             "install_median": statistics.median(install_times[name]),
             "env_runs": env_times[name], "install_runs": install_times[name]}
        if name != "baseline":
            r["faster_median"] = base_med / r["median"]
            r["faster_min"] = base_min / r["min"]
            r["env_faster_median"] = base_env / r["env_median"]
            r["build_seconds"] = [x["build_seconds"] for x in extra[name]]
            r["installer"] = extra[name][0]["installer"] if extra[name] else None
        if name == "warm":
            r["target"] = f">= {WARM_TARGET:.0f}x faster"
            r["target_met"] = r["faster_median"] >= WARM_TARGET
        results[name] = r

    return {
        "machine": benchlib.machine(swe_ark, ("git",)),
        "python": python,
        "python_version": benchlib.tool_version([python, "--version"]),
        "uv": uv and benchlib.tool_version([uv, "--version"]),
        "warm_cache_installer": built["installer"],
        "runs": args.runs,
        "warm_up_runs": 1,
        "lock": {
            "id": lock,
            "repo": REPO,
            "version": VERSION,
            "as_of": DATE,
            "runtime_packages": len(runtime),
            "wheels": len(wheels),
            "wheel_bytes": wheel_bytes,
            "lock_seconds": lock_seconds,
            "reused": reused,
        },
        "commands": COMMANDS,
        "results": results,
    }


INSTALL = ("NEW/bin/python -m pip install --no-index --find-links WHEELHOUSE "
           "--no-build-isolation -e CHECKOUT")
COMMANDS = {
    "cold uv": "swe-ark env build LOCK --force --installer uv --copy-to NEW; " + INSTALL,
    "cold uv, no cache": "the same, with ARK/cache/uv moved away first",
    "cold pip": "swe-ark env build LOCK --force --installer pip --copy-to NEW; " + INSTALL,
    "warm": ("swe-ark env build LOCK --copy-to NEW (cached, built once by the default "
             "installer in a copy of the archive); " + INSTALL),
    "baseline": ("python3.11 -m venv NEW; NEW/bin/python -m pip install --no-index "
                 "--find-links WHEELHOUSE -r requirements-pinned.txt; " + INSTALL),
}


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def report(s):
    m, lk = s["machine"], s["lock"]
    print()
    print("swe-ark environment bench")
    print(f"  machine    {m['cores']} cores ({m['usable_cores']} usable), {m['platform']}")
    print(f"  tools      {m['swe_ark']}; {s['python_version']} ({s['python']}); "
          f"{s['uv'] or 'no uv'}; warm copies an environment built with "
          f"{s['warm_cache_installer']}")
    print(f"  lock       {lk['id'][:16]}: {lk['repo']} {lk['version']} as of {lk['as_of']}, "
          f"{lk['runtime_packages']} runtime packages, {lk['wheels']} wheels, "
          f"{mb(lk['wheel_bytes'])}; "
          + ("reused" if lk["reused"] else f"locked in {lk['lock_seconds']:.1f} s (online)"))
    runs = f"{s['runs']} timed round{'s' if s['runs'] != 1 else ''}"
    print(f"  method     wall time, {runs} after one untimed warm-up round, the order of the")
    print("             sides rotating; no network; each side ends with the instance install")
    print("             in a fresh clone; dirty pages flushed (sync) before each command,")
    print("             outside the timing")
    print()
    head = (f"{'side':<19}{'min':>7}{'median':>9}{'max':>8}{'x faster':>10}{'(min)':>7}"
            f"{'env med':>9}{'x faster':>10}{'install med':>13}  target")
    print(head)
    print("-" * (len(head) + 22))
    missed = False
    for name, r in s["results"].items():
        row = f"{name:<19}{r['min']:>6.2f}s{r['median']:>8.2f}s{r['max']:>7.2f}s"
        if name == "baseline":
            row += f"{'1.00x':>10}{'':>7}{r['env_median']:>8.2f}s{'1.00x':>10}"
        else:
            row += (f"{r['faster_median']:>9.2f}x{r['faster_min']:>6.2f}x"
                    f"{r['env_median']:>8.2f}s{r['env_faster_median']:>9.2f}x")
        row += f"{r['install_median']:>12.2f}s"
        if "target" in r:
            row += f"  {r['target']}: {'met' if r['target_met'] else 'TARGET MISSED'}"
            missed = missed or not r["target_met"]
        elif name == "baseline":
            row += "  (the reference)"
        else:
            row += "  (none)"
        print(row)
    print("x faster = baseline / side, on the medians of the whole (min, max, median: the")
    print("whole), then (min) on the minimums; env med = the median without the instance")
    print("install (swe-ark: env build; baseline: venv + pip install -r), and its x faster;")
    print("install med = the instance install's median. The target is judged on the whole.")
    builds = [f"{n} {statistics.median(r['build_seconds']):.2f} s ({r['installer']})"
              for n, r in s["results"].items() if r.get("build_seconds")]
    print("env build --json `seconds` (medians): " + ", ".join(builds))
    print()
    for name, cmd in s["commands"].items():
        print(f"  {name:<18} {cmd}")
    print()
    if missed:
        print(f"TARGET MISSED: warm is not {WARM_TARGET:.0f}x faster than the baseline")
    else:
        print(f"target met: warm >= {WARM_TARGET:.0f}x faster than the baseline")


def main():
    if sys.version_info < (3, 9):
        sys.exit("bench_env: needs Python 3.9 or newer")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--swe-ark", default="target/release/swe-ark", help="the swe-ark binary")
    p.add_argument("--workdir", default="target/bench",
                   help="where the archive (WORKDIR/env) and scratch files go")
    p.add_argument("--runs", type=int, default=5, help="timed rounds (default 5)")
    p.add_argument("--relock", action="store_true",
                   help="lock again even if an archive with the same inputs is there")
    p.add_argument("--json", metavar="FILE", help="write the JSON summary here instead of stdout")
    args = p.parse_args()
    if args.runs < 1:
        p.error("--runs must be at least 1")
    args.python = find_python311()
    if args.python is None:
        print("bench_env: SKIPPED: no Python 3.11 in pyenv ($PYENV_ROOT/versions/3.11.*); "
              "`pyenv install 3.11` and run it again")
        return 0
    return benchlib.finish("bench_env", bench, report, args,
                           os.path.join(args.workdir, "env-run"))


if __name__ == "__main__":
    sys.exit(main())
