#!/usr/bin/env python3
"""Generates the manifests of Multi-SWE-bench's repositories in Rust, JavaScript, TypeScript, C
and C++ from its harness, at a pinned commit, as scripts/gen_manifests.py generates the Python
ones from swebench's specifications (manifests/README.md, "Multi-SWE-bench's repositories").

For every repository whose default handler is registered under its own name
(`multi_swe_bench/harness/repos/<language>/<org>/<repo>.py`, `@Instance.register(org, repo)`),
the script instantiates the handler with a stand-in pull request and reads what it would build:
the base image (the kind, node's major), the Debian packages its images install, the commands
of prepare.sh and fix-run.sh, whether it fills submodules, and its `parse_log`. A handler that
picks its image by pull-request number is instantiated at each side of every number its module
compares against, and each run of numbers that builds alike becomes a version with `pulls`; the
handlers chosen by `number_interval` (`<repo>_<N>_to_<M>.py`) become versions that serve the
rows naming that interval (`number_interval = "<repo>_<N>_to_<M>"`), as the harness serves only
those with them. The parser is a runner parser where the method's code is one of those swe-ark
has (the same code as the handler it was written from), else the handler's own method, carried
as data (`[handler_parsers]`, src/logparse/handler.rs) and checked here to read sample logs as
the harness's own method does. What cannot be translated is listed, with why, in
manifests/MSB-UNTRANSLATED.md.

Judgements a person made about a repository's context (a command that reached the network, a
runtime the image's Ubuntu had) are data in scripts/msb_overrides.toml, written for every
version of the repository alike, and applied last.

Usage:
  python3 -m venv /tmp/msb-venv && /tmp/msb-venv/bin/pip install dataclasses-json==0.6.7 unidiff==1.0.1
  /tmp/msb-venv/bin/python scripts/gen_msb_manifests.py --harness-git GIT_DIR --out manifests [--check]

GIT_DIR is a clone of github.com/multi-swe-bench/multi-swe-bench holding COMMIT (below).
--check: exit 1 if a file differs from what the script writes.
"""

import argparse
import ast
import builtins
import inspect
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import tomllib

COMMIT = "24f493f8"
LANGS = ("rust", "javascript", "typescript", "c", "cpp")
KIND = {"rust": "rust", "javascript": "node", "typescript": "node", "c": "native", "cpp": "native"}
INTERVAL = re.compile(r"^(.*)_(\d+)_to_(\d+)$")

# The handlers whose `parse_log` each of swe-ark's Multi-SWE-bench parsers was written from
# (src/logparse/msb.rs, PARSERS and RUNNERS): a method with the same code is that parser.
# The repositories of PARSERS keep their `msb_*` name; any other takes the runner's name where
# one stands for the parser.
REFERENCE = {
    "rust/BurntSushi/ripgrep.py": "msb_cargo",
    "javascript/axios/axios.py": "msb_axios",
    "cpp/catchorg/catch2.py": "msb_catch2",
    "typescript/darkreader/darkreader.py": "msb_darkreader",
    "javascript/iamkun/dayjs.py": "msb_dayjs",
    "cpp/fmtlib/fmt.py": "msb_fmt",
    "c/jqlang/jq.py": "msb_jq",
    "c/libgit2/libgit2.py": "ctest",
    "cpp/yhirose/cpp_httplib.py": "googletest",
    "javascript/google/zx.py": "tap",
    "typescript/vuejs/core.py": "vitest",
}
MSB_REPOS = {
    "msb_axios": ["axios/axios"],
    "msb_cargo": ["BurntSushi/ripgrep", "sharkdp/bat", "tokio-rs/tokio", "tokio-rs/bytes"],
    "msb_catch2": ["catchorg/Catch2"],
    "msb_darkreader": ["darkreader/darkreader"],
    "msb_dayjs": ["iamkun/dayjs"],
    "msb_fmt": ["fmtlib/fmt"],
    "msb_jq": ["jqlang/jq"],
}
RUNNER_OF = {"msb_cargo": "cargo", "msb_dayjs": "jest", "msb_jq": "automake"}

