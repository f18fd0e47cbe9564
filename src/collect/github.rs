//! A small GitHub REST client for what collection needs: GETs of JSON and diffs, pagination
//! through `Link` headers, rate limits waited out, transient failures retried with capped
//! backoff, and ETags kept so that a repeated collection is answered with 304s, which GitHub
//! does not count against the quota.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::{ACCEPT, AUTHORIZATION, ETAG, HeaderMap, IF_NONE_MATCH, LINK, USER_AGENT};
use serde_json::Value;

use crate::dataset::json_type_name;

/// The public API.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// How many times one request is tried before giving up.
const MAX_TRIES: u32 = 6;
/// The longest wait between two tries after a failure (not a rate limit).
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest rate-limit wait we accept before giving up with an error.
const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    #[error("GET {url}: {status} {detail}")]
    Status {
        url: String,
        status: u16,
        detail: String,
    },
    #[error("GET {url}: not found (404)")]
    NotFound { url: String },
    #[error("GET {url}: gave up after {tries} tries: {last}")]
    GaveUp {
        url: String,
        tries: u32,
        last: String,
    },
    #[error("GET {url}: rate limited for {wait_secs} s more, longer than swe-ark waits")]
    RateLimitTooLong { url: String, wait_secs: u64 },
    #[error("GET {url}: the answer is not valid JSON: {detail}")]
    BadJson { url: String, detail: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Where ETags and the bodies they stand for are kept between runs.
pub trait EtagCache {
    fn lookup(&self, url: &str) -> Option<(String, Vec<u8>)>;
    fn store(&mut self, url: &str, etag: &str, body: &[u8]);
}

impl EtagCache for crate::store::Index {
    fn lookup(&self, url: &str) -> Option<(String, Vec<u8>)> {
        self.http_cache_lookup(url)
    }
    fn store(&mut self, url: &str, etag: &str, body: &[u8]) {
        self.http_cache_store(url, etag, body)
    }
}

/// A cache that forgets everything, for one-off runs.
#[derive(Default)]
pub struct NoCache;

impl EtagCache for NoCache {
    fn lookup(&self, _: &str) -> Option<(String, Vec<u8>)> {
        None
    }
    fn store(&mut self, _: &str, _: &str, _: &[u8]) {}
}

/// What the client did, for the summary.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct RequestStats {
    /// Requests sent, retries included.
    pub requests: u64,
    /// Answers that were 304 Not Modified (served from the cache).
    pub not_modified: u64,
    pub retries: u64,
    pub rate_limit_waits: u64,
}

pub struct GithubClient<'c> {
    http: Client,
    api: String,
    token: Option<String>,
    cache: &'c mut dyn EtagCache,
    pub stats: RequestStats,
    /// Called with a sentence whenever the client waits (rate limits, backoff).
    pub on_wait: Box<dyn Fn(&str) + 'c>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The `rel="next"` URL of a `Link` header.
pub fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim() == "rel=\"next\"")
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

/// How long a 403/429 answer asks us to wait, if it is a rate limit: `Retry-After` (secondary
/// limits), or the primary limit's reset time when no request is left.
fn rate_limit_wait(status: StatusCode, h: &HeaderMap) -> Option<Duration> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    if let Some(secs) = header(h, "retry-after").and_then(|v| v.trim().parse::<u64>().ok()) {
        return Some(Duration::from_secs(secs));
    }
    if header(h, "x-ratelimit-remaining") == Some("0")
        && let Some(reset) = header(h, "x-ratelimit-reset").and_then(|v| v.parse::<u64>().ok())
    {
        // One second more: the reset time is rounded down.
        return Some(Duration::from_secs(reset.saturating_sub(now_secs()) + 1));
    }
    (status == StatusCode::TOO_MANY_REQUESTS).then_some(Duration::from_secs(60))
}

/// An answer that is neither a success nor a 404, with the `message` GitHub puts in its body.
fn status_error(url: &str, status: StatusCode, body: &[u8]) -> GithubError {
    let detail = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_default();
    GithubError::Status {
        url: url.to_string(),
        status: status.as_u16(),
        detail,
    }
}

