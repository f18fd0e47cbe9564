//! A context's services at test time: started in the background inside each test run's own
//! sandbox (so in its network namespace), from their own environments (the lock's, read-only
//! at `/swe-ark/service-envs/<name>`), waited for until every port accepts connections, and
//! given to the tests: the host names they stand in for resolve to 127.0.0.1 (the run's
//! private /etc/hosts), TLS ports get a certificate for those names signed by a CA made for
//! this work directory (its key never written down), and the tests get the CA's file in the
//! variables the manifest names. Everything the services write is in the work directory's
//! `services/`, which the run sees at `/swe-ark/services`: the script names what the run sees,
//! swe-ark reads the host's side.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::{Reason, Stop};
use crate::context::layout;
use crate::manifest::Service;
use crate::shell::quote as shell_quote;

/// The first port given to a service that names none (the next ones follow); inside the run's
/// own network namespace every port is free.
const FIRST_PORT: u16 = 18080;

/// The services of one work directory, ready to start in its test runs.
#[derive(Debug, Default)]
pub(crate) struct Services {
    /// Bash that starts them and waits until they listen; it exits (writing why to `failed`)
    /// when one ends or never listens. Put before the test command.
    pub(crate) script: String,
    /// The host names the runs resolve to the services.
    pub(crate) hosts: BTreeMap<String, IpAddr>,
    /// One sentence per service, for the results.
    pub(crate) described: Vec<String>,
    /// The services' directory on the host (none when the context has no services).
    pub(crate) dir: Option<PathBuf>,
    failed: Place,
    /// Each listener's log: the only files [`Services::failure`] reads a tail of.
    logs: Vec<Place>,
    /// The run's CA certificate (on the host), and the checkout's bundles that get it added.
    ca: Option<PathBuf>,
    ca_files: Vec<String>,
}

/// A file or directory of `services/`: on the host, and as the run sees it.
#[derive(Debug, Default, Clone)]
struct Place {
    host: PathBuf,
    seen: PathBuf,
}

impl Place {
    fn join(&self, rel: impl AsRef<Path>) -> Place {
        Place {
            host: self.host.join(&rel),
            seen: self.seen.join(&rel),
        }
    }
}

/// One process to start: a service's command on one port.
struct Listener {
    service: String,
    port: u16,
    command: Vec<String>,
}

