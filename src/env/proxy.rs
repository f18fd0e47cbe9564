//! The package index pip resolves through at lock time: a PEP 503 simple index on 127.0.0.1
//! in front of the real one (PyPI, or any simple index).
//!
//! It does three things no installer flag does for every pip a context may need (3.6's
//! included): it hides every file uploaded after the cutoff, so unpinned requirements resolve
//! "as of then" (the rules of the cutoff, and its two exceptions — explicit pins and the
//! installers' floor — are in [`asof`](super::asof)); it records every file an installer
//! downloads, isolated build environments included, which is how build backends get locked;
//! and it stores each file in the object store as it passes, refusing one whose content does
//! not match the hash the index published.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::digest::Sha256Digest;
use crate::local_server::{Bound, LocalServer};
use crate::store::{ObjectError, ObjectStore};

use super::asof::{self, INSTALLERS};
use super::pylock::{normalize, parse_filename, same_version};

/// One file the index lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub project: String,
    pub filename: String,
    pub url: String,
    pub sha256: Option<String>,
    pub size: Option<u64>,
    pub upload_time: Option<String>,
    pub requires_python: Option<String>,
    pub yanked: Option<String>,
}

/// A file an installer downloaded through the proxy, now an object.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub info: FileInfo,
    pub sha256: Sha256Digest,
    pub size: u64,
}

/// Why the proxy could not hand a file over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The index lists the file but no longer serves it.
    Vanished {
        filename: String,
        url: String,
        detail: String,
    },
    /// The file's content does not hash to what the index published.
    Tampered {
        filename: String,
        expected: String,
        actual: String,
    },
    /// The index could not be reached or answered with an error.
    Upstream { url: String, detail: String },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Vanished {
                filename,
                url,
                detail,
            } => write!(
                f,
                "{filename} is listed by the index but cannot be downloaded from {url} ({detail})"
            ),
            Failure::Tampered {
                filename,
                expected,
                actual,
            } => write!(
                f,
                "{filename} hashes to {actual}, not the sha256 {expected} the index published"
            ),
            Failure::Upstream { url, detail } => write!(f, "the index at {url}: {detail}"),
        }
    }
}

