//! Operator commands to a running server ([`Control`]): shut down, drain, reload the configuration,
//! reopen the log files, upgrade the binary in place. Signals (`signals.rs`: TERM/INT, HUP,
//! USR1, USR2) and the admin command `reloadconfig` send them through a [`ControlHandle`]; the
//! server's run loop (`server.rs`) carries them out one at a time, so a reload never races an
//! upgrade.

use tokio::sync::{mpsc, oneshot};

/// One operator command.
#[derive(Debug)]
pub enum Control {
    /// Stop serving: stop sources, close listeners, exit (SIGINT; SIGTERM without
    /// `[limits] drain-timeout`, or during a drain).
    Shutdown,
    /// SIGTERM: a drain when `[limits] drain-timeout` is more than 0 and none runs, else a
    /// [`Control::Shutdown`] (the run loop decides, with the configuration in force).
    Terminate,
    /// Drain (`POST /api/v1/drain`): stop taking listeners, keep the ones here until they
    /// leave or `drain-timeout` passes, then close them (`shutdown:drained`) and exit
    /// (`cluster/drain.rs`).
    Drain,
    /// Re-read the configuration file and apply it without dropping anyone (SIGHUP, admin
    /// `reloadconfig`). The reply, when asked for, carries the outcome: `Ok` with a summary of
    /// what changed, or `Err` with why the new configuration was refused (the running one is
    /// kept).
    Reload(Option<oneshot::Sender<Result<String, String>>>),
    /// Reopen the access and error logs at their configured paths (SIGUSR1, after logrotate
    /// moved them).
    ReopenLogs,
    /// Start the binary at the server's own path and hand it every socket (SIGUSR2).
    Upgrade,
}

/// The sending side of the server's command queue (cheap to clone).
#[derive(Debug, Clone)]
pub struct ControlHandle(mpsc::UnboundedSender<Control>);

impl ControlHandle {
    /// A handle and the receiver the run loop reads.
    pub fn channel() -> (ControlHandle, mpsc::UnboundedReceiver<Control>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ControlHandle(tx), rx)
    }

    /// Queues `command`; a no-op once the server has stopped.
    pub fn send(&self, command: Control) {
        let _ = self.0.send(command);
    }

    /// Asks for a reload and waits for its outcome (`Err` also when the server has stopped).
    pub async fn reload(&self) -> Result<String, String> {
        let (tx, rx) = oneshot::channel();
        self.send(Control::Reload(Some(tx)));
        rx.await
            .unwrap_or_else(|_| Err("the server is stopping".to_string()))
    }
}
