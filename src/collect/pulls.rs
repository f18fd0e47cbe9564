//! Collection: merged pull requests of one repository turned into task instances by the rules
//! in `rules`, through the client in `github`. Every pull request's outcome is kept, so a run
//! that stops can be started again and goes on where it was.

use std::collections::BTreeMap;

use serde_json::Value;

use super::github::{GithubClient, GithubError};
use super::rules;
use crate::dataset::{Instance, InstanceError};
use crate::store::IndexError;

#[derive(Debug, Clone, Default)]
pub struct CollectOptions {
    /// Only pull requests created at or after this time (RFC 3339, or a date `2024-01-01`).
    pub since: Option<String>,
    /// Only pull requests created before this time.
    pub until: Option<String>,
    /// Stop after this many merged pull requests.
    pub max_pulls: Option<usize>,
}

/// What became of one pull request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    Instance { instance_id: String },
    Skipped { reason: String },
}

#[derive(Debug, Default)]
pub struct CollectReport {
    pub pulls_listed: usize,
    pub merged: usize,
    pub already_done: usize,
    pub instances: Vec<Instance>,
    /// Pull number → outcome, for this run's pull requests.
    pub outcomes: BTreeMap<u64, Outcome>,
}

fn str_field<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

/// A `--since`/`--until` bound as an instant: a date (`2024-01-01`, the start of that day, UTC)
/// or an RFC 3339 time with any offset.
fn parse_bound(s: &str) -> Result<rules::Instant, CollectError> {
    let full = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_string()
    };
    rules::parse_rfc3339(&full).map_err(|e| CollectError::BadBound(s.to_string(), e.to_string()))
}