# What every image has, or the machine gives a native context: not carried as packages.
BASE_PACKAGES = {
    "git", "curl", "wget", "ca-certificates", "build-essential", "gcc", "g++", "make",
    "tar", "gzip", "unzip", "xz-utils", "bzip2", "sudo", "vim", "nano", "bash", "locales",
    "tzdata", "gnupg", "software-properties-common", "lsb-release", "apt-transport-https",
    "python3", "python3-pip", "python3-dev", "python3-venv", "python-is-python3", "perl",
    "nodejs", "npm", "yarn", "rustc", "cargo", "binutils", "file", "patch", "jq", "openssh-client",
    "crossbuild-essential-amd64", "dpkg-dev", "libc6-dev", "strip", "m4",
}

SAMPLE_LOGS = [
    # libtest
    "running 3 tests\ntest a::b ... ok\ntest a::c ... FAILED\ntest a::d ... ignored\n"
    "test result: FAILED. 1 passed; 1 failed; 1 ignored\n",
    # jest
    "PASS test/a.test.js (1.2 s)\n  ✓ adds (3 ms)\n  ✕ subtracts (2 ms)\nFAIL test/b.test.js\n"
    "  ● b › fails\n    ✓ nested one\n    ○ skipped one\nTests: 1 failed, 2 passed, 3 total\n",
    # mocha spec (old and new marks), pending, failures
    "  utils\n    ✓ parses (5ms)\n    ✔ formats\n    - pending one\n  2 passing (8ms)\n  1 failing\n"
    "  1) utils\n       breaks:\n     Error: no\n",
    # ctest
    "Test project /home/x/build\n    Start 1: alpha\n1/3 Test #1: alpha ............   Passed    0.01 sec\n"
    "2/3 Test #2: beta .............***Failed    0.02 sec\n3/3 Test #3: gamma ...........***Skipped   0.00 sec\n"
    "-- Performing Test HAVE_X - Success\n-- Performing Test HAVE_Y - Failed\n",
    # googletest
    "[ RUN      ] Suite.One\n[       OK ] Suite.One (0 ms)\n[ RUN      ] Suite.Two\n[  FAILED  ] Suite.Two (1 ms)\n"
    "[ SKIPPED  ] Suite.Three\n",
    # automake, TAP
    "PASS: tests/a.test\nFAIL: tests/b.test\nSKIP: tests/c.test\nXFAIL: tests/d.test\n"
    "TAP version 13\nok 1 - first\nnot ok 2 - second\nok 3 - third # SKIP no\n",
    # mocha's JSON reporter, as `npm run test -- --reporter json` prints it
    "\n> pkg@1.0.0 test\n> mocha --reporter json\n\n{\n  \"stats\": {\"suites\": 1, \"tests\": 3, "
    "\"passes\": 1, \"pending\": 1, \"failures\": 1, \"start\": \"x\", \"end\": \"y\", "
    "\"duration\": 5},\n  \"tests\": [],\n  \"pending\": [{\"title\": \"p\", \"fullTitle\": \"s p\", "
    "\"currentRetry\": 0, \"err\": {}}],\n  \"failures\": [{\"title\": \"f\", \"fullTitle\": \"s f\", "
    "\"currentRetry\": 0, \"duration\": 1, \"err\": {\"message\": \"no\"}}],\n  \"passes\": "
    "[{\"title\": \"ok\", \"fullTitle\": \"s ok\", \"currentRetry\": 0, \"duration\": 1, "
    "\"speed\": \"fast\", \"err\": {}}]\n}\n",
    # vitest
    " ✓ src/a.test.ts (3 tests) 5ms\n ❯ src/b.test.ts (2 tests | 1 failed) 7ms\n   × b > fails 3ms\n"
    "   ✓ b > works\n ↓ src/c.test.ts > skipped\n",
    "",
]


def unpack(git_dir, dest):
    data = subprocess.run(
        ["git", "--git-dir", git_dir, "archive", COMMIT, "multi_swe_bench"],
        check=True, capture_output=True,
    ).stdout
    tarfile.open(fileobj=io.BytesIO(data)).extractall(dest, filter="data")


def stand_in_pr(PullRequest, Base, org, repo, number):
    return PullRequest(
        org=org, repo=repo, number=number, state="closed", title="", body="",
        base=Base(label="", ref="main", sha="BASESHA"), resolved_issues=[],
        fix_patch="FIXPATCH", test_patch="TESTPATCH",
    )


def images(inst):
    """The chain of images, the handler's own first, and the base image's name."""
    chain, dep = [], inst.dependency()
    while dep is not None and not isinstance(dep, str):
        chain.append(dep)
        dep = dep.dependency()
    return chain, dep or ""


