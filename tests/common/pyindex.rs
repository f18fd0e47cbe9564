//! A Python package index on 127.0.0.1, shaped like PyPI's simple API (PEP 503 HTML, PEP 691
//! JSON with PEP 700's `versions`, `size` and `upload-time`), serving the wheels and sdists of
//! one directory. A real HTTP/1.1 server: one thread per connection, keep-alive, every answer
//! with a Content-Length.
//!
//! The directory is read again for every answer, so a test may add files after `start`. A
//! dist's `requires-python` comes from the sidecar `<file>.meta.json` (`{"requires_python":
//! …}`) that `tests/fixtures/mkdists.py` writes beside it; sidecars are not listed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use swe_ark::env::proxy::percent_encode;
use swe_ark::env::pylock::normalize;

pub const DEFAULT_UPLOAD_TIME: &str = "2020-01-01T00:00:00Z";
const JSON_TYPE: &str = "application/vnd.pypi.simple.v1+json";
const HTML_TYPE: &str = "text/html; charset=utf-8";

struct State {
    dir: PathBuf,
    upload_times: HashMap<String, String>,
    yanked: HashMap<String, String>,
    vanished: HashSet<String>,
    log: Vec<String>,
    /// Open connections (a clone of each), to close them on drop.
    conns: HashMap<u64, TcpStream>,
    next_conn: u64,
}

/// The running index; stops accepting and closes its connections when dropped.
pub struct PyIndex {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl PyIndex {
    /// Serves every file in `dir` (wheels and sdists); the project name is parsed from the
    /// file name and normalized per PEP 503.
    pub fn start(dir: &Path) -> PyIndex {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("a local address").port();
        let state = Arc::new(Mutex::new(State {
            dir: dir.to_path_buf(),
            upload_times: HashMap::new(),
            yanked: HashMap::new(),
            vanished: HashSet::new(),
            log: Vec::new(),
            conns: HashMap::new(),
            next_conn: 0,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let id = {
                    let mut g = lock(&s);
                    g.next_conn += 1;
                    let id = g.next_conn;
                    if let Ok(c) = stream.try_clone() {
                        g.conns.insert(id, c);
                    }
                    id
                };
                let s = s.clone();
                std::thread::spawn(move || {
                    serve_connection(stream, &s, port);
                    lock(&s).conns.remove(&id);
                });
            }
        });
        PyIndex { port, state, stop }
    }

    /// The simple API's root, e.g. `http://127.0.0.1:PORT/simple`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/simple", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The upload time a file is listed with (RFC 3339); `2020-01-01T00:00:00Z` unless set.
    pub fn set_upload_time(&self, filename: &str, rfc3339: &str) {
        lock(&self.state)
            .upload_times
            .insert(filename.to_string(), rfc3339.to_string());
    }

    /// Lists the file as yanked (PEP 592) with `reason` (an empty reason: yanked, no reason).
    pub fn yank(&self, filename: &str, reason: &str) {
        lock(&self.state)
            .yanked
            .insert(filename.to_string(), reason.to_string());
    }

    /// Still listed, but a GET of the file answers 404.
    pub fn vanish(&self, filename: &str) {
        lock(&self.state).vanished.insert(filename.to_string());
    }

    /// Every request so far as `"METHOD TARGET"` (e.g. `"GET /simple/alpha/"`), in order.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state).log.clone()
    }

    /// How many requests were for files (downloads), so far.
    pub fn file_requests(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.contains("/files/"))
            .count()
    }
}

impl Drop for PyIndex {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread so that it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for (_, c) in lock(&self.state).conns.drain() {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

/// One request's head.
struct Request {
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    fn keep_alive(&self) -> bool {
        if self.version == "HTTP/1.1" {
            !self.has_token("connection", "close")
        } else {
            self.has_token("connection", "keep-alive")
        }
    }
}

struct Response {
    status: u16,
    content_type: &'static str,
    extra: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Response {
    fn ok(content_type: &'static str, body: Vec<u8>) -> Self {
        Response {
            status: 200,
            content_type,
            extra: vec![],
            body,
        }
    }

    fn error(status: u16) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            extra: vec![],
            body: format!("{} {}\n", status, reason(status)).into_bytes(),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        501 => "Not Implemented",
        _ => "Unknown",
    }
}

/// Reads one line (up to LF) as text without its line end; `None` at the end of the stream.
fn read_line(reader: &mut impl BufRead) -> Option<String> {
    let mut buf = Vec::new();
    match reader.read_until(b'\n', &mut buf) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                buf.pop();
            }
            Some(String::from_utf8_lossy(&buf).into_owned())
        }
    }
}

/// The next request's head; `Err(())` if the stream ended, `Ok(None)` if it is malformed.
fn read_request(reader: &mut impl BufRead) -> Result<Option<Request>, ()> {
    // Empty lines before a request line are allowed (RFC 9112 section 2.2).
    let first = loop {
        let line = read_line(reader).ok_or(())?;
        if !line.is_empty() {
            break line;
        }
    };
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader).ok_or(())?;
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let mut parts = first.split_whitespace();
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Ok(None);
    };
    if !version.starts_with("HTTP/1.") {
        return Ok(None);
    }
    Ok(Some(Request {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
    }))
}

