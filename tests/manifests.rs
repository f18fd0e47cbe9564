//! The shipped manifests: every SWE-bench Lite repository, every version its instances use.

mod common;

use std::path::PathBuf;

use swe_ark::manifest::Manifests;

const LITE_REPOS: [&str; 18] = [
    "astropy/astropy",
    "django/django",
    "marshmallow-code/marshmallow",
    "matplotlib/matplotlib",
    "mwaskom/seaborn",
    "pallets/flask",
    "psf/requests",
    "pvlib/pvlib-python",
    "pydata/xarray",
    "pydicom/pydicom",
    "pylint-dev/astroid",
    "pylint-dev/pylint",
    "pytest-dev/pytest",
    "pyvista/pyvista",
    "scikit-learn/scikit-learn",
    "sphinx-doc/sphinx",
    "sqlfluff/sqlfluff",
    "sympy/sympy",
];

fn shipped() -> Manifests {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests");
    Manifests::load_dir(&dir).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_lite_repository_has_a_valid_manifest() {
    let m = shipped();
    let repos: Vec<&str> = m.repos().map(|r| r.repo.as_str()).collect();
    for repo in LITE_REPOS {
        assert!(repos.contains(&repo), "no manifest for {repo}");
        let r = m.repo(repo).unwrap();
        assert!(!r.source.is_empty());
        for v in r.versions() {
            let c = r.context(&v).unwrap_or_else(|e| panic!("{e}"));
            assert!(!c.test_cmd.trim().is_empty(), "{repo} {v}: empty test_cmd");
            assert!(!c.log_parser.is_empty(), "{repo} {v}: no log parser");
        }
    }
}

#[test]
fn every_lite_dev_instance_has_its_context() {
    let Some(path) = common::lite_dev() else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let m = shipped();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let (repo, version) = (v["repo"].as_str().unwrap(), v["version"].as_str().unwrap());
        let c = m
            .context(repo, version)
            .unwrap_or_else(|e| panic!("{}: {e}", v["instance_id"]));
        assert_eq!(
            c.python.split('.').count(),
            2,
            "{repo} {version}: {}",
            c.python
        );
    }
}

/// psf/requests: the versions whose tests call httpbin.org get a loopback httpbin standing in
/// for it (http and https), those that call 0.0.0.0:7077 get one there, and those that use
/// pytest-httpbin's fixture get none; the service is the same locked closure everywhere.
#[test]
fn requests_versions_that_call_httpbin_get_a_stand_in() {
    let m = shipped();
    let r = m.repo("psf/requests").unwrap();
    let mut closures = std::collections::BTreeSet::new();
    for v in r.versions() {
        let c = r.context(&v).unwrap();
        let calls_org = c.notes.contains("call http://httpbin.org/");
        let calls_local = c.notes.contains("http://0.0.0.0:$HTTPBIN_PORT/");
        match c.services.as_slice() {
            [] => assert!(!calls_org && !calls_local, "{v}: no service: {}", c.notes),
            [s] => {
                assert_eq!(s.name, "httpbin", "{v}");
                closures.insert(s.packages.clone());
                if calls_org {
                    assert_eq!(s.hosts, vec!["httpbin.org"], "{v}");
                    assert_eq!(
                        (s.ports.as_slice(), s.tls_ports.as_slice()),
                        (&[80][..], &[443][..])
                    );
                    assert_eq!(s.ca_env(), vec!["REQUESTS_CA_BUNDLE"], "{v}");
                } else {
                    assert!(calls_local, "{v}: {}", c.notes);
                    assert_eq!(s.ports, vec![7077], "{v}");
                    assert!(s.hosts.is_empty() && s.tls_ports.is_empty(), "{v}");
                }
            }
            more => panic!("{v}: {more:?}"),
        }
    }
    assert_eq!(closures.len(), 1, "{closures:?}");
    let closure = closures.into_iter().next().unwrap();
    assert!(
        closure.contains(&"httpbin==0.10.2".to_string())
            && closure.contains(&"gunicorn==22.0.0".to_string()),
        "{closure:?}"
    );
}

/// The binary carries the manifests it was built with: a copy on another machine (the
/// air-gapped one) needs no checkout. What is built in is what `manifests/` says.
#[test]
fn the_built_in_manifests_are_the_shipped_ones() {
    let (dir, built_in) = (
        shipped(),
        Manifests::builtin().unwrap_or_else(|e| panic!("{e}")),
    );
    let repos = |m: &Manifests| -> Vec<String> { m.repos().map(|r| r.repo.clone()).collect() };
    assert_eq!(repos(&built_in), repos(&dir));
    for r in dir.repos() {
        let b = built_in.repo(&r.repo).unwrap();
        assert_eq!(b.versions(), r.versions(), "{}", r.repo);
        for v in r.versions() {
            assert_eq!(
                b.context(&v).unwrap(),
                r.context(&v).unwrap(),
                "{} {v}",
                r.repo
            );
        }
        assert!(
            b.path.starts_with(swe_ark::manifest::BUILT_IN),
            "{}",
            b.path.display()
        );
    }
}

/// The contexts generated from Multi-SWE-bench's harness (scripts/gen_msb_manifests.py): every
/// version names a parser swe-ark runs, and each handler's own `parse_log`, carried as data,
/// runs (no name it needs is missing) and reads libtest's lines where it is the cargo reader.
#[test]
fn every_generated_context_names_a_parser_that_runs() {
    let m = shipped();
    let log = "running 2 tests\ntest a::b ... ok\ntest a::c ... FAILED\n\ntest result: FAILED. 1 passed; 1 failed\n";
    let mut handlers = 0;
    for repo in m
        .repos()
        .filter(|r| r.source.starts_with("multi-swe-bench"))
    {
        for version in repo.versions() {
            let ctx = repo.context(&version).unwrap();
            assert!(
                swe_ark::logparse::is_known(&ctx.log_parser),
                "{} {version}: {}",
                repo.repo,
                ctx.log_parser
            );
            if swe_ark::logparse::handler::split(&ctx.log_parser).is_none() {
                continue;
            }
            handlers += 1;
            let id = format!("{}-1", repo.repo.replace('/', "__"));
            match swe_ark::logparse::parse_for(
                &ctx.log_parser,
                log,
                swe_ark::logparse::Grading::default(),
                &id,
            ) {
                Ok(_) => {}
                // The harness's own method may refuse a log (its TestResult raises): never
                // for a name it lacks.
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        !["NameError", "ImportError", "SyntaxError", "AttributeError"]
                            .iter()
                            .any(|bad| e.contains(bad)),
                        "{} {version}: {e}",
                        repo.repo
                    );
                }
            }
        }
    }
    assert!(handlers > 20, "only {handlers} handler parsers");
}
