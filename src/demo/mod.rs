//! `swe-ark demo`: the whole pipeline on data it makes itself, with the real parts. An
//! upstream repository made by code ([`upstream`]), a GitHub-shaped API for it on 127.0.0.1
//! ([`github_api`]), then every stage run as a user would type it — each step is this same
//! program started again with the printed arguments:
//! mirror → collect → env lock (the one step that needs the network: PyPI, unless an index is
//! given) → validate → pack → release create → export → import-archive into a second, empty
//! archive → replay there with the network cut (the gold patches, then a model's predictions)
//! → release verify, verify and verify --rebuild → a closing summary.

pub mod github_api;
pub mod upstream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::gitcmd;

/// What `swe-ark demo` is asked to do.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The folder the demo makes (emptied first) and leaves its archives in.
    pub dir: PathBuf,
    /// The swe-ark program each step runs.
    pub program: PathBuf,
    /// A package index for `env lock` instead of PyPI (the suite points it at a local one).
    pub index_url: Option<String>,
    /// The Python `major.minor` the demo's context asks for.
    pub python: String,
    /// Validation runs after the fix.
    pub runs: u32,
}

/// A step that failed: which, and why.
#[derive(Debug, thiserror::Error)]
#[error("demo step `{step}` failed: {detail}")]
pub struct DemoError {
    pub step: String,
    pub detail: String,
}

fn fail(step: &str, detail: impl std::fmt::Display) -> DemoError {
    DemoError {
        step: step.to_string(),
        detail: detail.to_string(),
    }
}

/// What the demo found, for its closing summary (and the suite's assertions).
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct DemoSummary {
    pub dir: PathBuf,
    pub api_requests: u64,
    pub api_requests_rerun: u64,
    pub api_not_modified_rerun: u64,
    pub collected: Vec<String>,
    /// Pull request → why `collect` dropped it.
    pub dropped_by_collect: BTreeMap<String, String>,
    pub kept: Vec<String>,
    /// Instance → why `validate` dropped it.
    pub dropped_by_validate: BTreeMap<String, String>,
    /// Instance → its flaky tests.
    pub flaky: BTreeMap<String, Vec<String>>,
    pub lock: String,
    /// Instance → bundle id.
    pub bundles: BTreeMap<String, String>,
    pub release_root: String,
    pub export_bytes: u64,
    pub archive_bytes: u64,
    /// The bundles' tars, summed, and what the archive's deduplicated store keeps of them.
    pub bundles_logical_bytes: u64,
    pub bundles_stored_bytes: u64,
    pub gold_resolved: usize,
    pub gold_total: usize,
    /// Instance → the model prediction's outcome (`resolved`, `unresolved`, or the error).
    pub predictions: BTreeMap<String, String>,
    pub network_cut: bool,
    pub release_verified: bool,
    pub verified: bool,
    /// Whether `verify --rebuild` packed every bundle again to the same id.
    pub rebuilt_identical: bool,
    /// Whether `verify` refused a bundle with one byte changed.
    pub tamper_caught: bool,
    /// Step → seconds.
    pub seconds: Vec<(String, f64)>,
}

struct Driver<'a> {
    opts: &'a DemoOptions,
    say: &'a dyn Fn(&str),
    env: Vec<(String, String)>,
    summary: DemoSummary,
}

/// The path as the demo prints it: relative to its folder.
fn shown(dir: &Path, p: &Path) -> String {
    p.strip_prefix(dir)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| p.display().to_string())
}

