//! The `git` program, run hermetically: no system or user configuration, no prompts, a fixed
//! identity for the commits swe-ark makes itself. Mirrors use libgit2 (`git2`); the git
//! program is for what libgit2 does not do the way SWE-bench's tooling does (`git apply`,
//! work trees that build backends read).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `git` with the environment every swe-ark call uses.
pub fn command() -> Command {
    let mut cmd = Command::new("git");
    hermetic(&mut cmd);
    cmd
}

/// The empty tree, read as the tree that holds the `.gitattributes` (`GIT_ATTR_SOURCE`).
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// `git` as [`command`] makes it, reading no `.gitattributes` (git 2.40 and later): files go
/// into the index and come back out of it byte for byte. For the commands that build a work
/// tree from a codebase and put it back: a file committed with CRLF under `text=auto` (jq's
/// `src/decNumber/`) would otherwise be stored with LF, unlike the repository's own blob, and
/// written back with LF.
pub fn command_bytewise() -> Command {
    let mut cmd = command();
    cmd.env("GIT_ATTR_SOURCE", EMPTY_TREE);
    cmd
}

/// Sets on `cmd` (git, or a program that runs git) what makes git ignore the machine's
/// configuration and never ask for credentials.
pub fn hermetic(cmd: &mut Command) -> &mut Command {
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        // The trees swe-ark runs git in are its own, whoever owns their files: a kept work
        // tree's are the runs' uid's (docs/REPLAY.md, "The work tree").
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .env("GIT_AUTHOR_NAME", "swe-ark")
        .env("GIT_AUTHOR_EMAIL", "swe-ark@localhost")
        .env("GIT_COMMITTER_NAME", "swe-ark")
        .env("GIT_COMMITTER_EMAIL", "swe-ark@localhost")
}

/// Runs `git args` in `dir`; a git that cannot be started reads as a failed run (status 127)
/// with the reason on stderr.
pub fn output(dir: &Path, args: &[&str]) -> Output {
    command()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| Output {
            status: std::os::unix::process::ExitStatusExt::from_raw(127 << 8),
            stdout: Vec::new(),
            stderr: format!("git could not be started: {e}").into_bytes(),
        })
}

/// A git command that failed: the command, where it ran, and git's stderr.
#[derive(Debug, thiserror::Error)]
#[error("git {} (in {}): {stderr}", .args.join(" "), .dir.display())]
pub struct GitError {
    pub args: Vec<String>,
    pub dir: PathBuf,
    pub stderr: String,
}

impl GitError {
    /// The failure of `git args` in `dir`, from its output.
    pub fn of(dir: &Path, args: &[&str], out: &Output) -> GitError {
        GitError {
            args: args.iter().map(|a| a.to_string()).collect(),
            dir: dir.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }
    }
}

/// Runs `git args` in `dir`; its stdout, or an error with the command and git's stderr.
pub fn run(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = output(dir, args);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(GitError::of(dir, args, &out))
    }
}
