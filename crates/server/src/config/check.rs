//! The file checks of a configuration ([`check`]): every file and directory it names must exist
//! and be readable before a server starts or reloads on it (`throng check-config` prints the
//! same list). A missing file a listener would hit (a webroot fallback file, an intro, an
//! htpasswd file) is an error here, not a silent 404 later. Each [`Problem`] names its
//! configuration key as the TOML spells it (`paths.webroot`, `mount[/live.mp3].intro`).
//!
//! Parsing and value ranges are [`Config::validate`](crate::config::Config::validate)'s; this
//! file only looks at the file system (reads metadata, opens files, lists directories).

use std::path::Path;

use crate::config::{AuthConfig, Config};

/// One problem of a configuration: the key and what is wrong with its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The configuration key, e.g. `paths.webroot` or `mount[/live.mp3].intro`.
    pub key: String,
    /// What is wrong, e.g. `/srv/www: no such directory`.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// File extensions a webroot fallback file may have (what `ingest/file.rs` can loop).
const AUDIO_EXTENSIONS: [&str; 5] = ["mp3", "aac", "ogg", "oga", "opus"];

/// Every problem of `config`'s files and directories, in configuration order; empty when all
/// are there and readable. Checked: `paths.webroot` (a readable directory), `paths.deny-ip`,
/// `paths.allow-ip`, `paths.deny-agents`, each `[[mount]]`'s `file`, `intro` and htpasswd
/// `authentication.filename` (readable files), each `fallback-mount` that names a webroot
/// file, and the directories of `logging.access-log` and `logging.error-log`.
///
/// A `fallback-mount` names a webroot file when a webroot is set and the target has an audio
/// file extension but no `[[mount]]` entry, relay, master, demo or SHOUTcast mount provides
/// it (declare a `[[mount]]` for a fallback that a source client feeds).
pub fn check(config: &Config) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut report = |key: String, message: Option<String>| {
        if let Some(message) = message {
            problems.push(Problem { key, message });
        }
    };
    let paths = &config.paths;
    if let Some(w) = &paths.webroot {
        report("paths.webroot".into(), dir_problem(w));
    }
    for (key, p) in [
        ("paths.deny-ip", &paths.deny_ip),
        ("paths.allow-ip", &paths.allow_ip),
        ("paths.deny-agents", &paths.deny_agents),
    ] {
        if let Some(p) = p {
            report(key.into(), file_problem(p));
        }
    }
    for m in &config.mount {
        let key = |k: &str| format!("mount[{}].{k}", m.name);
        if let Some(f) = &m.file {
            report(key("file"), file_problem(f));
        }
        if let Some(f) = &m.intro {
            report(key("intro"), file_problem(f));
        }
        if let Some(AuthConfig::Htpasswd { filename, .. }) = &m.authentication {
            report(key("authentication.filename"), file_problem(filename));
        }
        if let (Some(target), Some(webroot)) = (&m.fallback_mount, &paths.webroot) {
            // A missing webroot is reported once, above, not again for each file in it.
            if names_webroot_file(config, target) && dir_problem(webroot).is_none() {
                let path = crate::config::webroot_file(webroot, target);
                report(
                    key("fallback-mount"),
                    file_problem(&path).map(|why| {
                        format!(
                            "{why} (a webroot fallback file; add a [[mount]] entry for \
                             {target} if a source feeds it)"
                        )
                    }),
                );
            }
        }
    }
    for (key, log) in [
        ("logging.access-log", &config.logging.access_log),
        ("logging.error-log", &config.logging.error_log),
    ] {
        if matches!(log.as_str(), "" | "-") {
            continue;
        }
        let dir = Path::new(log)
            .parent()
            .filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            report(
                key.into(),
                dir_problem(dir).map(|why| format!("directory of {log}: {why}")),
            );
        }
    }
    // Certificates and keys must load as the HTTPS sockets will load them.
    for message in crate::net::tls::check(&config.tls) {
        problems.push(Problem {
            key: "tls.certificate".into(),
            message,
        });
    }
    problems
}

/// Whether `target`, a `fallback-mount`, can only be a webroot file (see [`check`]).
fn names_webroot_file(config: &Config, target: &str) -> bool {
    let audio = Path::new(target)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| AUDIO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
    audio
        && config.mount_for(target).is_none()
        && !config.relay.iter().any(|r| r.local() == target)
        && config.master.is_none()
        && !(config.demo && config.demo_mount == target)
        && config.shoutcast_mount.as_deref() != Some(target)
}

/// Why `path` is not a readable regular file, if it is not.
pub fn file_problem(path: &Path) -> Option<String> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(format!("{shown}: no such file"))
        }
        Err(e) => return Some(format!("{shown}: {e}")),
        Ok(m) if m.is_dir() => return Some(format!("{shown}: is a directory, not a file")),
        Ok(_) => {}
    }
    std::fs::File::open(path)
        .err()
        .map(|e| format!("{shown}: cannot read: {e}"))
}

/// Why `path` is not a readable directory, if it is not.
pub fn dir_problem(path: &Path) -> Option<String> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(format!("{shown}: no such directory"))
        }
        Err(e) => return Some(format!("{shown}: {e}")),
        Ok(m) if !m.is_dir() => return Some(format!("{shown}: not a directory")),
        Ok(_) => {}
    }
    std::fs::read_dir(path)
        .err()
        .map(|e| format!("{shown}: cannot list: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_are_named_by_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        std::fs::write(dir.path().join("users"), "a:b\n").unwrap();
        std::fs::write(dir.path().join("intro.mp3"), b"x").unwrap();
        let c = Config::from_toml(&format!(
            r#"
            [paths]
            webroot = "{d}/www"
            deny-ip = "{d}/deny"
            [[mount]]
            name = "/live.mp3"
            fallback-mount = "/silence.mp3"
            intro = "{d}/intro.mp3"
            authentication = {{ type = "htpasswd", filename = "{d}/nousers" }}
            [[mount]]
            name = "/b.mp3"
            fallback-mount = "/live.mp3"
            authentication = {{ type = "htpasswd", filename = "{d}/users" }}
            "#
        ))
        .unwrap();
        let keys: Vec<String> = check(&c).iter().map(|p| p.key.clone()).collect();
        assert_eq!(
            keys,
            [
                "paths.webroot",
                "paths.deny-ip",
                "mount[/live.mp3].authentication.filename",
            ],
            "a missing webroot is not reported again for its files: {:?}",
            check(&c)
        );
        assert!(check(&c)[0].to_string().ends_with("www: no such directory"));
        std::fs::create_dir(dir.path().join("www")).unwrap();
        let last = check(&c).pop().unwrap();
        assert_eq!(last.key, "mount[/live.mp3].fallback-mount");
        assert!(last.message.contains("silence.mp3: no such file"), "{last}");
        std::fs::write(dir.path().join("www/silence.mp3"), b"x").unwrap();
        std::fs::write(dir.path().join("deny"), b"").unwrap();
        std::fs::write(dir.path().join("nousers"), b"").unwrap();
        assert_eq!(check(&c), []);
    }
}
