//! Named points where a test can make swe-ark crash, to prove that a crash at that point
//! leaves the archive consistent. Set `SWE_ARK_FAILPOINT=<name>` to abort the process there
//! (as a `kill -9` would: no destructor runs, temporary files stay), or `<name>:stall` to stop
//! there until killed.

/// The environment variable that names the failpoint to trigger.
pub const ENV: &str = "SWE_ARK_FAILPOINT";

pub fn hit(name: &str) {
    let Ok(spec) = std::env::var(ENV) else {
        return;
    };
    let (point, action) = spec.split_once(':').unwrap_or((spec.as_str(), "abort"));
    if point != name {
        return;
    }
    eprintln!("swe-ark: failpoint `{name}` reached ({action})");
    if action == "stall" {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    std::process::abort();
}