pub struct ProxyConfig {
    /// The real index's simple API root, e.g. `https://pypi.org/simple`.
    pub upstream: String,
    /// Files uploaded after this instant are not offered...
    pub exclude_newer: Option<SystemTime>,
    /// ...except these exact versions (normalized project name → versions): the context's
    /// explicit `==` pins, honoured whatever their date.
    pub pins: BTreeMap<String, BTreeSet<String>>,
    /// pip, setuptools and wheel are offered as of this instant when it is later than
    /// `exclude_newer` (the interpreter's first release: older ones do not run on it).
    pub installers_as_of: Option<SystemTime>,
    /// Build tools offered as of a later instant than `exclude_newer` (normalized project
    /// name → the instant and why: [`asof::tool_floors`]).
    pub tool_floors: BTreeMap<String, (SystemTime, &'static str)>,
    /// Serve yanked files as if they were not: the index says what is yanked today, not what
    /// was yanked then (the lock still records each one's reason).
    pub allow_yanked: bool,
    pub objects: ObjectStore,
}

#[derive(Default)]
struct State {
    /// Listings as served (cutoff applied), by normalized project name.
    listings: HashMap<String, Vec<FileInfo>>,
    /// Every file listed so far, by file name.
    files: HashMap<String, FileInfo>,
    fetched: BTreeMap<String, Fetched>,
    failures: Vec<Failure>,
    /// Projects whose listing gave no upload times: the cutoff could not apply to them.
    untimed: BTreeSet<String>,
    /// Projects with no file before the cutoff, whose earliest later release was offered.
    reuploaded: BTreeSet<String>,
    /// Files of each project hidden by the cutoff (to explain a requirement nothing met).
    hidden: HashMap<String, Vec<FileInfo>>,
    /// Installers offered past the cutoff, each with the floor that admitted it.
    floors: BTreeSet<String>,
    /// Pinned releases offered past the cutoff: (project, version) → the earliest upload
    /// among their files, and the cutoff.
    pinned: BTreeMap<(String, String), (SystemTime, SystemTime)>,
    /// Releases admitted past the cutoff because a release admitted past it requires them
    /// (project → versions), and the note of each.
    required: BTreeMap<String, BTreeSet<String>>,
    required_notes: Vec<String>,
}

struct Shared {
    config: ProxyConfig,
    client: reqwest::blocking::Client,
    state: Mutex<State>,
    base: String,
}

/// The running proxy; stops when dropped.
pub struct LockProxy {
    _server: LocalServer,
    shared: Arc<Shared>,
}

impl LockProxy {
    pub fn start(config: ProxyConfig) -> io::Result<LockProxy> {
        let bound = Bound::new("the proxy")?;
        let client = reqwest::blocking::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .timeout(None)
            .user_agent(concat!("swe-ark/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(io::Error::other)?;
        let shared = Arc::new(Shared {
            config,
            client,
            state: Mutex::new(State::default()),
            base: bound.base.clone(),
        });
        let sh = shared.clone();
        let server = bound.serve(move |request| {
            let sh = sh.clone();
            std::thread::spawn(move || handle(&sh, request));
        });
        Ok(LockProxy {
            _server: server,
            shared,
        })
    }

    /// The simple API root installers are pointed at.
    pub fn url(&self) -> String {
        format!("{}/simple/", self.shared.base)
    }

    /// Every file downloaded so far, by file name.
    pub fn fetched(&self) -> Vec<Fetched> {
        self.shared.lock().fetched.values().cloned().collect()
    }

    pub fn failures(&self) -> Vec<Failure> {
        self.shared.lock().failures.clone()
    }

    /// Projects the cutoff could not apply to (their index gave no upload times).
    pub fn untimed(&self) -> Vec<String> {
        self.shared.lock().untimed.iter().cloned().collect()
    }

    /// Projects whose every file is newer than the cutoff, and what was offered instead.
    pub fn reuploaded(&self) -> Vec<String> {
        self.shared.lock().reuploaded.iter().cloned().collect()
    }

    /// Releases offered past the cutoff (explicit pins, installers as of the interpreter),
    /// each in a sentence.
    pub fn admitted(&self) -> Vec<String> {
        let st = self.shared.lock();
        let pinned = st.pinned.iter().map(|((project, v), (uploaded, cutoff))| {
            format!(
                "{project}=={v}: pinned by the context, uploaded {} after the cutoff {}; admitted",
                asof::rfc3339(*uploaded),
                asof::rfc3339(*cutoff)
            )
        });
        pinned
            .chain(st.required_notes.iter().cloned())
            .chain(st.floors.iter().cloned())
            .collect()
    }

    /// When `requirement` (as pip printed it) was left unmet for `parent`, a release the
    /// cutoff admitted anyway (a pin, or one admitted this way), admits the earliest release
    /// that satisfies it — the closest to "as of then" that lets the pinned release install —
    /// and says so. False when `parent` is not such a release or nothing satisfies it.
    pub fn admit_required(&self, requirement: &str, parent: &str) -> bool {
        let Some(req) = asof::Requirement::parse(requirement) else {
            return false;
        };
        let parent = normalize(
            parent
                .split(|c: char| c.is_whitespace() || "=<>!~[;(".contains(c))
                .next()
                .unwrap_or(""),
        );
        let mut st = self.shared.lock();
        let parent_past =
            st.pinned.keys().any(|(p, _)| *p == parent) || st.required.contains_key(&parent);
        if !parent_past {
            return false;
        }
        let Some((when, version)) = st.hidden.get(&req.name).and_then(|files| {
            files
                .iter()
                .filter_map(|f| {
                    let (_, v, _) = parse_filename(&f.filename)?;
                    req.admits(&v).then_some(())?;
                    Some((upload_time(f)?, v))
                })
                .min()
        }) else {
            return false;
        };
        let cutoff = self
            .shared
            .config
            .exclude_newer
            .map(asof::rfc3339)
            .unwrap_or_default();
        st.required_notes.push(format!(
            "{}=={version}: {parent}, admitted past the cutoff, requires {requirement}, which no \
             release before the cutoff {cutoff} satisfies; its earliest release that does \
             (uploaded {}) admitted",
            req.name,
            asof::rfc3339(when)
        ));
        st.required
            .entry(req.name.clone())
            .or_default()
            .insert(version);
        // Listed again, with the release, when pip asks next.
        st.listings.remove(&req.name);
        true
    }

    /// Why `requirement` (as pip printed it) found nothing, when the cutoff is the cause: the
    /// first release that satisfies it and when it was uploaded. None when the index has no
    /// satisfying release at all, or the project was never asked for.
    pub fn excluded(&self, requirement: &str) -> Option<Excluded> {
        let req = asof::Requirement::parse(requirement)?;
        let st = self.shared.lock();
        let (when, file) = st
            .hidden
            .get(&req.name)?
            .iter()
            .filter_map(|f| {
                let (_, v, _) = parse_filename(&f.filename)?;
                (req.admits(&v)).then_some(())?;
                Some((upload_time(f)?, f))
            })
            .min_by_key(|(t, _)| *t)?;
        Some(Excluded {
            requirement: requirement.to_string(),
            filename: file.filename.clone(),
            uploaded: when,
        })
    }

    /// Whether the index offers any file of `project` before the cutoff.
    pub fn offers(&self, project: &str) -> Result<bool, Failure> {
        Ok(self
            .shared
            .listing(&normalize(project))?
            .is_some_and(|files| !files.is_empty()))
    }
}

/// A requirement that only files hidden by the cutoff satisfy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    pub requirement: String,
    /// The earliest satisfying file.
    pub filename: String,
    pub uploaded: SystemTime,
}

fn upload_time(f: &FileInfo) -> Option<SystemTime> {
    f.upload_time
        .as_deref()
        .and_then(|t| humantime::parse_rfc3339_weak(t.trim_end_matches('Z')).ok())
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panicking handler thread must not take the lock run down with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail(&self, f: Failure) -> Failure {
        let mut st = self.lock();
        if !st.failures.contains(&f) {
            st.failures.push(f.clone());
        }
        f
    }

    /// The index's listing of `project`, as the index gives it (None: it does not know it).
    fn fetch_listing(&self, project: &str) -> Result<Option<Vec<FileInfo>>, Failure> {
        let upstream = self.config.upstream.trim_end_matches('/');
        let url = format!("{upstream}/{project}/");
        let upstream_err = |detail: String| Failure::Upstream {
            url: url.clone(),
            detail,
        };
        let resp = self
            .client
            .get(&url)
            .header(
                "Accept",
                "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
            )
            .send()
            .map_err(|e| self.fail(upstream_err(error_chain(&e))))?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(self.fail(upstream_err(format!("HTTP {status}"))));
        }
        let json = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.contains("json"));
        let page_url = resp.url().clone();
        let body = resp
            .text()
            .map_err(|e| self.fail(upstream_err(error_chain(&e))))?;
        let files = if json {
            parse_json_listing(project, &page_url, &body)
        } else {
            Ok(parse_html_listing(project, &page_url, &body))
        }
        .map_err(|e| self.fail(upstream_err(e.to_string())))?;
        Ok(Some(files))
    }

