use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use crate::bundle::{Codebase, PackInputs, PackOptions, ValidationRecord};
use crate::dataset::Instance;
use crate::mirror::{Mirror, RepoName};
use crate::store::{Ark, PinRow};
use crate::validate::expected::BundleRecord;
use crate::vcs::VcsRecord;

use super::Context;
use super::output::human_bytes;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").args(["codebase", "repo"])))]
pub struct PackArgs {
    /// One SWE-bench instance as JSON.
    #[arg(long, value_name = "FILE", required_unless_present_any = ["instance_ids", "all_validated"])]
    pub instance: Option<PathBuf>,
    /// Pack these validated instances from the index: the codebase from the mirror, the
    /// context, the lock, the logs and results of their validation.
    #[arg(long, value_delimiter = ',', value_name = "ID",
          conflicts_with_all = ["instance", "codebase", "repo", "spec", "lock", "pre_log", "post_log", "results", "validation", "vcs"])]
    pub instance_ids: Vec<String>,
    /// Pack every instance that validation kept.
    #[arg(long, conflicts_with_all = ["instance", "codebase", "repo", "instance_ids"])]
    pub all_validated: bool,
    /// The codebase at the instance's base commit, from a directory (a `.git` inside is left
    /// out).
    #[arg(long, value_name = "DIR")]
    pub codebase: Option<PathBuf>,
    /// The codebase from this repository's mirror in the archive, with no checkout.
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// The commit to pack from the mirror (default and only choice: the instance's
    /// base_commit; given, it must equal it).
    #[arg(long, value_name = "SHA", requires = "repo")]
    pub commit: Option<String>,
    /// The executable context (TOML), stored as env/spec.toml.
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// The environment lock (PEP 751 pylock.toml), stored as env/pylock.toml.
    #[arg(long, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// The expected log of the run before the gold patch.
    #[arg(long, value_name = "FILE")]
    pub pre_log: Option<PathBuf>,
    /// The expected log of the run after the gold patch.
    #[arg(long, value_name = "FILE")]
    pub post_log: Option<PathBuf>,
    /// A validation's results.json (as `swe-ark validate` records it): the bundle keeps what it
    /// proved as expected.json and the logs normalized (format version 3), as packing from the
    /// index does.
    #[arg(long, value_name = "FILE", conflicts_with = "results")]
    pub validation: Option<PathBuf>,
    /// Results of your own (JSON), kept as given as results.json (format version 1 or 2).
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    /// What git says about the base commit (`vcs.json`, docs/BUNDLE-FORMAT.md), from a file,
    /// for a codebase from a directory. Without it, it is computed from the directory's own
    /// repository when the directory is a git work tree (not shallow) whose HEAD is the base
    /// commit, and left out otherwise.
    #[arg(
        long,
        value_name = "FILE",
        requires = "codebase",
        conflicts_with = "no_vcs"
    )]
    pub vcs: Option<PathBuf>,
    /// Leave `vcs.json` out (a format version 1 bundle, as swe-ark wrote before version 2).
    #[arg(long, conflicts_with_all = ["instance_ids", "all_validated"])]
    pub no_vcs: bool,
    /// Write the bundle as a self-contained file, DIR/<id>.tar.zst (the exchange form), instead
    /// of into the archive's store; the index is left as it is.
    #[arg(short, long, value_name = "DIR", conflicts_with_all = ["instance_ids", "all_validated"])]
    pub output: Option<PathBuf>,
    /// zstd level (1-22); the bundle id does not depend on it.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22))]
    pub level: i32,
    /// zstd worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: u32,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn read(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {what} `{}`", path.display()))
}

fn read_toml(path: &Option<PathBuf>, what: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let Some(path) = path else { return Ok(None) };
    let bytes = read(path, what)?;
    let text = std::str::from_utf8(&bytes)
        .with_context(|| format!("{what} `{}` is not UTF-8", path.display()))?;
    if let Err(e) = text.parse::<toml::Table>() {
        bail!("{what} `{}` is not valid TOML: {e}", path.display());
    }
    Ok(Some(bytes))
}

