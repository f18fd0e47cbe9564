//! A local HTTP server on a free port of 127.0.0.1, serving on a thread of its own until it is
//! dropped: what the lock's index proxy and the demo's GitHub API stand on.

use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A server bound to its port, not serving yet: its URL is known before its handler is made.
pub(crate) struct Bound {
    server: tiny_http::Server,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
}

impl Bound {
    /// `what` names the server in the error when it has no TCP address.
    pub(crate) fn new(what: &str) -> io::Result<Bound> {
        let server = tiny_http::Server::http("127.0.0.1:0").map_err(io::Error::other)?;
        let port = server
            .server_addr()
            .to_ip()
            .map(|a| a.port())
            .ok_or_else(|| io::Error::other(format!("{what} has no TCP address")))?;
        Ok(Bound {
            server,
            base: format!("http://127.0.0.1:{port}"),
        })
    }

    /// Hands each request to `handle`, in the order they come, until the server is dropped.
    pub(crate) fn serve(
        self,
        mut handle: impl FnMut(tiny_http::Request) + Send + 'static,
    ) -> LocalServer {
        let server = Arc::new(self.server);
        let srv = server.clone();
        let thread = std::thread::spawn(move || {
            for request in srv.incoming_requests() {
                handle(request);
            }
        });
        LocalServer {
            server,
            thread: Some(thread),
        }
    }
}

/// The serving server; stops when dropped.
pub(crate) struct LocalServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