fn serve_connection(stream: TcpStream, state: &Arc<Mutex<State>>, port: u16) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut writer = stream;
    loop {
        let req = match read_request(&mut reader) {
            Err(()) => return,
            Ok(None) => {
                let _ = write_response(&mut writer, &Response::error(400), false, false);
                return;
            }
            Ok(Some(req)) => req,
        };
        lock(state)
            .log
            .push(format!("{} {}", req.method, req.target));
        if req.header("transfer-encoding").is_some() {
            // No request here has a body; a chunked one is not worth reading.
            let _ = write_response(&mut writer, &Response::error(501), false, false);
            return;
        }
        if let Some(n) = req.header("content-length") {
            let Ok(n) = n.parse::<u64>() else {
                let _ = write_response(&mut writer, &Response::error(400), false, false);
                return;
            };
            if std::io::copy(&mut (&mut reader).take(n), &mut std::io::sink()).ok() != Some(n) {
                return;
            }
        }
        let keep = req.keep_alive();
        let head = req.method == "HEAD";
        let resp = answer(&req, state, port);
        if write_response(&mut writer, &resp, keep, head).is_err() || !keep {
            let _ = writer.shutdown(Shutdown::Write);
            return;
        }
    }
}

fn write_response(
    w: &mut TcpStream,
    resp: &Response,
    keep: bool,
    head: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n",
        resp.status,
        reason(resp.status),
        resp.content_type,
        resp.body.len(),
        if keep { "keep-alive" } else { "close" },
    );
    for (k, v) in &resp.extra {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if !head {
        bytes.extend_from_slice(&resp.body);
    }
    w.write_all(&bytes)?;
    w.flush()
}

fn answer(req: &Request, state: &Arc<Mutex<State>>, port: u16) -> Response {
    if req.method != "GET" && req.method != "HEAD" {
        let mut r = Response::error(405);
        r.extra.push(("Allow", "GET, HEAD".to_string()));
        return r;
    }
    let path = req.target.split(['?', '#']).next().unwrap_or("");
    let Some(path) = percent_decode(path) else {
        return Response::error(400);
    };
    let json = req
        .header("accept")
        .is_some_and(|a| a.to_ascii_lowercase().contains(JSON_TYPE));
    // A snapshot, so that connections do not wait on each other's disk reads.
    let st = {
        let g = lock(state);
        Snapshot {
            dir: g.dir.clone(),
            upload_times: g.upload_times.clone(),
            yanked: g.yanked.clone(),
            vanished: g.vanished.clone(),
        }
    };
    if path == "/simple" || path == "/simple/" {
        return project_list(&scan(&st), json);
    }
    if let Some(name) = path.strip_prefix("/simple/") {
        let name = name.strip_suffix('/').unwrap_or(name);
        if name.is_empty() || name.contains('/') {
            return Response::error(404);
        }
        let project = normalize(name);
        let dists: Vec<Dist> = scan(&st)
            .into_iter()
            .filter(|d| d.project == project)
            .collect();
        if dists.is_empty() {
            return Response::error(404);
        }
        return project_page(&project, &dists, json, port);
    }
    if let Some(filename) = path.strip_prefix("/files/") {
        if filename.contains('/') || st.vanished.contains(filename) || parse(filename).is_none() {
            return Response::error(404);
        }
        return match fs::read(st.dir.join(filename)) {
            Ok(bytes) => Response::ok("application/octet-stream", bytes),
            Err(_) => Response::error(404),
        };
    }
    Response::error(404)
}

/// What an answer needs of the state.
struct Snapshot {
    dir: PathBuf,
    upload_times: HashMap<String, String>,
    yanked: HashMap<String, String>,
    vanished: HashSet<String>,
}

/// One listed file.
struct Dist {
    filename: String,
    project: String,
    version: String,
    sha256: String,
    size: u64,
    requires_python: Option<String>,
    upload_time: String,
    yanked: Option<String>,
}

/// (normalized project, version) of a wheel or sdist file name; `None` for anything else.
fn parse(filename: &str) -> Option<(String, String)> {
    if let Some(stem) = filename.strip_suffix(".whl") {
        let mut parts = stem.split('-');
        let (name, version) = (parts.next()?, parts.next()?);
        if parts.count() < 3 || name.is_empty() {
            return None;
        }
        return Some((normalize(name), version.to_string()));
    }
    let stem = [".tar.gz", ".zip", ".tar.bz2", ".tgz"]
        .iter()
        .find_map(|ext| filename.strip_suffix(ext))?;
    let (name, version) = stem.rsplit_once('-')?;
    if name.is_empty() || version.is_empty() {
        return None;
    }
    Some((normalize(name), version.to_string()))
}

