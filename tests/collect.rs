//! `collect` against a real HTTP server on 127.0.0.1 that answers like the GitHub REST API:
//! pagination, a rate limit, a 502, ETags and 304s, bad data, and a resumed run.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use common::*;

/// One scripted answer.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn json(body: serde_json::Value) -> Self {
        Answer {
            status: 200,
            headers: vec![],
            body: body.to_string(),
        }
    }
    fn text(body: &str) -> Self {
        Answer {
            status: 200,
            headers: vec![],
            body: body.to_string(),
        }
    }
    fn status(status: u16, headers: &[(&str, String)]) -> Self {
        Answer {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            body: "{\"message\": \"scripted\"}".into(),
        }
    }
}

#[derive(Default)]
struct State {
    routes: HashMap<String, Answer>,
    /// Answers given once, before the route's own, in order.
    once: HashMap<String, Vec<Answer>>,
    log: Vec<String>,
    not_modified: usize,
}

/// A GitHub-shaped API on a free port of 127.0.0.1; every answer has an ETag and a request
/// that sends it back gets a 304.
struct FakeGithub {
    port: u16,
    state: Arc<Mutex<State>>,
}

fn etag_of(body: &str) -> String {
    format!("\"{}\"", &sha256_hex(body.as_bytes())[..16])
}

fn serve(mut stream: TcpStream, state: &Arc<Mutex<State>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let target = first.split_whitespace().nth(1).unwrap_or("/").to_string();
    let answer = {
        let mut s = state.lock().unwrap();
        s.log.push(target.clone());
        let once = s
            .once
            .get_mut(&target)
            .and_then(|q| (!q.is_empty()).then(|| q.remove(0)));
        match once {
            Some(a) => a,
            None => s
                .routes
                .get(&target)
                .cloned()
                .unwrap_or(Answer::status(404, &[])),
        }
    };
    let mut extra = answer.headers.clone();
    let mut status = answer.status;
    let mut body = answer.body.clone();
    if status == 200 {
        let etag = etag_of(&answer.body);
        if headers.get("if-none-match") == Some(&etag) {
            status = 304;
            body.clear();
            state.lock().unwrap().not_modified += 1;
        }
        extra.push(("ETag".into(), etag));
    }
    let reason = match status {
        200 => "OK",
        304 => "Not Modified",
        403 => "Forbidden",
        404 => "Not Found",
        502 => "Bad Gateway",
        _ => "Other",
    };
    let mut resp = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        resp.push_str(&format!("{k}: {v}\r\n"));
    }
    resp.push_str("\r\n");
    resp.push_str(&body);
    let _ = stream.write_all(resp.as_bytes());
    let _ = stream.flush();
    let mut rest = Vec::new();
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(1)));
    let _ = reader.read_to_end(&mut rest);
}

impl FakeGithub {
    fn start() -> FakeGithub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(stream, &s));
            }
        });
        FakeGithub { port, state }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn route(&self, path: &str, a: Answer) {
        self.state
            .lock()
            .unwrap()
            .routes
            .insert(path.to_string(), a);
    }

    fn once(&self, path: &str, a: Answer) {
        self.state
            .lock()
            .unwrap()
            .once
            .entry(path.to_string())
            .or_default()
            .push(a);
    }

    fn requests(&self) -> usize {
        self.state.lock().unwrap().log.len()
    }

    fn not_modified(&self) -> usize {
        self.state.lock().unwrap().not_modified
    }
}

const REPO: &str = "/repos/acme/widgets";
const BASE: &str = "1111111111111111111111111111111111111111";

fn gold_diff() -> &'static str {
    "diff --git a/widgets/core.py b/widgets/core.py\n--- a/widgets/core.py\n+++ b/widgets/core.py\n@@ -1 +1 @@\n-def f(): return 1\n+def f(): return 2\n"
}

fn test_diff() -> &'static str {
    "diff --git a/tests/test_core.py b/tests/test_core.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_core.py\n@@ -0,0 +1,2 @@\n+from widgets.core import f\n+def test_f(): assert f() == 2\n"
}

fn pr(number: u64, title: &str, body: &str, merged: bool) -> serde_json::Value {
    serde_json::json!({
        "number": number,
        "title": title,
        "body": body,
        "created_at": format!("2024-0{number}-01T10:00:00Z"),
        "merged_at": if merged { serde_json::json!(format!("2024-0{number}-02T10:00:00Z")) } else { serde_json::Value::Null },
        "base": {"sha": BASE, "ref": "main"},
    })
}

