//! The test index (`common::pyindex`) and the dists `tests/fixtures/mkdists.py` makes, checked
//! by hand over raw HTTP and for real with pip: wheels, an sdist built in pip's isolated
//! environment with the `tinybuild` backend fetched from the index, and an editable install.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::pyindex::PyIndex;

const SPEC: &str = r#"[
 {"name": "tinybuild", "version": "1.0", "kind": "wheel", "backend": true},
 {"name": "alpha", "version": "1.0", "kind": "wheel", "requires": ["delta"], "requires_python": ">=3.6"},
 {"name": "alpha", "version": "2.0", "kind": "wheel", "requires": ["delta"], "requires_python": ">=3.6"},
 {"name": "beta",  "version": "1.2", "kind": "sdist", "requires": []},
 {"name": "delta", "version": "1.0", "kind": "wheel"},
 {"name": "gamma", "version": "1.0", "kind": "wheel", "tag": "py3-none-any"}
]"#;

fn mkdists_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mkdists.py")
}

fn works(python: &Path) -> bool {
    Command::new(python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The first of python3.11, 3.12, 3.10, 3.9 under `$PYENV_ROOT/versions/*/bin/`, then on PATH.
fn find_python() -> Option<PathBuf> {
    const NAMES: [&str; 4] = ["python3.11", "python3.12", "python3.10", "python3.9"];
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(root) = root {
        let mut versions: Vec<PathBuf> = std::fs::read_dir(root.join("versions"))
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        versions.sort();
        for name in NAMES {
            for v in &versions {
                let p = v.join("bin").join(name);
                if p.is_file() && works(&p) {
                    return Some(p);
                }
            }
        }
    }
    let path = std::env::var_os("PATH")?;
    for name in NAMES {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() && works(&p) {
                return Some(p);
            }
        }
    }
    None
}

/// `program args…` with no pip or Python configuration from the outside and no proxy.
fn hermetic(program: &Path) -> Command {
    let mut c = Command::new(program);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().to_string();
        let upper = k.to_ascii_uppercase();
        if upper.starts_with("PIP_")
            || upper.starts_with("PYTHON")
            || upper.starts_with("UV_")
            || upper.ends_with("_PROXY")
            || upper == "VIRTUAL_ENV"
        {
            c.env_remove(&k);
        }
    }
    c.env("PIP_CONFIG_FILE", "/dev/null")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_INPUT", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost");
    c
}

