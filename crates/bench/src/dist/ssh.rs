//! Agents on plain hosts started over SSH, as Tsung starts its nodes: `--agents
//! ssh://[USER@]HOST[:PORT][/PATH-TO-THRONG][?OPTION=VALUE&...]` runs `ssh … HOST PATH bench agent
//! --stdio --once [--OPTION VALUE …]` (PATH defaults to `throng`, found in the remote `PATH`),
//! and the link is that session's standard input and output, authenticated by SSH (no shared
//! token). `ssh` is OpenSSH's client with `-o BatchMode=yes` (no password prompts); extra client
//! options come from `THRONG_BENCH_SSH_OPTS` (e.g. `-i key -o UserKnownHostsFile=...`), another
//! client program from `THRONG_BENCH_SSH`. When the controller ends the session closes, and the
//! agent, seeing its input close, stops every listener.

use crate::dist::wire::{Reader, Writer};
use std::process::{Child, Command, Stdio};

/// The environment variable naming the SSH client program (default `ssh`).
pub const PROGRAM_ENV: &str = "THRONG_BENCH_SSH";

/// The environment variable of extra SSH client options (split at whitespace).
pub const OPTS_ENV: &str = "THRONG_BENCH_SSH_OPTS";

/// What an `ssh://` address says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// `user@host` or `host`.
    pub destination: String,
    /// The port, when given.
    pub port: Option<u16>,
    /// The remote `throng` program.
    pub program: String,
    /// Extra agent arguments (`--bind-range 10.0.0.20-10.0.0.29`, ...).
    pub args: Vec<String>,
}

/// Reads `[USER@]HOST[:PORT][/PATH][?K=V&...]` (the part after `ssh://`).
///
/// Errors: no host, a port that is not a number.
pub fn parse(rest: &str) -> Result<SshTarget, String> {
    let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (hostport, path) = match main.find('/') {
        Some(i) => (&main[..i], &main[i..]),
        None => (main, ""),
    };
    let (dest, port) = match hostport.rsplit_once(':') {
        Some((d, p)) => (
            d,
            Some(
                p.parse::<u16>()
                    .map_err(|_| format!("ssh://{rest}: bad port {p:?}"))?,
            ),
        ),
        None => (hostport, None),
    };
    if dest.is_empty() || dest.ends_with('@') {
        return Err(format!("ssh://{rest}: no host"));
    }
    let mut args = Vec::new();
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        args.push(format!("--{k}"));
        if !v.is_empty() {
            args.push(v.to_owned());
        }
    }
    Ok(SshTarget {
        destination: dest.to_owned(),
        port,
        program: if path.is_empty() {
            "throng".into()
        } else {
            path.to_owned()
        },
        args,
    })
}

/// Starts the agent over SSH: the link's two halves and the `ssh` process.
///
/// Errors: a bad address, an `ssh` that cannot be started.
pub fn start(rest: &str) -> Result<(Reader, Writer, Child), String> {
    let t = parse(rest)?;
    let program = std::env::var(PROGRAM_ENV).unwrap_or_else(|_| "ssh".into());
    let mut cmd = Command::new(&program);
    cmd.args(["-o", "BatchMode=yes"]);
    if let Some(p) = t.port {
        cmd.args(["-p", &p.to_string()]);
    }
    if let Ok(opts) = std::env::var(OPTS_ENV) {
        cmd.args(opts.split_whitespace());
    }
    cmd.arg(&t.destination)
        .arg(&t.program)
        .args(["bench", "agent", "--stdio", "--once"])
        .args(&t.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("ssh://{rest}: starting {program}: {e}"))?;
    let stdin = child.stdin.take().ok_or("ssh: no stdin")?;
    let stdout = child.stdout.take().ok_or("ssh: no stdout")?;
    Ok((
        Reader::new(Box::new(stdout)),
        Writer::new(Box::new(stdin)),
        child,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_addresses_parse() {
        let t = parse("bench@load-1:2222/opt/throng/bin/throng?bind-range=10.0.0.20-10.0.0.29")
            .unwrap();
        assert_eq!(t.destination, "bench@load-1");
        assert_eq!(t.port, Some(2222));
        assert_eq!(t.program, "/opt/throng/bin/throng");
        assert_eq!(t.args, ["--bind-range", "10.0.0.20-10.0.0.29"]);
        let t = parse("load-2").unwrap();
        assert_eq!((t.port, t.program.as_str()), (None, "throng"));
        assert!(parse("user@").is_err());
        assert!(parse("h:x").is_err());
    }
}