fn commits(message: &str, date: &str) -> Answer {
    Answer::json(serde_json::json!([
        {"sha": "2222222222222222222222222222222222222222",
         "commit": {"message": message, "author": {"date": date}}}
    ]))
}

/// Six pull requests over two pages: one good instance, and every reason to skip.
fn fixture(gh: &FakeGithub) {
    let page2 = format!(
        "{}{REPO}/pulls?state=closed&sort=created&direction=asc&per_page=100&page=2",
        gh.url()
    );
    gh.route(
        &format!("{REPO}/pulls?state=closed&sort=created&direction=asc&per_page=100"),
        Answer {
            headers: vec![("Link".into(), format!("<{page2}>; rel=\"next\""))],
            ..Answer::json(serde_json::json!([
                pr(1, "Make f return 2", "Fixes #10\n<!-- closes #99 -->", true),
                pr(2, "Tidy", "No issue here.", true),
                pr(3, "Docs", "closes #11", true),
            ]))
        },
    );
    gh.route(
        &format!("{REPO}/pulls?state=closed&sort=created&direction=asc&per_page=100&page=2"),
        Answer::json(serde_json::json!([
            pr(4, "Abandoned", "Fixes #10", false),
            pr(
                5,
                "Gone issue",
                "Resolves https://github.com/acme/widgets/issues/12",
                true
            ),
            pr(6, "Broken diff", "Fixes #13", true),
        ])),
    );
    for n in [1, 2, 3, 5, 6] {
        gh.route(
            &format!("{REPO}/pulls/{n}/commits?per_page=100"),
            commits("work", "2024-01-05T00:00:00Z"),
        );
    }
    gh.route(
        &format!("{REPO}/pulls/1"),
        Answer::text(&format!("{}{}", gold_diff(), test_diff())),
    );
    gh.route(&format!("{REPO}/pulls/3"), Answer::text(gold_diff()));
    gh.route(
        &format!("{REPO}/pulls/5"),
        Answer::text(&format!("{}{}", gold_diff(), test_diff())),
    );
    gh.route(
        &format!("{REPO}/pulls/6"),
        Answer::text("this is not a diff\n"),
    );
    gh.route(
        &format!("{REPO}/issues/10"),
        Answer::json(serde_json::json!({"number": 10, "title": "f() returns 1", "body": "It should return 2."})),
    );
    gh.route(
        &format!("{REPO}/issues/10/comments?per_page=100"),
        Answer::json(serde_json::json!([
            {"created_at": "2024-01-03T00:00:00Z", "body": "Probably in core.py."},
            {"created_at": "2024-01-06T00:00:00Z", "body": "Fixed by the PR."},
        ])),
    );
    gh.route(
        &format!("{REPO}/issues/11"),
        Answer::json(serde_json::json!({"number": 11, "title": "Docs", "body": null})),
    );
    gh.route(
        &format!("{REPO}/issues/11/comments?per_page=100"),
        Answer::json(serde_json::json!([])),
    );
    // Issue 12 is not routed: a 404.
    gh.route(
        &format!("{REPO}/issues/13"),
        Answer::json(serde_json::json!({"number": 13, "title": "x", "body": "y"})),
    );
}