    /// Why `project` is offered as of `fl`, later than the cutoff `base`.
    fn floor_note(&self, project: &str, fl: SystemTime, base: SystemTime) -> String {
        match self.config.tool_floors.get(project) {
            Some((_, why)) => format!(
                "{project}: offered as of {}, not the cutoff {}: {why}",
                asof::rfc3339(fl),
                asof::rfc3339(base)
            ),
            None => format!(
                "{project}: offered as of {} (the interpreter's first release), not the cutoff \
             {}: older installers do not run on it",
                asof::rfc3339(fl),
                asof::rfc3339(base)
            ),
        }
    }

    /// The files of `project` the installers may see (None: the index does not know it).
    fn listing(&self, project: &str) -> Result<Option<Vec<FileInfo>>, Failure> {
        if let Some(files) = self.lock().listings.get(project) {
            return Ok(Some(files.clone()));
        }
        let Some(files) = self.fetch_listing(project)? else {
            return Ok(None);
        };
        let base_cutoff = self.config.exclude_newer;
        // The installers: never older than the interpreter's first release; build tools of a
        // broken window: as of their fix.
        // The note says which (an installer's words are those of every lock made before tool
        // floors, so those locks keep their bytes).
        let floor = match self.config.tool_floors.get(project) {
            Some((when, _)) => Some(*when),
            None => self
                .config
                .installers_as_of
                .filter(|_| INSTALLERS.contains(&project)),
        };
        let cutoff = match (base_cutoff, floor) {
            (Some(c), Some(f)) => Some(c.max(f)),
            (c, _) => c,
        };
        let mut pins: BTreeSet<String> = self.config.pins.get(project).cloned().unwrap_or_default();
        pins.extend(
            self.lock()
                .required
                .get(project)
                .cloned()
                .unwrap_or_default(),
        );
        let pinned = |f: &FileInfo| {
            parse_filename(&f.filename)
                .is_some_and(|(_, v, _)| pins.iter().any(|p| same_version(p, &v)))
        };
        let mut untimed = false;
        let mut floors = BTreeSet::new();
        let mut pinned_past: BTreeMap<(String, String), (SystemTime, SystemTime)> = BTreeMap::new();
        let mut hidden = Vec::new();
        let uploaded = upload_time;
        let all = files;
        let mut files: Vec<FileInfo> = Vec::new();
        for f in &all {
            let keep = match (cutoff, uploaded(f)) {
                (None, _) => true,
                (Some(_), None) => {
                    untimed = true;
                    true
                }
                (Some(cutoff), Some(t)) if t <= cutoff => {
                    if let (Some(base), Some(fl)) = (base_cutoff, floor)
                        && t > base
                    {
                        floors.insert(self.floor_note(project, fl, base));
                    }
                    true
                }
                (Some(cutoff), Some(t)) if pinned(f) => {
                    if let Some((_, v, _)) = parse_filename(&f.filename)
                        && self
                            .config
                            .pins
                            .get(project)
                            .is_some_and(|p| p.iter().any(|p| same_version(p, &v)))
                    {
                        let e = pinned_past
                            .entry((project.to_string(), v))
                            .or_insert((t, cutoff));
                        e.0 = e.0.min(t);
                    }
                    true
                }
                (Some(_), Some(_)) => false,
            };
            if keep {
                files.push(f.clone());
            } else {
                hidden.push(f.clone());
            }
        }
        // Every file is newer than the cutoff: the project's old releases were deleted and
        // re-uploaded later (atomicwrites was, in 2022).
        let reuploaded = if files.is_empty() && !all.is_empty() && cutoff.is_some() {
            earliest_release(project, &all, &mut files, &mut hidden)
        } else {
            None
        };
        let mut st = self.lock();
        if untimed {
            st.untimed.insert(project.to_string());
        }
        st.floors.extend(floors);
        st.pinned.extend(pinned_past);
        st.hidden.insert(project.to_string(), hidden);
        if let Some(note) = reuploaded {
            st.reuploaded.insert(note);
        }
        for f in &files {
            st.files.insert(f.filename.clone(), f.clone());
        }
        st.listings.insert(project.to_string(), files.clone());
        Ok(Some(files))
    }

