//! Files on S3-compatible object storage (docs/DISTRIBUTED.md): what `shard run --to
//! s3://BUCKET/PREFIX/` uploads and `merge s3://…` downloads, through the `object_store` crate.
//!
//! - Where: `s3://BUCKET/PREFIX/NAME`; the endpoint, region and credentials from the usual
//!   variables (`AWS_ENDPOINT_URL` or `AWS_ENDPOINT`, `AWS_REGION` or `AWS_DEFAULT_REGION`,
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, …).
//! - A file is uploaded in parts (a multipart upload, which S3 shows only once complete: an
//!   interrupted upload never becomes visible), then `NAME.sha256` beside it, the sha256 of
//!   what was uploaded. A file without its `.sha256` did not finish; a download that does not
//!   hash to it is refused.
//! - Each request gives up after `SWE_ARK_S3_TIMEOUT` seconds (default 120), tried three
//!   times in all.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};

use crate::digest::{Sha256Digest, Sha256Hasher};

/// The scheme of a remote location.
pub const SCHEME: &str = "s3://";
/// Parts of a multipart upload (S3's smallest part is 5 MiB).
const PART: usize = 16 << 20;
/// The suffix of the file that holds an uploaded file's sha256.
pub const HASH_SUFFIX: &str = ".sha256";

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("`{0}` is not an s3:// location (s3://BUCKET/PREFIX/)")]
    BadUrl(String),
    #[error("`{0}`: SWE_ARK_S3_TIMEOUT is not a number of seconds")]
    BadTimeout(String),
    #[error("cannot reach object storage for {url}: {source}")]
    Setup {
        url: String,
        #[source]
        source: Box<object_store::Error>,
    },
    #[error("{op} {url} failed (endpoint {endpoint}): {source}")]
    Request {
        op: &'static str,
        url: String,
        endpoint: String,
        #[source]
        source: Box<object_store::Error>,
    },
    #[error(
        "{url} hashes to {actual}, not to {expected} (its {HASH_SUFFIX} file, or its name \
         for an object or a pack): the object store gave other bytes than were uploaded"
    )]
    WrongHash {
        url: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error(
        "`{}` hashes to {actual}, not to {expected} as its name says; not uploaded to {url}",
        .path.display()
    )]
    NotUploaded {
        path: PathBuf,
        url: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error("{0} does not exist")]
    NotFound(String),
    #[error("{url}{HASH_SUFFIX} is not a sha256 ({detail})")]
    BadHashFile { url: String, detail: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Whether `s` names a remote location.
pub fn is_remote(s: &str) -> bool {
    s.starts_with(SCHEME)
}

/// A bucket and a prefix in it, with a client for them.
pub struct Remote {
    store: AmazonS3,
    rt: tokio::runtime::Runtime,
    bucket: String,
    /// Without slashes at either end; may be empty.
    prefix: String,
    endpoint: String,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remote({})", self.url(""))
    }
}

/// `s3://BUCKET/PREFIX` cut into the bucket and the prefix.
pub fn parse_url(url: &str) -> Result<(String, String), RemoteError> {
    let rest = url
        .strip_prefix(SCHEME)
        .ok_or_else(|| RemoteError::BadUrl(url.to_string()))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let ok = !bucket.is_empty()
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
        && !prefix.split('/').any(|p| p == "." || p == "..");
    if !ok {
        return Err(RemoteError::BadUrl(url.to_string()));
    }
    Ok((bucket.to_string(), prefix.trim_matches('/').to_string()))
}