fn run_ok(c: &mut Command) -> Output {
    let out = c.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{c:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn mkdists(python: &Path, out: &Path, spec: &Path) {
    run_ok(hermetic(python).arg(mkdists_py()).arg(out).arg(spec));
}

/// Every regular file in `dir` with its bytes, by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// A raw HTTP response: status, headers (lowercase names), body.
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends `request` on `conn` and reads one response (by Content-Length; none for HEAD).
fn exchange(conn: &mut BufReader<TcpStream>, request: &str, head: bool) -> Raw {
    conn.get_mut().write_all(request.as_bytes()).unwrap();
    let mut line = String::new();
    conn.read_line(&mut line).unwrap();
    let status: u16 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        conn.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .expect("every answer has a Content-Length")
        .1
        .parse()
        .unwrap();
    let mut body = vec![0; if head { 0 } else { len }];
    conn.read_exact(&mut body).unwrap();
    Raw {
        status,
        headers,
        body,
    }
}

/// A GET of `path` accepting `accept`, and its answer.
fn fetch(conn: &mut BufReader<TcpStream>, path: &str, accept: &str) -> Raw {
    exchange(conn, &get(path, accept), false)
}

fn get(path: &str, accept: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {accept}\r\n\r\n")
}

/// [`SPEC`]'s dists, made in a temporary directory.
struct Made {
    python: PathBuf,
    tmp: tempfile::TempDir,
    spec: PathBuf,
    dists: PathBuf,
}

/// Makes [`SPEC`]'s dists; `None`, saying so, when there is no Python to make them with.
fn made_dists() -> Option<Made> {
    let Some(python) = find_python() else {
        eprintln!("skipped: no python3.9 to 3.12 found (pyenv or PATH)");
        return None;
    };
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("spec.json");
    std::fs::write(&spec, SPEC).unwrap();
    let dists = tmp.path().join("dists");
    mkdists(&python, &dists, &spec);
    Some(Made {
        python,
        tmp,
        spec,
        dists,
    })
}

#[test]
fn index_speaks_http_and_both_simple_apis() {
    // `_tmp` keeps the directory for the whole test.
    let Some(Made {
        tmp: _tmp, dists, ..
    }) = made_dists()
    else {
        return;
    };
    let index = PyIndex::start(&dists);
    let port = index.port();
    assert_eq!(index.url(), format!("http://127.0.0.1:{port}/simple"));

    let stream = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    let mut conn = BufReader::new(stream);
    // Several requests on one connection (keep-alive).
    let json = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01";
    let r = fetch(&mut conn, "/simple/Alpha", json);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.pypi.simple.v1+json")
    );
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["meta"]["api-version"], "1.1");
    assert_eq!(v["name"], "alpha");
    assert_eq!(v["versions"], serde_json::json!(["1.0", "2.0"]));
    let f = &v["files"][0];
    assert_eq!(f["filename"], "alpha-1.0-py3-none-any.whl");
    assert_eq!(
        f["url"],
        format!("http://127.0.0.1:{port}/files/alpha-1.0-py3-none-any.whl")
    );
    let whl = std::fs::read(dists.join("alpha-1.0-py3-none-any.whl")).unwrap();
    assert_eq!(f["hashes"]["sha256"], common::sha256_hex(&whl));
    assert_eq!(f["size"], whl.len());
    assert_eq!(f["requires-python"], ">=3.6");
    assert_eq!(f["upload-time"], "2020-01-01T00:00:00Z");
    assert_eq!(f["yanked"], false);

    index.yank("alpha-2.0-py3-none-any.whl", "broken <\"badly\">");
    index.set_upload_time("alpha-2.0-py3-none-any.whl", "2021-06-01T12:00:00Z");
    let r = fetch(&mut conn, "/simple/alpha/", "text/html");
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    let html = r.text();
    assert!(
        html.contains(&format!(
            "<a href=\"http://127.0.0.1:{port}/files/alpha-1.0-py3-none-any.whl#sha256={}\" data-requires-python=\"&gt;=3.6\">alpha-1.0-py3-none-any.whl</a>",
            common::sha256_hex(&whl)
        )),
        "{html}"
    );
    assert!(
        html.contains("data-yanked=\"broken &lt;&quot;badly&quot;&gt;\""),
        "{html}"
    );
    assert!(!html.contains(".meta.json"), "{html}");
    let r = fetch(&mut conn, "/simple/alpha/", json);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["files"][1]["yanked"], "broken <\"badly\">");
    assert_eq!(v["files"][1]["upload-time"], "2021-06-01T12:00:00Z");

    let r = fetch(&mut conn, "/simple/", json);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let names = common::column(&v["projects"], "name");
    assert_eq!(
        names,
        ["alpha", "beta", "delta", "gamma", "tinybuild"],
        "{v}"
    );
    let r = fetch(&mut conn, "/simple/", "text/html");
    assert!(r.text().contains("<a href=\"/simple/beta/\">beta</a>"));

    let r = fetch(&mut conn, "/simple/nothere/", json);
    assert_eq!(r.status, 404);
    let r = fetch(&mut conn, "/files/alpha-1.0-py3-none-any.whl", "*/*");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, whl);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    let head = "HEAD /files/alpha-1.0-py3-none-any.whl HTTP/1.1\r\nHost: x\r\n\r\n";
    let r = exchange(&mut conn, head, true);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(whl.len().to_string().as_str())
    );
    let r = fetch(
        &mut conn,
        "/files/alpha-1.0-py3-none-any.whl.meta.json",
        "*/*",
    );
    assert_eq!(r.status, 404);
    let r = exchange(
        &mut conn,
        "POST /simple/ HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        false,
    );
    assert_eq!(r.status, 405);

    // A file added after start is listed; a vanished one is listed but not served.
    std::fs::copy(
        dists.join("gamma-1.0-py3-none-any.whl"),
        dists.join("gamma-1.1-py3-none-any.whl"),
    )
    .unwrap();
    index.vanish("gamma-1.0-py3-none-any.whl");
    let r = fetch(&mut conn, "/simple/gamma", json);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["versions"], serde_json::json!(["1.0", "1.1"]));
    let r = fetch(&mut conn, "/files/gamma-1.0-py3-none-any.whl", "*/*");
    assert_eq!(r.status, 404);

    // `Connection: close` is honoured: the answer says so and the stream ends.
    let r = exchange(
        &mut conn,
        "GET /simple/beta/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    let mut rest = Vec::new();
    conn.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());

    let log = index.requests();
    assert_eq!(log[0], "GET /simple/Alpha");
    assert_eq!(log[1], "GET /simple/alpha/");
    assert_eq!(log.last().unwrap(), "GET /simple/beta/");
}