    /// The object holding `filename`, downloading and storing it first if needed.
    fn object_of(&self, filename: &str) -> Result<Option<Fetched>, Failure> {
        let info = {
            let st = self.lock();
            if let Some(f) = st.fetched.get(filename) {
                return Ok(Some(f.clone()));
            }
            match st.files.get(filename) {
                Some(info) => info.clone(),
                None => return Ok(None),
            }
        };
        let expected: Option<Sha256Digest> = info.sha256.as_deref().and_then(|s| s.parse().ok());
        let objects = &self.config.objects;
        let (sha256, size) = match expected {
            // Locking again, or another context with the same file: no download.
            Some(id) if objects.has(&id) => match objects.check(&id) {
                Ok(size) => (id, size),
                Err(_) => self.download(&info, expected)?,
            },
            _ => self.download(&info, expected)?,
        };
        let fetched = Fetched { info, sha256, size };
        self.lock()
            .fetched
            .insert(filename.to_string(), fetched.clone());
        Ok(Some(fetched))
    }

    fn download(
        &self,
        info: &FileInfo,
        expected: Option<Sha256Digest>,
    ) -> Result<(Sha256Digest, u64), Failure> {
        let vanished = |detail: String| Failure::Vanished {
            filename: info.filename.clone(),
            url: info.url.clone(),
            detail,
        };
        let mut resp = self
            .client
            .get(&info.url)
            .send()
            .map_err(|e| self.fail(vanished(error_chain(&e))))?;
        if !resp.status().is_success() {
            return Err(self.fail(vanished(format!("HTTP {}", resp.status()))));
        }
        match self
            .config
            .objects
            .put_checked(&mut resp, expected.as_ref())
        {
            Ok(x) => Ok(x),
            Err(ObjectError::Mismatch { expected, actual }) => Err(self.fail(Failure::Tampered {
                filename: info.filename.clone(),
                expected: expected.hex(),
                actual: actual.hex(),
            })),
            Err(e) => Err(self.fail(vanished(e.to_string()))),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

fn respond(request: tiny_http::Request, status: u16, content_type: &str, body: Vec<u8>) {
    let mut r = tiny_http::Response::from_data(body).with_status_code(status);
    if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", content_type) {
        r.add_header(h);
    }
    let _ = request.respond(r);
}

fn handle(shared: &Shared, request: tiny_http::Request) {
    let path = request
        .url()
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .to_string();
    let method = request.method().clone();
    if !matches!(method, tiny_http::Method::Get | tiny_http::Method::Head) {
        return respond(request, 405, "text/plain", b"GET only\n".to_vec());
    }
    if path == "/simple/" || path == "/simple" {
        return respond(
            request,
            200,
            "text/html",
            b"<!DOCTYPE html><html><body></body></html>\n".to_vec(),
        );
    }
    if let Some(project) = path.strip_prefix("/simple/") {
        let project = normalize(&percent_decode(project.trim_end_matches('/')));
        return match shared.listing(&project) {
            Ok(Some(files)) => {
                let body = listing_html(&shared.base, &project, &files, shared.config.allow_yanked);
                respond(request, 200, "text/html; charset=utf-8", body.into_bytes())
            }
            Ok(None) => respond(request, 404, "text/plain", b"no such project\n".to_vec()),
            Err(f) => respond(request, 502, "text/plain", format!("{f}\n").into_bytes()),
        };
    }
    if let Some(name) = path.strip_prefix("/files/") {
        let filename = percent_decode(name);
        if method == tiny_http::Method::Head {
            // Installers fall back to a plain GET; downloading here would record a file
            // nobody installs.
            return respond(request, 405, "text/plain", b"GET only\n".to_vec());
        }
        return match shared.object_of(&filename) {
            Ok(Some(f)) => match shared
                .config
                .objects
                .ensure(&f.sha256)
                .map_err(std::io::Error::other)
                .and_then(std::fs::File::open)
            {
                Ok(file) => {
                    let mut r = tiny_http::Response::from_file(file);
                    if let Ok(h) =
                        tiny_http::Header::from_bytes("Content-Type", "application/octet-stream")
                    {
                        r.add_header(h);
                    }
                    let _ = request.respond(r);
                }
                Err(e) => respond(request, 500, "text/plain", format!("{e}\n").into_bytes()),
            },
            Ok(None) => respond(request, 404, "text/plain", b"not listed\n".to_vec()),
            Err(f) => respond(request, 502, "text/plain", format!("{f}\n").into_bytes()),
        };
    }
    respond(request, 404, "text/plain", b"not found\n".to_vec())
}

fn listing_html(base: &str, project: &str, files: &[FileInfo], unyank: bool) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html><head><title>Links for {}</title></head><body>\n",
        html_escape(project)
    );
    for f in files {
        let mut href = format!("{base}/files/{}", percent_encode(&f.filename));
        if let Some(sha) = &f.sha256 {
            href.push_str("#sha256=");
            href.push_str(sha);
        }
        out.push_str(&format!("<a href=\"{}\"", html_escape(&href)));
        if let Some(rp) = &f.requires_python {
            out.push_str(&format!(" data-requires-python=\"{}\"", html_escape(rp)));
        }
        if let Some(y) = f.yanked.as_ref().filter(|_| !unyank) {
            out.push_str(&format!(" data-yanked=\"{}\"", html_escape(y)));
        }
        out.push_str(&format!(">{}</a><br/>\n", html_escape(&f.filename)));
    }
    out.push_str("</body></html>\n");
    out
}

