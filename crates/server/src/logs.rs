//! Log reopening on a running server (SIGUSR1, as nginx does): after logrotate moved the access
//! and error logs, new lines go to fresh files at the configured paths. A file that cannot be
//! reopened is reported and keeps receiving lines; the other one is still reopened. Every
//! `dump-file` recording starts a new file too (`dump_file.rs`).

use crate::ctx::ServerCtx;
use crate::observe::error_log;

/// Reopens the access log (`[logging] access-log`, unless it is standard output or off) and
/// the process's error log (`[logging] error-log`, when it is a file), then logs one line
/// saying so, which is the first line of the new error log.
pub fn reopen(ctx: &ServerCtx) {
    // Recordings start new files too, as the logs do.
    ctx.new_dump_files
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let access = ctx.access_log.reopen();
    let error = error_log::reopen();
    match (&access, &error) {
        (Ok(a), Ok(e)) => tracing::info!(
            access_log = %if a.is_empty() { "off" } else { a.as_str() },
            error_log = %e.as_ref().map_or("-".into(), |p| p.display().to_string()),
            "logs reopened"
        ),
        _ => {
            if let Err(e) = &access {
                tracing::error!("cannot reopen the access log: {e}");
            }
            if let Err(e) = &error {
                tracing::error!("{e}");
            }
        }
    }
}
