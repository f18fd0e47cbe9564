//! The log parsers on real logs (tests/fixtures/logs/README.md): every fixture against the maps
//! SWE-bench's own parsers give for it, swebench 4.1.0's (`<fixture>.expected.json`) and 5.0.2's
//! (`<fixture>.expected-5.json`), both made by `generate_expected.py` (for the Multi-SWE-bench
//! parsers, `msb_*` and the runner parsers `jest`, `mocha`, `mocha_json`, `vitest`, `tap`,
//! `cargo`, `ctest`, `googletest` and `automake`, its own functions' maps, by
//! `scripts/msb_expected.py`), then hand-checked facts about each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use TestStatus::*;
use swe_ark::logparse::{self, Grading, StatusMap, TestStatus};

/// Parsed as swebench 4.1.0 reads logs (`<fixture>.expected.json`).
fn parse4(parser: &str, log: &str) -> Result<StatusMap, logparse::LogParseError> {
    logparse::parse(parser, log, Grading::Swebench4)
}

/// Parsed as swebench 5.0.2 reads logs (`<fixture>.expected-5.json`).
fn parse5(parser: &str, log: &str) -> Result<StatusMap, logparse::LogParseError> {
    logparse::parse(parser, log, Grading::Swebench5)
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/logs")
}

fn read(rel: &str) -> String {
    let path = fixtures().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The parser named by the fixture's directory, on the fixture, as swebench 4.1.0 reads it.
fn parsed(rel: &str) -> StatusMap {
    let parser = rel.split('/').next().unwrap();
    parse4(parser, &read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The same as swebench 5.0.2 reads it.
fn parsed5(rel: &str) -> StatusMap {
    let parser = rel.split('/').next().unwrap();
    parse5(parser, &read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn status(map: &StatusMap, id: &str) -> Option<TestStatus> {
    map.get(id).copied()
}

/// Each test id has its status in `map` (`None`: not there).
fn assert_statuses(map: &StatusMap, want: &[(&str, Option<TestStatus>)]) {
    for (id, status) in want {
        assert_eq!(map.get(*id).copied(), *status, "{id}");
    }
}

/// The expected maps' file name endings, with the release each is of.
const EXPECTED: [(&str, Grading); 2] = [
    (".expected.json", Grading::Swebench4),
    (".expected-5.json", Grading::Swebench5),
];

#[test]
fn every_fixture_gives_what_swebench_gives() {
    let mut checked = 0;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.ends_with("sources"))
        .collect();
    dirs.sort();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut known: Vec<&str> = logparse::known_parsers().to_vec();
    known.sort();
    assert_eq!(names, known, "one fixture directory per parser");
    for dir in &dirs {
        let parser = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.to_string_lossy();
                !EXPECTED.iter().any(|(suffix, _)| name.ends_with(suffix))
            })
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{parser}: no fixture");
        for file in files {
            let log = std::fs::read_to_string(&file).unwrap();
            let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
            for (suffix, grading) in EXPECTED {
                let got = logparse::parse(&parser, &log, grading)
                    .unwrap_or_else(|e| panic!("{} ({grading}): {e}", file.display()));
                let expected_path = file.with_file_name(format!("{stem}{suffix}"));
                let expected: BTreeMap<String, String> = serde_json::from_str(
                    &std::fs::read_to_string(&expected_path)
                        .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display())),
                )
                .unwrap();
                // SWE-bench may keep a word that is not a status; such an id is left out here.
                let expected: BTreeMap<String, String> = expected
                    .into_iter()
                    .filter(|(_, v)| {
                        ["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"].contains(&v.as_str())
                    })
                    .collect();
                let got: BTreeMap<String, String> =
                    serde_json::from_value(serde_json::to_value(&got).unwrap()).unwrap();
                // The Multi-SWE-bench parsers' maps are its functions' (scripts/msb_expected.py).
                let reference = if parser.starts_with("msb_")
                    || logparse::msb::runner_names().any(|r| r == parser)
                {
                    "Multi-SWE-bench 24f493f8"
                } else {
                    grading.release()
                };
                if got != expected {
                    let only_got: Vec<_> = got
                        .iter()
                        .filter(|(k, v)| expected.get(*k) != Some(v))
                        .collect();
                    let only_exp: Vec<_> = expected
                        .iter()
                        .filter(|(k, v)| got.get(*k) != Some(v))
                        .collect();
                    panic!(
                        "{} ({grading}): differs from {reference}\n  ours only: {only_got:?}\n  reference only: {only_exp:?}",
                        file.display(),
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 64, "only {checked} fixtures");
}

#[test]
fn pytest_ra_summary_as_swebench_reads_it() {
    for rel in [
        "pytest/pytest4-py37.log",
        "pytest/pytest6-py39.log",
        "pytest/pytest8-py311.log",
    ] {
        let m = parsed(rel);
        let s = |id: &str| status(&m, id);
        assert_eq!(s("tests/test_basic.py::test_pass"), Some(Passed), "{rel}");
        assert_eq!(s("tests/test_basic.py::test_fail"), Some(Failed), "{rel}");
        assert_eq!(
            s("tests/test_basic.py::TestGroup::test_method_param[2]"),
            Some(Failed)
        );
        assert_eq!(s("tests/test_basic.py::test_xfail"), Some(Xfail), "{rel}");
        assert_eq!(
            s("tests/test_basic.py::test_error_in_setup"),
            Some(Error),
            "{rel}"
        );
        // PASSED, then ERROR for its teardown: the later line wins.
        assert_eq!(
            s("tests/test_basic.py::test_error_in_teardown"),
            Some(Error),
            "{rel}"
        );
        // ERROR (teardown), then FAILED (call): FAILED lines come last in the summary.
        assert_eq!(
            s("tests/test_basic.py::test_fail_and_error_in_teardown"),
            Some(Failed)
        );
        // A non-strict XPASS is not read at all; a strict one is FAILED.
        assert_eq!(s("tests/test_basic.py::test_xpass"), None, "{rel}");
        assert_eq!(
            s("tests/test_basic.py::test_xpass_strict"),
            Some(Failed),
            "{rel}"
        );
        // Skips are `SKIPPED [1] file:line: reason`: the id is `[1]`.
        assert_eq!(s("tests/test_basic.py::test_skip_mark"), None, "{rel}");
        assert_eq!(s("[1]"), Some(Skipped), "{rel}");
        // Ids end at the first space; brackets and slashes are kept.
        assert_eq!(
            s("tests/test_params.py::test_ids_pass[a"),
            Some(Passed),
            "{rel}"
        );
        assert_eq!(s("tests/test_params.py::test_ids_pass[a b]"), None, "{rel}");
        assert_eq!(
            s("tests/test_params.py::test_ids_fail[fail"),
            Some(Failed),
            "{rel}"
        );
        assert_eq!(
            s("tests/test_params.py::test_ids_fail[fail/slash]"),
            Some(Failed)
        );
        assert_eq!(
            s("tests/test_params.py::test_ids_fail[fail[nested]]"),
            Some(Failed)
        );
        assert_eq!(
            s("tests/test_params.py::test_ids_pass[/abs/path/to/file.txt]"),
            Some(Passed)
        );
        // Lines a test printed or logged count too.
        assert_eq!(
            s("tests/test_basic.py::test_never_ran"),
            Some(Passed),
            "{rel}"
        );
        assert_eq!(s("this"), Some(Error), "{rel}");
    }
    // Python 3.11 gives IntEnum parameters their number.
    let m = parsed("pytest/pytest8-py311.log");
    let id = "tests/sub/test_nested.py::test_click_fail[2]";
    assert_statuses(&m, &[(id, Some(Failed))]);
    let m = parsed("pytest/pytest6-py39.log");
    let id = "tests/sub/test_nested.py::test_click_fail[MouseButton.MIDDLE]";
    assert_statuses(&m, &[(id, Some(Failed))]);
}

#[test]
fn pytest_sees_no_coloured_summary_and_a_collection_error_names_the_file() {
    let m = parsed("pytest/pytest8-color.log");
    assert!(
        !m.keys()
            .any(|k| k.starts_with("tests/") && k != "tests/test_basic.py::test_never_ran"),
        "{m:?}"
    );
    let m = parsed("pytest/collection-error.log");
    assert_eq!(
        m.into_iter().collect::<Vec<_>>(),
        [("broken/test_broken.py".to_string(), Error)]
    );
}

#[test]
fn pytest_absolute_ids_are_made_relative() {
    // The real log, its ids rewritten in memory as pytest would print them absolute.
    let log = read("pytest/pytest8-py311.log");
    let plain = parse4("pytest", &log).unwrap();
    for prefix in ["/tmp/proj/", "/testbed/", "/srv/x/testbed/"] {
        let mut abs = String::new();
        for line in log.split_inclusive('\n') {
            let mut line = line.to_string();
            for word in ["PASSED ", "FAILED ", "ERROR ", "XFAIL "] {
                if line.starts_with(&format!("{word}tests/")) {
                    line = line.replacen(word, &format!("{word}{prefix}"), 1);
                }
            }
            abs.push_str(&line);
        }
        assert_ne!(abs, log);
        assert_eq!(parse4("pytest", &abs).unwrap(), plain, "{prefix}");
    }
    // Without the `rootdir:` line, only `/testbed/` is known.
    let log = "PASSED /tmp/proj/tests/a.py::t\nPASSED /testbed/tests/b.py::u[/testbed/x]\n";
    let m = parse4("pytest", log).unwrap();
    assert_eq!(status(&m, "/tmp/proj/tests/a.py::t"), Some(Passed));
    assert_eq!(status(&m, "tests/b.py::u[/testbed/x]"), Some(Passed));
    let m = parse4(
        "pytest",
        &format!("rootdir: /tmp/proj, configfile: setup.cfg\n{log}"),
    )
    .unwrap();
    assert_eq!(status(&m, "tests/a.py::t"), Some(Passed));
}

#[test]
fn pytest_options_shortens_absolute_path_parameters() {
    let m = parsed("pytest_options/pytest6-py39.log");
    let s = |id: &str| status(&m, id);
    // A random temporary directory in the id becomes its last component.
    assert_eq!(
        s("tests/test_params.py::test_data_path[/input.txt]"),
        Some(Passed)
    );
    assert!(!m.keys().any(|k| k.contains("/tmp/tmp")), "{m:?}");
    assert_eq!(
        s("tests/test_params.py::test_ids_pass[/file.txt]"),
        Some(Passed)
    );
    // `//…` and globs are kept whole; relative paths are not touched.
    assert_eq!(
        s("tests/test_params.py::test_ids_pass[//double/slash]"),
        Some(Passed)
    );
    assert_eq!(
        s("tests/test_params.py::test_ids_pass[/glob/*.py]"),
        Some(Passed)
    );
    assert_eq!(
        s("tests/test_params.py::test_data_path[relative/input.txt]"),
        Some(Passed)
    );
    assert_eq!(
        s("tests/test_params.py::test_ids_fail[fail/slash]"),
        Some(Failed)
    );
}

#[test]
fn pytest_v2_reads_verbose_lines_and_colours() {
    let plain = parsed("pytest_v2/vv-classic-pytest8.log");
    let colour = parsed("pytest_v2/vv-classic-color-pytest8.log");
    for m in [&plain, &colour] {
        let s = |id: &str| status(m, id);
        assert_eq!(s("tests/test_basic.py::test_pass"), Some(Passed));
        assert_eq!(s("tests/test_basic.py::test_xfail"), Some(Xfail));
        assert_eq!(
            s("tests/test_basic.py::test_error_in_teardown"),
            Some(Error)
        );
        assert_eq!(
            s("tests/sub/test_nested.py::test_click_fail[2]"),
            Some(Failed)
        );
        // `[10m` is taken for a colour code: the parameter `10m` eats its bracket.
        assert_eq!(s("tests/test_params.py::test_ids_pass]"), Some(Passed));
        assert_eq!(s("tests/test_params.py::test_ids_pass[10m]"), None);
    }
    // The colour codes do not change the ids (the random tmp path differs between runs).
    let strip = |m: &StatusMap| -> Vec<(String, TestStatus)> {
        m.iter()
            .filter(|(k, _)| !k.contains("/tmp/tmp"))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    assert_eq!(strip(&plain), strip(&colour));
}

#[test]
fn matplotlib_writes_mouse_buttons_as_numbers() {
    let m = parsed("matplotlib/pytest6-py39.log");
    assert_statuses(
        &m,
        &[
            ("tests/sub/test_nested.py::test_click[1]", Some(Passed)),
            ("tests/sub/test_nested.py::test_click[3]", Some(Passed)),
            (
                "tests/sub/test_nested.py::test_click[MouseButton.LEFT]",
                None,
            ),
            // Only LEFT and RIGHT are rewritten.
            (
                "tests/sub/test_nested.py::test_click_fail[MouseButton.MIDDLE]",
                Some(Failed),
            ),
        ],
    );
}

#[test]
fn seaborn_reads_only_passes_and_failures() {
    let m = parsed("seaborn/no-header-pytest8.log");
    assert!(m.values().all(|s| matches!(s, Passed | Failed)), "{m:?}");
    assert_eq!(status(&m, "tests/test_basic.py::test_pass"), Some(Passed));
    assert_eq!(
        status(&m, "tests/test_basic.py::test_fail_and_error_in_teardown"),
        Some(Failed)
    );
    assert_eq!(status(&m, "tests/test_basic.py::test_error_in_setup"), None);
    assert_eq!(status(&m, "tests/test_basic.py::test_xfail"), None);
}

#[test]
fn django_verbosity_two() {
    let m = parsed("django/django-3.2.25-py39.log");
    let s = |id: &str| status(&m, id);
    assert_eq!(
        s("test_international (str.tests.SimpleTests)"),
        Some(Passed)
    );
    // Output between ` ... ` and `ok`.
    assert_eq!(
        s("test_prints_between_dots_and_ok (str.tests.SweArkFixtureTests)"),
        Some(Passed)
    );
    // Output between ` ... ` and `FAIL`: only the summary's bare method name is read.
    assert_eq!(
        s("test_prints_then_fails (str.tests.SweArkFixtureTests)"),
        None
    );
    assert_eq!(s("test_prints_then_fails"), Some(Failed));
    assert_eq!(s("test_errors (str.tests.SweArkFixtureTests)"), Some(Error));
    assert_eq!(s("test_errors"), Some(Error));
    // A test with a docstring is known by the docstring's first line.
    assert_eq!(
        s("A docstring's first line stands for the test."),
        Some(Failed)
    );
    assert_eq!(
        s("Calling an async view down the asynchronous path."),
        Some(Passed)
    );
    // Real failures of running as root, and a skip.
    assert_eq!(s("Permission errors are not swallowed"), Some(Failed));
    assert_eq!(s("test_readonly_root"), Some(Failed));
    assert!(m.values().any(|v| *v == Skipped));
    // The log has the harness's markers: `+ : '>>>>> Start Test Output'` is not a test.
    assert!(!m.keys().any(|k| k.contains(">>>>>")));

    let m = parsed("django/django-5.0.14-py311.log");
    assert_eq!(
        status(
            &m,
            "test_international (str.tests.SimpleTests.test_international)"
        ),
        Some(Passed)
    );
    assert_eq!(status(&m, "test_prints_then_fails"), Some(Failed));
}

#[test]
fn sympy_bin_test() {
    let m = parsed("sympy/sympy-1.12-py39.log");
    let s = |id: &str| status(&m, id);
    assert_eq!(s("test__aresame"), Some(Passed));
    assert_eq!(s("test_S"), Some(Failed));
    assert_eq!(s("sympy/core/tests/test_basic.py:test_S"), Some(Failed));
    // The test that raised printed first: only its failure header is read, as FAILED.
    assert_eq!(s("test_call"), None);
    assert_eq!(s("sympy/core/tests/test_basic.py:test_call"), Some(Failed));
    // The last test of a file shares its line with `[OK]`/`[FAIL]`.
    assert_eq!(s("test_ManagedProperties"), None);
    // Expected failures (`f`) and skips (`s`) are not read.
    assert_eq!(s("test_multivariate_relational_as_set"), None);
    assert_eq!(s("test_issue_19399"), None);
}

/// `map` without pytest's `SKIPPED [N] file:line: reason` summary lines' `[N]`.
fn without_skip_counts(map: &StatusMap) -> StatusMap {
    map.iter()
        .filter(|(k, _)| {
            !(k.starts_with('[') && k.ends_with(']') && k[1..k.len() - 1].parse::<u32>().is_ok())
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[test]
fn real_pytest_logs_skip_summaries_under_both_releases() {
    // swe-ark's replays of gold patches; under 4.1.0 each `SKIPPED [N] …` summary line is a
    // test named `[N]` (the last one wins), under 5.0.2 it is not read. Nothing else differs.
    for (rel, counts) in [
        (
            "pytest/pytest-dev__pytest-7432-gold.log",
            &["[1]", "[2]"][..],
        ),
        ("pytest/pytest-dev__pytest-5692-gold.log", &["[1]"]),
        ("pytest/pydata__xarray-4094-gold.log", &["[16]"]),
        ("pytest/pylint-dev__astroid-1268-gold.log", &["[1]"]),
        (
            "pytest_options/pylint-dev__pylint-7114-coder.log",
            &["[1]", "[2]"],
        ),
    ] {
        let (m4, m5) = (parsed(rel), parsed5(rel));
        for id in counts {
            assert_eq!(status(&m4, id), Some(Skipped), "{rel} {id}");
            assert_eq!(status(&m5, id), None, "{rel} {id}");
        }
        assert_eq!(
            without_skip_counts(&m4).len() + counts.len(),
            m4.len(),
            "{rel}"
        );
        assert_eq!(without_skip_counts(&m4), m5, "{rel}");
    }

    // pytest's own suite runs pytest and prints the inner runs' summaries: they are read too.
    let m = parsed5("pytest/pytest-dev__pytest-7432-gold.log");
    assert_statuses(
        &m,
        &[
            (
                "testing/test_skipping.py::test_skip_not_report_default",
                Some(Passed),
            ),
            ("test_simple.py::test_foo", Some(Error)),
            ("test_reportchars.py::test_1", Some(Failed)),
            ("test_reportchars.py::test_2", Some(Xfail)),
            ("test_module_level_skip_error.py", Some(Error)),
            // `ERROR test_invalid_skip_keyword_parameter.py - TypeError: …`: ends at the space.
            ("test_invalid_skip_keyword_parameter.py", Some(Error)),
        ],
    );
    // `ERROR: --junitxml must be a filename, given: .`, printed by a test: SWE-bench keeps
    // `--junitxml` → `ERROR:`, a word that is no status; here the id is left out.
    let m = parsed5("pytest/pytest-dev__pytest-5692-gold.log");
    assert_eq!(status(&m, "--junitxml"), None);
    assert_eq!(
        status(&m, "testing/test_junitxml.py::test_runs_twice_xdist"),
        Some(Xfail)
    );
    let m = parsed("pytest/pydata__xarray-4094-gold.log");
    assert_eq!(
        status(
            &m,
            "xarray/tests/test_dataset.py::TestDataset::test_categorical_multiindex"
        ),
        Some(Failed)
    );
    assert_eq!(
        status(
            &m,
            "xarray/tests/test_dataset.py::TestDataset::test_copy_coords[True-expected_orig0]"
        ),
        Some(Xfail)
    );
}

#[test]
fn real_pytest_options_log() {
    // A model's patch evaluated by the SWE-bench harness of 2024 (CodeR's run).
    let m = parsed5("pytest_options/pylint-dev__pylint-7114-coder.log");
    // `FAILED id - AssertionE...`: the id ends at the space.
    assert_eq!(
        status(
            &m,
            "tests/lint/unittest_lint.py::test_analyze_explicit_script"
        ),
        Some(Failed)
    );
    assert_eq!(
        status(
            &m,
            "tests/lint/unittest_lint.py::test_recursive_ignore[--ignore-paths-.*directory/ignored.*]"
        ),
        Some(Failed)
    );
    // XPASS is no status SWE-bench reads.
    let id = "tests/checkers/unittest_imports.py::TestImportsChecker::test_relative_beyond_top_level_two";
    assert_eq!(status(&m, id), None);
    // The gold patch under swe-ark: the same test XFAIL.
    let m = parsed5("pytest_options/pylint-dev__pylint-7114-gold.log");
    assert_eq!(status(&m, id), Some(Xfail));
}

#[test]
fn real_pytest_v2_log_differs_between_releases() {
    // A model's patch evaluated by the SWE-bench harness of 2024 (AutoCodeRover's run), pytest
    // with colours, `--tb=no`, under `conda run`.
    let rel = "pytest_v2/astropy__astropy-6938-autocoderover.log";
    let (m4, m5) = (parsed(rel), parsed5(rel));
    // `SKIPPED [1] astropy/io/fits/tests/test_table.py:2468: condition: not HAVE_OBJGRAPH`
    assert_eq!(status(&m4, "[1]"), Some(Skipped));
    assert_eq!(status(&m5, "[1]"), None);
    // `ERROR id - ...` (pytest's shortened message): 4.1.0 ends the id at the first space, 5.0.2
    // cuts only FAILED lines at ` - ` and keeps the rest of an ERROR line whole.
    let id = "astropy/io/fits/tests/test_table.py::TestTableFunctions::test_pickle";
    assert_eq!(status(&m4, id), Some(Error));
    assert_eq!(status(&m5, id), None);
    assert_eq!(status(&m5, &format!("{id} - ...")), Some(Error));
    // conda's own `ERROR conda.cli.main_run:execute(124): `conda run pytest …` failed. …`.
    assert_eq!(status(&m4, "conda.cli.main_run:execute(124):"), Some(Error));
    assert_eq!(status(&m5, "conda.cli.main_run:execute(124):"), None);
    assert!(
        m5.iter().any(|(k, v)| *v == Error
            && k.starts_with("conda.cli.main_run:execute(124): `conda run pytest ")
            && k.ends_with("failed. (See above for error)")),
        "{m5:?}"
    );
    // `FAILED id - A...`: the same id under both.
    let id = "astropy/io/fits/tests/test_table.py::TestTableFunctions::test_open";
    assert_eq!(status(&m4, id), Some(Failed));
    assert_eq!(status(&m5, id), Some(Failed));
    // A coloured `PASSED` line.
    let id = "astropy/io/fits/tests/test_checksum.py::TestChecksumFunctions::test_sample_file";
    assert_eq!(status(&m4, id), Some(Passed));
    assert_eq!(status(&m5, id), Some(Passed));

    // swe-ark's replay of astropy__astropy-12907's gold patch: both releases read it alike.
    let rel = "pytest_v2/astropy__astropy-12907-gold.log";
    let m = parsed5(rel);
    assert_eq!(m, parsed(rel));
    assert_eq!(m.len(), 15);
    assert!(m.values().all(|s| *s == Passed));
    assert_eq!(
        status(
            &m,
            "astropy/modeling/tests/test_separable.py::test_separable[compound_model9-result9]"
        ),
        Some(Passed)
    );
}

#[test]
fn real_seaborn_and_sympy_logs() {
    let m = parsed5("seaborn/mwaskom__seaborn-3190-gold.log");
    assert_eq!(m, parsed("seaborn/mwaskom__seaborn-3190-gold.log"));
    assert_eq!(m.len(), 85);
    assert!(m.values().all(|s| *s == Passed), "{m:?}");

    // The gold run of sympy__sympy-13971 has real errors (tracebacks ending in Python 3.9's
    // DeprecationWarning for `collections.Iterable`).
    let m = parsed5("sympy/sympy__sympy-13971-gold.log");
    assert_eq!(m, parsed("sympy/sympy__sympy-13971-gold.log"));
    let s = |id: &str| status(&m, id);
    assert_eq!(s("test_printmethod"), Some(Passed));
    // `test_latex_indexed E`, and its failure header.
    assert_eq!(s("test_latex_indexed"), Some(Error));
    assert_eq!(
        s("sympy/printing/tests/test_latex.py:test_latex_indexed"),
        Some(Failed)
    );
    // `f` (expected failure) is not read.
    assert_eq!(s("test_latex_symbols_failing"), None);
    // The file's last test shares its line with `[FAIL]`.
    assert_eq!(s("test_WedgeProduct_printing"), None);
}

#[test]
fn junit_xml_reports() {
    for rel in [
        "junit_xml/pytest8-xunit2.xml",
        "junit_xml/pytest6-xunit1.xml",
    ] {
        let m = parsed(rel);
        let s = |id: &str| status(&m, id);
        assert_eq!(s("tests.test_basic::test_pass"), Some(Passed), "{rel}");
        assert_eq!(
            s("tests.test_basic::test_skip_mark"),
            Some(Skipped),
            "{rel}"
        );
        assert_eq!(s("tests.test_basic::test_xfail"), Some(Xfail), "{rel}");
        assert_eq!(s("tests.test_basic::test_xpass"), Some(Passed), "{rel}");
        assert_eq!(
            s("tests.test_basic::test_xpass_strict"),
            Some(Failed),
            "{rel}"
        );
        assert_eq!(
            s("tests.test_basic::test_error_in_teardown"),
            Some(Error),
            "{rel}"
        );
        // Written twice (failure, then teardown error): FAILED, as pytest -rA ends.
        assert_eq!(
            s("tests.test_basic::test_fail_and_error_in_teardown"),
            Some(Failed)
        );
        assert_eq!(
            s("tests.test_basic.TestGroup::test_method_param[2]"),
            Some(Failed)
        );
        // Whole ids, spaces included.
        assert_eq!(
            s("tests.test_params::test_ids_pass[a b]"),
            Some(Passed),
            "{rel}"
        );
        assert_eq!(
            s("tests.test_params::test_ids_fail[fail - dash]"),
            Some(Failed),
            "{rel}"
        );
        assert_eq!(m.len(), 43, "{rel}");
    }
    let err = parse4("junit_xml", &read("pytest/pytest8-py311.log")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("not a readable JUnit XML report"),
        "{err}"
    );
}

/// Multi-SWE-bench's parsers have one reading: both gradings give it.
fn parsed_msb(rel: &str) -> StatusMap {
    let m = parsed(rel);
    assert_eq!(m, parsed5(rel), "{rel}");
    m
}

#[test]
fn msb_cargo_reads_libtest_lines() {
    let m = parsed_msb("msb_cargo/all-binaries.log");
    assert_statuses(
        &m,
        &[
            ("tests::it_works", Some(Passed)),
            ("tests::ünïcode::naïve", Some(Passed)),
            ("tests::expensive", Some(Skipped)),
            // `... ignored, needs the network`: the pattern does not anchor the end.
            ("tests::network", Some(Skipped)),
            // `test tests::div_by_zero - should panic ... ok` is not read.
            ("tests::div_by_zero", None),
            // Integration tests are known by their bare names.
            ("shared_name", Some(Passed)),
            ("integration_passes", Some(Passed)),
        ],
    );
    // Doc tests (`test src/lib.rs - add (line 5) ... ok`) are not read, the failed one neither.
    assert!(!m.keys().any(|k| k.contains("src/lib.rs")), "{m:?}");
    assert_eq!(m.len(), 8);

    // A failing binary stops `cargo test`: the later binaries and the doc tests are absent.
    // Captured output shown with the failure is read like libtest's own lines.
    let m = parsed_msb("msb_cargo/unit-test-fails.log");
    assert_statuses(
        &m,
        &[
            ("tests::fails_on_request", Some(Failed)),
            ("fake::printed", Some(Failed)),
            ("shared_name", None),
            ("integration_passes", None),
        ],
    );
}

#[test]
fn msb_cargo_a_name_in_two_binaries() {
    // `shared_name` passes in tests/cli.rs and fails in tests/other.rs. Multi-SWE-bench keeps
    // sets of names: a name passed and failed makes its TestResult raise ValueError. Here the
    // failure wins.
    let m = parsed_msb("msb_cargo/same-name-two-binaries.log");
    assert_statuses(
        &m,
        &[
            ("shared_name", Some(Failed)),
            ("tests::shared_name", Some(Passed)),
            // Passed in both: one entry.
            ("integration_passes", Some(Passed)),
        ],
    );
}

#[test]
fn msb_dayjs_reads_jest_verbose_output() {
    let m = parsed_msb("msb_dayjs/npm-test-verbose.log");
    assert_statuses(
        &m,
        &[
            // Suites are tests too.
            ("test/parse.test.js", Some(Passed)),
            ("test/plugin/relativeTime.test.js", Some(Failed)),
            ("test/parse.test.js:Now", Some(Passed)),
            // `✓ waits a little (124ms)`: the time is cut; the title's describe blocks are not
            // part of the id.
            ("test/parse.test.js:waits a little", Some(Passed)),
            ("test/plugin/relativeTime.test.js:Time to X", Some(Failed)),
            // Two tests of one title are one entry.
            ("test/plugin/relativeTime.test.js:Time from X", Some(Passed)),
            ("test/plugin/relativeTime.test.js:Custom thresholds", None),
            // `console.log('✓ printed by a test')` in a test of parse.test.js.
            ("test/parse.test.js:printed by a test", Some(Passed)),
            // The timezone suite ran four times (three TZ runs and the full run).
            (
                "test/timezone.test.js:London is at UTC in January",
                Some(Passed),
            ),
        ],
    );
    // `✓ adds (2 days) (4ms)`: only the last parenthesis is a time; alone, `(2 days)` is cut.
    assert_eq!(status(&m, "test/parse.test.js:adds (2 days)"), Some(Passed));
    let m = parse4("msb_dayjs", "PASS test/a.test.js\n  ✓ adds (2 days)\n").unwrap();
    assert_eq!(status(&m, "test/a.test.js:adds"), Some(Passed));

    // The London run fails what the Auckland run passed (Multi-SWE-bench raises ValueError);
    // `&&` ends the chain there.
    let m = parsed_msb("msb_dayjs/timezone-fails.log");
    assert_statuses(
        &m,
        &[
            ("test/timezone.test.js", Some(Failed)),
            (
                "test/timezone.test.js:London is at UTC in January",
                Some(Failed),
            ),
            (
                "test/timezone.test.js:UTC offset is a whole number of hours",
                Some(Passed),
            ),
            ("test/parse.test.js", None),
        ],
    );
}

#[test]
fn msb_darkreader_reads_suites_and_cuts_titles_at_a_parenthesis() {
    // Several test files: jest prints one line per file, no line per test.
    let m = parsed_msb("msb_darkreader/test-unit.log");
    assert_eq!(
        m.into_iter().collect::<Vec<_>>(),
        [
            // `console.log('PASS tests/unit/fake.tests.ts')` in a test.
            ("tests/unit/fake.tests.ts".to_string(), Passed),
            ("tests/unit/utils/color.tests.ts".to_string(), Failed),
            // `PASS tests/unit/utils/slow.tests.ts (5.342 s)`
            ("tests/unit/utils/slow.tests.ts".to_string(), Passed),
            ("tests/unit/utils/time.tests.ts".to_string(), Passed),
        ]
    );
    let m = parsed_msb("msb_darkreader/test-unit-one-file.log");
    let suite = "tests/unit/utils/color.tests.ts";
    let s = |title: &str| status(&m, &format!("{suite}:{title}"));
    // `✕ converts (hsl) values (8 ms)`: the title ends before its first ` (`.
    assert_eq!(s("converts"), Some(Failed));
    assert_eq!(s("waits for a slow color"), Some(Passed));
    // No space before the parenthesis: kept.
    assert_eq!(s("should parse rgb(0, 0, 0)"), Some(Passed));
    // `○ skipped …` and `✎ todo …` are not read.
    assert_eq!(m.len(), 6);
}

#[test]
fn msb_axios_reads_mocha_spec_output() {
    let m = parsed_msb("msb_axios/npm-test.log");
    assert_statuses(
        &m,
        &[
            ("should accept undefined for second argument", Some(Passed)),
            // `(deprecated)` is taken for a time and cut; `(127ms)` is one.
            ("should merge headers", Some(Passed)),
            ("should wait for a slow adapter", Some(Passed)),
            ("should not mutate the defaults", Some(Failed)),
            (r#""before each" hook for "uses a hook""#, Some(Failed)),
            // The failure summary's `1) core::mergeConfig` names the describe block.
            ("core::mergeConfig", Some(Failed)),
            ("helpers::combineURLs", Some(Failed)),
            ("2) should remove duplicate slashes", Some(Passed)),
            ("printed by a test", Some(Passed)),
            ("should support a pending option", None),
            // mocha failed, so `npm run test:exports` did not run.
            ("should have consistent ESM export", None),
        ],
    );
}

#[test]
fn msb_jq_reads_automake_results() {
    let m = parsed_msb("msb_jq/run-sh.log");
    assert_eq!(
        m.into_iter().collect::<Vec<_>>(),
        [
            // `make check` recurses into the bundled oniguruma first.
            ("test/test_syntax".to_string(), Passed),
            ("test/test_utf8".to_string(), Passed),
            ("tests/jqtest".to_string(), Failed),
            ("tests/mantest".to_string(), Passed),
            ("tests/optionaltest".to_string(), Passed),
            ("tests/shtest".to_string(), Skipped),
            // `ERROR: tests/utf8test` and `XFAIL: tests/base64test` are not read.
        ]
    );
    // With automake's colours nothing is read.
    assert_eq!(parsed_msb("msb_jq/make-check-color.log"), StatusMap::new());
}

#[test]
fn msb_fmt_never_reads_a_failure() {
    let m = parsed_msb("msb_fmt/run-sh.log");
    assert!(m.values().all(|s| *s == Passed), "{m:?}");
    assert_statuses(
        &m,
        &[
            ("args-test", Some(Passed)),
            ("find-package-test.passes", Some(Passed)),
            // `***Failed    0.01 sec`: the pattern wants the line to end at `Failed`.
            ("chrono-test", None),
            ("os-test", None),
            ("posix-mock-test", None),
            ("unicode-test", None),
            ("noexception-test", None),
        ],
    );
    assert_eq!(m.len(), 7);
}

#[test]
fn msb_catch2_reads_lowercased_ctest_and_cmake_checks() {
    let m = parsed_msb("msb_catch2/run-sh.log");
    assert_statuses(
        &m,
        &[
            ("runtests", Some(Passed)),
            ("RunTests", None),
            ("colours::colourmodecanbeexplicitlysettoansi", Some(Passed)),
            ("tag filtering: multiple", Some(Passed)),
            // `***Failed  Required regular expression not found. Regex=[…`
            ("list::tags::output", Some(Failed)),
            ("approvaltests", Some(Failed)),
            // `***Not Run (Disabled)`
            ("ctestregistration", None),
            // CMake's compiler checks count as tests.
            ("cmake_have_libc_pthread", Some(Passed)),
            ("have_flag__wall", Some(Passed)),
            ("have_flag__wglobal_constructors", Some(Failed)),
            ("have_flag__ffile_prefix_map__home_catch2__", Some(Passed)),
        ],
    );
}

#[test]
fn msb_parsers_read_the_whole_log() {
    // No harness markers for Multi-SWE-bench: the test lines outside them count too.
    let log = "test a ... ok\n>>>>> Start Test Output\ntest b ... FAILED\n>>>>> End Test Output\n";
    for grading in Grading::ALL {
        let m = logparse::parse("msb_cargo", log, grading).unwrap();
        assert_statuses(&m, &[("a", Some(Passed)), ("b", Some(Failed))]);
    }
    assert_eq!(
        logparse::msb::parser_for_repo("BurntSushi/ripgrep"),
        Some("msb_cargo")
    );
}

#[test]
fn runner_names_that_stand_for_msb_parsers_read_as_they_do() {
    for (runner, parser, fixtures) in [
        ("cargo", "msb_cargo", &["cargo-test", "no-fail-fast"][..]),
        (
            "jest",
            "msb_dayjs",
            &[
                "verbose-jest30",
                "default-jest30",
                "verbose-jest29",
                "one-file-jest29",
            ],
        ),
        ("automake", "msb_jq", &["make-check", "make-check-verbose"]),
    ] {
        assert_eq!(logparse::canonical_parser(runner), Some(parser));
        for stem in fixtures {
            let log = read(&format!("{runner}/{stem}.log"));
            let by_runner = parse4(runner, &log).unwrap();
            assert!(!by_runner.is_empty(), "{runner}/{stem}");
            assert_eq!(by_runner, parse4(parser, &log).unwrap(), "{runner}/{stem}");
        }
    }
}

#[test]
fn jest_reads_files_and_titles_of_verbose_output() {
    for rel in ["jest/verbose-jest30.log", "jest/verbose-jest29.log"] {
        let m = parsed_msb(rel);
        assert_statuses(
            &m,
            &[
                // Each file is a test, and the current suite of the titles after it.
                ("test/math.test.js", Some(Failed)),
                ("test/all-pass.test.js", Some(Passed)),
                ("test/all-pass.test.js:one", Some(Passed)),
                // Describe blocks are not part of the id; the time is cut.
                ("test/math.test.js:adds two numbers", Some(Passed)),
                ("test/math.test.js:slow test", Some(Passed)),
                ("test/math.test.js:fails on purpose", Some(Failed)),
                ("test/strings.test.js:throws", Some(Failed)),
                // `(edge case)` has no number: kept.
                ("test/math.test.js:adds negatives (edge case)", Some(Passed)),
                // Skipped (`○ skipped …`) and todo (`✎ todo …`) tests are not read.
                ("test/math.test.js:skipped test", None),
                ("test/math.test.js:todo test", None),
                // Lines a test printed count: jest shows strings.test.js's console output
                // before its `FAIL test/strings.test.js` line, so under math.test.js.
                ("test/math.test.js:fake printed pass", Some(Passed)),
                ("test/fake.test.js", Some(Passed)),
                ("test/strings.test.js:unicode title — café ✓", Some(Passed)),
            ],
        );
        // `same title` at the top of `strings` and in `strings > nested`: one id.
        assert_eq!(
            m.keys().filter(|k| k.ends_with(":same title")).count(),
            1,
            "{rel}"
        );
    }
    // Without `--verbose`, several files give one line each: only the files are read.
    let m = parsed_msb("jest/default-jest30.log");
    assert_statuses(
        &m,
        &[
            ("test/math.test.js", Some(Failed)),
            ("test/all-pass.test.js", Some(Passed)),
            ("test/math.test.js:adds two numbers", None),
        ],
    );
    // One file: jest is verbose unasked.
    let m = parsed_msb("jest/one-file-jest29.log");
    assert_eq!(
        status(&m, "test/math.test.js:adds two numbers"),
        Some(Passed)
    );
}

#[test]
fn mocha_reads_spec_reporter_titles() {
    for rel in [
        "mocha/spec-mocha12.log",
        "mocha/spec-mocha10.log",
        "mocha/spec-mocha5.log",
        "mocha/spec-mocha3.log",
    ] {
        let m = parsed_msb(rel);
        assert_statuses(
            &m,
            &[
                // `✔` (mocha 9 and later) and `✓` (before) alike.
                ("adds two numbers", Some(Passed)),
                ("slow test", Some(Passed)),
                ("adds negatives (edge case)", Some(Passed)),
                ("fails on purpose", Some(Failed)),
                ("throws", Some(Failed)),
                // A passing test whose title starts like a failure is passed.
                ("2) a title that looks like a failure", Some(Passed)),
                // Pending tests (`- title`) are skipped.
                ("skipped test", Some(Skipped)),
                ("pending test without body", Some(Skipped)),
                // Printed by a test, read as the spec reporter's own lines.
                ("fake printed pass", Some(Passed)),
                ("fake printed failure", Some(Failed)),
                ("same title", Some(Passed)),
            ],
        );
    }
    // The failure summary's `1) math` names the outer describe block (mocha 5 and later);
    // mocha 3's names the test by its full title, with a colon.
    for rel in [
        "mocha/spec-mocha12.log",
        "mocha/spec-mocha10.log",
        "mocha/spec-mocha5.log",
    ] {
        let m = parsed_msb(rel);
        assert_statuses(&m, &[("math", Some(Failed)), ("strings", Some(Failed))]);
    }
    let m = parsed_msb("mocha/spec-mocha3.log");
    assert_statuses(
        &m,
        &[
            ("math", None),
            ("math add fails on purpose:", Some(Failed)),
            ("strings nested throws:", Some(Failed)),
        ],
    );
    // A failing `before all` hook: mocha 10 and 12 name the test it was for, and that test
    // fails; mocha 3 and 5 name only the hook.
    for rel in ["mocha/spec-mocha12.log", "mocha/spec-mocha10.log"] {
        let m = parsed_msb(rel);
        assert_statuses(
            &m,
            &[
                ("never runs", Some(Failed)),
                ("\"before all\" hook for \"never runs\"", None),
            ],
        );
    }
    let m = parsed_msb("mocha/spec-mocha5.log");
    assert_eq!(status(&m, "\"before all\" hook"), Some(Failed));
}

#[test]
fn mocha_reads_mocha5_spec_output_as_vscodes_parse_log_does() {
    // What Multi-SWE-bench's own method gives on this log, printed once, from this
    // repository's root with the harness at 24f493f8 in /tmp/msb and a Python that imports it
    // (dataclasses-json 0.6.7, unidiff), by:
    // python3 -c 'import sys; sys.path.insert(0, "/tmp/msb")
    // from multi_swe_bench.harness.repos.typescript.microsoft.vscode import vscode
    // r = vscode.parse_log(None, open(sys.argv[1], encoding="utf-8").read())
    // print(sorted(r.passed_tests), sorted(r.failed_tests), sorted(r.skipped_tests))' \
    // tests/fixtures/logs/mocha/spec-mocha5.log
    let passed = [
        "2) a title that looks like a failure",
        "adds negatives (edge case)",
        "adds two numbers",
        "fake printed pass",
        "prints lines that look like results",
        "same title",
        "slow test",
        "top-level test",
        "unicode title — café ✔",
    ];
    let failed = [
        "\"before all\" hook",
        "fails on purpose",
        "fake printed failure",
        "hooks",
        "math",
        "strings",
        "throws",
    ];
    let skipped = ["pending test without body", "skipped test"];
    let want: StatusMap = [
        (&passed[..], Passed),
        (&failed, Failed),
        (&skipped, Skipped),
    ]
    .into_iter()
    .flat_map(|(ids, st)| ids.iter().map(move |id| (id.to_string(), st)))
    .collect();
    assert_eq!(parsed_msb("mocha/spec-mocha5.log"), want);
    // axios's reading (`msb_axios`, which `mocha` stood for before) knows only `✔`: of mocha
    // 5's passing tests it reads the one a test printed.
    let axios = parse4("msb_axios", &read("mocha/spec-mocha5.log")).unwrap();
    let passing: Vec<&String> = axios
        .iter()
        .filter(|(_, st)| **st == Passed)
        .map(|(id, _)| id)
        .collect();
    assert_eq!(passing, ["fake printed pass"]);
}

#[test]
fn mocha_json_reads_npm_run_output_as_express_does() {
    // What Multi-SWE-bench's own method gives on these logs, printed once, from this
    // repository's root with the harness at 24f493f8 in /tmp/msb and a Python that imports it
    // (dataclasses-json 0.6.7, unidiff), by:
    // python3 -c 'import sys; sys.path.insert(0, "/tmp/msb")
    // from multi_swe_bench.harness.repos.javascript.expressjs.express import Express
    // r = Express.parse_json_log(None, open(sys.argv[1], encoding="utf-8").read())
    // print(sorted(r.passed_tests), sorted(r.failed_tests), sorted(r.skipped_tests))' \
    // tests/fixtures/logs/mocha_json/npm-run-mocha10.log
    // and the same for npm-run-mocha5.log (its hook failure is `hooks "before all" hook`).
    let passed = [
        "math 2) a title that looks like a failure",
        "math add adds negatives (edge case)",
        "math add adds two numbers",
        "math slow test",
        "strings nested same title",
        "strings prints lines that look like results",
        "strings same title",
        "strings unicode title — café ✔",
        "top-level test",
    ];
    let skipped = [
        "math add pending test without body",
        "math add skipped test",
    ];
    for (rel, hook) in [
        (
            "mocha_json/npm-run-mocha10.log",
            "hooks \"before all\" hook for \"never runs\"",
        ),
        ("mocha_json/npm-run-mocha5.log", "hooks \"before all\" hook"),
    ] {
        let failed = [hook, "math add fails on purpose", "strings nested throws"];
        let want: StatusMap = [
            (&passed[..], Passed),
            (&failed, Failed),
            (&skipped, Skipped),
        ]
        .into_iter()
        .flat_map(|(ids, st)| ids.iter().map(move |id| (id.to_string(), st)))
        .collect();
        let log = read(rel);
        // npm's lines and what a test printed come before the report.
        assert!(log.starts_with("\n> mocha"), "{rel}");
        assert!(log.contains("  9) fake printed failure\n{\n"), "{rel}");
        assert_eq!(parsed_msb(rel), want, "{rel}");
        // The spec reader finds only the printed lines in it.
        let spec = parse4("mocha", &log).unwrap();
        assert_eq!(
            spec.keys().collect::<Vec<_>>(),
            ["fake printed failure", "fake printed pass"]
        );
    }
}

#[test]
fn vitest_reads_verbose_lines_whole() {
    for rel in ["vitest/verbose-vitest4.log", "vitest/verbose-vitest3.log"] {
        let m = parsed_msb(rel);
        assert_statuses(
            &m,
            &[
                // File, describe blocks and title, the time cut.
                (
                    "test/math.test.js > math > add > adds two numbers",
                    Some(Passed),
                ),
                ("test/math.test.js > math > slow test", Some(Passed)),
                (
                    "test/math.test.js > math > add > fails on purpose",
                    Some(Failed),
                ),
                ("test/strings.test.js > strings > same title", Some(Passed)),
                (
                    "test/strings.test.js > strings > nested > same title",
                    Some(Passed),
                ),
                (
                    "test/strings.test.js > strings > nested > throws",
                    Some(Failed),
                ),
                // `handles 10s 0ms`: only the last number is cut.
                ("test/math.test.js > math > handles 10s", Some(Passed)),
                // `↓` (skipped) and `□` (todo) lines are not read.
                ("test/math.test.js > math > skipped test", None),
                ("test/math.test.js > math > todo test", None),
                // A test's console output, unprefixed, is read too.
                ("fake printed failure", Some(Failed)),
            ],
        );
    }
    // The default reporter: a line per passing file (its count kept), titles without their
    // file or blocks for files that failed.
    let m = parsed_msb("vitest/default-vitest4.log");
    assert_statuses(
        &m,
        &[
            ("test/all-pass.test.js (2 tests)", Some(Passed)),
            ("adds two numbers", Some(Passed)),
            ("fails on purpose", Some(Failed)),
            ("test/math.test.js > math > add > adds two numbers", None),
        ],
    );
    // vitest colours its output unless NO_COLOR is set, and `\x1b[32m✓` is not `✓`.
    let m = parsed_msb("vitest/verbose-color-vitest4.log");
    assert_eq!(
        m.into_iter().collect::<Vec<_>>(),
        [("fake printed failure".to_string(), Failed)]
    );
}

#[test]
fn tap_names_results_by_their_subtests() {
    let m = parsed_msb("tap/node-test-node20.log");
    assert_statuses(
        &m,
        &[
            ("math:add:adds two numbers", Some(Passed)),
            ("math:add:fails on purpose", Some(Failed)),
            ("top-level test:subtest passes", Some(Passed)),
            ("top-level test:subtest fails", Some(Failed)),
            ("unicode title — café", Some(Passed)),
            ("strings:nested:deep", Some(Passed)),
            // Skips and todos pass, their directive in the id.
            ("math:skipped test # SKIP not today", Some(Passed)),
            ("math:todo test # TODO", Some(Passed)),
            // A suite's own line is named after its last subtest's parents.
            ("math:add:add", Some(Failed)),
            ("math:math", Some(Failed)),
            ("top-level test:top-level test", Some(Failed)),
            // node:test turns what a test printed into `# ` comments.
            ("fake printed pass", None),
        ],
    );
    assert_eq!(
        parsed_msb("tap/node-test-one-file.log")
            .into_keys()
            .collect::<Vec<_>>(),
        [
            "strings:nested:deep",
            "strings:nested:nested",
            "strings:nested:strings",
            "strings:uppercases"
        ]
    );
    // node-tap: each assertion is a result; a subtest's line carries `# time=…`, which
    // changes from run to run.
    let m = parsed_msb("tap/node-tap21.log");
    assert_statuses(
        &m,
        &[
            ("test/math.test.js:math:adds two numbers", Some(Passed)),
            ("test/math.test.js:math:fails on purpose", Some(Failed)),
            ("test/math.test.js:a failing assertion", Some(Failed)),
            ("test/strings.test.js:strings:unicode — café", Some(Passed)),
        ],
    );
    assert!(
        m.keys()
            .any(|k| k.starts_with("test/math.test.js:top-level test # time=")),
        "{m:?}"
    );
}

#[test]
fn cargo_reads_libtest_lines_of_every_binary_that_ran() {
    let m = parsed_msb("cargo/no-fail-fast.log");
    assert_statuses(
        &m,
        &[
            ("tests::adds", Some(Passed)),
            ("tests::nested::café", Some(Passed)),
            ("tests::fails_on_purpose", Some(Failed)),
            ("tests::ignored_with_reason", Some(Skipped)),
            ("tests::extra_passes", Some(Passed)),
            ("integration_passes", Some(Passed)),
            // `... - should panic ... ok` and doc tests are not read.
            ("tests::overflows", None),
            // Captured output shown with a failure.
            ("fake::printed", Some(Passed)),
        ],
    );
    // Without `--no-fail-fast` cargo stops after the failing binary.
    let m = parsed_msb("cargo/cargo-test.log");
    assert_statuses(
        &m,
        &[
            ("tests::fails_on_purpose", Some(Failed)),
            ("tests::extra_passes", None),
            ("integration_passes", None),
        ],
    );
}

#[test]
fn ctest_reads_passed_and_failed_result_lines() {
    let m = parsed_msb("ctest/ctest.log");
    assert_statuses(
        &m,
        &[
            // googletest cases by gtest_discover_tests, Catch2 test cases by
            // catch_discover_tests, and plain add_test commands.
            ("Calc.Adds", Some(Passed)),
            ("Calc.Fails", Some(Failed)),
            ("Values/AddParam.IsPositive/-5", Some(Failed)),
            ("Typed.Zero<int>", Some(Passed)),
            ("adds two numbers", Some(Passed)),
            ("fails on purpose", Some(Failed)),
            ("Mixed Case Name (with parens)", Some(Passed)),
            ("shell.fails", Some(Failed)),
            ("shell.expected-to-fail", Some(Passed)),
            // `***Failed  Required regular expression not found. …`
            ("shell.regex-not-found", Some(Failed)),
            // Neither passed nor failed to this reading: a crash, a timeout, a skip, a test
            // that did not run.
            ("shell.segfaults", None),
            ("shell.times-out", None),
            ("shell.skips", None),
            ("Calc.Skips", None),
            ("shell.missing", None),
            ("Calc.Disabled", None),
        ],
    );
    assert_eq!(m.len(), 16);
    // `ctest -j 4` after the build (results out of order) and `ctest -V` (every test's own
    // output, googletest's `[       OK ]` lines among it) read the same.
    assert_eq!(parsed_msb("ctest/run-sh.log"), m);
    assert_eq!(parsed_msb("ctest/verbose.log"), m);
}

#[test]
fn googletest_reads_ok_and_failed_lines() {
    let m = parsed_msb("googletest/make.log");
    assert_statuses(
        &m,
        &[
            ("Calc.Adds", Some(Passed)),
            ("Calc.Fails", Some(Failed)),
            ("CalcFixture.UsesBase", Some(Passed)),
            ("Typed/0.Zero", Some(Passed)),
            ("Values/AddParam.IsPositive/0", Some(Passed)),
            // `[  FAILED  ] Values/AddParam.IsPositive/2, where GetParam() = -5 (0 ms)`: not
            // one word before the time, not read.
            ("Values/AddParam.IsPositive/2", None),
            // `[  SKIPPED ]` and `[ DISABLED ]` are not read.
            ("Calc.Skips", None),
            ("Calc.DISABLED_Disabled", None),
            // Printed by a test.
            ("Fake.Printed", Some(Passed)),
            ("Fake.PrintedFailure", Some(Failed)),
        ],
    );
    assert_eq!(m.len(), 10);
    // `--gtest_color=yes` writes `\x1b[0;32m[       OK ] \x1b[m`; the pattern wants `\x1b[0m`.
    let m = parsed_msb("googletest/color.log");
    assert_eq!(
        m.into_keys().collect::<Vec<_>>(),
        ["Fake.Printed", "Fake.PrintedFailure"]
    );
    // `--gtest_brief=1` prints failures only.
    assert_eq!(
        status(&parsed_msb("googletest/brief.log"), "Calc.Adds"),
        None
    );
}

#[test]
fn automake_reads_the_harness_results() {
    let m = parsed_msb("automake/make-check.log");
    assert_statuses(
        &m,
        &[
            ("tests/passes.test", Some(Passed)),
            ("tests/fails.test", Some(Failed)),
            ("tests/skips.test", Some(Skipped)),
            // XFAIL and ERROR are not read.
            ("tests/xfails.test", None),
            ("tests/errors.test", None),
            // What a test printed goes to its .log file, not to make's output.
            ("tests/fake.test", None),
        ],
    );
    // With VERBOSE=1 the test-suite.log is printed: its `FAIL: tests/fails` headers count.
    let m = parsed_msb("automake/make-check-verbose.log");
    assert_statuses(
        &m,
        &[
            ("tests/fails", Some(Failed)),
            ("tests/skips", Some(Skipped)),
        ],
    );
}