impl Services {
    /// Prepares `services` for runs in `work` (logs in `work/logs`), each from its
    /// environment in `envs` (by name: on the host, and where the run sees it): their commands
    /// with ports and certificate paths filled in, the certificate when a TLS port needs one,
    /// and the variables the tests get.
    pub(crate) fn prepare(
        services: &[Service],
        envs: &BTreeMap<String, (PathBuf, PathBuf)>,
        work: &Path,
    ) -> Result<Services, Stop> {
        let io = |p: &Path, e: std::io::Error| Stop(Reason::Io, format!("{}: {e}", p.display()));
        let work = &std::path::absolute(work).map_err(|e| io(work, e))?;
        // Everything the services write is in `work/services`, which a confined run may
        // write (unlike `work/logs`); swe-ark reads it back without following links.
        let root = Place {
            host: work.join("services"),
            seen: PathBuf::from(layout::SERVICES),
        };
        let mut out = Services {
            failed: root.join("logs").join("service-failed.txt"),
            ..Services::default()
        };
        if services.is_empty() {
            return Ok(out);
        }
        out.dir = Some(root.host.clone());
        let logs = root.join("logs");
        std::fs::create_dir_all(&logs.host).map_err(|e| io(&logs.host, e))?;
        let tls = if services.iter().any(|s| !s.tls_ports.is_empty()) {
            let names: Vec<String> = services.iter().flat_map(|s| s.hosts.clone()).collect();
            Some(make_tls(&names, &root.join("tls"))?)
        } else {
            None
        };
        let mut script = WAIT_FUNCTION.replace("{failed}", &q(&out.failed.seen));
        let mut exports = String::new();
        let mut next_port = FIRST_PORT;
        for s in services {
            let dir = root.join(&s.name);
            std::fs::create_dir_all(&dir.host).map_err(|e| io(&dir.host, e))?;
            let mut listeners = Vec::new();
            let mut plain = s.ports.clone();
            if plain.is_empty() && s.tls_ports.is_empty() {
                plain.push(next_port);
                next_port = next_port.saturating_add(1);
            }
            for port in &plain {
                listeners.push(Listener {
                    service: s.name.clone(),
                    port: *port,
                    command: s.command.clone(),
                });
            }
            for port in &s.tls_ports {
                listeners.push(Listener {
                    service: s.name.clone(),
                    port: *port,
                    command: s.tls_command.clone().unwrap_or_default(),
                });
            }
            let venv = envs.get(&s.name).map(|(_, seen)| seen);
            for l in &listeners {
                let log = logs.join(format!("service-{}-{}.log", l.service, l.port));
                script.push_str(&launch_line(l, s, venv, tls.as_ref(), &dir.seen, &log.seen));
                out.logs.push(log);
            }
            let first = plain.first().or(s.tls_ports.first()).copied().unwrap_or(0);
            if let Some(var) = &s.env_var {
                let url = s
                    .url
                    .clone()
                    .unwrap_or_else(|| "http://127.0.0.1:{port}".to_string())
                    .replace("{port}", &first.to_string());
                exports.push_str(&format!("export {var}={}\n", shell_quote(&url)));
            }
            if let Some(t) = &tls
                && !s.tls_ports.is_empty()
            {
                for var in s.ca_env() {
                    exports.push_str(&format!("export {var}={}\n", q(&t.ca.seen)));
                }
                out.ca_files.extend(s.ca_files.iter().cloned());
            }
            for h in &s.hosts {
                out.hosts.insert(h.clone(), IpAddr::V4(Ipv4Addr::LOCALHOST));
            }
            out.described.push(describe(s, &plain, venv.is_some()));
        }
        script.push_str("for __swe_ark_p in \"${__swe_ark_pids[@]}\"; do __swe_ark_wait \"$__swe_ark_p\"; done\n");
        script.push_str(&exports);
        out.script = script;
        out.ca = tls.map(|t| t.ca.host);
        Ok(out)
    }

