//! A real S3 API on 127.0.0.1 for the tests: moto's `moto_server`, which `make tools` installs
//! in `.tools/bin` (pinned), started on a free port and killed when dropped.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload};

pub struct S3Server {
    child: Child,
    pub port: u16,
}

/// `.tools/bin/moto_server`, when `make tools` installed it.
pub fn moto_server() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/bin/moto_server");
    p.is_file().then_some(p)
}

impl S3Server {
    /// Starts moto; `None` (saying why) where it is not installed.
    pub fn start() -> Option<S3Server> {
        let Some(bin) = moto_server() else {
            eprintln!("skipped: no .tools/bin/moto_server (`make tools` installs it)");
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let server = S3Server { child, port };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "moto_server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(server)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The variables swe-ark reads to reach it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// Creates bucket `name` (moto takes an unsigned request for it).
    pub fn make_bucket(&self, name: &str) {
        let resp = reqwest::blocking::Client::new()
            .put(format!("{}/{name}", self.endpoint()))
            .send()
            .unwrap();
        assert!(resp.status().is_success(), "{:?}", resp.text());
    }

    /// A signed client for `bucket`, and a runtime to drive it.
    fn client(&self, bucket: &str) -> (AmazonS3, tokio::runtime::Runtime) {
        let store = AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id("testing")
            .with_secret_access_key("testing")
            .with_client_options(ClientOptions::new().with_allow_http(true))
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        (store, rt)
    }

    /// The keys under `prefix` in `bucket`, sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let (store, rt) = self.client(bucket);
        let mut keys: Vec<String> = rt.block_on(async {
            let p = Key::from(prefix);
            store
                .list(Some(&p))
                .map(|m| m.unwrap().location.to_string())
                .collect()
                .await
        });
        keys.sort();
        keys
    }

    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let (store, rt) = self.client(bucket);
        rt.block_on(async {
            store
                .get(&Key::from(key))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .to_vec()
        })
    }

    pub fn put(&self, bucket: &str, key: &str, body: Vec<u8>) {
        let (store, rt) = self.client(bucket);
        rt.block_on(store.put(&Key::from(key), PutPayload::from(body)))
            .unwrap();
    }

    pub fn delete(&self, bucket: &str, key: &str) {
        let (store, rt) = self.client(bucket);
        rt.block_on(store.delete(&Key::from(key))).unwrap();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