impl Remote {
    /// A client for `url` (`s3://BUCKET/PREFIX/`), configured from the environment.
    pub fn open(url: &str) -> Result<Remote, RemoteError> {
        let (bucket, prefix) = parse_url(url)?;
        let timeout = match std::env::var("SWE_ARK_S3_TIMEOUT") {
            Ok(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0)
                .ok_or(RemoteError::BadTimeout(v))?,
            Err(_) => 120.0,
        };
        let timeout = Duration::from_secs_f64(timeout);
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&bucket);
        let endpoint = std::env::var("AWS_ENDPOINT_URL")
            .or_else(|_| std::env::var("AWS_ENDPOINT"))
            .ok();
        if let Some(e) = &endpoint {
            builder = builder.with_endpoint(e);
        }
        // Plain http only where the endpoint asks for it (a local S3 API).
        let allow_http = endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"))
            || std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v == "true");
        if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
            builder = builder.with_region("us-east-1");
        }
        let retry = RetryConfig {
            max_retries: 2,
            retry_timeout: timeout * 3,
            ..RetryConfig::default()
        };
        let store = builder
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(allow_http)
                    .with_timeout(timeout)
                    .with_connect_timeout(timeout.min(Duration::from_secs(10))),
            )
            .with_retry(retry)
            .build()
            .map_err(|source| RemoteError::Setup {
                url: url.to_string(),
                source: Box::new(source),
            })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| RemoteError::Io {
                path: PathBuf::from(url),
                source,
            })?;
        Ok(Remote {
            store,
            rt,
            bucket,
            prefix,
            endpoint: endpoint.unwrap_or_else(|| "AWS S3".to_string()),
        })
    }

    fn key(&self, name: &str) -> Key {
        if self.prefix.is_empty() {
            Key::from(name)
        } else {
            Key::from(format!("{}/{name}", self.prefix))
        }
    }

    /// `s3://BUCKET/PREFIX/NAME`.
    pub fn url(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            format!("{SCHEME}{}/{name}", self.bucket)
        } else {
            format!("{SCHEME}{}/{}/{name}", self.bucket, self.prefix)
        }
    }

    fn failed(
        &self,
        op: &'static str,
        name: &str,
    ) -> impl FnOnce(object_store::Error) -> RemoteError {
        let url = self.url(name);
        let endpoint = self.endpoint.clone();
        move |source| RemoteError::Request {
            op,
            url,
            endpoint,
            source: Box::new(source),
        }
    }

    /// Uploads the file at `local` as NAME, then its sha256 as NAME.sha256. Returns the sha256
    /// and the size.
    pub fn upload(&self, local: &Path, name: &str) -> Result<(Sha256Digest, u64), RemoteError> {
        let (sha, size) = self.send(local, name, None)?;
        let line = format!("{}  {name}\n", sha.hex());
        let hash_name = format!("{name}{HASH_SUFFIX}");
        self.rt
            .block_on(
                self.store
                    .put(&self.key(&hash_name), PutPayload::from(line.into_bytes())),
            )
            .map_err(self.failed("writing", &hash_name))?;
        Ok((sha, size))
    }

    /// Uploads each (file, NAME, sha256), NAME being a name that says its content's sha256 (an
    /// object, a pack): content that hashes to anything else is refused before its upload
    /// completes, so it never becomes visible. No `.sha256` files: the name is the hash.
    /// `at_once` are in flight at a time (a bucket's requests are slow, not its bandwidth).
    /// Stops at the first failure; what was uploaded before it stays. Returns the sizes, in
    /// the order given.
    pub fn upload_addressed_all(
        &self,
        files: &[(PathBuf, String, Sha256Digest)],
        at_once: usize,
        mut done: impl FnMut(u64),
    ) -> Result<Vec<u64>, RemoteError> {
        self.rt.block_on(async {
            let mut sizes = vec![0u64; files.len()];
            let mut sends = futures::stream::iter(files.iter().enumerate())
                .map(|(i, (path, name, sha))| async move {
                    self.send_addressed(path, name, sha).await.map(|n| (i, n))
                })
                .buffer_unordered(at_once.max(1));
            while let Some(sent) = sends.next().await {
                let (i, n) = sent?;
                sizes[i] = n;
                done(n);
            }
            Ok(sizes)
        })
    }

    /// A file named by its sha256: a small one checked whole, then one PUT (which S3 shows
    /// only once complete); a larger one as a multipart upload checked before it completes.
    async fn send_addressed(
        &self,
        local: &Path,
        name: &str,
        expected: &Sha256Digest,
    ) -> Result<u64, RemoteError> {
        let io = |source| RemoteError::Io {
            path: local.to_path_buf(),
            source,
        };
        let len = std::fs::metadata(local).map_err(io)?.len();
        if len >= PART as u64 {
            return self
                .send_parts(local, name, Some(expected))
                .await
                .map(|(_, n)| n);
        }
        let bytes = std::fs::read(local).map_err(io)?;
        self.refuse_unless(local, name, Some(expected), Sha256Digest::of(&bytes))?;
        let n = bytes.len() as u64;
        self.store
            .put(&self.key(name), PutPayload::from(bytes))
            .await
            .map_err(self.failed("uploading", name))?;
        Ok(n)
    }

    /// A multipart upload of `local` as NAME, aborted (nothing visible) on any failure or when
    /// the content does not hash to `expected`.
    fn send(
        &self,
        local: &Path,
        name: &str,
        expected: Option<&Sha256Digest>,
    ) -> Result<(Sha256Digest, u64), RemoteError> {
        self.rt.block_on(self.send_parts(local, name, expected))
    }

    /// [`RemoteError::NotUploaded`] when `local`, which hashes to `actual`, is expected to hash
    /// to something else.
    fn refuse_unless(
        &self,
        local: &Path,
        name: &str,
        expected: Option<&Sha256Digest>,
        actual: Sha256Digest,
    ) -> Result<(), RemoteError> {
        match expected {
            Some(e) if *e != actual => Err(RemoteError::NotUploaded {
                path: local.to_path_buf(),
                url: self.url(name),
                expected: *e,
                actual,
            }),
            _ => Ok(()),
        }
    }

    async fn send_parts(
        &self,
        local: &Path,
        name: &str,
        expected: Option<&Sha256Digest>,
    ) -> Result<(Sha256Digest, u64), RemoteError> {
        let io = |source| RemoteError::Io {
            path: local.to_path_buf(),
            source,
        };
        let mut file = File::open(local).map_err(io)?;
        let key = self.key(name);
        let mut upload = self
            .store
            .put_multipart(&key)
            .await
            .map_err(self.failed("starting the upload of", name))?;
        let sent = async {
            let mut hasher = Sha256Hasher::new();
            let mut size = 0u64;
            let mut parts = 0usize;
            loop {
                let mut buf = vec![0u8; PART];
                let n = read_full(&mut file, &mut buf).map_err(io)?;
                if n == 0 && parts > 0 {
                    break;
                }
                buf.truncate(n);
                hasher.update(&buf);
                size += n as u64;
                upload
                    .put_part(PutPayload::from(buf))
                    .await
                    .map_err(self.failed("uploading a part of", name))?;
                parts += 1;
                crate::failpoint::hit("s3.upload-part");
                if n < PART {
                    break;
                }
            }
            let sha = hasher.finish();
            self.refuse_unless(local, name, expected, sha)?;
            upload
                .complete()
                .await
                .map_err(self.failed("completing the upload of", name))?;
            Ok::<_, RemoteError>((sha, size))
        }
        .await;
        if sent.is_err() {
            // Nothing becomes visible; the parts are dropped.
            let _ = upload.abort().await;
        }
        sent
    }

    /// Every name under `PREFIX/SUB/`, at any depth, relative to the prefix (so
    /// `SUB/…`), sorted.
    pub fn list_under(&self, sub: &str) -> Result<Vec<String>, RemoteError> {
        let base = self.key(sub.trim_matches('/'));
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let mut names = self.rt.block_on(async {
            let mut stream = self.store.list(Some(&base));
            let mut names = Vec::new();
            while let Some(meta) = stream.next().await {
                let meta = meta.map_err(self.failed("listing", sub))?;
                let full = meta.location.to_string();
                names.push(full.strip_prefix(&strip).unwrap_or(&full).to_string());
            }
            Ok::<_, RemoteError>(names)
        })?;
        names.sort();
        Ok(names)
    }

    /// Whether NAME exists.
    pub fn exists(&self, name: &str) -> Result<bool, RemoteError> {
        match self.rt.block_on(self.store.head(&self.key(name))) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.failed("looking up", name)(e)),
        }
    }

    /// Downloads NAME, whose content must hash to `expected`, to `dest`. A missing NAME is
    /// [`RemoteError::NotFound`], other bytes [`RemoteError::WrongHash`]; either way `dest`
    /// holds no verified content and is the caller's to remove.
    pub fn download_addressed(
        &self,
        name: &str,
        dest: &Path,
        expected: &Sha256Digest,
    ) -> Result<u64, RemoteError> {
        let (actual, size) = self.fetch_to(name, dest)?;
        if actual != *expected {
            return Err(RemoteError::WrongHash {
                url: self.url(name),
                expected: *expected,
                actual,
            });
        }
        Ok(size)
    }

    /// Streams NAME into a new file at `dest`; its sha256 and size.
    fn fetch_to(&self, name: &str, dest: &Path) -> Result<(Sha256Digest, u64), RemoteError> {
        let io = |source| RemoteError::Io {
            path: dest.to_path_buf(),
            source,
        };
        let mut out = File::create(dest).map_err(io)?;
        let got = self.rt.block_on(async {
            let got = match self.store.get(&self.key(name)).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(RemoteError::NotFound(self.url(name)));
                }
                Err(e) => return Err(self.failed("downloading", name)(e)),
            };
            let mut stream = got.into_stream();
            let mut hasher = Sha256Hasher::new();
            let mut size = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(self.failed("downloading", name))?;
                hasher.update(&chunk);
                size += chunk.len() as u64;
                out.write_all(&chunk).map_err(io)?;
            }
            Ok::<_, RemoteError>((hasher.finish(), size))
        })?;
        out.sync_all().map_err(io)?;
        Ok(got)
    }

    /// The names under the prefix (not below a further `/`), sorted.
    pub fn list(&self) -> Result<Vec<String>, RemoteError> {
        let prefix = (!self.prefix.is_empty()).then(|| Key::from(self.prefix.as_str()));
        let listed = self
            .rt
            .block_on(self.store.list_with_delimiter(prefix.as_ref()))
            .map_err(self.failed("listing", ""))?;
        let mut names: Vec<String> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Downloads NAME to `dest`, checked against NAME.sha256. Returns its sha256.
    pub fn download(&self, name: &str, dest: &Path) -> Result<Sha256Digest, RemoteError> {
        let hash_name = format!("{name}{HASH_SUFFIX}");
        let expected = self.rt.block_on(async {
            let got = self
                .store
                .get(&self.key(&hash_name))
                .await
                .map_err(self.failed("reading", &hash_name))?;
            got.bytes()
                .await
                .map_err(self.failed("reading", &hash_name))
        })?;
        let text = String::from_utf8_lossy(&expected);
        let expected: Sha256Digest = text
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .parse()
            .map_err(|e| RemoteError::BadHashFile {
                url: self.url(name),
                detail: format!("{e}"),
            })?;
        let (actual, _) = self.fetch_to(name, dest)?;
        if actual != expected {
            return Err(RemoteError::WrongHash {
                url: self.url(name),
                expected,
                actual,
            });
        }
        Ok(actual)
    }
}

/// Reads until `buf` is full or the input ends; how much was read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_a_bucket_and_a_prefix() {
        assert_eq!(
            parse_url("s3://shards/run-1/").unwrap(),
            ("shards".into(), "run-1".into())
        );
        assert_eq!(parse_url("s3://b").unwrap(), ("b".into(), "".into()));
        assert_eq!(
            parse_url("s3://b/a/b/").unwrap(),
            ("b".into(), "a/b".into())
        );
        for bad in [
            "s3://",
            "s3:///x",
            "http://b/x",
            "s3://B_ad/x",
            "s3://b/../x",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }
}