/// Reads the instance's base commit from its mirror, with what git says about it, and pins it
/// (and the environment setup commit, when the mirror has it) so that no later fetch can drop
/// them.
fn codebase_from_mirror(
    ctx: &Context,
    ark: &mut Ark,
    instance: &Instance,
    repo: &str,
    commit: Option<&str>,
) -> anyhow::Result<(Codebase, VcsRecord)> {
    let name = RepoName::parse(repo)
        .with_context(|| format!("--repo `{repo}` is not of the form OWNER/NAME"))?;
    if !instance.repo.eq_ignore_ascii_case(name.as_str()) {
        bail!(
            "instance {} is of repository {}, not {name}",
            instance.instance_id,
            instance.repo
        );
    }
    if let Some(c) = commit
        && c != instance.base_commit
    {
        bail!(
            "--commit {c} is not the base_commit of instance {} ({})",
            instance.instance_id,
            instance.base_commit
        );
    }
    let mirror = Mirror::open(&ark.mirrors_dir(), &name)?;
    let progress = ctx.progress();
    let codebase = mirror.codebase_at(&instance.base_commit, progress.as_ref())?;
    let vcs = crate::vcs::record(&mirror.path, &instance.base_commit).with_context(|| {
        format!(
            "what git says about commit {} of mirror {name} (vcs.json)",
            instance.base_commit
        )
    })?;
    let mut pins = vec![("base_commit", instance.base_commit.as_str())];
    let env = instance.environment_setup_commit.as_str();
    if !env.is_empty() && env != instance.base_commit {
        if mirror.commit(env).is_ok() {
            pins.push(("environment_setup_commit", env));
        } else {
            ctx.note(format!(
                "warning: the environment setup commit {env} is not in mirror {name}; it is not pinned"
            ));
        }
    }
    for (role, commit) in pins {
        let reference = mirror.pin(&instance.instance_id, role, commit)?;
        ark.index_mut().record_pin(&PinRow {
            mirror: name.to_string(),
            reference,
            commit: commit.to_string(),
            instance_id: instance.instance_id.clone(),
            role: role.to_string(),
        })?;
    }
    Ok((codebase, vcs))
}

