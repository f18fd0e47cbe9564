//! A GitHub-shaped REST API for the demo's upstream repository, served on 127.0.0.1 so that
//! `collect` runs its real client against it: the endpoints `collect` reads (pull request
//! pages with `Link` headers, a pull request's commits and `.diff`, issues and their
//! comments), ETags answered with 304s, and the rate-limit headers GitHub sends.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::upstream::{Issue, Pull, Upstream};
use crate::digest::Sha256Digest;
use crate::local_server::{Bound, LocalServer};

/// The running API; stops when dropped.
pub struct GithubApi {
    _server: LocalServer,
    base: String,
    counts: Arc<Counts>,
}

/// What the API answered, for the demo's summary.
#[derive(Debug, Default)]
pub struct Counts {
    pub requests: AtomicU64,
    pub not_modified: AtomicU64,
    paths: Mutex<Vec<String>>,
}

struct Data {
    owner: String,
    name: String,
    pulls: Vec<Pull>,
    issues: Vec<Issue>,
    base: String,
}

impl GithubApi {
    /// Serves `upstream` as `OWNER/NAME` (`repo`) on a free port of 127.0.0.1.
    pub fn start(repo: &str, upstream: &Upstream) -> io::Result<GithubApi> {
        let (owner, name) = repo
            .split_once('/')
            .ok_or_else(|| io::Error::other(format!("`{repo}` is not OWNER/NAME")))?;
        let bound = Bound::new("the API server")?;
        let base = bound.base.clone();
        let data = Arc::new(Data {
            owner: owner.to_string(),
            name: name.to_string(),
            pulls: upstream.pulls.clone(),
            issues: upstream.issues.clone(),
            base: base.clone(),
        });
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let server = bound.serve(move |request| handle(&data, &c, request));
        Ok(GithubApi {
            _server: server,
            base,
            counts,
        })
    }

    /// The URL `collect --api-url` takes.
    pub fn url(&self) -> &str {
        &self.base
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }
}