def script_lines(text):
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


APT = re.compile(r"\bapt(?:-get)?\s+install\s+([^&;|\n]+)")


def apt_packages(texts):
    pkgs = []
    for t in texts:
        for m in APT.finditer(t.replace("\\\n", " ")):
            for w in m.group(1).split():
                if w.startswith("-") or "=" in w or "$" in w:
                    continue
                if w not in pkgs:
                    pkgs.append(w)
    return pkgs


# The major of Ubuntu's own `nodejs` package in each release an image may start from (`apt-get
# install nodejs`): noble 18.19, jammy 12.22, focal 10.19; `ubuntu:latest` was noble when the
# dataset's images were built (2025).
UBUNTU_NODEJS = {"latest": "18", "24.04": "18", "22.04": "12", "20.04": "10"}


def node_major(base, texts):
    m = re.match(r"node:(\d+)", base)
    if m:
        return m.group(1)
    ubuntu = re.match(r"ubuntu:(\S+)", base)
    for t in texts:
        for pat in (r"setup_(\d+)\.x", r"nvm install v?(\d+)", r"\bn (\d+)\b", r"node-v(\d+)\."):
            m = re.search(pat, t)
            if m:
                return m.group(1)
    if ubuntu and ubuntu.group(1) in UBUNTU_NODEJS and "nodejs" in apt_packages(texts):
        return UBUNTU_NODEJS[ubuntu.group(1)]
    return ""


def commands_after(lines, markers):
    """The lines after the last line that matches one of `markers`."""
    last = -1
    for i, line in enumerate(lines):
        if any(re.search(m, line) for m in markers):
            last = i
    return lines[last + 1:]


RUSTUP_ENV = re.compile(r'(?:^|(?<=&&)|(?<=;))\s*(?:source|\.)\s+"?\S*\.cargo/env"?\s*(?:&&|;|$)')
COMPOUND = re.compile(r"^(if|then|else|elif|fi|for|while|do|done|case|esac)\b|[{}]$")


HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def test_command(files, repo):
    """fix-run.sh without what applies the patches (swe-ark applies them), enters the checkout
    or sources rustup's environment: simple commands joined by `&&` under `set -e` (`;`
    without), else the script as it is, `set -e` kept and here-documents verbatim."""
    fix = files.get("fix-run.sh", "")
    raw = fix.replace("\\\n", " ").splitlines()
    strict = any(l.strip().startswith("set -e") for l in raw)
    keep, skipping, heredoc, compound = [], False, None, False
    for line in raw:
        t = line.strip()
        if heredoc is not None:
            keep.append(line.rstrip())
            if t == heredoc:
                heredoc = None
            continue
        if not t or t.startswith("#"):
            continue
        if skipping:
            skipping = not re.match(r"^fi\b", t)
            continue
        if re.match(r"^if\b.*\bapply\b", t):
            skipping = True
            continue
        # rustup's environment file: swe-ark's toolchain is on PATH already, and the image's
        # home is not there.
        if RUSTUP_ENV.search(t):
            t = re.sub(r"\s*(&&|;)\s*$", "", RUSTUP_ENV.sub("", t)).strip()
        if (not t or t.startswith("set -") or re.match(r"^git (-C \S+ )?apply\b", t)
                or re.match(r"^cd /home/", t) or "check_git_changes" in t):
            continue
        m = HEREDOC.search(t)
        if m:
            heredoc = m.group(1)
        compound = compound or bool(m) or bool(COMPOUND.search(t))
        keep.append(t)
    if compound:
        return "\n".join((["set -e"] if strict else []) + keep)
    return (" && " if strict else "; ").join(keep)


def prepare_commands(files):
    lines = [l for l in script_lines(files.get("prepare.sh", "")) if not l.startswith("#!")]
    lines = commands_after(lines, [r"^git checkout\b", r"check_git_changes", r"^git reset"])
    return [l for l in lines if not l.startswith("set -")]