#[test]
fn pip_installs_wheels_an_sdist_and_an_editable_project_from_the_index() {
    let Some(Made {
        python,
        tmp,
        spec,
        dists,
    }) = made_dists()
    else {
        return;
    };
    // Deterministic: a second run makes the same bytes.
    let again = tmp.path().join("again");
    mkdists(&python, &again, &spec);
    let made = files(&dists);
    assert_eq!(made.len(), 12, "six dists and their sidecars");
    assert_eq!(made, files(&again));

    let index = PyIndex::start(&dists);
    let venv = tmp.path().join("venv");
    run_ok(hermetic(&python).args(["-m", "venv"]).arg(&venv));
    let vpy = venv.join("bin/python");
    let pip_install = |args: &[&str]| {
        run_ok(
            hermetic(&vpy)
                .args(["-m", "pip", "install", "--index-url"])
                .arg(index.url())
                .arg("--no-cache-dir")
                .args(args)
                .current_dir(tmp.path()),
        )
    };
    pip_install(&["alpha==1.0", "beta", "gamma"]);
    let out = run_ok(hermetic(&vpy).args([
        "-c",
        "import alpha, beta, gamma, delta; print(alpha.VERSION, beta.VERSION)",
    ]));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1.0 1.2");
    let log = index.requests();
    for want in [
        "GET /simple/alpha/",
        "GET /simple/beta/",
        "GET /simple/tinybuild/",
        "GET /files/beta-1.2.tar.gz",
        "GET /files/tinybuild-1.0-py3-none-any.whl",
    ] {
        assert!(log.iter().any(|r| r == want), "no {want:?} in {log:#?}");
    }
    assert!(!log.iter().any(|r| r.contains("alpha-2.0")), "{log:#?}");

    // An editable install of a project tree whose backend comes from the index.
    let project = tmp.path().join("proj");
    run_ok(
        hermetic(&python)
            .arg(mkdists_py())
            .arg("--project")
            .arg(&project)
            .args(["my-proj", "0.1", r#"["gamma>=1"]"#]),
    );
    pip_install(&["-e", project.to_str().unwrap()]);
    let out = run_ok(
        hermetic(&vpy)
            .args([
                "-c",
                "import my_proj, gamma; print(my_proj.VERSION); print(my_proj.__file__)",
            ])
            .current_dir(&venv),
    );
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("0.1"));
    let file = PathBuf::from(lines.next().unwrap());
    assert!(
        file.starts_with(project.canonicalize().unwrap()) || file.starts_with(&project),
        "{file:?} is not in {project:?}"
    );
    // Editable: a change in the tree is seen without reinstalling.
    std::fs::write(
        project.join("my_proj/__init__.py"),
        "VERSION = \"edited\"\n",
    )
    .unwrap();
    let out = run_ok(
        hermetic(&vpy)
            .args(["-c", "import my_proj; print(my_proj.VERSION)"])
            .current_dir(&venv),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "edited");
}