fn collect(t: &TestContext, gh: &FakeGithub, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["collect", "acme/widgets", "--json", "--api-url"];
    let url = gh.url();
    args.push(&url);
    args.extend_from_slice(extra);
    let mut cmd = t.cmd();
    cmd.env_remove("GITHUB_TOKEN").args(&args);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn collects_instances_by_the_rules_and_reruns_cheaply() {
    let t = TestContext::new();
    let gh = FakeGithub::start();
    fixture(&gh);
    // A rate limit that resets a second from now, and a 502, each once.
    let reset = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1;
    gh.once(
        &format!("{REPO}/issues/10"),
        Answer::status(
            403,
            &[
                ("X-RateLimit-Remaining", "0".into()),
                ("X-RateLimit-Reset", reset.to_string()),
            ],
        ),
    );
    gh.once(
        &format!("{REPO}/pulls/1/commits?per_page=100"),
        Answer::status(502, &[]),
    );

    let report = collect(&t, &gh, &["-o", "candidates.jsonl"]);
    assert_eq!(report["pulls_listed"], 6);
    assert_eq!(report["merged"], 5);
    assert_eq!(report["instances"], serde_json::json!(["acme__widgets-1"]));
    let outcomes = &report["outcomes"];
    assert_eq!(outcomes["2"]["reason"], "it resolves no issue");
    assert_eq!(outcomes["3"]["reason"], "it changes no test file");
    assert!(
        outcomes["5"]["reason"]
            .as_str()
            .unwrap()
            .contains("#12 is not found"),
        "{outcomes}"
    );
    assert!(
        outcomes["6"]["reason"]
            .as_str()
            .unwrap()
            .contains("cannot be read"),
        "{outcomes}"
    );
    assert_eq!(report["requests"]["rate_limit_waits"], 1);
    assert_eq!(report["requests"]["retries"], 1);
    // 2 list pages; #1: commits (502, then 200), diff, issue (403, then 200), comments;
    // #2: commits; #3: commits, diff; #5: commits, diff, issue (404); #6: commits, diff.
    let first_run = gh.requests();
    assert_eq!(first_run, 16);
    assert_eq!(report["requests"]["requests"], first_run);

    // The instance, field by field.
    let text = std::fs::read_to_string(t.path("candidates.jsonl")).unwrap();
    let inst: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(inst["instance_id"], "acme__widgets-1");
    assert_eq!(inst["repo"], "acme/widgets");
    assert_eq!(inst["base_commit"], BASE);
    assert_eq!(inst["patch"], gold_diff());
    assert_eq!(inst["test_patch"], test_diff());
    assert_eq!(
        inst["problem_statement"],
        "f() returns 1\nIt should return 2.\n"
    );
    assert_eq!(inst["hints_text"], "Probably in core.py.\n");
    assert_eq!(inst["created_at"], "2024-01-01T10:00:00Z");
    assert_eq!(inst["pull_number"], 1);
    assert_eq!(inst["issue_numbers"], serde_json::json!([10]));

    // Again: nothing is decided twice; only the two list pages are asked for, and answered 304.
    let report = collect(&t, &gh, &[]);
    assert_eq!(report["already_done"], 5);
    assert_eq!(gh.requests() - first_run, 2);
    assert_eq!(gh.not_modified(), 2);
    assert_eq!(report["requests"]["not_modified"], 2);

    // With --refresh every pull request is decided again, from 304s.
    let before = gh.not_modified();
    let report = collect(&t, &gh, &["--refresh"]);
    assert_eq!(report["instances"], serde_json::json!(["acme__widgets-1"]));
    let asked = report["requests"]["requests"].as_u64().unwrap() as usize;
    assert_eq!(gh.not_modified() - before, asked - count_404s(&gh, asked));
}

/// Of the last `n` requests, those that were answered 404 (never cached).
fn count_404s(gh: &FakeGithub, n: usize) -> usize {
    let s = gh.state.lock().unwrap();
    s.log[s.log.len() - n..]
        .iter()
        .filter(|p| !s.routes.contains_key(*p))
        .count()
}

#[test]
fn a_malformed_list_page_is_an_error_naming_it() {
    let t = TestContext::new();
    let gh = FakeGithub::start();
    gh.route(
        &format!("{REPO}/pulls?state=closed&sort=created&direction=asc&per_page=100"),
        Answer::text("{\"not\": json"),
    );
    let url = gh.url();
    let out = t.run_expect(&["collect", "acme/widgets", "--api-url", &url], 2);
    let err = stderr(&out);
    assert!(
        err.contains("not valid JSON") && err.contains("/pulls?state=closed"),
        "{err}"
    );
}

#[test]
fn an_interrupted_collect_goes_on_where_it_stopped() {
    let t = TestContext::new();
    let gh = FakeGithub::start();
    fixture(&gh);
    // The first run dies right after deciding its first pull request.
    let url = gh.url();
    let out = t
        .cmd()
        .env("SWE_ARK_FAILPOINT", "collect.after-record")
        .args(["collect", "acme/widgets", "--api-url", &url])
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(6), "{}", stderr(&out));
    let report = collect(&t, &gh, &[]);
    assert_eq!(report["already_done"], 1, "{report}");
    assert_eq!(
        report["instances"],
        serde_json::json!([]),
        "#1 was decided before the crash"
    );
    assert_eq!(report["outcomes"].as_object().unwrap().len(), 4);
    let all = t.run_expect(&["export-dataset", "-o", "all.jsonl"], 0);
    assert!(all.status.success());
    let text = std::fs::read_to_string(t.path("all.jsonl")).unwrap();
    assert!(
        text.contains("\"instance_id\": \"acme__widgets-1\""),
        "{text}"
    );
}