def method_code(cls, module):
    """parse_log and the methods of the class it calls on self, as a class of their own, with
    the module-level names they use: code the driver of src/logparse/handler.rs runs."""
    methods, todo = {}, ["parse_log"]
    while todo:
        name = todo.pop()
        if name in methods:
            continue
        fn = getattr(cls, name, None)
        if fn is None:
            continue
        src = textwrap.dedent(inspect.getsource(fn))
        methods[name] = src
        for n in ast.walk(ast.parse(src)):
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id == "self" and hasattr(cls, n.attr)
                    and callable(getattr(cls, n.attr)) and not isinstance(
                        inspect.getattr_static(cls, n.attr), property)):
                todo.append(n.attr)
    body = "".join(textwrap.indent(methods[m], "    ") + "\n" for m in sorted(methods))
    tree = ast.parse(textwrap.dedent("".join(methods.values())))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    msrc = inspect.getsource(module)
    mtree = ast.parse(msrc)
    head, missing = [], []
    for node in mtree.body:
        seg = ast.get_source_segment(msrc, node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name.split(".")[0] for a in node.names]
            if not set(names) & used:
                continue
            modname = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if modname.startswith("multi_swe_bench"):
                extra = set(names) & used - {"TestResult", "Instance"}
                if extra:
                    missing.append(f"names of multi_swe_bench it uses: {', '.join(sorted(extra))}")
                continue
            top = modname.split(".")[0]
            # src/logparse/handler.rs's driver gives `dataclass_json` (a shim of it).
            if top == "dataclasses_json" and set(names) <= {"dataclass_json"}:
                head.append(seg)
                continue
            if top not in sys.stdlib_module_names:
                missing.append(f"module `{modname}`, not in Python's standard library")
                continue
            head.append(seg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Assign)):
            targets = ([node.name] if not isinstance(node, ast.Assign)
                       else [t.id for t in node.targets if isinstance(t, ast.Name)])
            if set(targets) & used and not (isinstance(node, ast.ClassDef) and node.name == cls.__name__):
                head.append(seg)
    props = "    @property\n    def pr(self):\n        return self._pr\n\n"
    code = "\n".join(head) + ("\n\n" if head else "") + f"class {cls.__name__}:\n" + props + body
    return code.strip() + "\n", missing


def run_driver(code, cls_name, log, number, org, repo):
    """What src/logparse/handler.rs's driver prints for `log` (the same driver, read from it)."""
    src = open(os.path.join(ROOT, "src/logparse/handler.rs"), encoding="utf-8").read()
    driver = src.split('const DRIVER: &str = r#"', 1)[1].split('"#;', 1)[0]
    req = json.dumps({"class": cls_name, "code": code, "log": log,
                      "pr": {"number": number, "org": org, "repo": repo}})
    out = subprocess.run(["python3", "-I", "-S", "-c", driver], input=req.encode(),
                         capture_output=True)
    if out.returncode != 0:
        return None, out.stderr.decode(errors="replace").strip().splitlines()[-1:]
    return json.loads(out.stdout), None


def same_reading(inst, code, cls_name, number, org, repo):
    """Why the method run as data does not read the sample logs as the harness's does, or
    why it reads none (it raises on every one), if so."""
    raised = []
    for log in SAMPLE_LOGS:
        try:
            r = inst.parse_log(log)
            want = {"passed": sorted(r.passed_tests), "failed": sorted(r.failed_tests),
                    "skipped": sorted(r.skipped_tests)}
        except Exception as e:  # the harness's own raising: the driver must raise too
            want = None
            raised.append(f"{type(e).__name__}: {e}")
            # A test in two sets is resolved by swe-ark, where the harness raises.
            if "should not have common items" in str(e):
                continue
        got, err = run_driver(code, cls_name, log, number, org, repo)
        if want is None and got is None:
            continue
        if got != want:
            return f"on a sample log it reads {got or err}, the harness's method {want or raised[-1]}"
    if len(raised) == len(SAMPLE_LOGS):
        return f"the harness's own method raises on every log tried ({raised[0]})"
    return None


