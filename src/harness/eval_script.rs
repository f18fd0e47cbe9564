//! A version-5 dataset row's `eval_script`, made to run here. swebench 5 keeps each
//! instance's evaluation script in its row; the official harness runs it with bash in the
//! instance's Docker image, where the code is at `/testbed` and a conda environment `testbed`
//! holds the dependencies. Here the same script runs in the sandbox, where the work tree is at
//! `/testbed` too, with its locked environment first on `PATH`, after these changes, each made
//! only outside here-documents (a test patch's text is never touched):
//!
//! - the `#!/bin/bash` and `set -uxo pipefail` lines the harness strips and adds again
//!   (`parse_eval_script`, `TestSpec.eval_script`) are stripped and `set -uxo pipefail` put
//!   first;
//! - lines that activate or deactivate conda (`source /opt/miniconda3/bin/activate`,
//!   `conda activate testbed`) become no-ops: the environment is already active;
//! - the base commit's id becomes `HEAD`: the work tree's commit is the base commit with the
//!   context's setup committed, which is what the image's `/testbed` holds;
//! - swebench 5's `record_test_exit_code`: `SWEBENCH_TEST_EXIT_CODE=$?` right before the line
//!   holding `>>>>> End Test Output`, and `echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"`
//!   right after it.

use std::sync::OnceLock;

use regex::Regex;

/// The harness's `START_TEST_OUTPUT`.
pub const START_TEST_OUTPUT: &str = ">>>>> Start Test Output";
/// The harness's `END_TEST_OUTPUT`.
pub const END_TEST_OUTPUT: &str = ">>>>> End Test Output";
/// The harness's `TEST_EXIT_CODE`.
pub const TEST_EXIT_CODE: &str = ">>>>> Test Exit Code";