/// A sort key for versions good enough for listing: numeric parts as numbers.
fn version_key(v: &str) -> Vec<(u64, String)> {
    v.split(['.', '-', '+'])
        .map(|p| match p.parse::<u64>() {
            Ok(n) => (n, String::new()),
            Err(_) => (0, p.to_string()),
        })
        .collect()
}

/// Every wheel and sdist in the directory, by project, version and file name.
fn scan(st: &Snapshot) -> Vec<Dist> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(&st.dir) else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(filename) = e.file_name().into_string() else {
            continue;
        };
        let Some((project, version)) = parse(&filename) else {
            continue;
        };
        let path = e.path();
        if !path.is_file() {
            continue;
        }
        let Ok(bytes) = fs::read(&path) else {
            continue;
        };
        let requires_python = fs::read(st.dir.join(format!("{filename}.meta.json")))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("requires_python")?.as_str().map(str::to_string))
            .filter(|s| !s.is_empty());
        out.push(Dist {
            sha256: super::sha256_hex(&bytes),
            size: bytes.len() as u64,
            requires_python,
            upload_time: st
                .upload_times
                .get(&filename)
                .cloned()
                .unwrap_or_else(|| DEFAULT_UPLOAD_TIME.to_string()),
            yanked: st.yanked.get(&filename).cloned(),
            filename,
            project,
            version,
        });
    }
    out.sort_by(|a, b| {
        (&a.project, version_key(&a.version), &a.filename).cmp(&(
            &b.project,
            version_key(&b.version),
            &b.filename,
        ))
    });
    out
}

fn project_list(dists: &[Dist], json: bool) -> Response {
    let mut names: Vec<&str> = dists.iter().map(|d| d.project.as_str()).collect();
    names.dedup();
    if json {
        let body = serde_json::json!({
            "meta": {"api-version": "1.1"},
            "projects": names.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>(),
        });
        return Response::ok(JSON_TYPE, body.to_string().into_bytes());
    }
    let mut html = String::from(
        "<!DOCTYPE html>\n<html>\n<head><meta name=\"pypi:repository-version\" content=\"1.1\"><title>Simple index</title></head>\n<body>\n",
    );
    for n in names {
        html.push_str(&format!(
            "<a href=\"/simple/{}/\">{}</a><br/>\n",
            escape(&percent_encode(n)),
            escape(n)
        ));
    }
    html.push_str("</body>\n</html>\n");
    Response::ok(HTML_TYPE, html.into_bytes())
}

fn project_page(project: &str, dists: &[Dist], json: bool, port: u16) -> Response {
    let file_url = |d: &Dist| {
        format!(
            "http://127.0.0.1:{port}/files/{}",
            percent_encode(&d.filename)
        )
    };
    if json {
        let mut versions: Vec<&str> = dists.iter().map(|d| d.version.as_str()).collect();
        versions.dedup();
        let files: Vec<serde_json::Value> = dists
            .iter()
            .map(|d| {
                let mut f = serde_json::Map::new();
                f.insert("filename".into(), d.filename.clone().into());
                f.insert("url".into(), file_url(d).into());
                let hashes: BTreeMap<&str, &str> = [("sha256", d.sha256.as_str())].into();
                f.insert("hashes".into(), serde_json::json!(hashes));
                if let Some(rp) = &d.requires_python {
                    f.insert("requires-python".into(), rp.clone().into());
                }
                f.insert("upload-time".into(), d.upload_time.clone().into());
                f.insert("size".into(), d.size.into());
                f.insert(
                    "yanked".into(),
                    match &d.yanked {
                        None => false.into(),
                        // An empty string would read as "not yanked".
                        Some(r) if r.is_empty() => true.into(),
                        Some(r) => r.clone().into(),
                    },
                );
                serde_json::Value::Object(f)
            })
            .collect();
        let body = serde_json::json!({
            "meta": {"api-version": "1.1"},
            "name": project,
            "versions": versions,
            "files": files,
        });
        return Response::ok(JSON_TYPE, body.to_string().into_bytes());
    }
    let title = escape(project);
    let mut html = format!(
        "<!DOCTYPE html>\n<html>\n<head><meta name=\"pypi:repository-version\" content=\"1.1\"><title>Links for {title}</title></head>\n<body>\n<h1>Links for {title}</h1>\n"
    );
    for d in dists {
        let mut attrs = format!(
            "href=\"{}\"",
            escape(&format!("{}#sha256={}", file_url(d), d.sha256))
        );
        if let Some(rp) = &d.requires_python {
            attrs.push_str(&format!(" data-requires-python=\"{}\"", escape(rp)));
        }
        if let Some(r) = &d.yanked {
            attrs.push_str(&format!(" data-yanked=\"{}\"", escape(r)));
        }
        html.push_str(&format!("<a {attrs}>{}</a><br/>\n", escape(&d.filename)));
    }
    html.push_str("</body>\n</html>\n");
    Response::ok(HTML_TYPE, html.into_bytes())
}

/// HTML escaping for text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