def exact_dump(fn):
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    return ast.dump(tree, annotate_fields=False)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harness-git", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--overrides", default=os.path.join(ROOT, "scripts/msb_overrides.toml"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="msb-harness-")
    unpack(a.harness_git, tmp)
    sys.path.insert(0, tmp)
    import multi_swe_bench.harness.repos  # noqa: F401  (registers every handler)
    from multi_swe_bench.harness.instance import Instance
    from multi_swe_bench.harness.image import Config
    from multi_swe_bench.harness.pull_request import PullRequest, Base

    overrides = tomllib.load(open(a.overrides, "rb")) if os.path.exists(a.overrides) else {}
    config = Config(need_clone=True, global_env=None, clear_env=False)
    reg = Instance._registry
    modpath = lambda cls: "/".join(cls.__module__.split(".")[3:]) + ".py"
    refs = {}
    for key, cls in reg.items():
        if modpath(cls) in REFERENCE:
            refs[exact_dump(cls.parse_log)] = REFERENCE[modpath(cls)]

    defaults = {k: c for k, c in reg.items()
                if c.__module__.split(".")[3] in LANGS and not INTERVAL.match(k.split("/", 1)[1])}
    intervals = {k: c for k, c in reg.items()
                 if c.__module__.split(".")[3] in LANGS and INTERVAL.match(k.split("/", 1)[1])}
    norm = lambda s: re.sub(r"[-.]", "_", s).lower()
    untranslated = []
    written = {}

    def context_of(cls, org, repo, number, lang):
        pr = stand_in_pr(PullRequest, Base, org, repo, number)
        inst = cls(pr, config)
        chain, base = images(inst)
        files, texts = {}, []
        for img in chain:
            for f in img.files():
                files.setdefault(f.name, f.content)
                texts.append(f.content)
            texts.append(img.dockerfile())
        kind = KIND[lang]
        ctx = {"base": base, "kind": kind}
        pkgs = apt_packages(texts)
        ctx["packages"] = pkgs
        ctx["node"] = node_major(base, texts) if kind == "node" else ""
        ctx["prepare"] = prepare_commands(files)
        ctx["test"] = test_command(files, repo)
        ctx["submodules"] = any("submodule update" in t for t in texts)
        dump = exact_dump(cls.parse_log)
        ref = refs.get(dump)
        full = f"{org}/{repo}"
        if ref is not None:
            ctx["parser"] = ref if full in MSB_REPOS.get(ref, []) else RUNNER_OF.get(ref, ref)
            ctx["code"] = None
        else:
            code, missing = method_code(cls, sys.modules[cls.__module__])
            ctx["parser"] = cls.__name__
            ctx["code"] = code
            ctx["missing"] = missing
            # Checked once per version (below), not at every number probed.
            ctx["check"] = (inst, code, cls.__name__, number, org, repo)
        return ctx

    def checked(ctx):
        args = ctx.pop("check", None)
        if args and not ctx.get("missing"):
            ctx["mismatch"] = same_reading(*args)
        return ctx

    def segments(cls, org, repo, lang):
        src = inspect.getsource(sys.modules[cls.__module__])
        lits = sorted({n.value for n in ast.walk(ast.parse(src))
                       if isinstance(n, ast.Constant) and type(n.value) is int and 0 < n.value < 10**6})
        points = sorted({0} | {p for v in lits for p in (v - 1, v, v + 1) if p >= 0})
        bounds = sorted(set(points))
        segs = []
        for i, lo in enumerate(bounds):
            hi = bounds[i + 1] - 1 if i + 1 < len(bounds) else None
            ctx = context_of(cls, org, repo, lo, lang)
            key = json.dumps({k: v for k, v in ctx.items() if k != "check"}, sort_keys=True)
            if segs and segs[-1][2] == key:
                segs[-1][1] = hi
            else:
                segs.append([lo, hi, key, ctx])
        # The runs that build alike are one version; the one that holds the open end takes
        # every number no other names (a version with no `pulls`); the others need one run.
        open_key = segs[-1][2]
        out = []
        for lo, hi, key, ctx in segs:
            if key == open_key:
                continue
            out.append([lo, hi, key, ctx])
        out.append([0, None, open_key, segs[-1][3]])
        return out

    for key in sorted(defaults):
        cls = defaults[key]
        org, repo = key.split("/", 1)
        lang = cls.__module__.split(".")[3]
        where = modpath(cls)
        try:
            segs = segments(cls, org, repo, lang)
        except Exception as e:
            untranslated.append((key, where, f"instantiating the handler raised {type(e).__name__}: {e}"))
            continue
        versions = []
        for lo, hi, _, ctx in segs:
            versions.append((lo, hi, checked(ctx), where, cls.__name__))
        for ikey in sorted(intervals):
            iorg, irepo = ikey.split("/", 1)
            prefix, n_hi, n_lo = INTERVAL.match(irepo).groups()
            if iorg != org or norm(prefix) != norm(repo):
                continue
            icls = intervals[ikey]
            try:
                ictx = checked(context_of(icls, org, repo, int(n_lo), lang))
            except Exception as e:
                untranslated.append((ikey, modpath(icls), f"instantiating the handler raised {type(e).__name__}: {e}"))
                continue
            versions.append((int(n_lo), int(n_hi), ictx, modpath(icls), icls.__name__, irepo))
        text, why = render(key, lang, versions, overrides.get(key, {}))
        if why:
            untranslated.append((key, where, why))
            continue
        written[key.replace("/", "__", 1) + ".toml"] = text
    handled = {k for k in intervals
               if any(k.split("/", 1)[0] == d.split("/", 1)[0]
                      and norm(INTERVAL.match(k.split("/", 1)[1]).group(1)) == norm(d.split("/", 1)[1])
                      for d in defaults)}
    for k in sorted(set(intervals) - handled):
        untranslated.append((k, modpath(intervals[k]),
                             "registered only under a pull-request interval (`number_interval`), "
                             "with no default handler of the repository: the handler does not "
                             "name the repository as GitHub spells it"))
    written["MSB-UNTRANSLATED.md"] = untranslated_doc(untranslated, len(written))
    bad = 0
    for name, text in sorted(written.items()):
        path = os.path.join(a.out, name)
        if a.check:
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if old != text:
                print(f"differs: {path}")
                bad = 1
        else:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(path + ".tmp", path)
    print(f"{len(written) - 1} manifests, {len(untranslated)} handlers not translated", file=sys.stderr)
    sys.exit(bad)


