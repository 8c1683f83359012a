//! Finding the server process to sample: `--pid-file FILE` (the number in a pidfile, as
//! `throng serve --pid-file` and most daemons write) or `--pid-name PATTERN` (the one process
//! whose command line contains PATTERN, like `pgrep -f` but refusing zero or several matches
//! instead of handing `--pid` a list).

use crate::observe::sampler::parse_stat;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Errors finding a process.
#[derive(Debug, Error)]
pub enum PidError {
    /// The pidfile could not be read.
    #[error("reading pidfile {path}: {source}")]
    Read {
        /// The pidfile.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The pidfile does not hold one process id.
    #[error("pidfile {path} does not hold a process id (it holds {content:?})")]
    Content {
        /// The pidfile.
        path: PathBuf,
        /// What it holds (first 40 characters).
        content: String,
    },
    /// The process named in the pidfile does not exist.
    #[error("pidfile {path} names process {pid}, which is not running")]
    Gone {
        /// The pidfile.
        path: PathBuf,
        /// The process id it holds.
        pid: u32,
    },
    /// No process's command line contains the pattern.
    #[error("--pid-name {0:?}: no running process has it in its command line")]
    NoMatch(String),
    /// Several unrelated processes match.
    #[error("--pid-name {pattern:?} matches {} processes, give a longer pattern or --pid:\n{}",
        .matches.len(), .matches.iter().map(|(p, c)| format!("  {p} {c}")).collect::<Vec<_>>().join("\n"))]
    Ambiguous {
        /// The pattern.
        pattern: String,
        /// Each match: process id and command line.
        matches: Vec<(u32, String)>,
    },
}

/// The process id in `path` (the first line, surrounding blanks ignored), checked to be running.
///
/// Errors: [`PidError::Read`], [`PidError::Content`], [`PidError::Gone`].
pub fn pid_from_file(path: &Path) -> Result<u32, PidError> {
    let text = std::fs::read_to_string(path).map_err(|source| PidError::Read {
        path: path.into(),
        source,
    })?;
    let first = text.lines().next().unwrap_or("").trim();
    let pid: u32 = first.parse().map_err(|_| PidError::Content {
        path: path.into(),
        content: text.chars().take(40).collect(),
    })?;
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(PidError::Gone {
            path: path.into(),
            pid,
        });
    }
    Ok(pid)
}

/// Every process's parent and command line (arguments joined by spaces), from `/proc`.
fn processes() -> HashMap<u32, (u32, String)> {
    let mut out = HashMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Some(ppid) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
            .map(|f| f.0)
        else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .split('\0')
                    .filter(|a| !a.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        out.insert(pid, (ppid, cmd));
    }
    out
}

/// The one process whose command line contains `pattern` (a plain substring). This process and
/// its ancestors (the shell that started the bench, whose command line holds the pattern too)
/// are never matches, and a match whose ancestor also matches counts as part of that one (its
/// whole tree is sampled).
///
/// Errors: [`PidError::NoMatch`], [`PidError::Ambiguous`].
pub fn pid_by_name(pattern: &str) -> Result<u32, PidError> {
    let procs = processes();
    let ancestors = |mut pid: u32| {
        let mut v = Vec::new();
        while let Some((ppid, _)) = procs.get(&pid) {
            if *ppid == 0 || v.contains(ppid) {
                break;
            }
            v.push(*ppid);
            pid = *ppid;
        }
        v
    };
    let me = std::process::id();
    let mut excluded = ancestors(me);
    excluded.push(me);
    let matches: Vec<u32> = procs
        .iter()
        .filter(|(pid, (_, cmd))| !excluded.contains(pid) && cmd.contains(pattern))
        .map(|(pid, _)| *pid)
        .collect();
    let mut roots: Vec<(u32, String)> = matches
        .iter()
        .filter(|pid| !ancestors(**pid).iter().any(|a| matches.contains(a)))
        .map(|pid| (*pid, procs[pid].1.clone()))
        .collect();
    roots.sort();
    match roots.len() {
        0 => Err(PidError::NoMatch(pattern.into())),
        1 => Ok(roots[0].0),
        _ => Err(PidError::Ambiguous {
            pattern: pattern.into(),
            matches: roots,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    /// A `sleep 30` whose command line starts with `sleep-<tag>`.
    fn sleeper(tag: &str) -> std::process::Child {
        Command::new("sleep")
            .arg0(format!("sleep-{tag}"))
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    }

    #[test]
    fn pidfile_is_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("pidfind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ok.pid");
        std::fs::write(&f, format!("{}\n", std::process::id())).unwrap();
        assert_eq!(pid_from_file(&f).unwrap(), std::process::id());
        std::fs::write(&f, "12 34\n").unwrap();
        assert!(matches!(pid_from_file(&f), Err(PidError::Content { .. })));
        std::fs::write(&f, format!("{}\n", u32::MAX - 1)).unwrap();
        assert!(matches!(pid_from_file(&f), Err(PidError::Gone { .. })));
        let e = pid_from_file(&dir.join("missing.pid")).unwrap_err();
        assert!(e.to_string().contains("missing.pid"), "{e}");
    }

    #[test]
    fn name_needs_exactly_one_match() {
        let tag = format!("pidfind-one-{}", std::process::id());
        let mut a = sleeper(&tag);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let found = pid_by_name(&tag);
        let mut b = sleeper(&tag);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let two = pid_by_name(&tag);
        let _ = (a.kill(), b.kill(), a.wait(), b.wait());
        assert_eq!(found.unwrap(), a.id());
        match two {
            Err(PidError::Ambiguous { matches, .. }) => assert_eq!(matches.len(), 2),
            other => panic!("two servers: {other:?}"),
        }
        assert!(matches!(
            pid_by_name("no-such-process-anywhere-xyzzy"),
            Err(PidError::NoMatch(_))
        ));
    }
}