/// Why an index's JSON listing cannot be read.
#[derive(Debug, thiserror::Error)]
enum ListingError {
    #[error("the JSON listing does not parse: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the JSON listing has no `files` list")]
    NoFiles,
    #[error("a file in the JSON listing has no filename or url")]
    Unnamed,
    /// A file's url that does not join the page's (the url crate's words in `detail`).
    #[error("`{url}`: {detail}")]
    Url { url: String, detail: String },
}

/// The earliest release the index has now, offered (moved from `hidden` to `files`) when
/// every file of `project` is newer than the cutoff: the closest to "as of then". Returns the
/// note the lock run gives.
fn earliest_release(
    project: &str,
    all: &[FileInfo],
    files: &mut Vec<FileInfo>,
    hidden: &mut Vec<FileInfo>,
) -> Option<String> {
    let first = all
        .iter()
        .filter_map(|f| Some((upload_time(f)?, parse_filename(&f.filename)?.1)))
        .min();
    if let Some((when, version)) = first {
        *files = all
            .iter()
            .filter(|f| parse_filename(&f.filename).is_some_and(|(_, v, _)| v == version))
            .cloned()
            .collect();
        hidden.retain(|h| !files.contains(h));
        return Some(format!(
            "{project}: no file existed before the cutoff; its earliest release on the \
             index now, {version} (uploaded {}), was offered",
            humantime::format_rfc3339_seconds(when)
        ));
    }
    None
}

