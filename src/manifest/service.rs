//! A manifest's services: helper processes a context's tests run beside (a local httpbin), and
//! what makes a service's definition valid.

use std::collections::BTreeMap;

use serde::Deserialize;

/// A helper process started on loopback while tests run (e.g. a local httpbin), in the
/// tests' own sandbox, from an environment of its own (its `packages`, locked with the
/// context). It may stand in for hosts of the internet: the run resolves `hosts` to 127.0.0.1
/// and the service listens on their ports (80, 443 with TLS).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    pub name: String,
    /// The distributions of the service's own environment, each pinned with `==`: the whole
    /// closure, so that it resolves the same whatever the lock's date.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    /// The program and its arguments, started once per port of `ports`; `{port}` in any of
    /// them is replaced by the port.
    pub command: Vec<String>,
    /// The ports it listens on without TLS; none given: one port from 18080 on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    /// The ports it listens on with TLS, each served by `tls_command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tls_ports: Vec<u16>,
    /// The command of a TLS port: `{port}`, and `{certfile}` / `{keyfile}`, the PEM files of a
    /// certificate for `hosts` (and 127.0.0.1, localhost) signed by a CA made for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_command: Option<Vec<String>>,
    /// Host names the tests' run resolves to 127.0.0.1 (a private /etc/hosts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The variables that give the tests the run's CA certificate (a PEM file) when the service
    /// has TLS ports; default `SSL_CERT_FILE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_env: Option<Vec<String>>,
    /// CA bundles in the checkout that the tests' client reads on its own (e.g. requests'
    /// vendored `requests/cacert.pem`, which `Session.send` uses whatever the variables say):
    /// in each test run, each one that exists is seen with the run's CA added (a bind mount in
    /// the run's own mount namespace; the checkout does not change). TLS ports only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ca_files: Vec<String>,
    /// Seconds to wait until each port accepts connections (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timeout: Option<u64>,
    /// The variable that points the tests at the service.
    #[serde(default)]
    pub env_var: Option<String>,
    /// The variable's value (`{port}` replaced by its first port); default
    /// `http://127.0.0.1:{port}`.
    #[serde(default)]
    pub url: Option<String>,
}

impl Service {
    /// Seconds to wait for each port.
    pub fn start_timeout(&self) -> u64 {
        self.start_timeout.unwrap_or(60)
    }

    /// The variables that get the run's CA certificate (TLS ports only).
    pub fn ca_env(&self) -> Vec<String> {
        if self.tls_ports.is_empty() {
            return Vec::new();
        }
        self.ca_env
            .clone()
            .unwrap_or_else(|| vec!["SSL_CERT_FILE".to_string()])
    }
}

/// `NAME==VERSION` (extras allowed, no markers): a pin that resolves to one release whatever
/// the date.
fn is_pin(req: &str) -> bool {
    let Some((name, version)) = req.split_once("==") else {
        return false;
    };
    let name = match name.split_once('[') {
        Some((n, extras)) => {
            if !extras.ends_with(']') || extras[..extras.len() - 1].contains(['[', ']']) {
                return false;
            }
            n
        }
        None => name,
    };
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !version.is_empty()
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+!-".contains(&b))
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// What is wrong with one of a version's services.
#[derive(Debug, thiserror::Error)]
#[error("service `{service}`{fault}")]
pub(super) struct ServiceError {
    service: String,
    fault: ServiceFault,
}

/// The fault of a service, as it reads after the service's name.
#[derive(Debug, thiserror::Error)]
pub(super) enum ServiceFault {
    #[error(": a service name is letters, digits, `.`, `_` and `-`")]
    BadName,
    #[error(" is named twice")]
    NamedTwice,
    #[error(" has an empty command")]
    EmptyCommand,
    #[error(
        ": package `{0}` is not pinned as NAME==VERSION (a service's packages must resolve the \
         same whatever the lock's date)"
    )]
    Unpinned(String),
    #[error(": `{0}` is not a valid host name (DNS labels of letters, digits and `-`)")]
    BadHost(String),
    #[error(" has a tls_command but no tls_ports")]
    TlsCommandWithoutPorts,
    #[error(" has tls_ports but no tls_command")]
    TlsPortsWithoutCommand,
    #[error(" has an empty tls_command")]
    EmptyTlsCommand,
    #[error(" has ca_files but no tls_ports")]
    CaFilesWithoutTls,
    #[error(": ca_files entry `{0}` is not a plain path inside the checkout")]
    BadCaFile(String),
    #[error(": `{0}` is not an environment variable name")]
    BadEnvName(String),
    #[error(": port 0 is not a port")]
    PortZero,
    #[error(": port {port} is taken by service `{other}` already")]
    PortTaken { port: u16, other: String },
}

/// Whether `name` may name a service: letters, digits, `.`, `_` and `-`, a letter or digit first
/// (it becomes a directory name).
pub(crate) fn is_plain_service_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// What is wrong with a version's services, if anything.
pub(super) fn check_services(services: &[Service]) -> Result<(), ServiceError> {
    let mut names = std::collections::BTreeSet::new();
    let mut ports = BTreeMap::new();
    for s in services {
        let fail = |fault| ServiceError {
            service: s.name.clone(),
            fault,
        };
        if !is_plain_service_name(&s.name) {
            return Err(fail(ServiceFault::BadName));
        }
        if !names.insert(s.name.as_str()) {
            return Err(fail(ServiceFault::NamedTwice));
        }
        if s.command.is_empty() {
            return Err(fail(ServiceFault::EmptyCommand));
        }
        if let Some(p) = s.packages.iter().find(|p| !is_pin(p)) {
            return Err(fail(ServiceFault::Unpinned(p.clone())));
        }
        if let Some(h) = s.hosts.iter().find(|h| !crate::sandbox::is_host_name(h)) {
            return Err(fail(ServiceFault::BadHost(h.clone())));
        }
        match (&s.tls_command, s.tls_ports.is_empty()) {
            (Some(_), true) => return Err(fail(ServiceFault::TlsCommandWithoutPorts)),
            (None, false) => return Err(fail(ServiceFault::TlsPortsWithoutCommand)),
            (Some(c), false) if c.is_empty() => {
                return Err(fail(ServiceFault::EmptyTlsCommand));
            }
            _ => {}
        }
        if !s.ca_files.is_empty() && s.tls_ports.is_empty() {
            return Err(fail(ServiceFault::CaFilesWithoutTls));
        }
        if let Some(f) = s.ca_files.iter().find(|f| {
            f.is_empty()
                || f.starts_with('/')
                || f.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        }) {
            return Err(fail(ServiceFault::BadCaFile(f.clone())));
        }
        for v in s.ca_env().iter().chain(&s.env_var) {
            if !is_env_name(v) {
                return Err(fail(ServiceFault::BadEnvName(v.clone())));
            }
        }
        for p in s.ports.iter().chain(&s.tls_ports) {
            if *p == 0 {
                return Err(fail(ServiceFault::PortZero));
            }
            if let Some(other) = ports.insert(*p, s.name.clone()) {
                return Err(fail(ServiceFault::PortTaken { port: *p, other }));
            }
        }
    }
    Ok(())
}