/// `vcs.json` for a codebase packed from directory `dir`: `--vcs FILE`; else computed from
/// `dir`'s own repository when `dir` is a git work tree at the base commit; else none (said on
/// stderr when `dir` has a `.git` that could not give it).
fn vcs_for_dir(
    ctx: &Context,
    args: &PackArgs,
    dir: &Path,
    instance: &Instance,
) -> anyhow::Result<Option<VcsRecord>> {
    if args.no_vcs {
        return Ok(None);
    }
    if let Some(file) = &args.vcs {
        let bytes = read(file, "--vcs")?;
        let record: VcsRecord = serde_json::from_slice(&bytes)
            .with_context(|| format!("--vcs `{}` is not a VCS record", file.display()))?;
        if let Err(why) = record.check() {
            bail!(
                "--vcs `{}` is not a valid VCS record: {why}",
                file.display()
            );
        }
        if record.base_commit.hex() != instance.base_commit {
            bail!(
                "--vcs `{}` is about commit {}, not the base commit of instance {} ({})",
                file.display(),
                record.base_commit,
                instance.instance_id,
                instance.base_commit
            );
        }
        return Ok(Some(record));
    }
    let git_dir = dir.join(".git");
    if !git_dir.exists() {
        return Ok(None);
    }
    let skip = |why: String| {
        ctx.note(format!(
            "note: no vcs.json: {why} (give --vcs FILE, or --no-vcs to silence this)"
        ));
        Ok(None)
    };
    let head = crate::gitcmd::command()
        .arg("--git-dir")
        .arg(&git_dir)
        .args(["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        .output();
    let head = match head {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => return skip(format!("`{}` is not a git repository", git_dir.display())),
    };
    if head != instance.base_commit {
        return skip(format!(
            "the HEAD of `{}` is {head}, not the base commit {}",
            dir.display(),
            instance.base_commit
        ));
    }
    match crate::vcs::record(&git_dir, &instance.base_commit) {
        Ok(r) => Ok(Some(r)),
        Err(e) => skip(e.to_string()),
    }
}

pub fn run(ctx: &Context, args: PackArgs) -> anyhow::Result<ExitCode> {
    if !args.instance_ids.is_empty() || args.all_validated {
        return pack_validated(ctx, &args);
    }
    let Some(instance_path) = &args.instance else {
        bail!(
            "give --instance FILE with --codebase or --repo, or --instance-ids / --all-validated"
        );
    };
    let instance_bytes = read(instance_path, "instance")?;
    let instance = Instance::from_json(&instance_bytes)
        .with_context(|| format!("instance file `{}`", instance_path.display()))?;
    let spec = read_toml(&args.spec, "--spec")?;
    let lock = read_toml(&args.lock, "--lock")?;
    let results = match &args.results {
        Some(p) => {
            let bytes = read(p, "--results")?;
            serde_json::from_slice::<serde_json::Value>(&bytes)
                .with_context(|| format!("--results `{}` is not valid JSON", p.display()))?;
            Some(bytes)
        }
        None => None,
    };
    let mut pre_log = args
        .pre_log
        .as_deref()
        .map(|p| read(p, "--pre-log"))
        .transpose()?;
    let mut post_log = args
        .post_log
        .as_deref()
        .map(|p| read(p, "--post-log"))
        .transpose()?;
    let record = match (&args.validation, results) {
        (Some(p), _) => {
            let bytes = read(p, "--validation")?;
            let v: crate::validate::Results =
                serde_json::from_slice(&bytes).with_context(|| {
                    format!(
                        "--validation `{}` is not a validation's results.json",
                        p.display()
                    )
                })?;
            if v.instance_id != instance.instance_id {
                bail!(
                    "--validation `{}` is the validation of {}, not of {}",
                    p.display(),
                    v.instance_id,
                    instance.instance_id
                );
            }
            let kept = BundleRecord::of(&v, pre_log.as_deref(), post_log.as_deref());
            (pre_log, post_log) = (kept.pre_log, kept.post_log);
            Some(ValidationRecord::Expected(kept.expected))
        }
        (None, Some(bytes)) => Some(ValidationRecord::Results(bytes)),
        (None, None) => None,
    };

    let progress = ctx.progress();
    let started = std::time::Instant::now();
    let mut ark = None;
    let (codebase, vcs) = match (&args.codebase, &args.repo) {
        (Some(dir), _) => {
            let codebase = Codebase::from_dir(dir, progress.as_ref())?;
            let vcs = vcs_for_dir(ctx, &args, dir, &instance)?;
            if args.output.is_none() {
                ark = Some(Ark::create(&ctx.ark)?);
            }
            (codebase, vcs)
        }
        (None, Some(repo)) => {
            let opened = ark.insert(Ark::open(&ctx.ark)?);
            let (codebase, vcs) =
                codebase_from_mirror(ctx, opened, &instance, repo, args.commit.as_deref())?;
            (codebase, (!args.no_vcs).then_some(vcs))
        }
        (None, None) => bail!("give --codebase DIR or --repo OWNER/NAME"),
    };
    tracing::debug!(
        "hashed {} codebase files in {:.2?}",
        codebase.entries.len(),
        started.elapsed()
    );
    let inputs = PackInputs {
        instance: &instance,
        codebase: &codebase,
        spec,
        lock,
        pre_log,
        post_log,
        record,
        vcs: vcs.as_ref(),
    };
    let options = PackOptions {
        level: args.level,
        threads: args.threads,
    };
    let started = std::time::Instant::now();
    let packed = match (&args.output, &mut ark) {
        (Some(dir), _) => crate::bundle::pack_to_dir(&inputs, dir, &options, progress.as_ref())?,
        (None, Some(ark)) => ark.pack(&inputs, &options, progress.as_ref())?,
        (None, None) => bail!("no archive to pack into"),
    };
    tracing::debug!("wrote the bundle in {:.2?}", started.elapsed());
    if args.json {
        let v = serde_json::json!({
            "id": packed.id,
            "instance_id": instance.instance_id,
            "path": packed.path,
            "codebase_tree": packed.codebase_tree,
            "codebase_files": packed.codebase_files,
            "members": packed.member_count,
            "tar_size": packed.tar_size,
            "file_size": packed.file_size,
            "describe": vcs.as_ref().and_then(|v| v.describe.clone()),
        });
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let stored = match &packed.path {
            Some(p) => format!(
                "{} ({:.1}x) in {}",
                human_bytes(packed.file_size),
                packed.tar_size as f64 / packed.file_size.max(1) as f64,
                p.display()
            ),
            None => format!("{} added to the store", human_bytes(packed.file_size)),
        };
        ctx.note(format!(
            "packed {}: {} codebase files, tree {}, {}tar {}, {stored}",
            instance.instance_id,
            packed.codebase_files,
            packed.codebase_tree,
            describe_note(vcs.as_ref()),
            human_bytes(packed.tar_size),
        ));
        out!("{}", packed.id);
    }
    Ok(ExitCode::SUCCESS)
}

/// `git describe 4.4.2-6-g…, ` for a note (`no tag, ` when none is reachable).
fn describe_note(vcs: Option<&VcsRecord>) -> String {
    match vcs {
        None => String::new(),
        Some(v) => match (&v.describe, v.tags.first()) {
            (Some(_), Some(t)) => format!("git describe {}-{}, ", t.name, t.distance),
            _ => format!("no tag in {} commits, ", v.commits),
        },
    }
}

/// Packs validated instances from the index: everything a bundle holds comes from the archive.
fn pack_validated(ctx: &Context, args: &PackArgs) -> anyhow::Result<ExitCode> {
    let mut ark = Ark::open(&ctx.ark)?;
    let manifests = crate::manifest::Manifests::load_default()?;
    let validations = ark.index().validations()?;
    let chosen: Vec<&crate::store::ValidationRow> = if args.all_validated {
        validations.iter().filter(|v| v.verdict == "kept").collect()
    } else {
        let mut out = Vec::new();
        for id in &args.instance_ids {
            let Some(v) = validations.iter().find(|v| &v.instance_id == id) else {
                bail!(
                    "instance {id} has not been validated (run `swe-ark validate --instance-ids {id}`)"
                );
            };
            if v.verdict != "kept" {
                bail!(
                    "instance {id} was not kept by validation ({}: {}); only proven instances are packed",
                    v.verdict,
                    v.reason.lines().next().unwrap_or("")
                );
            }
            out.push(v);
        }
        out
    };
    if chosen.is_empty() {
        ctx.note("no validated instance to pack (run `swe-ark validate`)");
        return Ok(ExitCode::SUCCESS);
    }
    let options = PackOptions {
        level: args.level,
        threads: args.threads,
    };
    let mut packed_all = Vec::new();
    for v in chosen {
        let instance = ark
            .index()
            .instance(&v.instance_id)?
            .with_context(|| format!("instance {} is not in the index", v.instance_id))?;
        let context = manifests.context(&instance.repo, &instance.version)?;
        let spec = toml::to_string(&context)
            .with_context(|| format!("the context of {} {}", instance.repo, instance.version))?
            .into_bytes();
        let objects = ark.objects();
        let lock = if v.lock_id.is_empty() {
            None
        } else {
            let id: crate::digest::Sha256Digest = v
                .lock_id
                .parse()
                .with_context(|| format!("lock id `{}`", v.lock_id))?;
            Some(objects.get(&id)?)
        };
        let get = |id: &Option<crate::digest::Sha256Digest>| -> anyhow::Result<Option<Vec<u8>>> {
            Ok(match id {
                Some(id) => Some(objects.get(id)?),
                None => None,
            })
        };
        let raw_pre = get(&v.log_pre)?;
        let raw_post = get(&v.log_post)?;
        let results_bytes = objects.get(&v.results)?;
        let results: crate::validate::Results = serde_json::from_slice(&results_bytes)
            .with_context(|| {
                format!(
                    "the results of {}'s validation (object {}) are not readable",
                    v.instance_id, v.results
                )
            })?;
        let kept = BundleRecord::of(&results, raw_pre.as_deref(), raw_post.as_deref());
        let repo = instance.repo.clone();
        let (codebase, vcs) = codebase_from_mirror(ctx, &mut ark, &instance, &repo, None)?;
        // The mirror may have been fetched since the validation: say so when git answers
        // differently now.
        if let Some(then) = &results.describe
            && Some(then) != vcs.describe.as_ref()
        {
            ctx.note(format!(
                "warning: {}: validation saw `git describe` {then}, the mirror now gives {}",
                instance.instance_id,
                vcs.describe.as_deref().unwrap_or("no tag")
            ));
        }
        let inputs = PackInputs {
            instance: &instance,
            codebase: &codebase,
            spec: Some(spec),
            lock,
            pre_log: kept.pre_log,
            post_log: kept.post_log,
            record: Some(ValidationRecord::Expected(kept.expected)),
            vcs: Some(&vcs),
        };
        let progress = ctx.progress();
        let packed = ark.pack(&inputs, &options, progress.as_ref())?;
        ctx.note(format!(
            "packed {}: {} codebase files, {}{} added to the store",
            instance.instance_id,
            packed.codebase_files,
            describe_note(Some(&vcs)),
            human_bytes(packed.file_size)
        ));
        packed_all.push((instance.instance_id.clone(), packed));
    }
    if args.json {
        let list: Vec<_> = packed_all
            .iter()
            .map(|(i, p)| serde_json::json!({"instance_id": i, "id": p.id, "path": p.path, "file_size": p.file_size}))
            .collect();
        out!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        for (i, p) in &packed_all {
            out!("{i} {}", p.id);
        }
    }
    Ok(ExitCode::SUCCESS)
}