/// `script` as it runs here (see the module's comment) for an instance whose base commit is
/// `base_commit`.
pub fn adapt(script: &str, base_commit: &str) -> String {
    let mut out = vec!["set -uxo pipefail".to_string()];
    let mut heredoc_end: Option<(String, bool)> = None;
    for line in script.trim().split('\n') {
        if let Some((delim, dash)) = &heredoc_end {
            let end = if *dash {
                line.trim_start_matches('\t')
            } else {
                line
            };
            if end == delim {
                heredoc_end = None;
            }
            out.push(line.to_string());
            continue;
        }
        if line == "#!/bin/bash" || line == "set -uxo pipefail" {
            continue;
        }
        heredoc_end = heredoc_start(line);
        if activates_conda(line) {
            out.push(format!(
                ": swe-ark: the environment is active already: {}",
                quote(line)
            ));
            continue;
        }
        let mut line = line.to_string();
        if !base_commit.is_empty() {
            line = line.replace(base_commit, "HEAD");
        }
        if line.contains(END_TEST_OUTPUT) {
            out.push("SWEBENCH_TEST_EXIT_CODE=$?".to_string());
            out.push(line);
            out.push(format!(
                "echo \"{TEST_EXIT_CODE}: $SWEBENCH_TEST_EXIT_CODE\""
            ));
            continue;
        }
        out.push(line);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// The delimiter of a here-document that `line` opens (`<<'EOF'`, `<<EOF`, `<<-EOF`), and
/// whether leading tabs are stripped before it (`<<-`).
fn heredoc_start(line: &str) -> Option<(String, bool)> {
    static HEREDOC: OnceLock<Regex> = OnceLock::new();
    let re = HEREDOC.get_or_init(|| {
        Regex::new(r#"<<(-?)\s*(?:'([^']+)'|"([^"]+)"|([A-Za-z_][A-Za-z0-9_]*))"#)
            .expect("the here-document pattern is a valid regex")
    });
    let c = re.captures(line)?;
    let delim = c.get(2).or(c.get(3)).or(c.get(4))?.as_str().to_string();
    Some((delim, !c[1].is_empty()))
}

/// Whether `line` activates or deactivates a conda environment.
fn activates_conda(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["conda", "activate" | "deactivate", ..] => true,
        ["source" | ".", path, ..] => path.ends_with("/bin/activate") && path.contains("conda"),
        _ => false,
    }
}

/// `s` as one single-quoted shell word.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The test command's exit code the adapted script recorded (swebench 5's
/// `parse_test_exit_code`): the first `>>>>> Test Exit Code: N` in `log`.
pub fn recorded_exit_code(log: &str) -> Option<i64> {
    static CODE: OnceLock<Regex> = OnceLock::new();
    let re = CODE.get_or_init(|| {
        Regex::new(&format!(r"{}:\s*(-?\d+)", regex::escape(TEST_EXIT_CODE)))
            .expect("the exit code pattern is a valid regex")
    });
    re.captures(log)?.get(1)?.as_str().parse().ok()
}

/// Whether `log` holds both of the harness's markers (without them the harness grades
/// nothing).
pub fn has_markers(log: &str) -> bool {
    log.contains(START_TEST_OUTPUT) && log.contains(END_TEST_OUTPUT)
}

/// The output of step `step`'s script as one to grade: `tests-did-not-run` without both
/// markers.
pub(crate) fn require_markers(step: &str, log: &[u8]) -> Result<(), super::Stop> {
    if has_markers(&String::from_utf8_lossy(log)) {
        return Ok(());
    }
    Err(super::Stop(
        super::Reason::TestsDidNotRun,
        format!(
            "{step}: the eval_script's output has no `{START_TEST_OUTPUT}` and `{END_TEST_OUTPUT}` markers: the harness grades nothing without them"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "0123456789abcdef0123456789abcdef01234567";

    /// The shape swebench's `make_eval_script_list_py` writes (4.1.0), which 5.0's rows carry.
    fn script() -> String {
        format!(
            "#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate\nconda activate testbed\n\
             cd /testbed\ngit config --global --add safe.directory /testbed\ncd /testbed\ngit status\n\
             git -c core.fileMode=false diff {BASE}\nsource /opt/miniconda3/bin/activate\n\
             conda activate testbed\npython -m pip install -e .\ngit checkout {BASE} tests/test_a.py\n\
             git apply -v - <<'EOF_114329324912'\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n\
             @@ -1 +1 @@\n-x = '/testbed {BASE}'\n+conda activate testbed\nEOF_114329324912\n\
             : '>>>>> Start Test Output'\npytest -rA tests/test_a.py\n: '>>>>> End Test Output'\n\
             git checkout {BASE} tests/test_a.py\n"
        )
    }

    #[test]
    fn the_script_runs_in_the_work_tree_with_the_exit_code_recorded() {
        let s = adapt(&script(), BASE);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "set -uxo pipefail");
        assert!(!s.contains("#!/bin/bash"));
        assert_eq!(s.matches("set -uxo pipefail").count(), 1);
        assert!(lines[1].starts_with(": swe-ark: the environment is active already: "));
        // The work tree is at /testbed here too: the script's paths stay as they are.
        assert!(s.contains("\ncd /testbed\n"));
        assert!(s.contains("git checkout HEAD tests/test_a.py\n"));
        assert!(s.contains("safe.directory /testbed\n"));
        // The here-document is left exactly as it was.
        assert!(s.contains(&format!(
            "-x = '/testbed {BASE}'\n+conda activate testbed\nEOF_"
        )));
        let end = lines
            .iter()
            .position(|l| l.contains(END_TEST_OUTPUT))
            .unwrap();
        assert_eq!(lines[end - 2], "pytest -rA tests/test_a.py");
        assert_eq!(lines[end - 1], "SWEBENCH_TEST_EXIT_CODE=$?");
        assert_eq!(
            lines[end + 1],
            "echo \">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE\""
        );
        assert_eq!(*lines.last().unwrap(), "git checkout HEAD tests/test_a.py");
    }

    #[test]
    fn heredocs_and_exit_codes_are_read() {
        assert_eq!(
            heredoc_start("cat <<'EOF' > x"),
            Some(("EOF".into(), false))
        );
        assert_eq!(heredoc_start("cat <<-END"), Some(("END".into(), true)));
        assert_eq!(heredoc_start("echo a << b"), Some(("b".into(), false)));
        assert_eq!(heredoc_start("echo $((1 << 2))"), None);
        assert_eq!(recorded_exit_code("x\n>>>>> Test Exit Code: 1\n"), Some(1));
        assert_eq!(recorded_exit_code(">>>>> Test Exit Code: -9"), Some(-9));
        assert_eq!(recorded_exit_code("nothing"), None);
        assert!(has_markers(
            "+ : '>>>>> Start Test Output'\n+ : '>>>>> End Test Output'\n"
        ));
        assert!(!has_markers(">>>>> Start Test Output\n"));
        assert!(activates_conda("source /opt/miniconda3/bin/activate"));
        assert!(activates_conda("conda deactivate"));
        assert!(!activates_conda("source venv/bin/activate"));
    }
}