impl Driver<'_> {
    fn step(&self, title: &str) {
        (self.say)(&format!("\n\x1b[1m== {title}\x1b[0m"));
    }

    /// Runs swe-ark with `args` in the demo folder (stderr shown as it comes, stdout
    /// returned); `wrap` puts a program before it (`unshare -n --`); `ok` says which exit codes
    /// are fine.
    fn swe_ark(
        &mut self,
        name: &str,
        wrap: &[&str],
        args: &[&str],
        extra_env: &[(&str, &str)],
        ok: &[i32],
    ) -> Result<(i32, String), DemoError> {
        let printed: Vec<String> = args
            .iter()
            .map(|a| {
                if a.contains(' ') || a.is_empty() {
                    format!("'{a}'")
                } else {
                    a.to_string()
                }
            })
            .collect();
        let env_shown: String = extra_env
            .iter()
            .map(|(k, v)| {
                let v = shown(&self.opts.dir, Path::new(v));
                format!("{k}={} ", if v.is_empty() { "''".into() } else { v })
            })
            .collect();
        (self.say)(&format!(
            "$ {env_shown}{}swe-ark {}",
            wrap.iter().map(|w| format!("{w} ")).collect::<String>(),
            printed.join(" ")
        ));
        let started = Instant::now();
        let mut cmd = match wrap.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&self.opts.program);
                c
            }
            None => Command::new(&self.opts.program),
        };
        cmd.args(args)
            .current_dir(&self.opts.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in self.env.iter() {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let out = cmd.output().map_err(|e| {
            fail(
                name,
                format!("{} could not be started: {e}", self.opts.program.display()),
            )
        })?;
        self.summary
            .seconds
            .push((name.to_string(), started.elapsed().as_secs_f64()));
        let code = out.status.code().unwrap_or(-1);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !ok.contains(&code) {
            return Err(fail(
                name,
                format!("swe-ark exited with {code}; its output:\n{stdout}"),
            ));
        }
        Ok((code, stdout))
    }

    fn json(&mut self, name: &str, args: &[&str]) -> Result<Value, DemoError> {
        let (_, out) = self.swe_ark(name, &[], args, &[], &[0])?;
        serde_json::from_str(&out).map_err(|e| fail(name, format!("its --json output: {e}")))
    }
}

fn write(path: &Path, text: &str) -> Result<(), DemoError> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(|e| fail("files", format!("{}: {e}", p.display())))?;
    }
    std::fs::write(path, text).map_err(|e| fail("files", format!("{}: {e}", path.display())))
}

/// The context of demo/calc 1.0, as manifests/ holds them for real repositories.
fn manifest(python: &str) -> String {
    format!(
        "# The demo's upstream project: pytest from the index, no install step (the checkout's\n\
         # conftest.py puts the package on sys.path).\n\
         repo = \"{}\"\nsource = \"swe-ark demo\"\nlog_parser = \"pytest\"\n\n[defaults]\n\
         python = \"{python}\"\npip_packages = [\"pytest==7.4.4\"]\ntest_cmd = \"pytest -rA\"\n\n\
         [versions.\"1.0\"]\n",
        upstream::REPO
    )
}

/// A wrong fix for pull request #4's issue: it applies, and breaks what worked.
fn wrong_patch(upstream_dir: &Path, scratch: &Path, base: &str) -> Result<String, DemoError> {
    let step = "predictions";
    let up = upstream_dir.to_string_lossy();
    let sc = scratch.to_string_lossy();
    gitcmd::run(Path::new("/"), &["clone", "-q", "--shared", &up, &sc])
        .map_err(|e| fail(step, e))?;
    gitcmd::run(scratch, &["checkout", "-q", "--detach", base]).map_err(|e| fail(step, e))?;
    let ops = scratch.join("calc/ops.py");
    let text = std::fs::read_to_string(&ops).map_err(|e| fail(step, e))?;
    std::fs::write(
        &ops,
        text.replace("    return max(lo, x)\n", "    return min(hi, x)\n"),
    )
    .map_err(|e| fail(step, e))?;
    gitcmd::run(scratch, &["diff", "--no-color"]).map_err(|e| fail(step, e))
}

