//! Services, end to end and offline: a small HTTP(S) server with packages of its own (made
//! here, served by the local index, one of them an sdist) locked with the `acme/widget`
//! context, built apart from the tests' environment, and started in the tests' sandbox as a
//! stand-in for `widget.example` on ports 80 and 443 with a certificate from a CA made for the
//! run. The tests reach it by name; validation keeps the instance, says the service was used,
//! names it in a difference from the published lists; `pack` and `replay --gold` work from
//! the bundle. Bad input: a service that ends before it listens, one that never listens, and
//! packages that are not a closed set of pins.

mod common;

use common::widget::{GOLD, Widget, instance, test_patch};
use common::{TestContext, git_commit_all, pyfix, stderr};

/// The service: `python -m tinyserve PORT [CERTFILE KEYFILE]`, saying a word of its
/// dependency, the Host it was asked for and the scheme.
const SERVER: &str = r#"import http.server, ssl, sys
from tinydep.word import WORD

SCHEME = "https" if len(sys.argv) > 2 else "http"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("%s %s %s" % (WORD, self.headers["Host"], SCHEME)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
if SCHEME == "https":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print("serving on", sys.argv[1], flush=True)
server.serve_forever()
"#;

/// The test the gold patch makes pass; it reaches the stand-in by name over http and https,
/// and does not see the service's packages.
/// The CA is given both ways: in WIDGET_CA, and added to the checkout's own bundle.
const SERVICE_TEST: &str = "\n\ndef test_stand_in():\n    import importlib.util, os, ssl, urllib.request\n    import widget\n    from widget.core import add\n    assert urllib.request.urlopen('http://widget.example/').read() == b'served widget.example http'\n    for ca in (os.environ['WIDGET_CA'], os.path.join(os.path.dirname(widget.__file__), 'cacert.pem')):\n        context = ssl.create_default_context(cafile=ca)\n        assert urllib.request.urlopen('https://widget.example/', context=context).read() == b'served widget.example https'\n    assert importlib.util.find_spec('tinyserve') is None and 'SSL_CERT_FILE' not in os.environ\n    from tinydep.word import WORD\n    assert WORD == 'stale'\n    assert add(1, 1) == 2\n";

/// The checkout's own CA bundle (empty of certificates), as committed.
const BUNDLE: &str = "# the widget's own CA bundle\n";

fn manifest(python: &str) -> String {
    format!(
        r#"repo = "acme/widget"
source = "tests/services.rs"
log_parser = "pytest"

[defaults]
python = "{python}"
pip_packages = ["pytest", "tinydep"]
install = "python -m pip install -e ."
test_cmd = "pytest -rA"

[versions."1.0"]
[[versions."1.0".services]]
name = "web"
packages = ["tinyserve==1.0", "tinydep==2.0"]
command = ["python", "-m", "tinyserve", "{{port}}"]
ports = [80]
tls_ports = [443]
tls_command = ["python", "-m", "tinyserve", "{{port}}", "{{certfile}}", "{{keyfile}}"]
hosts = ["widget.example"]
ca_env = ["WIDGET_CA"]
ca_files = ["widget/cacert.pem"]

[versions."1.1"]
[[versions."1.1".services]]
name = "broken"
command = ["python", "-c", "import sys; print('no such luck'); sys.exit(3)"]

[versions."1.2"]
[[versions."1.2".services]]
name = "silent"
command = ["sleep", "600"]
start_timeout = 2

[versions."1.3"]
[[versions."1.3".services]]
name = "loose"
packages = ["tinyserve==1.0"]
command = ["python", "-m", "tinyserve", "{{port}}"]
"#
    )
}

#[test]
fn a_locked_service_stands_in_for_a_host_offline() {
    let t = TestContext::new();
    let Some(w) = Widget::new(&t) else { return };
    std::fs::write(w.manifests.join("acme__widget.toml"), manifest(&w.version)).unwrap();
    // tinydep 2.0 came out after the commit: the tests' environment resolves tinydep as of
    // then (1.0), the service pins 2.0, which passes the cutoff for the service alone.
    let spec = serde_json::json!([
        {"name": "tinyserve", "version": "1.0", "kind": "wheel", "requires": ["tinydep"],
         "files": {"tinyserve/__main__.py": SERVER}},
        {"name": "tinydep", "version": "1.0", "kind": "sdist",
         "files": {"tinydep/word.py": "WORD = 'stale'\n"}},
        {"name": "tinydep", "version": "2.0", "kind": "sdist",
         "files": {"tinydep/word.py": "WORD = 'served'\n"}},
    ]);
    pyfix::mkdists(&w.python, &t.path("dists"), &spec.to_string());
    w.index
        .set_upload_time("tinydep-2.0.tar.gz", "2022-01-01T00:00:00Z");
    std::fs::write(w.repo.join("widget/cacert.pem"), BUNDLE).unwrap();
    let base = git_commit_all(&w.repo, "a CA bundle of its own", "2021-06-02T00:00:00Z");
    let ok = |args: &[&str]| w.ok(&t, args);
    w.add_mirror(&t);

    // The lock: the service's closure, apart from the tests' packages.
    let lock_id = ok(&["env", "lock", "acme/widget", "1.0", "--commit", &base])
        .lines()
        .last()
        .unwrap()
        .to_string();
    let lock: toml::Value = toml::from_str(&ok(&["env", "show", &lock_id])).unwrap();
    let services = lock["tool"]["swe-ark"]["services"].as_array().unwrap();
    assert_eq!(services.len(), 1, "{services:?}");
    assert_eq!(services[0]["name"].as_str(), Some("web"));
    let dists: Vec<String> = services[0]["distributions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["name"].as_str().unwrap(),
                d["version"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(dists, vec!["tinydep 2.0", "tinyserve 1.0"]);
    let role = |name: &str, version: &str| {
        lock["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"].as_str() == Some(name) && p["version"].as_str() == Some(version))
            .map(|p| p["tool"]["swe-ark"]["role"].as_str().unwrap().to_string())
    };
    assert_eq!(role("tinyserve", "1.0").as_deref(), Some("service"));
    assert_eq!(role("tinydep", "2.0").as_deref(), Some("service"));
    assert_eq!(role("tinydep", "1.0").as_deref(), Some("runtime"));
    assert_eq!(role("pytest", "7.4.4").as_deref(), Some("runtime"));
    let notes = lock["tool"]["swe-ark"]["notes"].to_string();
    assert!(
        notes.contains("tinydep==2.0: pinned by a service"),
        "{notes}"
    );
    let built: serde_json::Value =
        serde_json::from_str(&ok(&["env", "build", &lock_id, "--json"])).unwrap();
    let web = std::path::PathBuf::from(built["services"]["web"].as_str().unwrap());
    assert!(web.join("bin/python").exists(), "{built}");

    // A service's packages must be a closed set of pins.
    let out = w.run(
        &t,
        &["env", "lock", "acme/widget", "1.3", "--commit", &base],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the packages of service loose are not a closed set of pins")
            && stderr(&out).contains("they also need tinydep 1.0"),
        "{}",
        stderr(&out)
    );
    ok(&["env", "lock", "acme/widget", "1.1", "--commit", &base]);
    ok(&["env", "lock", "acme/widget", "1.2", "--commit", &base]);

    let stand_in = "tests/test_core.py::test_stand_in";
    let sub = "tests/test_core.py::test_sub";
    let patch = test_patch(SERVICE_TEST);
    let with_version = |mut i: serde_json::Value, v: &str| {
        i["version"] = v.into();
        i
    };
    let instances = [
        instance(1, &patch, GOLD, &[stand_in], &[sub], &base),
        // Published as if test_sub had failed before the fix (as a flaky host would make it).
        instance(2, &patch, GOLD, &[stand_in, sub], &[], &base),
        with_version(instance(11, &patch, GOLD, &[], &[], &base), "1.1"),
        with_version(instance(12, &patch, GOLD, &[], &[], &base), "1.2"),
    ];
    let file = t.path("instances.jsonl");
    let data: String = instances.iter().map(|i| format!("{i}\n")).collect();
    std::fs::write(&file, data).unwrap();
    ok(&["import", file.to_str().unwrap()]);

    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "validate",
        "--repo",
        "acme/widget",
        "--runs",
        "1",
        "--keep-workdir",
        "--json",
    ]))
    .unwrap();
    // The bundle was seen with the CA in the runs only: the checkouts keep theirs.
    let mut checkouts = 0;
    for e in std::fs::read_dir(t.ark().join("tmp")).unwrap().flatten() {
        let bundle = e.path().join("src/widget/cacert.pem");
        if bundle.exists() {
            assert_eq!(std::fs::read_to_string(&bundle).unwrap(), BUNDLE);
            checkouts += 1;
        }
    }
    assert_eq!(checkouts, 4);
    let of = |n: u32| {
        report["validated"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["instance_id"].as_str() == Some(&format!("acme__widget-{n}")))
            .unwrap_or_else(|| panic!("no result for {n}: {report}"))
            .clone()
    };
    assert_eq!(of(1)["verdict"].as_str(), Some("kept"), "{}", of(1));
    let two = of(2);
    assert_eq!(two["verdict"].as_str(), Some("not-reproducible"), "{two}");
    let reason = two["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("FAIL_TO_PASS lacks 1 ({sub})"))
            && reason.contains("ran against 1 service on loopback")
            && reason
                .contains("web, standing in for widget.example, on 127.0.0.1 ports 80, 443 (TLS)"),
        "{reason}"
    );
    // A service that does not start is the context's problem: reported, not recorded.
    let service_failed = |n: u32| {
        let r = of(n);
        assert_eq!(r["reason_kind"].as_str(), Some("service-failed"), "{r}");
        r["reason"].as_str().unwrap().to_string()
    };
    let reason = service_failed(11);
    assert!(
        reason.contains(
            "service broken ended (exit status 3) before it accepted connections on port 18080"
        ) && reason.contains("no such luck"),
        "{reason}"
    );
    let reason = service_failed(12);
    assert!(
        reason.contains("service silent did not accept connections on port 18080 within 2 s"),
        "{reason}"
    );
    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&["ls", "--validated", "--json"])).unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");

    // The bundle carries the context and the lock: the gold patch resolves from it, offline.
    let packed = ok(&["pack", "--all-validated"]);
    let bundle = packed.split_whitespace().nth(1).unwrap().to_string();
    let unpacked = t.path("unpacked");
    ok(&["unpack", &bundle, "-o", unpacked.to_str().unwrap()]);
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(unpacked.join("expected.json")).unwrap()).unwrap();
    assert!(
        results["services"][0]
            .as_str()
            .unwrap()
            .starts_with("web, standing in for widget.example"),
        "{results}"
    );
    ok(&["replay", "--gold", "--run-id", "gold"]);
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(t.ark().join("runs/gold/gold/acme__widget-1/report.json")).unwrap(),
    )
    .unwrap();
    let r = &r["acme__widget-1"];
    assert_eq!(r["resolved"].as_bool(), Some(true), "{r}");
    assert_eq!(r["network"].as_str(), Some("isolated"));
    assert!(
        r["services"][0]
            .as_str()
            .unwrap()
            .contains("widget.example"),
        "{r}"
    );
}
