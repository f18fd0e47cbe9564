#!/usr/bin/env python3
"""Writes manifests/OWNER__NAME.toml for the SWE-bench Lite repositories from SWE-bench's own
per-version specifications, as published in the `swebench` package on PyPI.

    python3 -m venv /tmp/swebench-venv
    /tmp/swebench-venv/bin/pip install 'swebench>=4,<5'
    /tmp/swebench-venv/bin/python scripts/gen_manifests.py --out manifests
    /tmp/swebench-venv/bin/python scripts/gen_manifests.py --out manifests --check \
        --dataset swe-bench-lite-dev.jsonl

Facts come from:
  swebench.harness.constants    MAP_REPO_VERSION_TO_SPECS, MAP_REPO_TO_REQS_PATHS,
                                MAP_REPO_TO_ENV_YML_PATHS, MAP_REPO_TO_INSTALL
  swebench.harness.log_parsers  MAP_REPO_TO_PARSER
The output is deterministic: the same swebench release gives the same bytes. `--check` writes
nothing and exits 1 if a file would change (or a file is missing); `--dataset` checks that every
(repo, version) of a SWE-bench JSONL file has a manifest entry.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import shlex
import sys
from pathlib import Path

import swebench.harness.constants as C
from swebench.harness.log_parsers import MAP_REPO_TO_PARSER

# SWE-bench Lite: the 12 repositories of its test split, then the 6 of its dev split.
REPOS = [
    "astropy/astropy",
    "django/django",
    "matplotlib/matplotlib",
    "mwaskom/seaborn",
    "pallets/flask",
    "psf/requests",
    "pydata/xarray",
    "pylint-dev/pylint",
    "pytest-dev/pytest",
    "scikit-learn/scikit-learn",
    "sphinx-doc/sphinx",
    "sympy/sympy",
    "sqlfluff/sqlfluff",
    "pvlib/pvlib-python",
    "pylint-dev/astroid",
    "pydicom/pydicom",
    "marshmallow-code/marshmallow",
    "pyvista/pyvista",
]

# The keys of a version's table, in the order they are written (the schema's order).
FIELDS = [
    "python",
    "requirements",
    "packages",
    "pip_packages",
    "conda_environment",
    "pre_install",
    "install",
    "test_cmd",
    "eval_commands",
    "env",
    "notes",
    "services",
]

# Spec keys this script understands. Any other key stops it: a new swebench release that adds
# one must be looked at, not dropped silently.
KNOWN_SPEC_KEYS = {
    "python",
    "packages",
    "pip_packages",
    "pre_install",
    "install",
    "test_cmd",
    "eval_commands",
    "execute_test_as_nonroot",
    "nano_cpus",
    "no_use_env",
}

CONDA_CHANNELS = "conda's channels as SWE-bench's base image sets them: defaults, then conda-forge"

# Facts checked by hand (see manifests/README.md), keyed by repository and version.

# No CPython 3.9 wheel on PyPI for these exact pins (pip lists numpy 1.19.3 and scipy 1.5.4 as
# the first with cp39 manylinux wheels).
NO_CP39_WHEEL = {"numpy==1.19.2": "numpy 1.19.3", "scipy==1.5.2": "scipy 1.5.4"}

# psf/requests: how each version's test suite reaches httpbin, read at the release tags, and the
# loopback httpbin that stands in for it (swe-ark's `services`). The service's packages are the
# whole closure of httpbin 0.10.2 (the psf's continuation of the httpbin that httpbin.org ran)
# and gunicorn 22.0.0 for CPython 3.9, every requests context's Python, as `uv pip compile
# --python-version 3.9 --exclude-newer 2024-06-27` resolves them: each pinned, so that the
# service resolves the same whatever the lock's date.
HTTPBIN_PACKAGES = [
    "attrs==23.2.0",
    "blinker==1.8.2",
    "brotlicffi==1.1.0.0",
    "cffi==1.16.0",
    "click==8.1.7",
    "decorator==5.1.1",
    "flasgger==0.9.7.1",
    "flask==3.0.3",
    "greenlet==2.0.2",
    "gunicorn==22.0.0",
    "httpbin==0.10.2",
    "importlib-metadata==8.0.0",
    "itsdangerous==2.2.0",
    "jinja2==3.1.4",
    "jsonschema==4.22.0",
    "jsonschema-specifications==2023.12.1",
    "markupsafe==2.1.5",
    "mistune==3.0.2",
    "packaging==24.1",
    "pycparser==2.22",
    "pyyaml==6.0.1",
    "referencing==0.35.1",
    "rpds-py==0.18.1",
    "six==1.16.0",
    "werkzeug==3.0.3",
    "zipp==3.19.2",
]
# gunicorn with threads, as httpbin.org served it with concurrent workers: the tests keep
# connections alive and leave streamed responses unread.
GUNICORN = ["gunicorn", "--bind", "127.0.0.1:{port}", "--worker-class", "gthread",
            "--threads", "8", "--access-logfile", "-"]
HTTPBIN_COMMAND = GUNICORN + ["httpbin:app"]
HTTPBIN_TLS_COMMAND = GUNICORN + ["--certfile", "{certfile}", "--keyfile", "{keyfile}",
                                  "httpbin:app"]


def httpbin_service(**where) -> dict:
    return {"name": "httpbin", "packages": HTTPBIN_PACKAGES, "command": HTTPBIN_COMMAND, **where}


REQUESTS_HTTPBIN = [
    (
        ("0.7", "0.8", "0.9"),
        "The tests call an httpbin server at http://0.0.0.0:$HTTPBIN_PORT/ (default port 7077) "
        "that nothing in SWE-bench's spec starts (read at the release tag); the service "
        "httpbin listens there.",
        [httpbin_service(ports=[7077])],
    ),
    (
        ("0.11", "0.13", "0.14", "1.1", "1.2", "2.0", "2.2", "2.3", "2.4", "2.5", "2.7", "2.8"),
        "The tests call http://httpbin.org/ over the network unless HTTPBIN_URL names another "
        "httpbin server, and some call https://httpbin.org/ by name; SWE-bench sets no "
        "service, so its published results came from the real httpbin.org of the time (read "
        "at the release tag). The service httpbin stands in for httpbin.org on ports 80 and "
        "443 (TLS, with a CA made for the run: in REQUESTS_CA_BUNDLE, which requests reads "
        "from 0.9 on for requests made through a session's request(), and added to its "
        "vendored requests/cacert.pem, from 0.14 on what Session.send() and the adapters "
        "verify with otherwise).",
        [
            httpbin_service(
                ports=[80],
                tls_ports=[443],
                tls_command=HTTPBIN_TLS_COMMAND,
                hosts=["httpbin.org"],
                ca_env=["REQUESTS_CA_BUNDLE"],
                ca_files=["requests/cacert.pem"],
            )
        ],
    ),
]
REQUESTS_HTTPBIN_FIXTURE = (
    "The tests take a local httpbin server from pytest-httpbin's `httpbin` fixture (read at "
    "the release tags from 2.9 on); SWE-bench's spec installs only pytest, not pytest-httpbin."
)

# The keys of a service's table, in the order they are written (the schema's order).
SERVICE_FIELDS = [
    "name",
    "packages",
    "command",
    "ports",
    "tls_ports",
    "tls_command",
    "hosts",
    "ca_env",
    "ca_files",
    "start_timeout",
    "env_var",
    "url",
]

# What swe-ark does with a conda environment file (src/env/conda.rs), for the note.
ENV_YML_MAPPED = (
    "swe-ark maps it to pip at lock time: each conda package becomes the PyPI project that "
    "provides it (conda-forge names that differ, such as matplotlib-base, dask-core and iris, "
    "are renamed; the interpreter, the installers, C libraries that PyPI's wheels carry, and "
    "packages PyPI lacks, such as cdms2, are left out and named in the lock's notes), conda's "
    "fuzzy versions (`=1.21`) become `==1.21.*`, and the file's `pip:` section is taken as "
    "it is. Packages resolve on PyPI, not conda-forge, as of the lock's cutoff."
)


def version_key(v: str):
    """Numeric order (0.9 before 0.12); a leading `v` is ignored (astropy's `v5.3`)."""
    m = re.fullmatch(r"v?(\d+(?:\.\d+)*)", v)
    if m:
        return (0, tuple(int(p) for p in m.group(1).split(".")), v)
    return (1, (), v)


def parser_name(repo: str) -> str:
    name = MAP_REPO_TO_PARSER[repo].__name__
    if not name.startswith("parse_log_"):
        sys.exit(f"{repo}: parser {name} does not start with parse_log_")
    return name[len("parse_log_") :]


def split_packages(pkgs: str) -> list[str]:
    return shlex.split(pkgs)


def env_from(commands: list[str]) -> dict[str, str]:
    env = {}
    for cmd in commands:
        m = re.fullmatch(r"export ([A-Za-z_][A-Za-z0-9_]*)=(.*)", cmd.strip())
        if m:
            value = shlex.split(m.group(2))
            if len(value) != 1:
                sys.exit(f"cannot read the value of `{cmd}`")
            env[m.group(1)] = value[0]
    return env


def context(repo: str, version: str, spec: dict) -> dict:
    unknown = set(spec) - KNOWN_SPEC_KEYS
    if unknown:
        sys.exit(f"{repo} {version}: spec keys this script does not know: {sorted(unknown)}")
    out: dict = {}
    notes: list[str] = []
    out["python"] = spec["python"]

    pkgs = spec.get("packages")
    if pkgs == "requirements.txt":
        out["requirements"] = list(C.MAP_REPO_TO_REQS_PATHS[repo])
    elif pkgs == "environment.yml":
        out["requirements"] = []
        paths = C.MAP_REPO_TO_ENV_YML_PATHS[repo]
        files = " or ".join(f"`{p}`" for p in paths)
        first = "" if len(paths) == 1 else ", the first that exists"
        if spec.get("no_use_env"):
            how = (
                f"`conda create -c conda-forge -n testbed python={spec['python']}` then "
                "`conda env update -f` of that file"
            )
        else:
            how = (
                "`conda env create --file` of that file then "
                f"`conda install python={spec['python']}`"
            )
        out["conda_environment"] = list(paths)
        notes.append(
            f"SWE-bench builds this environment from the repository's {files}{first} at the "
            f"environment setup commit ({how}), then installs pip_packages. {ENV_YML_MAPPED}"
        )
    elif pkgs:
        packages = split_packages(pkgs)
        out["packages"] = packages
        notes.append(
            f"SWE-bench installs `packages` with conda (`conda create -n testbed "
            f"python={spec['python']} {pkgs}`, {CONDA_CHANNELS}); mapped to pip under the "
            "same names and versions, which exist on PyPI."
        )
        if spec["python"] == "3.9":
            missing = [p for p in packages if p in NO_CP39_WHEEL]
            if missing:
                firsts = " and ".join(NO_CP39_WHEEL[p] for p in missing)
                notes.append(
                    f"Not faithful: {' and '.join(missing)} are on PyPI only as source for "
                    f"Python 3.9 (the first releases with CPython 3.9 wheels are {firsts}), "
                    "so pip builds them from source (scipy needs a Fortran compiler and "
                    "BLAS/LAPACK) where conda installs binary builds."
                )
        if spec["python"] == "3.6" and "cython" in packages:
            notes.append(
                "Not faithful: unpinned `cython` resolves on PyPI for Python 3.6 to Cython "
                "3.0.x (3.0.12 when checked), while conda's channels have no Cython 3 build "
                "for Python 3.6 (Cython 3.0 came out in 2023, after they stopped building "
                "for 3.6), so SWE-bench builds with Cython 0.29.x; `cython<3` would match it."
            )
    if repo in C.MAP_REPO_TO_INSTALL:
        out.setdefault("pre_install", []).append(C.MAP_REPO_TO_INSTALL[repo])

    if "pip_packages" in spec:
        out["pip_packages"] = list(spec["pip_packages"])
    if "pre_install" in spec:
        out["pre_install"] = out.get("pre_install", []) + list(spec["pre_install"])
        if any("&& &&" in c for c in spec["pre_install"]):
            notes.append(
                "pre_install is SWE-bench's as given, including its `&& &&`, which is a shell "
                "syntax error."
            )
    out["install"] = spec["install"]
    test_cmd = spec["test_cmd"]
    out["test_cmd"] = " && ".join(test_cmd) if isinstance(test_cmd, list) else test_cmd
    if "eval_commands" in spec:
        out["eval_commands"] = list(spec["eval_commands"])
        env = env_from(spec["eval_commands"])
        if env:
            out["env"] = env
    if spec.get("execute_test_as_nonroot"):
        notes.append(
            "SWE-bench's spec also sets execute_test_as_nonroot = true (run the tests as a "
            "non-root user); swebench's harness does not read it."
        )
    if "nano_cpus" in spec:
        notes.append(
            f"SWE-bench's spec also sets nano_cpus = {spec['nano_cpus']} (a Docker limit of "
            f"{spec['nano_cpus'] / 1e9:g} CPUs); swebench's harness does not read it."
        )

    if repo == "psf/requests":
        for versions, note, services in REQUESTS_HTTPBIN:
            if version in versions:
                notes.append(note)
                out["services"] = services
                break
        else:
            notes.append(REQUESTS_HTTPBIN_FIXTURE)

    if notes:
        out["notes"] = " ".join(notes)
    return out


# ---- TOML writing ---------------------------------------------------------------------------

_ESC = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def toml_str(s: str) -> str:
    # A literal string reads better for commands with backslashes, when it can hold them.
    if "\\" in s and "'" not in s and not any(ord(c) < 32 or ord(c) == 127 for c in s):
        return f"'{s}'"
    out = []
    for c in s:
        if c in _ESC:
            out.append(_ESC[c])
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else toml_str(k)


def toml_value(key: str, v) -> str:
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        inline = "[" + ", ".join(str(x) if isinstance(x, int) else toml_str(x) for x in v) + "]"
        if len(v) <= 1 or len(key) + 3 + len(inline) <= 100:
            return inline
        return "[\n" + "".join(f"    {toml_str(x)},\n" for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_str(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"{key}: {type(v)}")


def table(fields: dict, header: str) -> str:
    text = "".join(
        f"{k} = {toml_value(k, fields[k])}\n" for k in FIELDS if k in fields and k != "services"
    )
    for service in fields.get("services", []):
        unknown = set(service) - set(SERVICE_FIELDS)
        if unknown:
            sys.exit(f"{header}: service keys this script does not write: {sorted(unknown)}")
        text += f"\n[[{header}.services]]\n" + "".join(
            f"{k} = {toml_value(k, service[k])}\n" for k in SERVICE_FIELDS if k in service
        )
    return text


def manifest(repo: str, swebench_version: str) -> tuple[str, list[str]]:
    specs = C.MAP_REPO_VERSION_TO_SPECS[repo]
    versions = sorted(specs, key=version_key)
    contexts = {v: context(repo, v, specs[v]) for v in versions}

    # A field with the same value in every version goes to [defaults].
    defaults = {}
    for k in FIELDS:
        values = [contexts[v].get(k) for v in versions]
        if values[0] is not None and all(x == values[0] for x in values):
            defaults[k] = values[0]
    for c in contexts.values():
        for k in defaults:
            del c[k]

    source = (
        f"swebench {swebench_version}, swebench/harness/constants "
        "(MAP_REPO_VERSION_TO_SPECS, MAP_REPO_TO_REQS_PATHS, MAP_REPO_TO_ENV_YML_PATHS), "
        "swebench/harness/log_parsers (MAP_REPO_TO_PARSER)"
    )
    text = (
        f"# Generated by scripts/gen_manifests.py from swebench {swebench_version}; "
        "do not edit by hand.\n"
        f"repo = {toml_str(repo)}\n"
        f"source = {toml_str(source)}\n"
        f"log_parser = {toml_str(parser_name(repo))}\n"
    )
    if defaults:
        text += "\n[defaults]\n" + table(defaults, "defaults")
    for v in versions:
        header = f"versions.{toml_str(v)}"
        text += f"\n[{header}]\n" + table(contexts[v], header)
    return text, versions


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="the manifests folder")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on a difference")
    ap.add_argument("--dataset", type=Path, action="append", default=[],
                    help="a SWE-bench JSONL file whose (repo, version) pairs must all be covered")
    args = ap.parse_args()

    swebench_version = importlib.metadata.version("swebench")
    if not swebench_version.startswith("4."):
        print(f"warning: swebench {swebench_version} is not 4.x", file=sys.stderr)

    known: dict[str, list[str]] = {}
    stale = []
    for repo in REPOS:
        text, versions = manifest(repo, swebench_version)
        known[repo] = versions
        path = args.out / (repo.replace("/", "__", 1) + ".toml")
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            path.write_text(text)
        print(f"{path}: {len(versions)} versions")

    missing = []
    for ds in args.dataset:
        for line in ds.read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                if d["version"] not in known.get(d["repo"], []):
                    missing.append(f"{d['instance_id']} ({d['repo']} {d['version']})")
        print(f"{ds}: checked")
    for m in missing:
        print(f"no manifest entry: {m}", file=sys.stderr)
    for p in stale:
        print(f"differs from what the script writes: {p}", file=sys.stderr)
    return 1 if missing or stale else 0


if __name__ == "__main__":
    sys.exit(main())
