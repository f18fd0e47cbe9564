"""Writes the statuses Multi-SWE-bench's own `parse_log` gives each log fixture of its parsers.

For every parser of swe-ark that re-implements a Multi-SWE-bench handler's `parse_log` (the
runner parsers `jest`, `mocha`, `mocha_json`, `vitest`, `tap`, `cargo`, `ctest`, `googletest`,
`automake` and the repository parsers `msb_*`), the method is read from the harness itself:
`git show COMMIT:multi_swe_bench/harness/repos/<path>` in a git directory of
multi-swe-bench/multi-swe-bench, its `parse_log` (for `mocha_json`, express's
`parse_json_log`, which its `parse_log` calls) taken out of the class by its syntax tree and
compiled on its own (with `re`, a stand-in `TestResult` and the handler module's other
imports), then run on every log in tests/fixtures/logs/<parser>/ read as Multi-SWE-bench's
`ReportTask` reads a log (`open(path, "r", encoding="utf-8").read()`). Where a parser follows
several handlers, the others' method is checked to be the same code (the same syntax tree,
keyword arguments in any order).

The sets that come back are written as `{test: "PASSED" | "FAILED" | "SKIPPED"}` to
`<log stem>.expected.json` and `<log stem>.expected-5.json` (tests/logparse.rs reads both;
Multi-SWE-bench has one reading). Multi-SWE-bench's `TestResult` raises `ValueError` when a
test is in two sets: the script names such a log, and the map gives the test FAILED over
SKIPPED over PASSED, swe-ark's reading (docs/LOG-PARSERS.md).

    git clone --bare https://github.com/multi-swe-bench/multi-swe-bench msb.git   # holds 24f493f8
    python3 scripts/msb_expected.py --msb-git msb.git
    python3 scripts/msb_expected.py --msb-git GIT_DIR --check   # exit 1 if a file would change

Any Python 3.9+, no network. No packages, but for `mocha_json`: express's method decodes
the report with the `dataclasses-json` package (`pip install dataclasses-json`; 0.6.7 made the
files here), as the harness does; without it a run of every parser says `mocha_json: not
checked` and goes on.
"""

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

MSB_COMMIT = "24f493f8a103e72312ded4f6b9c89f081d69cb09"

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs"

# Parser → the handlers (under multi_swe_bench/harness/repos/) whose `parse_log` it is; the
# first is run, the others must have the same code. Keep in step with src/logparse/msb.rs.
HANDLERS = {
    "automake": ["c/jqlang/jq.py"],
    "cargo": [
        "rust/BurntSushi/ripgrep.py",
        "rust/alacritty/alacritty.py",
        "rust/bee_san/RustScan.py",
        "rust/clap_rs/clap.py",
        "rust/fish_shell/fish_shell.py",
        "rust/helix_editor/helix.py",
        "rust/nushell/nushell.py",
        "rust/rayon_rs/rayon.py",
        "rust/rusqlite/rusqlite.py",
        "rust/rust_lang/mdBook.py",
        "rust/serde_rs/serde.py",
        "rust/sharkdp/bat.py",
        "rust/sharkdp/fd.py",
        "rust/tokio_rs/bytes.py",
        "rust/tokio_rs/tokio.py",
        "rust/tokio_rs/tracing.py",
    ],
    "ctest": [
        "c/libgit2/libgit2.py",
        "c/OpenMathLib/OpenBLAS.py",
        "c/fluent/fluentbit.py",
        "c/libsdlorg/SDL.py",
        "cpp/cgal/cgal.py",
        "cpp/rootproject/root.py",
    ],
    "googletest": ["cpp/yhirose/cpp_httplib.py", "c/ponylang/ponyc.py"],
    "jest": ["javascript/iamkun/dayjs.py", "javascript/anuraghazra/github_readme_stats.py"],
    "mocha": ["typescript/microsoft/vscode.py"],
    "mocha_json": ["javascript/expressjs/express.py"],
    "tap": ["javascript/google/zx.py"],
    "vitest": ["typescript/vuejs/core.py", "javascript/sveltejs/svelte.py"],
    "msb_axios": ["javascript/axios/axios.py"],
    "msb_cargo": [
        "rust/BurntSushi/ripgrep.py",
        "rust/sharkdp/bat.py",
        "rust/tokio_rs/tokio.py",
        "rust/tokio_rs/bytes.py",
    ],
    "msb_catch2": ["cpp/catchorg/catch2.py"],
    "msb_darkreader": ["typescript/darkreader/darkreader.py"],
    "msb_dayjs": ["javascript/iamkun/dayjs.py"],
    "msb_fmt": ["cpp/fmtlib/fmt.py"],
    "msb_jq": ["c/jqlang/jq.py"],
}

# Parser → the method it is, where that is not `parse_log`.
METHODS = {"mocha_json": "parse_json_log"}

EXPECTED_SUFFIXES = (".expected.json", ".expected-5.json")


