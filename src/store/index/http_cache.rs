//! GitHub's answers kept for collection's conditional requests.

use rusqlite::{OptionalExtension, params};

use super::{Index, now};

/// The index keeps the ETag and body of every GitHub answer, so a repeated collection sends
/// `If-None-Match` and gets 304s (collect's `EtagCache`). The cache is best effort: a failure
/// to store is logged.
impl Index {
    pub fn http_cache_lookup(&self, url: &str) -> Option<(String, Vec<u8>)> {
        self.conn
            .query_row(
                "SELECT etag, body FROM http_cache WHERE url = ?1",
                [url],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .ok()
            .flatten()
    }

    pub fn http_cache_store(&mut self, url: &str, etag: &str, body: &[u8]) {
        let result = self.conn.execute(
            "INSERT INTO http_cache (url, etag, body, fetched_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(url) DO UPDATE SET etag = ?2, body = ?3, fetched_at = ?4",
            params![url, etag, body, now()],
        );
        if let Err(e) = result {
            tracing::warn!("cannot keep the answer of {url} in the index: {e}");
        }
    }
}
