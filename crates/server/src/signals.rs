//! Unix signals as operator commands, as Icecast and nginx use them: SIGTERM and SIGINT shut
//! down (SIGTERM drains first with `[limits] drain-timeout`, as a Kubernetes pod is stopped:
//! `cluster/drain.rs`), SIGHUP reloads the configuration (what `systemctl reload` and Debian's logrotate
//! send; Icecast 2.4.4 reloads on HUP), SIGUSR1 reopens the log files (nginx), SIGUSR2
//! upgrades the binary in place (nginx re-execs on USR2). Each becomes a [`Control`] on the
//! server's queue, so a signal never interrupts a command half done.

use tokio::signal::unix::{signal, SignalKind};

use crate::control::{Control, ControlHandle};

/// Forwards signals to `control` until the process exits. Installing the handlers replaces
/// the default action (for HUP and the USRs: terminate), so call it before anything could
/// send them.
///
/// Errors: a handler that cannot be installed (no signal driver in the runtime).
pub fn forward(control: ControlHandle) -> std::io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut usr2 = signal(SignalKind::user_defined2())?;
    tokio::spawn(async move {
        loop {
            let (name, command) = tokio::select! {
                _ = term.recv() => ("SIGTERM", Control::Terminate),
                _ = int.recv() => ("SIGINT", Control::Shutdown),
                _ = hup.recv() => ("SIGHUP", Control::Reload(None)),
                _ = usr1.recv() => ("SIGUSR1", Control::ReopenLogs),
                _ = usr2.recv() => ("SIGUSR2", Control::Upgrade),
            };
            tracing::info!("{name} received");
            control.send(command);
        }
    });
    Ok(())
}