class TestResult:
    """Multi-SWE-bench's `TestResult` (multi_swe_bench/harness/test_result.py), keeping the
    three sets and noting what its `__post_init__` would raise."""

    def __init__(self, *, passed_count, failed_count, skipped_count,
                 passed_tests, failed_tests, skipped_tests):
        self.passed, self.failed, self.skipped = (
            set(passed_tests), set(failed_tests), set(skipped_tests))
        self.raises = None
        for (a, b), (x, y) in [
            ((self.passed, self.failed), ("Passed", "failed")),
            ((self.passed, self.skipped), ("Passed", "skipped")),
            ((self.failed, self.skipped), ("Failed", "skipped")),
        ]:
            if a & b:
                self.raises = (f"{x} tests and {y} tests should not have common items: "
                               f"`{sorted(a & b)}`")
                break

    def status_map(self) -> dict:
        out = {t: "PASSED" for t in self.passed}
        out.update({t: "SKIPPED" for t in self.skipped})
        out.update({t: "FAILED" for t in self.failed})
        return out


class _SortKeywords(ast.NodeTransformer):
    """Keyword arguments in name order, so that `f(a=1, b=2)` and `f(b=2, a=1)` compare alike."""

    def visit_Call(self, node):
        self.generic_visit(node)
        node.keywords.sort(key=lambda k: k.arg or "")
        return node


def method_node(git_dir: str, path: str, name: str = "parse_log") -> ast.FunctionDef:
    """The method `name` of the handler at `path`, at MSB_COMMIT."""
    source = subprocess.run(
        ["git", "--git-dir", git_dir, "show",
         f"{MSB_COMMIT}:multi_swe_bench/harness/repos/{path}"],
        check=True, capture_output=True, text=True,
    ).stdout
    found = [n for n in ast.walk(ast.parse(source))
             if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(found) != 1:
        raise SystemExit(f"{path}: {len(found)} `{name}` methods, expected one")
    return found[0]


class MissingPackage(Exception):
    """A package the handler's method imports is not installed here."""


def method_namespace(parser: str) -> dict:
    """What the method's code names besides itself: `re`, the stand-in `TestResult`, and for
    express's `parse_json_log` the rest of its module's imports."""
    namespace = {"re": re, "TestResult": TestResult}
    if parser == "mocha_json":
        from dataclasses import asdict, dataclass
        from json import JSONDecoder
        from typing import Generator, Optional
        try:
            from dataclasses_json import dataclass_json
        except ImportError:
            raise MissingPackage("express's parse_json_log needs the dataclasses-json package "
                                 "(pip install dataclasses-json)")
        namespace.update(asdict=asdict, dataclass=dataclass, JSONDecoder=JSONDecoder,
                         Generator=Generator, Optional=Optional, dataclass_json=dataclass_json)
    return namespace


def load_parser(git_dir: str, parser: str):
    """The parser's method (`parse_log`, or the one `METHODS` names) of its first handler, as a
    function of the log, after checking the others."""
    paths = HANDLERS[parser]
    name = METHODS.get(parser, "parse_log")
    first = method_node(git_dir, paths[0], name)
    shape = ast.dump(_SortKeywords().visit(method_node(git_dir, paths[0], name)))
    for other in paths[1:]:
        if ast.dump(_SortKeywords().visit(method_node(git_dir, other, name))) != shape:
            raise SystemExit(f"{parser}: {name} in {other} differs from {paths[0]}'s")
    module = ast.fix_missing_locations(ast.Module(body=[first], type_ignores=[]))
    namespace = method_namespace(parser)
    exec(compile(module, f"{paths[0]}:{name}", "exec"), namespace)
    method = namespace[name]
    return lambda log: method(None, log)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--msb-git", metavar="GIT_DIR", required=True,
                    help="git directory of multi-swe-bench/multi-swe-bench (commit "
                         f"{MSB_COMMIT[:8]} in it)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if an expected file differs")
    ap.add_argument("parsers", nargs="*", help="only these parsers (default: all)")
    args = ap.parse_args()
    differs = 0
    for parser in args.parsers or HANDLERS:
        try:
            parse = load_parser(args.msb_git, parser)
        except MissingPackage as e:
            # Named, it must be checked; among all, the others still are.
            if args.parsers:
                raise SystemExit(f"{parser}: {e}")
            print(f"{parser}: not checked: {e}")
            continue
        logs = sorted(p for p in (FIXTURES / parser).iterdir()
                      if p.is_file() and not p.name.endswith(EXPECTED_SUFFIXES))
        if not logs:
            raise SystemExit(f"{parser}: no fixture in {FIXTURES / parser}")
        for log in logs:
            with open(log, "r", encoding="utf-8") as f:
                result = parse(f.read())
            if result.raises:
                print(f"{parser}/{log.name}: Multi-SWE-bench raises ValueError: {result.raises}")
            m = result.status_map()
            text = json.dumps(m, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
            for suffix in EXPECTED_SUFFIXES:
                out = log.with_name(log.stem + suffix)
                if args.check:
                    if not out.exists() or out.read_text(encoding="utf-8") != text:
                        print(f"differs: {out.relative_to(FIXTURES)}")
                        differs += 1
                else:
                    out.write_text(text, encoding="utf-8")
            counts = {s: sum(1 for v in m.values() if v == s)
                      for s in ("PASSED", "FAILED", "SKIPPED")}
            print(f"{parser}/{log.name}: {counts['PASSED']} passed, {counts['FAILED']} failed, "
                  f"{counts['SKIPPED']} skipped ({HANDLERS[parser][0]})")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