def toml_str(s):
    if "\n" in s:
        if "'''" not in s:
            return "'''\n" + s + "'''"
    return json.dumps(s, ensure_ascii=False)


def version_name(ctx, lo, hi, interval):
    """By the runtime or the base image (`node-18`, `rust-latest`, `gcc-7`); a handler chosen
    by `number_interval` adds its pull requests."""
    if ctx["kind"] == "node" and ctx["node"]:
        name = f"node-{ctx['node']}"
    else:
        name = ctx["base"].split("/")[-1].replace(":", "-") or "default"
    return f"{name}-pr-{lo}-{hi}" if interval else name


def install_of(ctx):
    """The context's install, offline from the lock, for the handler's prepare.sh."""
    prep = " ; ".join(ctx["prepare"])
    if ctx["kind"] == "rust":
        return "cargo fetch", None
    if ctx["kind"] == "node":
        if re.search(r"\b(yarn|pnpm)\b", prep):
            return None, f"its image installs with {re.search(r'(yarn|pnpm)', prep).group(1)}, which the node kind does not lock (npm only)"
        legacy = " --legacy-peer-deps" if "--legacy-peer-deps" in prep else ""
        return f"npm ci --offline{legacy}", None
    return "", None


def render(key, lang, versions, over):
    """The manifest of `key`, or why there is none. `over` (scripts/msb_overrides.toml) holds
    a person's judgements: `default_handler` fields apply to every version of the default
    handler, `versions.NAME` to one version."""
    kind = KIND[lang]
    out_versions, parsers, names = [], {}, set()
    # The version that takes the pull requests no other names is named first: it keeps the
    # plain name (`node-18`), a run of numbers built otherwise gets its range added.
    versions = sorted(versions, key=lambda v: (len(v) > 5, v[1] is not None))
    for v in versions:
        lo, hi, ctx, where, cname = v[:5]
        interval = len(v) > 5
        if ctx.get("missing"):
            return None, f"`{ctx['parser']}.parse_log` needs {'; '.join(ctx['missing'])}"
        if ctx.get("mismatch"):
            return None, f"`{ctx['parser']}.parse_log` run as data does not read as the harness: {ctx['mismatch']}"
        install, why = install_of(ctx)
        if why:
            return None, why
        mine = {} if interval else dict(over.get("default_handler", {}))
        if ctx["code"] is not None:
            parsers[ctx["parser"]] = (ctx["code"], where)
        fields = {}
        if kind == "node":
            fields["node"] = mine.get("node", ctx["node"]) or None
        if kind == "native":
            fields["debian"] = sorted(p for p in ctx["packages"] if p not in BASE_PACKAGES)
            if "valgrind" not in ctx["packages"]:
                fields["hidden_programs"] = ["valgrind"]
        if not ctx["submodules"]:
            fields["empty_submodules"] = True
        if install:
            fields["install"] = install
        test = ctx["test"]
        if kind == "native":
            pre = [re.sub(r"^mkdir (?!-p)", "mkdir -p ", c) for c in ctx["prepare"]
                   if re.match(r"^mkdir\b", c)]
            test = " && ".join(pre + [test]) if pre else test
        fields["test_cmd"] = test
        fields["log_parser"] = ctx["parser"]
        if interval:
            # Multi-SWE-bench serves only rows naming the interval with such a handler.
            fields["number_interval"] = v[5]
        elif hi is not None:
            fields["pulls"] = [lo, hi]
        fields.update(mine)
        name = version_name({**ctx, "node": fields.get("node") or ""}, lo, hi, interval)
        if name in names:
            name = f"{name}-pr-{lo}-{hi}"
        names.add(name)
        for k, val in over.get("versions", {}).get(name, {}).items():
            # A version's notes follow the handler's, as a manifest's version's follow its
            # defaults'.
            fields[k] = f"{fields[k]}\n{val}" if k == "notes" and fields.get(k) else val
        fields["_source"] = f"{where} ({cname}): image {ctx['base']}" + (
            f" + apt {' '.join(ctx['packages'])}" if ctx["packages"] else "")
        out_versions.append((name, fields))
    # Fields every version shares go to [defaults].
    shared = {}
    for k in ("node", "debian", "hidden_programs", "empty_submodules", "install", "test_cmd", "notes"):
        vals = {json.dumps(f.get(k), sort_keys=True) for _, f in out_versions}
        if len(vals) == 1 and out_versions[0][1].get(k) is not None:
            shared[k] = out_versions[0][1][k]
            for _, f in out_versions:
                f.pop(k, None)
    # The file's parser is the default handler's (its versions come first).
    top_parser = out_versions[0][1]["log_parser"]
    for _, f in out_versions:
        if f.get("log_parser") == top_parser:
            f.pop("log_parser")
    sources = sorted({f.pop("_source") for _, f in out_versions})
    lines = [
        "# Generated by scripts/gen_msb_manifests.py from Multi-SWE-bench's harness",
        f"# (github.com/multi-swe-bench/multi-swe-bench, commit {COMMIT}): do not edit; see",
        "# manifests/README.md. Judgements made by hand: scripts/msb_overrides.toml.",
        f'repo = "{key}"',
        f'kind = "{kind}"',
        f"source = {toml_str(f'multi-swe-bench {COMMIT}, multi_swe_bench/harness/repos/' + '; '.join(sources))}",
        f'log_parser = "{top_parser}"',
        "",
        "[defaults]",
    ]
    order = ("node", "debian", "hidden_programs", "empty_submodules", "install", "test_cmd",
             "pulls", "number_interval", "log_parser", "notes")

    def emit(d):
        for k in order:
            if k in d and d[k] is not None:
                v = d[k]
                if isinstance(v, bool):
                    lines.append(f"{k} = {'true' if v else 'false'}")
                elif isinstance(v, str):
                    lines.append(f"{k} = {toml_str(v)}")
                else:
                    lines.append(f"{k} = {json.dumps(v, ensure_ascii=False)}")
    emit(shared)
    for name, f in sorted(out_versions, key=lambda x: x[0]):
        lines += ["", f'[versions."{name}"]']
        emit(f)
    for cname, (code, where) in sorted(parsers.items()):
        lines += ["", f"[handler_parsers.{cname}]",
                  f'source = "multi_swe_bench/harness/repos/{where}, {cname}.parse_log"',
                  f"code = {toml_str(code)}"]
    return "\n".join(lines) + "\n", None


def untranslated_doc(items, n):
    out = [
        "# Multi-SWE-bench handlers not translated",
        "",
        f"Written by scripts/gen_msb_manifests.py (harness commit {COMMIT}) beside the {n} manifests",
        "it generated: each handler of a Rust, JavaScript, TypeScript, C or C++ repository that has",
        "no context here, and why. A manifest written by hand (manifests/README.md) serves such a",
        "repository.",
        "",
        "| handler | file | why |",
        "| --- | --- | --- |",
    ]
    for key, where, why in sorted(items):
        out.append(f"| `{key}` | `{where}` | {why.replace('|', '/')} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