/// The demo folder, emptied (or made) and canonical.
fn fresh_dir(dir: &Path) -> Result<PathBuf, DemoError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| fail("setup", format!("{}: {e}", dir.display())))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| fail("setup", format!("{}: {e}", dir.display())))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| fail("setup", format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

/// The demo's manifests written, and the environment every swe-ark it runs gets.
fn demo_env(opts: &DemoOptions, dir: &Path) -> Result<Vec<(String, String)>, DemoError> {
    let manifests = dir.join("manifests");
    write(&manifests.join("demo__calc.toml"), &manifest(&opts.python))?;
    let mut env = vec![
        (
            "SWE_ARK_MANIFESTS".to_string(),
            manifests.display().to_string(),
        ),
        (
            "GIT_CEILING_DIRECTORIES".to_string(),
            dir.display().to_string(),
        ),
    ];
    if let Some(url) = &opts.index_url {
        env.push(("SWE_ARK_INDEX_URL".to_string(), url.clone()));
    }
    Ok(env)
}

/// Step 1: the upstream repository, made by code.
fn make_upstream(d: &Driver, dir: &Path) -> Result<upstream::Upstream, DemoError> {
    let say = d.say;
    d.step("1. An upstream repository, made by code: demo/calc");
    let up = upstream::make(&dir.join("upstream")).map_err(|e| fail("upstream", e))?;
    let tags = gitcmd::run(&up.dir, &["tag"]).map_err(|e| fail("upstream", e))?;
    let commits =
        gitcmd::run(&up.dir, &["rev-list", "--count", "HEAD"]).map_err(|e| fail("upstream", e))?;
    say(&format!(
        "upstream/: {} commits, tags {}, {} issues, {} merged pull requests",
        commits.trim(),
        tags.split_whitespace().collect::<Vec<_>>().join(" "),
        up.issues.len(),
        up.pulls.len()
    ));
    for p in &up.pulls {
        say(&format!(
            "  PR #{:<3} {:<42} {}",
            p.number,
            p.title,
            p.body.lines().next().unwrap_or("")
        ));
    }
    Ok(up)
}

/// Step 4: collect, twice (the second run must ask the API for no decided pull request).
fn collect(d: &mut Driver, api: &github_api::GithubApi) -> Result<(), DemoError> {
    let say = d.say;
    d.step("4. collect: merged pull requests that fix an issue and change a test → task instances");
    let url = api.url().to_string();
    let args = [
        "--ark",
        "ark",
        "collect",
        upstream::REPO,
        "--api-url",
        &url,
        "--json",
    ];
    let collected = d.json("collect", &args)?;
    d.summary.api_requests = api
        .counts()
        .requests
        .load(std::sync::atomic::Ordering::Relaxed);
    d.summary.collected = collected["instances"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(outcomes) = collected["outcomes"].as_object() {
        for (number, o) in outcomes {
            if let Some(reason) = o
                .pointer("/reason")
                .or_else(|| o.pointer("/Skipped/reason"))
                .and_then(Value::as_str)
            {
                d.summary
                    .dropped_by_collect
                    .insert(format!("#{number}"), reason.to_string());
            }
        }
    }
    say(&format!(
        "{} instances: {}; dropped: {}",
        d.summary.collected.len(),
        d.summary.collected.join(", "),
        d.summary
            .dropped_by_collect
            .iter()
            .map(|(k, v)| format!("{k} ({v})"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let before = d.summary.api_requests;
    d.json("collect again", &args)?;
    d.summary.api_requests_rerun = api
        .counts()
        .requests
        .load(std::sync::atomic::Ordering::Relaxed)
        - before;
    d.summary.api_not_modified_rerun = api
        .counts()
        .not_modified
        .load(std::sync::atomic::Ordering::Relaxed);
    say(&format!(
        "run again: {} request(s), {} answered 304 Not Modified (decided pull requests are not fetched again)",
        d.summary.api_requests_rerun, d.summary.api_not_modified_rerun
    ));
    Ok(())
}

/// Steps 5 and 6: the lock, then validation.
fn lock_and_validate(d: &mut Driver) -> Result<(), DemoError> {
    let say = d.say;
    d.step("5. env lock: the context installed for real, every file locked by sha256 (the one online step)");
    let lock = d.json(
        "env lock",
        &[
            "--ark",
            "ark",
            "env",
            "lock",
            upstream::REPO,
            "1.0",
            "--json",
        ],
    )?;
    d.summary.lock = lock["id"].as_str().unwrap_or_default().to_string();

    d.step("6. validate: tests run before and after each gold patch, offline, several times");
    let runs = d.opts.runs.to_string();
    let validated = d.json(
        "validate",
        &["--ark", "ark", "validate", "--runs", &runs, "--json"],
    )?;
    for v in validated["validated"].as_array().into_iter().flatten() {
        let id = v["instance_id"].as_str().unwrap_or_default().to_string();
        if v["verdict"] == "kept" {
            d.summary.kept.push(id.clone());
        } else {
            d.summary.dropped_by_validate.insert(
                id.clone(),
                format!(
                    "{}: {}",
                    v["reason_kind"].as_str().unwrap_or(""),
                    v["reason"].as_str().unwrap_or("")
                ),
            );
        }
        if let Some(f) = v["flaky"].as_object().filter(|f| !f.is_empty()) {
            d.summary.flaky.insert(id, f.keys().cloned().collect());
        }
    }
    say(&format!(
        "kept {}: {}; dropped: {}; flaky tests: {}",
        d.summary.kept.len(),
        d.summary.kept.join(", "),
        d.summary
            .dropped_by_validate
            .iter()
            .map(|(k, v)| format!("{k} ({v})"))
            .collect::<Vec<_>>()
            .join(", "),
        d.summary
            .flaky
            .iter()
            .map(|(k, v)| format!("{k}: {}", v.join(" ")))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    Ok(())
}

/// Step 7: the bundles, and what they take in the store.
fn pack(d: &mut Driver) -> Result<(), DemoError> {
    let say = d.say;
    d.step("7. pack: one deterministic, content-hashed bundle per kept instance");
    let packed = d.json(
        "pack",
        &["--ark", "ark", "pack", "--all-validated", "--json"],
    )?;
    for p in packed.as_array().into_iter().flatten() {
        d.summary.bundles.insert(
            p["instance_id"].as_str().unwrap_or_default().to_string(),
            p["id"].as_str().unwrap_or_default().to_string(),
        );
    }

    let stats = d.json("ls --stats", &["--ark", "ark", "ls", "--stats", "--json"])?;
    d.summary.bundles_logical_bytes = stats["total"]["logical_bytes"].as_u64().unwrap_or(0);
    d.summary.bundles_stored_bytes = stats["total"]["stored_bytes"].as_u64().unwrap_or(0);
    say(&format!(
        "{} bundle(s): {} bytes of tar, {} bytes stored (each file kept once, whole or as a \
         delta against the same file in a similar bundle)",
        packed.as_array().map_or(0, Vec::len),
        d.summary.bundles_logical_bytes,
        d.summary.bundles_stored_bytes
    ));
    Ok(())
}

/// Steps 8 and 9: the release, and its export as one file.
fn release_and_export(d: &mut Driver, dir: &Path) -> Result<(), DemoError> {
    let say = d.say;
    d.step("8. release create: the release as one root hash");
    let release = d.json(
        "release create",
        &[
            "--ark",
            "ark",
            "release",
            "create",
            "demo-calc-1.0",
            "--all-validated",
            "-o",
            "demo-calc-1.0.json",
            "--json",
        ],
    )?;
    d.summary.release_root = release["root"]
        .as_str()
        .or_else(|| release["root_hash"].as_str())
        .unwrap_or_default()
        .to_string();
    say(&format!("root hash {}", d.summary.release_root));

    d.step("9. export: the release as one file, to carry across the air gap");
    d.swe_ark(
        "export",
        &[],
        &[
            "--ark",
            "ark",
            "export",
            "--release",
            "demo-calc-1.0.json",
            "-o",
            "demo-calc-1.0.ark",
        ],
        &[],
        &[0],
    )?;
    d.summary.export_bytes = std::fs::metadata(dir.join("demo-calc-1.0.ark"))
        .map(|m| m.len())
        .unwrap_or(0);
    say(&format!(
        "demo-calc-1.0.ark: {} bytes",
        d.summary.export_bytes
    ));
    Ok(())
}

/// Step 10: the release imported into an empty archive, with an empty HOME.
fn import_offline(d: &mut Driver, home: &Path, home_env: &[(&str, &str)]) -> Result<(), DemoError> {
    d.step("10. import-archive, on the \"other machine\": an empty archive, an empty HOME");
    std::fs::create_dir_all(home).map_err(|e| fail("import-archive", e))?;
    let root = d.summary.release_root.clone();
    d.swe_ark(
        "import-archive",
        &[],
        &[
            "--ark",
            "offline-ark",
            "import-archive",
            "demo-calc-1.0.ark",
            "--expect-root",
            &root,
        ],
        home_env,
        &[0],
    )?;
    Ok(())
}

/// Step 11: replay with the network cut: the gold patches, then a model's predictions.
fn replay_offline(
    d: &mut Driver,
    dir: &Path,
    up: &upstream::Upstream,
    home_env: &[(&str, &str)],
) -> Result<(), DemoError> {
    let say = d.say;
    d.step("11. replay there with the network cut: the gold patches, then a model's predictions");
    let unshare_works = Command::new("unshare")
        .args(["-n", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    let wrap: &[&str] = if unshare_works {
        &["unshare", "-n", "--"]
    } else {
        &[]
    };
    if !unshare_works {
        say(
            "(unshare -n is not available here: swe-ark itself keeps the network, the tests still run without it)",
        );
    }
    d.summary.network_cut = unshare_works;
    d.swe_ark(
        "replay gold",
        wrap,
        &[
            "--ark",
            "offline-ark",
            "replay",
            "--gold",
            "--run-id",
            "gold",
        ],
        home_env,
        &[0],
    )?;
    let gold: Value = read_json(&dir.join("offline-ark/runs/gold/gold.gold.json"))?;
    d.summary.gold_total = gold["total_instances"].as_u64().unwrap_or(0) as usize;
    d.summary.gold_resolved = gold["resolved_instances"].as_u64().unwrap_or(0) as usize;
    write_predictions(up, dir)?;
    say("predictions.jsonl: #2 the right fix, #4 a wrong one, #9 empty, #13 not a patch");
    d.swe_ark(
        "replay predictions",
        wrap,
        &[
            "--ark",
            "offline-ark",
            "replay",
            "--predictions",
            "predictions.jsonl",
            "--run-id",
            "model",
        ],
        home_env,
        &[0, 2],
    )?;
    record_predictions(d, dir)
}

/// predictions.jsonl: the right fix for one instance, a wrong one, an empty patch and one
/// that is not a patch.
fn write_predictions(up: &upstream::Upstream, dir: &Path) -> Result<(), DemoError> {
    let by_number = |n: u64| up.pulls.iter().find(|p| p.number == n);
    let instance = |n: u64| format!("demo__calc-{n}");
    let mut preds = String::new();
    let mut pred = |n: u64, patch: Option<String>| {
        preds.push_str(
            &serde_json::json!({
                "instance_id": instance(n),
                "model_name_or_path": "demo-model",
                "model_patch": patch,
            })
            .to_string(),
        );
        preds.push('\n');
    };
    // The right answer to #1: the non-test half of pull request #2, as a model that got it
    // right would write it.
    let right = match by_number(2) {
        Some(p) => gitcmd::run(
            &up.dir,
            &["diff", "--no-color", &p.base_sha, &p.head_sha, "--", "calc"],
        )
        .map_err(|e| fail("predictions", e))?,
        None => String::new(),
    };
    pred(2, Some(right));
    let base4 = by_number(4).map(|p| p.base_sha.clone()).unwrap_or_default();
    pred(4, Some(wrong_patch(&up.dir, &dir.join("scratch"), &base4)?));
    pred(9, Some(String::new()));
    pred(13, Some("this is not a diff\n".into()));
    write(&dir.join("predictions.jsonl"), &preds)?;
    Ok(())
}

/// What the replay of the predictions said of each instance.
fn record_predictions(d: &mut Driver, dir: &Path) -> Result<(), DemoError> {
    let model: Value = read_json(&dir.join("offline-ark/runs/model/demo-model.model.json"))?;
    for id in model["resolved_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        d.summary
            .predictions
            .insert(id.to_string(), "resolved".into());
    }
    for id in model["unresolved_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        d.summary
            .predictions
            .insert(id.to_string(), "unresolved".into());
    }
    if let Some(errors) = model["errors"].as_object() {
        for (id, e) in errors {
            d.summary.predictions.insert(
                id.clone(),
                e["reason"].as_str().unwrap_or("error").to_string(),
            );
        }
    }
    Ok(())
}

/// Step 12: release verify, verify, verify --rebuild, and a tampered bundle caught.
fn verify_everything(
    d: &mut Driver,
    dir: &Path,
    home_env: &[(&str, &str)],
) -> Result<(), DemoError> {
    let say = d.say;
    d.step("12. release verify, verify, verify --rebuild: everything by hash");
    let (code, _) = d.swe_ark(
        "release verify",
        &[],
        &[
            "--ark",
            "offline-ark",
            "release",
            "verify",
            "demo-calc-1.0.json",
        ],
        home_env,
        &[0, 1],
    )?;
    d.summary.release_verified = code == 0;
    let (code, _) = d.swe_ark(
        "verify",
        &[],
        &["--ark", "offline-ark", "verify"],
        home_env,
        &[0, 1],
    )?;
    d.summary.verified = code == 0;
    say("and on the first machine, every bundle packed again from its mirror, compared by id:");
    let (code, _) = d.swe_ark(
        "verify --rebuild",
        &[],
        &["--ark", "ark", "verify", "--rebuild"],
        &[],
        &[0, 1],
    )?;
    d.summary.rebuilt_identical = code == 0;
    // A bundle with one byte changed, as a bad disk or a hand might leave it: caught.
    if let Some(id) = d.summary.bundles.values().next().cloned() {
        let name = format!("{id}.tar.zst");
        d.swe_ark(
            "export-bundle",
            &[],
            &[
                "--ark",
                "offline-ark",
                "export-bundle",
                &id,
                "-o",
                "exported",
            ],
            home_env,
            &[0],
        )?;
        let mut bytes =
            std::fs::read(dir.join("exported").join(&name)).map_err(|e| fail("tamper", e))?;
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x01;
        write(&dir.join("tampered").join(&name), "")?;
        std::fs::write(dir.join("tampered").join(&name), &bytes).map_err(|e| fail("tamper", e))?;
        say("a copy of one bundle with one byte flipped:");
        let tampered = format!("tampered/{name}");
        let (code, _) = d.swe_ark(
            "verify tampered",
            &[],
            &["verify", &tampered],
            home_env,
            &[0, 1, 2],
        )?;
        d.summary.tamper_caught = code != 0;
    }
    Ok(())
}

/// Runs the demo; `say` prints a line of its narration.
pub fn run(opts: &DemoOptions, say: &dyn Fn(&str)) -> Result<DemoSummary, DemoError> {
    let started = Instant::now();
    let dir = fresh_dir(&opts.dir)?;
    let opts = &DemoOptions {
        dir: dir.clone(),
        ..opts.clone()
    };
    let env = demo_env(opts, &dir)?;
    let mut d = Driver {
        opts,
        say,
        env,
        summary: DemoSummary {
            dir: dir.clone(),
            ..DemoSummary::default()
        },
    };

    let up = make_upstream(&d, &dir)?;

    d.step("2. Its GitHub API, served by swe-ark on 127.0.0.1");
    let api = github_api::GithubApi::start(upstream::REPO, &up).map_err(|e| fail("api", e))?;
    say(&format!(
        "{} serves /repos/{}/pulls, …/commits, the .diff, issues and comments",
        api.url(),
        upstream::REPO
    ));

    d.step("3. mirror: the repository with its full history");
    d.swe_ark(
        "mirror",
        &[],
        &[
            "--ark",
            "ark",
            "mirror",
            "add",
            "upstream",
            "--name",
            upstream::REPO,
        ],
        &[],
        &[0],
    )?;

    collect(&mut d, &api)?;
    drop(api);

    lock_and_validate(&mut d)?;
    pack(&mut d)?;
    release_and_export(&mut d, &dir)?;
    let home = dir.join("offline-home");
    let home_s = home.display().to_string();
    let home_env = [("HOME", home_s.as_str())];
    import_offline(&mut d, &home, &home_env)?;
    replay_offline(&mut d, &dir, &up, &home_env)?;
    verify_everything(&mut d, &dir, &home_env)?;
    d.summary.archive_bytes = dir_size(&dir.join("ark"));

    d.summary
        .seconds
        .push(("total".into(), started.elapsed().as_secs_f64()));
    Ok(d.summary)
}

fn read_json(path: &Path) -> Result<Value, DemoError> {
    let bytes =
        std::fs::read(path).map_err(|e| fail("reports", format!("{}: {e}", path.display())))?;
    serde_json::from_slice(&bytes).map_err(|e| fail("reports", format!("{}: {e}", path.display())))
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}