impl Counts {
    /// The paths asked for, in order.
    pub fn paths(&self) -> Vec<String> {
        self.paths.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

fn header(name: &str, value: &str) -> Option<tiny_http::Header> {
    tiny_http::Header::from_bytes(name, value).ok()
}

fn user() -> Value {
    json!({"login": "demo-author", "id": 1, "type": "User"})
}

impl Data {
    fn repo_url(&self) -> String {
        format!("{}/repos/{}/{}", self.base, self.owner, self.name)
    }

    fn pull_json(&self, p: &Pull) -> Value {
        let url = format!("{}/pulls/{}", self.repo_url(), p.number);
        json!({
            "url": url,
            "number": p.number,
            "state": "closed",
            "title": p.title,
            "body": p.body,
            "user": user(),
            "created_at": p.created_at,
            "updated_at": p.merged_at,
            "closed_at": p.merged_at,
            "merged_at": p.merged_at,
            "html_url": format!("https://github.com/{}/{}/pull/{}", self.owner, self.name, p.number),
            "diff_url": format!("https://github.com/{}/{}/pull/{}.diff", self.owner, self.name, p.number),
            "base": {"ref": "main", "sha": p.base_sha, "label": format!("{}:main", self.owner)},
            "head": {"ref": p.branch, "sha": p.head_sha, "label": format!("{}:{}", self.owner, p.branch)},
        })
    }

    fn issue_json(&self, i: &Issue) -> Value {
        json!({
            "url": format!("{}/issues/{}", self.repo_url(), i.number),
            "number": i.number,
            "state": "closed",
            "title": i.title,
            "body": i.body,
            "user": user(),
            "created_at": i.created_at,
            "comments": i.comments.len(),
        })
    }

    /// A page of the pull requests, oldest first, as `collect` asks: pages of `per_page` with
    /// a `Link` header.
    fn pulls_page(&self, query: &str) -> Answer {
        let param = |k: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
                .and_then(|v| v.parse::<usize>().ok())
        };
        let per_page = param("per_page").unwrap_or(30).clamp(1, 100);
        let page = param("page").unwrap_or(1).max(1);
        let mut all: Vec<&Pull> = self.pulls.iter().collect();
        all.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        let last = all.len().div_ceil(per_page).max(1);
        let items: Vec<Value> = all
            .iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .map(|p| self.pull_json(p))
            .collect();
        let mut answer = as_json(Value::Array(items));
        if page < last {
            let link = |k: usize| {
                format!(
                    "{}/pulls?state=closed&sort=created&direction=asc&per_page={per_page}&page={k}",
                    self.repo_url()
                )
            };
            answer.3.push((
                "Link".into(),
                format!(
                    "<{}>; rel=\"next\", <{}>; rel=\"last\"",
                    link(page + 1),
                    link(last)
                ),
            ));
        }
        answer
    }

    /// The answer to `path` (query included): status, content type, body, extra headers.
    fn answer(&self, path: &str, wants_diff: bool) -> Answer {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let prefix = format!("/repos/{}/{}/", self.owner, self.name);
        let not_found = || {
            (
                404,
                "application/json",
                br#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}"#
                    .to_vec(),
                Vec::new(),
            )
        };
        let Some(rest) = path.strip_prefix(&prefix) else {
            return not_found();
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let number = |s: &str| s.parse::<u64>().ok();
        match parts.as_slice() {
            ["pulls"] => self.pulls_page(query),
            ["pulls", n] => match self.pulls.iter().find(|p| Some(p.number) == number(n)) {
                Some(p) if wants_diff => (
                    200,
                    "text/plain; charset=utf-8",
                    p.diff.clone().into_bytes(),
                    Vec::new(),
                ),
                Some(p) => as_json(self.pull_json(p)),
                None => not_found(),
            },
            ["pulls", n, "commits"] => match self.pulls.iter().find(|p| Some(p.number) == number(n)) {
                Some(p) => as_json(Value::Array(
                    p.commits
                        .iter()
                        .map(|c| {
                            json!({
                                "sha": c.sha,
                                "commit": {
                                    "message": c.message,
                                    "author": {"name": "Demo Author", "email": "author@calc.example", "date": c.date},
                                    "committer": {"name": "Demo Maintainer", "email": "maintainer@calc.example", "date": c.date},
                                },
                            })
                        })
                        .collect(),
                )),
                None => not_found(),
            },
            ["issues", n] => {
                if let Some(i) = self.issues.iter().find(|i| Some(i.number) == number(n)) {
                    as_json(self.issue_json(i))
                } else if let Some(p) = self.pulls.iter().find(|p| Some(p.number) == number(n)) {
                    // On GitHub every pull request is an issue too, marked as such.
                    let mut v = self.pull_json(p);
                    v["pull_request"] = json!({"url": format!("{}/pulls/{}", self.repo_url(), p.number)});
                    as_json(v)
                } else {
                    not_found()
                }
            }
            ["issues", n, "comments"] => match self.issues.iter().find(|i| Some(i.number) == number(n)) {
                Some(i) => as_json(Value::Array(
                    i.comments
                        .iter()
                        .map(|(at, body)| json!({"body": body, "created_at": at, "updated_at": at, "user": user()}))
                        .collect(),
                )),
                None if self.pulls.iter().any(|p| Some(p.number) == number(n)) => as_json(json!([])),
                None => not_found(),
            },
            _ => not_found(),
        }
    }
}

/// An answer: status, content type, body, extra headers.
type Answer = (u16, &'static str, Vec<u8>, Vec<(String, String)>);

/// A 200 answer with `v` as its JSON body.
fn as_json(v: Value) -> Answer {
    (
        200,
        "application/json; charset=utf-8",
        serde_json::to_vec_pretty(&v).unwrap_or_default(),
        Vec::new(),
    )
}

fn handle(data: &Data, counts: &Counts, request: tiny_http::Request) {
    counts.requests.fetch_add(1, Ordering::Relaxed);
    let url = request.url().to_string();
    if let Ok(mut p) = counts.paths.lock() {
        p.push(url.clone());
    }
    let get = |name: &'static str| {
        request
            .headers()
            .iter()
            .find(|h| h.field.equiv(name))
            .map(|h| h.value.as_str().to_string())
    };
    let wants_diff = get("Accept").is_some_and(|a| a.contains("diff"));
    let if_none_match = get("If-None-Match");
    let (status, ctype, body, extra) = data.answer(&url, wants_diff);
    let etag = format!("\"{}\"", Sha256Digest::of(&body).hex());
    let mut headers: Vec<tiny_http::Header> = [
        ("Content-Type", ctype.to_string()),
        ("X-RateLimit-Limit", "5000".into()),
        ("X-RateLimit-Remaining", "4999".into()),
        ("X-RateLimit-Reset", "4102444800".into()),
    ]
    .iter()
    .filter_map(|(k, v)| header(k, v))
    .chain(extra.iter().filter_map(|(k, v)| header(k, v)))
    .collect();
    let response = if status == 200 && if_none_match.as_deref() == Some(etag.as_str()) {
        counts.not_modified.fetch_add(1, Ordering::Relaxed);
        tiny_http::Response::from_data(Vec::new()).with_status_code(304)
    } else {
        if status == 200 {
            headers.extend(header("ETag", &etag));
        }
        tiny_http::Response::from_data(body).with_status_code(status)
    };
    let mut response = response;
    for h in headers {
        response.add_header(h);
    }
    let _ = request.respond(response);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_issues_diffs_and_etags() {
        let d = tempfile::tempdir().unwrap();
        let up = super::super::upstream::make(&d.path().join("calc")).unwrap();
        let api = GithubApi::start("demo/calc", &up).unwrap();
        let client = reqwest::blocking::Client::new();
        let get = |path: &str, accept: &str, etag: Option<&str>| {
            let mut r = client
                .get(format!("{}{path}", api.url()))
                .header("Accept", accept);
            if let Some(e) = etag {
                r = r.header("If-None-Match", e);
            }
            r.send().unwrap()
        };
        let page1 = get(
            "/repos/demo/calc/pulls?state=closed&per_page=5",
            "application/json",
            None,
        );
        assert_eq!(page1.status(), 200);
        let link = page1.headers()["link"].to_str().unwrap().to_string();
        assert!(link.contains("page=2>; rel=\"next\""), "{link}");
        let etag = page1.headers()["etag"].to_str().unwrap().to_string();
        let v: Value = page1.json().unwrap();
        assert_eq!(v.as_array().unwrap().len(), 5);
        let again = get(
            "/repos/demo/calc/pulls?state=closed&per_page=5",
            "application/json",
            Some(&etag),
        );
        assert_eq!(again.status(), 304);
        let diff = get(
            "/repos/demo/calc/pulls/2",
            "application/vnd.github.diff",
            None,
        )
        .text()
        .unwrap();
        assert!(
            diff.starts_with("diff --git a/calc/ops.py b/calc/ops.py"),
            "{diff}"
        );
        let pr_as_issue: Value = get("/repos/demo/calc/issues/2", "application/json", None)
            .json()
            .unwrap();
        assert!(pr_as_issue.get("pull_request").is_some());
        assert_eq!(
            get("/repos/demo/calc/issues/99", "application/json", None).status(),
            404
        );
        assert_eq!(api.counts().not_modified.load(Ordering::Relaxed), 1);
    }
}