    /// For a test run in the checkout `src` (on the host; `work_tree` in the run): each of the CA bundles it has,
    /// written anew with the run's CA added, as (copy, the original's place in the run) to
    /// show in its place. Made before each run: the patches may have changed a bundle.
    pub(crate) fn bundles(
        &self,
        src: &Path,
        work_tree: &str,
    ) -> Result<Vec<(PathBuf, PathBuf)>, Stop> {
        let Some(ca) = &self.ca else {
            return Ok(Vec::new());
        };
        let io = |p: &Path, e: std::io::Error| Stop(Reason::Io, format!("{}: {e}", p.display()));
        let ca_pem = std::fs::read(ca).map_err(|e| io(ca, e))?;
        let mut out = Vec::new();
        for (i, rel) in self.ca_files.iter().enumerate() {
            let original = src.join(rel);
            // A symbolic link could lead out of the checkout: only plain files.
            let Ok(meta) = std::fs::symlink_metadata(&original) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let mut bytes = std::fs::read(&original).map_err(|e| io(&original, e))?;
            if !bytes.is_empty() && !bytes.ends_with(b"\n") {
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(b"\n# swe-ark: the CA of this run's services\n");
            bytes.extend_from_slice(&ca_pem);
            let copy = ca.with_file_name(format!("bundle-{i}.pem"));
            std::fs::write(&copy, bytes).map_err(|e| io(&copy, e))?;
            let absolute = |p: &Path| std::path::absolute(p).map_err(|e| io(p, e));
            out.push((absolute(&copy)?, Path::new(work_tree).join(rel)));
        }
        Ok(out)
    }

    /// Why the services of the last run did not start, with the end of the failed one's
    /// output; `None` when they did (the file is removed, for the next run).
    pub(crate) fn failure(&self) -> Option<String> {
        // Written by the run: read without following a link it may have put there, a
        // bounded amount, and only logs of ours.
        let bytes = super::read_written(&self.failed.host, 64 << 10)?;
        let _ = std::fs::remove_file(&self.failed.host);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let mut lines = text.lines();
        let reason = lines.next().unwrap_or("a service failed").to_string();
        // The script names a log as the run sees it.
        let output = lines
            .next()
            .map(Path::new)
            .and_then(|seen| self.logs.iter().find(|l| l.seen == seen))
            .and_then(|log| super::read_written(&log.host, 1 << 20))
            .map(|b| super::tail(&b, 10))
            .unwrap_or_default();
        Some(if output.trim().is_empty() {
            format!("{reason} (it printed nothing)")
        } else {
            format!("{reason}; its output ends with:\n{output}")
        })
    }
}

/// Waits for one `pid:port:seconds:name:log` until the port accepts connections; exits the
/// script (writing why) when the process ends first or the time is up.
const WAIT_FUNCTION: &str = r#"__swe_ark_pids=()
__swe_ark_wait() {
  local pid=${1%%:*} rest=${1#*:}
  local port=${rest%%:*}; rest=${rest#*:}
  local secs=${rest%%:*}; rest=${rest#*:}
  local name=${rest%%:*} log=${rest#*:}
  local n=0
  until (: > "/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      printf 'service %s ended (exit status %s) before it accepted connections on port %s\n%s\n' "$name" "$?" "$port" "$log" > {failed}
      exit 97
    fi
    n=$((n + 1))
    if [ "$n" -gt $((secs * 10)) ]; then
      printf 'service %s did not accept connections on port %s within %s s\n%s\n' "$name" "$port" "$secs" "$log" > {failed}
      exit 97
    fi
    sleep 0.1
  done
}
"#;

/// The bash line that starts listener `l` of service `s` in the background, from its own
/// environment `venv` (with nothing of the tests'), its output in `log`, and registers it with
/// the wait function.
fn launch_line(
    l: &Listener,
    s: &Service,
    venv: Option<&PathBuf>,
    tls: Option<&Tls>,
    dir: &Path,
    log: &Path,
) -> String {
    let fill = |a: &String| {
        let mut a = a.replace("{port}", &l.port.to_string());
        if let Some(t) = tls {
            a = a
                .replace("{certfile}", &t.cert.seen.display().to_string())
                .replace("{keyfile}", &t.key.seen.display().to_string());
        }
        shell_quote(&a)
    };
    let command: Vec<String> = l.command.iter().map(fill).collect();
    // Its own environment and nothing of the tests': a clean set of variables.
    let launch = match venv {
        Some(v) => format!(
            "exec env -i HOME=\"$HOME\" TZ=UTC LANG=C.UTF-8 LC_ALL=C.UTF-8 \
             PYTHONHASHSEED=0 PATH={}:/usr/local/bin:/usr/bin:/bin VIRTUAL_ENV={} {}",
            q(&v.join("bin")),
            q(v),
            command.join(" ")
        ),
        // A lock made before services had environments: the tests' PATH.
        None => format!("exec {}", command.join(" ")),
    };
    // Service names are plain (letters, digits, `._-`): no quoting needed.
    format!(
        "( cd {} && {launch} ) > {} 2>&1 &\n__swe_ark_pids+=(\"$!:{}:{}:{}:\"{})\n",
        q(dir),
        q(log),
        l.port,
        s.start_timeout(),
        l.service,
        q(log),
    )
}

fn q(p: &Path) -> String {
    shell_quote(&p.display().to_string())
}

/// "httpbin, standing in for httpbin.org on 127.0.0.1 ports 80 and 443 (TLS), from its locked
/// environment of 26 distributions".
fn describe(s: &Service, plain: &[u16], own_env: bool) -> String {
    let mut ports: Vec<String> = plain.iter().map(u16::to_string).collect();
    ports.extend(s.tls_ports.iter().map(|p| format!("{p} (TLS)")));
    let what = if s.hosts.is_empty() {
        s.name.clone()
    } else {
        format!("{}, standing in for {},", s.name, s.hosts.join(", "))
    };
    let env = if !own_env {
        "with the tests' environment".to_string()
    } else if s.packages.is_empty() {
        "from an environment of its own".to_string()
    } else if s.packages.len() <= 3 {
        format!("from its locked environment ({})", s.packages.join(" "))
    } else {
        format!(
            "from its locked environment ({} pinned packages)",
            s.packages.len()
        )
    };
    format!(
        "{what} on 127.0.0.1 port{} {} {env}",
        if ports.len() == 1 { "" } else { "s" },
        ports.join(", ")
    )
}

/// The PEM files of a run's TLS: the CA the tests trust, and the services' certificate and key.
struct Tls {
    ca: Place,
    cert: Place,
    key: Place,
}

/// A CA made for this run (its key dropped once it has signed), and a certificate it signs for
/// `names`, `localhost` and 127.0.0.1.
fn make_tls(names: &[String], dir: &Place) -> Result<Tls, Stop> {
    let err = |e: rcgen::Error| Stop(Reason::Io, format!("making the run's TLS certificate: {e}"));
    let io = |p: &Path, e: std::io::Error| Stop(Reason::Io, format!("{}: {e}", p.display()));
    std::fs::create_dir_all(&dir.host).map_err(|e| io(&dir.host, e))?;
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "swe-ark sandbox CA (one run)");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut sans: Vec<String> = names.to_vec();
    sans.push("localhost".into());
    sans.sort();
    sans.dedup();
    let mut leaf = CertificateParams::new(sans).map_err(err)?;
    leaf.subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.first().map_or("localhost", String::as_str),
    );
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().map_err(err)?;
    let cert = leaf.signed_by(&key, &issuer).map_err(err)?;

    let tls = Tls {
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    for (place, text) in [
        (&tls.ca, ca_cert.pem()),
        (&tls.cert, cert.pem()),
        (&tls.key, key.serialize_pem()),
    ] {
        std::fs::write(&place.host, text).map_err(|e| io(&place.host, e))?;
    }
    Ok(tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_is_described_with_its_hosts_ports_and_environment() {
        let s: Service = toml::from_str(
            r#"
name = "httpbin"
packages = ["httpbin==0.10.2"]
command = ["gunicorn", "-b", "127.0.0.1:{port}", "httpbin:app"]
ports = [80]
tls_ports = [443]
tls_command = ["gunicorn"]
hosts = ["httpbin.org"]
"#,
        )
        .unwrap();
        assert_eq!(
            describe(&s, &s.ports, true),
            "httpbin, standing in for httpbin.org, on 127.0.0.1 ports 80, 443 (TLS) from its \
             locked environment (httpbin==0.10.2)"
        );
    }

    #[test]
    fn the_certificate_names_the_hosts_and_its_ca_signed_it() {
        let dir = tempfile::tempdir().unwrap();
        let place = Place {
            host: dir.path().to_path_buf(),
            seen: PathBuf::from("/swe-ark/services/tls"),
        };
        let Ok(tls) = make_tls(&["httpbin.org".into()], &place) else {
            panic!("no certificate");
        };
        assert_eq!(tls.ca.seen, Path::new("/swe-ark/services/tls/ca.pem"));
        let ca = std::fs::read_to_string(&tls.ca.host).unwrap();
        let cert = std::fs::read_to_string(&tls.cert.host).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
        assert!(
            std::fs::read_to_string(&tls.key.host)
                .unwrap()
                .contains("PRIVATE KEY")
        );
        // Nothing but the CA's certificate is written of it: no key beside it.
        let files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(files.len(), 3, "{files:?}");
    }
}