fn parse_json_listing(
    project: &str,
    page: &reqwest::Url,
    body: &str,
) -> Result<Vec<FileInfo>, ListingError> {
    let v: serde_json::Value = serde_json::from_str(body)?;
    let files = v
        .get("files")
        .and_then(|f| f.as_array())
        .ok_or(ListingError::NoFiles)?;
    let mut out = Vec::new();
    for f in files {
        let s = |k: &str| f.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let (Some(filename), Some(url)) = (s("filename"), s("url")) else {
            return Err(ListingError::Unnamed);
        };
        let url = page.join(&url).map_err(|e| ListingError::Url {
            detail: e.to_string(),
            url,
        })?;
        let yanked = match f.get("yanked") {
            Some(serde_json::Value::String(r)) => Some(r.clone()),
            Some(serde_json::Value::Bool(true)) => Some(String::new()),
            _ => None,
        };
        out.push(FileInfo {
            project: project.to_string(),
            filename,
            url: url.to_string(),
            sha256: f
                .get("hashes")
                .and_then(|h| h.get("sha256"))
                .and_then(|x| x.as_str())
                .map(str::to_string),
            size: f.get("size").and_then(|x| x.as_u64()),
            upload_time: s("upload-time"),
            requires_python: s("requires-python").filter(|r| !r.is_empty()),
            yanked,
        });
    }
    Ok(out)
}