impl<'c> GithubClient<'c> {
    /// A client for `api` (e.g. `https://api.github.com`), authenticated with `token` when
    /// given. The token is sent, never logged.
    pub fn new(
        api: &str,
        token: Option<String>,
        cache: &'c mut dyn EtagCache,
    ) -> Result<Self, GithubError> {
        let http = Client::builder()
            .timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| GithubError::Client(e.to_string()))?;
        Ok(GithubClient {
            http,
            api: api.trim_end_matches('/').to_string(),
            token,
            cache,
            stats: RequestStats::default(),
            on_wait: Box::new(|_| {}),
        })
    }

    /// `path` (`/repos/o/n/pulls`) made absolute against the API URL; absolute URLs pass.
    pub fn url(&self, path: &str) -> String {
        if path.starts_with("http://") || path.starts_with("https://") {
            path.to_string()
        } else {
            format!("{}{path}", self.api)
        }
    }

    /// One GET of `url`, with its headers; `etag`, the cached answer's, asks for a 304.
    fn request(&self, url: &str, accept: &str, etag: Option<&str>) -> RequestBuilder {
        let mut req = self
            .http
            .get(url)
            .header(USER_AGENT, concat!("swe-ark/", env!("CARGO_PKG_VERSION")))
            .header(ACCEPT, accept)
            .header("X-GitHub-Api-Version", "2022-11-28");
        if let Some(t) = &self.token {
            req = req.header(AUTHORIZATION, format!("Bearer {t}"));
        }
        if let Some(etag) = etag {
            req = req.header(IF_NONE_MATCH, etag);
        }
        req
    }

    /// One GET, with retries and rate-limit waits; the cache answers a 304. Returns the body
    /// and the `Link` header's next page.
    fn get_raw(
        &mut self,
        url: &str,
        accept: &str,
    ) -> Result<(Vec<u8>, Option<String>), GithubError> {
        let cached = self.cache.lookup(url);
        let mut backoff = Duration::from_millis(500);
        let mut last = String::new();
        let mut tries = 0;
        while tries < MAX_TRIES {
            tries += 1;
            self.stats.requests += 1;
            let etag = cached.as_ref().map(|(etag, _)| etag.as_str());
            let resp: Response = match self.request(url, accept, etag).send() {
                Ok(r) => r,
                Err(e) => {
                    last = format!("connection failed: {e}");
                    self.backoff(url, &mut backoff, &last);
                    continue;
                }
            };
            let status = resp.status();
            let headers = resp.headers().clone();
            let next = header(&headers, LINK.as_str()).and_then(next_link);
            if status == StatusCode::NOT_MODIFIED {
                if let Some((_, body)) = cached {
                    self.stats.not_modified += 1;
                    return Ok((body, next));
                }
                last = "304 Not Modified for a request with no cached answer".into();
                continue;
            }
            if let Some(wait) = rate_limit_wait(status, &headers) {
                if wait > MAX_RATE_LIMIT_WAIT {
                    return Err(GithubError::RateLimitTooLong {
                        url: url.to_string(),
                        wait_secs: wait.as_secs(),
                    });
                }
                self.stats.rate_limit_waits += 1;
                (self.on_wait)(&format!(
                    "rate limited by {}: waiting {} s before trying again",
                    self.api,
                    wait.as_secs()
                ));
                std::thread::sleep(wait);
                // A rate-limit wait is not a failed try.
                tries -= 1;
                continue;
            }
            if status.is_server_error() {
                last = format!("{status}");
                self.backoff(url, &mut backoff, &last);
                continue;
            }
            let body = resp
                .bytes()
                .map_err(|e| GithubError::GaveUp {
                    url: url.to_string(),
                    tries,
                    last: format!("reading the body failed: {e}"),
                })?
                .to_vec();
            if status == StatusCode::NOT_FOUND {
                return Err(GithubError::NotFound {
                    url: url.to_string(),
                });
            }
            if !status.is_success() {
                return Err(status_error(url, status, &body));
            }
            if let Some(etag) = header(&headers, ETAG.as_str()) {
                self.cache.store(url, etag, &body);
            }
            return Ok((body, next));
        }
        Err(GithubError::GaveUp {
            url: url.to_string(),
            tries,
            last,
        })
    }

    fn backoff(&mut self, url: &str, backoff: &mut Duration, why: &str) {
        self.stats.retries += 1;
        (self.on_wait)(&format!(
            "GET {url}: {why}; trying again in {:.1} s",
            backoff.as_secs_f64()
        ));
        std::thread::sleep(*backoff);
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
    }

    /// One JSON document.
    pub fn get_json(&mut self, path: &str) -> Result<Value, GithubError> {
        let url = self.url(path);
        let (body, _) = self.get_raw(&url, "application/vnd.github+json")?;
        serde_json::from_slice(&body).map_err(|e| GithubError::BadJson {
            url,
            detail: e.to_string(),
        })
    }

    /// Every item of a paginated list, 100 per page, following `Link: rel="next"`.
    pub fn get_all(&mut self, path: &str) -> Result<Vec<Value>, GithubError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = Some(self.url(&format!("{path}{sep}per_page=100")));
        let mut items = Vec::new();
        while let Some(u) = url {
            let (body, next) = self.get_raw(&u, "application/vnd.github+json")?;
            let page: Value = serde_json::from_slice(&body).map_err(|e| GithubError::BadJson {
                url: u.clone(),
                detail: e.to_string(),
            })?;
            match page {
                Value::Array(list) => items.extend(list),
                other => {
                    return Err(GithubError::BadJson {
                        url: u,
                        detail: format!("expected a list, found {}", json_type_name(&other)),
                    });
                }
            }
            url = next;
        }
        Ok(items)
    }

    /// A pull request's diff, as text.
    pub fn get_diff(&mut self, path: &str) -> Result<String, GithubError> {
        let url = self.url(path);
        let (body, _) = self.get_raw(&url, "application/vnd.github.diff")?;
        String::from_utf8(body).map_err(|_| GithubError::Status {
            url,
            status: 200,
            detail: "the diff is not UTF-8".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_headers() {
        let l = r#"<https://api.github.com/repos/o/r/pulls?page=2>; rel="next", <https://api.github.com/repos/o/r/pulls?page=9>; rel="last""#;
        assert_eq!(
            next_link(l).as_deref(),
            Some("https://api.github.com/repos/o/r/pulls?page=2")
        );
        assert_eq!(next_link(r#"<https://x/?page=1>; rel="prev""#), None);
    }
}
