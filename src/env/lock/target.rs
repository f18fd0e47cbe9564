//! What a lock is of: the interpreter, the environment setup commit and the cutoff.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::LockOptions;
use crate::env::asof::{self, Cutoff, CutoffRule, rfc3339};
use crate::env::{EnvError, python};
use crate::manifest::Context;
use crate::mirror::{Mirror, RepoName};
use crate::store::Ark;

/// What a lock is of: the interpreter, the mirror, the environment setup commit and the cutoff.
pub(super) struct Target {
    pub(super) interp: python::Interpreter,
    pub(super) mirror: Mirror,
    pub(super) commit: String,
    pub(super) cutoff: Cutoff,
}

/// The interpreter (exact major.minor), the environment setup commit and its date, and the
/// cutoff they give.
pub(super) fn resolve_target(
    ark: &Ark,
    ctx: &Context,
    opts: &LockOptions,
    say: &dyn Fn(&str),
) -> Result<Target, EnvError> {
    if ctx.python.starts_with("2.") {
        return Err(EnvError::NoVenv(ctx.python.clone()));
    }
    let interp = python::find(&ctx.python, opts.python.as_deref())?;
    say(&format!(
        "Python {} at {}",
        interp.version,
        interp.path.display()
    ));
    let name = RepoName::parse(&ctx.repo).ok_or_else(|| EnvError::NoCommit {
        repo: ctx.repo.clone(),
        version: ctx.version.clone(),
    })?;
    let mirror = Mirror::open(&ark.mirrors_dir(), &name)?;
    let commit_arg = resolve_commit(ark, ctx, opts.commit.as_deref())?;
    let (commit, commit_time) = {
        let c = mirror
            .repo
            .revparse_single(&commit_arg)
            .and_then(|o| o.peel_to_commit())
            .map_err(|_| crate::mirror::MirrorError::MissingCommit {
                name: ctx.repo.clone(),
                commit: commit_arg.clone(),
                hint: format!(
                    " (run `swe-ark mirror update {}`, or check the id)",
                    ctx.repo
                ),
            })?;
        (c.id().to_string(), c.time().seconds())
    };
    let cutoff = resolve_cutoff(
        ark,
        ctx,
        opts.exclude_newer,
        &commit,
        UNIX_EPOCH + Duration::from_secs(commit_time.max(0) as u64),
    )?;
    say(&format!(
        "{} {} at {}: resolving as of {} ({})",
        ctx.repo,
        ctx.version,
        &commit[..12],
        rfc3339(cutoff.when),
        cutoff.describe()
    ));
    Ok(Target {
        interp,
        mirror,
        commit,
        cutoff,
    })
}

/// The environment setup commit: `--commit`, else the one the index's instances agree on.
fn resolve_commit(ark: &Ark, ctx: &Context, given: Option<&str>) -> Result<String, EnvError> {
    if let Some(c) = given {
        return Ok(c.to_string());
    }
    let mut commits = BTreeSet::new();
    for row in ark.index().instances_of_repo(&ctx.repo)? {
        if row.version == ctx.version
            && let Some(inst) = ark.index().instance(&row.instance_id)?
            && !inst.environment_setup_commit.is_empty()
        {
            commits.insert(inst.environment_setup_commit.clone());
        }
    }
    match commits.len() {
        0 => Err(EnvError::NoCommit {
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
        }),
        1 => Ok(commits.into_iter().next().unwrap_or_default()),
        _ => Err(EnvError::AmbiguousCommit {
            repo: ctx.repo.clone(),
            version: ctx.version.clone(),
            commits: commits.into_iter().collect(),
        }),
    }
}

/// The cutoff of a lock: `--exclude-newer`, else the environments date of the dataset the
/// instances of this version came from, else the commit's date. A cutoff before the commit
/// (nothing could have been built then) or in the future is refused, as are instances of
/// several datasets that disagree.
pub fn resolve_cutoff(
    ark: &Ark,
    ctx: &Context,
    explicit: Option<SystemTime>,
    commit: &str,
    commit_time: SystemTime,
) -> Result<Cutoff, EnvError> {
    let cutoff = if let Some(when) = explicit {
        Cutoff {
            when,
            rule: CutoffRule::Explicit,
        }
    } else {
        let dated: Vec<_> = ark
            .index()
            .datasets_of(&ctx.repo, &ctx.version)?
            .into_iter()
            .filter_map(|d| Some((d.environments_as_of.clone()?, d)))
            .collect();
        let dates: BTreeSet<&str> = dated.iter().map(|(w, _)| w.as_str()).collect();
        match dates.len() {
            0 => Cutoff {
                when: commit_time,
                rule: CutoffRule::Commit,
            },
            1 => {
                let (when, d) = &dated[0];
                Cutoff {
                    when: asof::parse_when(when).ok_or_else(|| EnvError::BadCutoff {
                        detail: format!(
                            "dataset {}'s environments date `{when}` is not a date",
                            d.name
                        ),
                    })?,
                    rule: CutoffRule::Dataset {
                        name: d.name.clone(),
                        rule: d.rule.clone(),
                    },
                }
            }
            _ => {
                return Err(EnvError::BadCutoff {
                    detail: format!(
                        "the instances of {} {} come from datasets with different environments \
                         dates ({}); pass --exclude-newer WHEN to choose one",
                        ctx.repo,
                        ctx.version,
                        dated
                            .iter()
                            .map(|(w, d)| format!("{} as of {w}", d.name))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
    };
    if cutoff.when < commit_time {
        return Err(EnvError::BadCutoff {
            detail: format!(
                "the cutoff {} ({}) is before the environment setup commit {} of {} {} \
                 (committed {}): an environment cannot have been built before its code existed",
                rfc3339(cutoff.when),
                cutoff.describe(),
                &commit[..commit.len().min(12)],
                ctx.repo,
                ctx.version,
                rfc3339(commit_time)
            ),
        });
    }
    let now = SystemTime::now();
    if cutoff.when > now {
        return Err(EnvError::BadCutoff {
            detail: format!(
                "the cutoff {} ({}) is in the future (now {}): a lock resolved as of it would \
                 change as packages are uploaded",
                rfc3339(cutoff.when),
                cutoff.describe(),
                rfc3339(now)
            ),
        });
    }
    Ok(cutoff)
}