fn parse_html_listing(project: &str, page: &reqwest::Url, body: &str) -> Vec<FileInfo> {
    static ANCHOR: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static ATTR: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let anchor = ANCHOR
        .get_or_init(|| regex::Regex::new(r#"(?is)<a\s([^>]*)>(.*?)</a>"#).expect("a valid regex"));
    let attr = ATTR.get_or_init(|| {
        regex::Regex::new(r#"(?is)([a-z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')"#).expect("a valid regex")
    });
    let mut out = Vec::new();
    for a in anchor.captures_iter(body) {
        let mut attrs = HashMap::new();
        for m in attr.captures_iter(&a[1]) {
            let value = m.get(2).or(m.get(3)).map(|v| v.as_str()).unwrap_or("");
            attrs.insert(m[1].to_ascii_lowercase(), html_unescape(value));
        }
        let Some(href) = attrs.get("href") else {
            continue;
        };
        let Ok(url) = page.join(href) else {
            continue;
        };
        let sha256 = url
            .fragment()
            .and_then(|f| f.strip_prefix("sha256="))
            .map(str::to_string);
        let mut bare = url.clone();
        bare.set_fragment(None);
        let filename = percent_decode(bare.path().rsplit('/').next().unwrap_or(""));
        if filename.is_empty() {
            continue;
        }
        out.push(FileInfo {
            project: project.to_string(),
            filename,
            url: bare.to_string(),
            sha256,
            size: None,
            upload_time: None,
            requires_python: attrs
                .get("data-requires-python")
                .filter(|r| !r.is_empty())
                .cloned(),
            yanked: attrs.get("data-yanked").cloned(),
        });
    }
    out
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn html_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&")
}

/// Percent-encodes everything but RFC 3986's unreserved characters: a file name as one
/// segment of a URL's path.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes (a URL's path as the file name it names); anything else is kept.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(hex) = std::str::from_utf8(&bytes[i + 1..i + 3])
            && let Ok(v) = u8::from_str_radix(hex, 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_listings_parse_with_hashes_markers_and_yanks() {
        let page = reqwest::Url::parse("https://example.org/simple/foo/").unwrap();
        let body = r#"<a href="../../files/foo-1.0.tar.gz#sha256=abc" data-requires-python="&gt;=3.6">foo-1.0.tar.gz</a>
            <a href='https://cdn.example.org/foo-1.1-py3-none-any.whl' data-yanked="broken">x</a>"#;
        let files = parse_html_listing("foo", &page, body);
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].url, "https://example.org/files/foo-1.0.tar.gz");
        assert_eq!(files[0].sha256.as_deref(), Some("abc"));
        assert_eq!(files[0].requires_python.as_deref(), Some(">=3.6"));
        assert_eq!(files[1].filename, "foo-1.1-py3-none-any.whl");
        assert_eq!(files[1].yanked.as_deref(), Some("broken"));
        let html = listing_html("http://127.0.0.1:1", "foo", &files, false);
        assert!(!listing_html("http://127.0.0.1:1", "foo", &files, true).contains("data-yanked"));
        let back = parse_html_listing(
            "foo",
            &reqwest::Url::parse("http://127.0.0.1:1/simple/foo/").unwrap(),
            &html,
        );
        assert_eq!(back[0].requires_python, files[0].requires_python);
        assert_eq!(back[1].yanked, files[1].yanked);
        assert_eq!(percent_decode(&percent_encode("a+b c.whl")), "a+b c.whl");
    }
}