/// Why a pull request gives no instance (its outcome's reason).
#[derive(Debug, thiserror::Error)]
enum Skip {
    #[error("the pull request has no base sha")]
    NoBase,
    #[error("it resolves no issue")]
    NoIssue,
    #[error("its diff is not found")]
    DiffNotFound,
    #[error("its diff cannot be read: {0}")]
    BadDiff(#[source] rules::RulesError),
    #[error("it changes no test file")]
    NoTestFile,
    #[error("it changes only test files (no gold patch)")]
    OnlyTests,
    #[error("its linked issue #{0} is not found (404)")]
    IssueNotFound(u64),
    #[error("every `#N` it names is a pull request, not an issue")]
    OnlyPulls,
    #[error("its data does not make an instance: {0}")]
    NotAnInstance(#[source] InstanceError),
    #[error("the API's answer at {url} is not valid JSON: {detail}")]
    BadJson { url: String, detail: String },
}

/// The issues' statements (title, body) and comments (time, body).
type IssueTexts = (Vec<(String, String)>, Vec<(String, String)>);

/// The linked issues' titles and bodies, and their comments (time, body); pull requests that
/// `#N` names are passed over.
fn issue_texts(
    client: &mut GithubClient,
    repo_path: &str,
    issues: &[u64],
) -> Result<Result<IssueTexts, Skip>, GithubError> {
    let mut statements = Vec::new();
    let mut comments = Vec::new();
    for issue in issues {
        let data = match client.get_json(&format!("{repo_path}/issues/{issue}")) {
            Ok(d) => d,
            Err(GithubError::NotFound { .. }) => {
                return Ok(Err(Skip::IssueNotFound(*issue)));
            }
            Err(e) => return Err(e),
        };
        if data.get("pull_request").is_some() {
            // `#N` may name another pull request, not an issue.
            continue;
        }
        statements.push((
            str_field(&data, &["title"]).unwrap_or_default().to_string(),
            str_field(&data, &["body"]).unwrap_or_default().to_string(),
        ));
        for c in client.get_all(&format!("{repo_path}/issues/{issue}/comments"))? {
            comments.push((
                str_field(&c, &["created_at"])
                    .unwrap_or_default()
                    .to_string(),
                str_field(&c, &["body"]).unwrap_or_default().to_string(),
            ));
        }
    }
    Ok(Ok((statements, comments)))
}

/// Why a pull request gives no instance, or the instance it gives.
fn process_pull(
    client: &mut GithubClient,
    owner: &str,
    name: &str,
    pr: &Value,
) -> Result<Result<Instance, Skip>, GithubError> {
    let number = pr.get("number").and_then(Value::as_u64).unwrap_or(0);
    let repo_path = format!("/repos/{owner}/{name}");
    let Some(base) = str_field(pr, &["base", "sha"]) else {
        return Ok(Err(Skip::NoBase));
    };
    let created_at = str_field(pr, &["created_at"])
        .unwrap_or_default()
        .to_string();
    let title = str_field(pr, &["title"]).unwrap_or_default().to_string();
    let body = str_field(pr, &["body"]).unwrap_or_default().to_string();

    let commits = client.get_all(&format!("{repo_path}/pulls/{number}/commits"))?;
    let messages: Vec<String> = commits
        .iter()
        .filter_map(|c| str_field(c, &["commit", "message"]).map(str::to_string))
        .collect();
    let first_commit_time = commits
        .first()
        .and_then(|c| str_field(c, &["commit", "author", "date"]))
        .unwrap_or(&created_at)
        .to_string();
    let mut texts: Vec<&str> = vec![&title, &body];
    texts.extend(messages.iter().map(String::as_str));
    let issues = rules::linked_issues(&texts, owner, name);
    if issues.is_empty() {
        return Ok(Err(Skip::NoIssue));
    }

    let diff = match client.get_diff(&format!("{repo_path}/pulls/{number}")) {
        Ok(d) => d,
        Err(GithubError::NotFound { .. }) => return Ok(Err(Skip::DiffNotFound)),
        Err(e) => return Err(e),
    };
    let split = match rules::split_diff(&diff) {
        Ok(s) => s,
        Err(e) => return Ok(Err(Skip::BadDiff(e))),
    };
    if split.test_files.is_empty() {
        return Ok(Err(Skip::NoTestFile));
    }
    if split.gold_files.is_empty() {
        return Ok(Err(Skip::OnlyTests));
    }

    let (statements, comments) = match issue_texts(client, &repo_path, &issues)? {
        Ok(texts) => texts,
        Err(skip) => return Ok(Err(skip)),
    };
    if statements.is_empty() {
        return Ok(Err(Skip::OnlyPulls));
    }
    let mut extra = BTreeMap::new();
    extra.insert("pull_number".to_string(), Value::from(number));
    extra.insert(
        "issue_numbers".to_string(),
        Value::from(issues.iter().map(|n| Value::from(*n)).collect::<Vec<_>>()),
    );
    let new_names = rules::new_names_used_by_tests(&split.patch, &split.test_patch);
    if !new_names.is_empty() {
        extra.insert(
            "uses_new_names".to_string(),
            Value::from(new_names.into_iter().map(Value::from).collect::<Vec<_>>()),
        );
    }
    let value = serde_json::json!({
        "instance_id": rules::instance_id(owner, name, number),
        "repo": format!("{owner}/{name}"),
        "base_commit": base,
        "patch": split.patch,
        "test_patch": split.test_patch,
        "problem_statement": rules::problem_statement(&statements),
        "hints_text": rules::hints_text(&comments, &first_commit_time),
        "created_at": created_at,
    });
    let mut inst = match Instance::from_value(value) {
        Ok(i) => i,
        Err(e) => return Ok(Err(Skip::NotAnInstance(e))),
    };
    inst.extra = extra;
    Ok(Ok(inst))
}

/// Called with each pull request's number and outcome (and instance, if it gave one) as soon
/// as it is decided; an error stops the run.
pub type RecordOutcome<'a> =
    dyn FnMut(u64, &Outcome, Option<&Instance>) -> Result<(), IndexError> + 'a;

/// Collects the merged pull requests of `owner/name`, oldest first. `done` says which pull
/// requests an earlier run already decided (they are not fetched again); `record` is called
/// with each new outcome as soon as it is known, so an interrupted run loses nothing.
pub fn collect(
    client: &mut GithubClient,
    owner: &str,
    name: &str,
    options: &CollectOptions,
    done: &dyn Fn(u64) -> bool,
    record: &mut RecordOutcome,
) -> Result<CollectReport, CollectError> {
    let pulls = client.get_all(&format!(
        "/repos/{owner}/{name}/pulls?state=closed&sort=created&direction=asc"
    ))?;
    let since = options.since.as_deref().map(parse_bound).transpose()?;
    let until = options.until.as_deref().map(parse_bound).transpose()?;
    let mut report = CollectReport {
        pulls_listed: pulls.len(),
        ..CollectReport::default()
    };
    for pr in &pulls {
        let Some(number) = pr.get("number").and_then(Value::as_u64) else {
            continue;
        };
        if pr.get("merged_at").is_none_or(Value::is_null) {
            continue;
        }
        let created = str_field(pr, &["created_at"]).and_then(|c| rules::parse_rfc3339(c).ok());
        let outside = match created {
            Some(c) => since.is_some_and(|s| c < s) || until.is_some_and(|u| c >= u),
            None => since.is_some() || until.is_some(),
        };
        if outside {
            continue;
        }
        if options.max_pulls.is_some_and(|m| report.merged >= m) {
            break;
        }
        report.merged += 1;
        if done(number) {
            report.already_done += 1;
            continue;
        }
        // Bad data for one pull request skips it; the run goes on.
        let decided = match process_pull(client, owner, name, pr) {
            Ok(d) => d,
            Err(GithubError::BadJson { url, detail }) => Err(Skip::BadJson { url, detail }),
            Err(e) => return Err(e.into()),
        };
        let outcome = match decided {
            Ok(inst) => {
                let o = Outcome::Instance {
                    instance_id: inst.instance_id.clone(),
                };
                record(number, &o, Some(&inst)).map_err(CollectError::Record)?;
                report.instances.push(inst);
                o
            }
            Err(skip) => {
                let o = Outcome::Skipped {
                    reason: skip.to_string(),
                };
                record(number, &o, None).map_err(CollectError::Record)?;
                o
            }
        };
        report.outcomes.insert(number, outcome);
        crate::failpoint::hit("collect.after-record");
    }
    Ok(report)
}

/// Fills in `version` (read from the mirror at each base commit, by the manifest's `rule` when
/// the repository has one) and
/// `environment_setup_commit` (the base commit of the newest instance of the same version,
/// by `created_at`), and pins each base commit in the mirror. Returns the pins made
/// (instance id, ref, commit), and notes for instances whose commit the mirror lacks or whose
/// version cannot be told.
pub fn assign_versions(
    mirror: &crate::mirror::Mirror,
    instances: &mut [Instance],
    rule: Option<&crate::manifest::VersionRule>,
) -> (Vec<(String, String, String)>, Vec<String>) {
    let mut notes = Vec::new();
    let mut pins = Vec::new();
    for inst in instances.iter_mut() {
        let Ok(commit) = mirror.commit(&inst.base_commit) else {
            notes.push(format!(
                "{}: base commit {} is not in mirror {} (run `swe-ark mirror update {}`)",
                inst.instance_id, inst.base_commit, mirror.name, mirror.name
            ));
            continue;
        };
        match mirror.pin(&inst.instance_id, "base_commit", &inst.base_commit) {
            Ok(reference) => pins.push((
                inst.instance_id.clone(),
                reference,
                inst.base_commit.clone(),
            )),
            Err(e) => notes.push(format!(
                "{}: cannot pin its base commit: {e}",
                inst.instance_id
            )),
        }
        match super::version::detect(&mirror.repo, commit.id(), &inst.created_at, rule) {
            Some(v) => inst.version = v.version,
            None => notes.push(format!(
                "{}: no version found at {} (no packaging file, __version__ or version tag)",
                inst.instance_id, inst.base_commit
            )),
        }
    }
    let mut newest: BTreeMap<String, (String, String)> = BTreeMap::new();
    for inst in instances.iter() {
        if inst.version.is_empty() {
            continue;
        }
        let key = (inst.created_at.clone(), inst.base_commit.clone());
        let slot = newest
            .entry(inst.version.clone())
            .or_insert_with(|| key.clone());
        if key.0 > slot.0 {
            *slot = key;
        }
    }
    for inst in instances.iter_mut() {
        if let Some((_, commit)) = newest.get(&inst.version) {
            inst.environment_setup_commit = commit.clone();
        }
    }
    (pins, notes)
}

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("`{0}` is not a date (2024-01-01) or an RFC 3339 time: {1}")]
    BadBound(String, String),
    #[error(transparent)]
    Github(#[from] GithubError),
    #[error("cannot record an outcome in the index: {0}")]
    Record(#[source] IndexError),
}
