//! Versions read from a mirror at each base commit, and the environment setup commit of each
//! version, as `collect` assigns them.

mod common;

use std::fs;

use common::*;
use swe_ark::collect::{assign_versions, version};
use swe_ark::dataset::Instance;
use swe_ark::mirror::{Mirror, RepoName};

fn instance(id: &str, commit: &str, created: &str) -> Instance {
    let mut v: serde_json::Value = serde_json::from_str(&fixture_instance_json()).unwrap();
    v["instance_id"] = id.into();
    v["base_commit"] = commit.into();
    v["created_at"] = created.into();
    v["version"] = "".into();
    v["environment_setup_commit"] = "".into();
    Instance::from_value(v).unwrap()
}

#[test]
fn versions_come_from_the_source_then_tags_and_each_gets_its_newest_base() {
    let t = TestContext::new();
    let up = t.path("up");
    fs::create_dir_all(up.join("src/widgets")).unwrap();
    git(&up, &["init", "-q", "-b", "main"]);
    fs::write(
        up.join("src/widgets/__init__.py"),
        "__version__ = \"1.4.0.dev0\"\n",
    )
    .unwrap();
    let c1 = git_commit_all(&up, "one", "2024-01-01T00:00:00Z");
    fs::write(
        up.join("pyproject.toml"),
        "[project]\nname = \"widgets\"\nversion = \"1.5.0\"\n",
    )
    .unwrap();
    let c2 = git_commit_all(&up, "two", "2024-02-01T00:00:00Z");
    git(&up, &["tag", "v1.5.3"]);
    // Nothing in the source says the version any more: the tags tell.
    fs::remove_file(up.join("pyproject.toml")).unwrap();
    fs::remove_file(up.join("src/widgets/__init__.py")).unwrap();
    let c3 = git_commit_all(&up, "three", "2024-03-01T00:00:00Z");
    git(&up, &["tag", "v2.0.0"]);

    let url = format!("file://{}", up.display());
    t.run_expect(&["mirror", "add", &url, "--name", "acme/widgets"], 0);
    let m = Mirror::open(
        &t.ark().join("mirrors"),
        &RepoName::parse("acme/widgets").unwrap(),
    )
    .unwrap();

    let oid = |c: &str| git2::Oid::from_str(c).unwrap();
    let v = version::detect(&m.repo, oid(&c1), "2024-01-02T00:00:00Z", None).unwrap();
    assert_eq!(
        (v.version.as_str(), v.source.as_str()),
        ("1.4", "src/widgets/__init__.py")
    );
    let v = version::detect(&m.repo, oid(&c2), "2024-02-02T00:00:00Z", None).unwrap();
    assert_eq!(
        (v.version.as_str(), v.source.as_str()),
        ("1.5", "pyproject.toml")
    );
    // Created before v2.0.0 was tagged: the newest tag before it is v1.5.3.
    let v = version::detect(&m.repo, oid(&c3), "2024-02-15T00:00:00Z", None).unwrap();
    assert_eq!(
        (v.version.as_str(), v.source.as_str()),
        ("1.5", "tag v1.5.3")
    );
    let v = version::detect(&m.repo, oid(&c3), "2024-03-05T00:00:00Z", None).unwrap();
    assert_eq!(v.version, "2.0");
    // A manifest's own rule wins where it matches, and gives way where it does not.
    let rule = swe_ark::manifest::VersionRule {
        file: "src/widgets/__init__.py".into(),
        pattern: r#"__version__ = "([^"]+)""#.into(),
    };
    let v = version::detect(&m.repo, oid(&c2), "2024-02-02T00:00:00Z", Some(&rule)).unwrap();
    assert_eq!((v.version.as_str(), v.full.as_str()), ("1.4", "1.4.0.dev0"));
    assert!(v.source.contains("manifest rule"), "{}", v.source);
    let v = version::detect(&m.repo, oid(&c3), "2024-03-05T00:00:00Z", Some(&rule)).unwrap();
    assert_eq!(v.source, "tag v2.0.0");

    let mut instances = vec![
        instance("acme__widgets-1", &c1, "2024-01-02T00:00:00Z"),
        instance("acme__widgets-2", &c1, "2024-01-20T00:00:00Z"),
        instance("acme__widgets-3", &c2, "2024-02-02T00:00:00Z"),
        instance("acme__widgets-4", &c3, "2024-02-15T00:00:00Z"),
        instance(
            "acme__widgets-5",
            "0123456789abcdef0123456789abcdef01234567",
            "2024-03-01T00:00:00Z",
        ),
    ];
    let (pins, notes) = assign_versions(&m, &mut instances, None);
    let got: Vec<(&str, &str)> = instances
        .iter()
        .map(|i| (i.version.as_str(), i.environment_setup_commit.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("1.4", c1.as_str()),
            ("1.4", c1.as_str()),
            // 1.5: instance 4 is the newest, so its base commit sets the environment up.
            ("1.5", c3.as_str()),
            ("1.5", c3.as_str()),
            ("", ""),
        ]
    );
    assert_eq!(pins.len(), 4, "each base commit in the mirror is pinned");
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains("acme__widgets-5") && notes[0].contains("not in mirror"),
        "{notes:?}"
    );
}
