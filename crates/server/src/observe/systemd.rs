//! systemd readiness notifications (`sd_notify(3)`, for a `Type=notify` unit such as
//! `deploy/throng.service`): `READY=1` once the listen sockets are bound and accepting,
//! `RELOADING=1` while a configuration reload runs, `STOPPING=1` at shutdown, and `MAINPID=`
//! when another process takes over the service (a binary upgrade hands the sockets to a child,
//! which then announces itself, so the unit needs `NotifyAccess=all`). Each function is a no-op
//! when `NOTIFY_SOCKET` is not set (the server was not started by systemd); a failed send is
//! logged at debug level and otherwise ignored, since the service manager's view is never worth
//! stopping the server for. `NOTIFY_SOCKET` is left in the environment so that an upgraded
//! process started by this one can notify too.

use sd_notify::NotifyState;

/// Sends `states` to the service manager, if there is one.
fn notify(states: &[NotifyState<'_>]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::debug!("sd_notify failed: {e}");
    }
}

/// `READY=1`: the service is up (its sockets are bound and accepting).
pub fn ready() {
    notify(&[NotifyState::Ready]);
}

/// `RELOADING=1` with `MONOTONIC_USEC=` (what `Type=notify-reload` requires): a configuration
/// reload started; call [`ready`] when it is done.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(_) => notify(&[NotifyState::Reloading]),
    }
}

/// `STOPPING=1`: the service is shutting down.
pub fn stopping() {
    notify(&[NotifyState::Stopping]);
}

/// `MAINPID=pid`: process `pid` is now the service's main process (sent by the new process of
/// a binary upgrade, with `READY=1` once it serves). Needs `NotifyAccess=all` in the unit, as
/// the sender is not the main process systemd knows yet.
pub fn main_pid(pid: u32) {
    notify(&[NotifyState::MainPid(pid)]);
}

/// `STATUS=text`: a one-line status that `systemctl status` shows.
pub fn status(text: &str) {
    notify(&[NotifyState::Status(text)]);
}

#[cfg(test)]
mod tests {
    /// The messages arrive on the socket named by `NOTIFY_SOCKET`, one datagram per call.
    /// (The only test in this crate that sets `NOTIFY_SOCKET`; others never read it.)
    #[test]
    fn notifications_reach_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        // SAFETY (edition 2021 set_var): no other test of this crate reads NOTIFY_SOCKET.
        std::env::set_var("NOTIFY_SOCKET", &path);
        let mut buf = [0u8; 256];
        let mut recv = || {
            let n = sock.recv(&mut buf).unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        };
        super::ready();
        assert_eq!(recv(), "READY=1\n");
        super::reloading();
        let r = recv();
        assert!(r.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{r:?}");
        super::main_pid(42);
        assert_eq!(recv(), "MAINPID=42\n");
        super::status("serving");
        assert_eq!(recv(), "STATUS=serving\n");
        super::stopping();
        assert_eq!(recv(), "STOPPING=1\n");
        std::env::remove_var("NOTIFY_SOCKET");
    }
}
