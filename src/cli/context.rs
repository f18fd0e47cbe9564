//! What every command gets besides its own arguments.

use std::path::PathBuf;

use super::TerminalProgress;

/// What every command gets besides its own arguments.
pub struct Context {
    pub ark: PathBuf,
    pub quiet: bool,
    /// A bar on stderr (it is a terminal, and neither `-q` nor `--no-progress`).
    pub progress: bool,
    /// `--manifests DIR`: None for the built-in manifests.
    pub manifests: Option<PathBuf>,
    /// `--store s3://…`: the bucket of the archive's objects and packs, over `store_url`.
    pub store: Option<String>,
}

impl Context {
    /// The context of a parsed command line.
    pub fn new(cli: &super::Cli) -> Context {
        Context {
            ark: cli.ark.clone(),
            quiet: cli.quiet,
            progress: !cli.quiet
                && !cli.no_progress
                && std::io::IsTerminal::is_terminal(&std::io::stderr()),
            manifests: cli.manifests.clone(),
            store: cli.store.clone(),
        }
    }

    /// Makes `--store` the bucket of the archive at `--ark` for the rest of the process, over
    /// its `store_url`.
    pub fn apply_store(&self) -> Result<(), crate::store::ConfigError> {
        match &self.store {
            Some(url) => crate::store::set_store_flag(&self.ark, url),
            None => Ok(()),
        }
    }

    /// A bar on a terminal, plain lines on another stderr, nothing with `-q`.
    pub fn progress(&self) -> Box<dyn crate::progress::Progress> {
        if self.quiet {
            Box::new(crate::progress::NoProgress)
        } else if self.progress {
            Box::new(TerminalProgress::new())
        } else {
            Box::new(crate::progress::Lines)
        }
    }

    /// The manifests of the known repositories: `--manifests DIR` (or `SWE_ARK_MANIFESTS`),
    /// else the ones built into the binary.
    pub fn manifests(&self) -> Result<crate::manifest::Manifests, crate::manifest::ManifestError> {
        match &self.manifests {
            Some(dir) => crate::manifest::Manifests::load_dir(dir),
            None => crate::manifest::Manifests::builtin(),
        }
    }

    /// A note for people, on stderr, unless `-q`.
    pub fn note(&self, msg: impl std::fmt::Display) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }
}

/// Log output on stderr: `-v` debug, `-vv` trace, `-q` errors only; RUST_LOG overrides.
pub(super) fn init_tracing(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "swe_ark=debug",
        (false, _) => "swe_ark=trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}
