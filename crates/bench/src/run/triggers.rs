//! The title changes an events group times: the bench sets the title of the group's trigger
//! mount through Icecast's admin metadata command (`/admin/metadata?mode=updinfo`, so an
//! origin feeding relay edges can be the target), every `change-interval`, each title carrying
//! its change number and its trigger time on the run's one clock
//! ([`crate::events::subscriber::bench_title`]); subscribers on any host time their receipt
//! against it. Changes start once the group's first ramp is over (its target at its peak) and
//! stop before the run ends, leaving each the time to arrive.

use crate::events::subscriber::bench_title;
use crate::profile::slice::RunClock;
use crate::scenario::plan::GroupPlan;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The admin metadata request that sets `title` on the mount of `trigger`
/// (`http://host:port/mount`).
///
/// Errors: no connection, or a status other than 200.
pub fn set_title(trigger: &str, user: &str, password: &str, title: &str) -> anyhow::Result<()> {
    let u = crate::net::url::HttpUrl::parse(trigger)?;
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let req = format!(
        "GET /admin/metadata?mount={}&mode=updinfo&song={} HTTP/1.0\r\nHost: {}\r\nAuthorization: {}\r\nUser-Agent: throng-bench\r\n\r\n",
        enc(&u.path),
        enc(title),
        u.host_header(),
        throng_proto::auth::basic_authorization(user, password)
    );
    let mut s = std::net::TcpStream::connect_timeout(&u.addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(req.as_bytes())?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let head = String::from_utf8_lossy(&out);
    let status = head.split_whitespace().nth(1).unwrap_or("");
    anyhow::ensure!(
        status == "200",
        "title change on {trigger}: {}",
        head.lines().next().unwrap_or("no answer")
    );
    Ok(())
}

/// The default trigger of an event-stream URL: the `?mount=` of `url` on its server.
pub fn default_trigger(url: &str) -> Option<String> {
    let (base, query) = url.split_once('?')?;
    let mount = throng_proto::http::parse_query(query)
        .into_iter()
        .find(|(k, _)| k == "mount")?
        .1;
    let origin = base.split_once("/api/").map_or(base, |(o, _)| o);
    Some(format!("{origin}{mount}"))
}

/// When an events group's title changes begin and end (seconds since the run's start).
pub fn window(g: &GroupPlan) -> (f64, f64) {
    let peak = f64::from(g.schedule.peak());
    let mut t = 0.0;
    let mut first = 0.0;
    for s in &g.schedule.stages {
        t += s.duration.0;
        if f64::from(s.target) >= peak {
            first = t;
            break;
        }
    }
    let end = g.schedule.total_secs() - g.events.max_latency_ms / 1000.0 - 1.0;
    (first + 2.0, end)
}

/// One events group's changes, running on a thread.
pub struct Triggers {
    stop: Arc<AtomicBool>,
    /// Changes made so far.
    pub made: Arc<AtomicU32>,
    /// The first error.
    pub error: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl Triggers {
    /// Starts the changes of group `g` of a run whose second 0 is `start_unix_ms` on the
    /// run's clock `clock`.
    ///
    /// Errors: no trigger URL and none to derive, no admin password.
    pub fn start(
        g: &GroupPlan,
        start_unix_ms: u64,
        clock: Arc<RunClock>,
    ) -> anyhow::Result<Triggers> {
        let trigger = g
            .events
            .trigger_url
            .clone()
            .or_else(|| g.urls.first().and_then(|u| default_trigger(u)))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "group {}: a trigger URL is needed (the URL has no ?mount=): --trigger-url or trigger-url",
                    g.name
                )
            })?;
        let password = g
            .events
            .admin_password
            .clone()
            .or_else(|| std::env::var("THRONG_ADMIN_PASSWORD").ok())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "group {}: --admin-password (or THRONG_ADMIN_PASSWORD, or admin-password) is needed for the title changes",
                    g.name
                )
            })?;
        let user = g.events.admin_user.clone();
        let (from, until) = window(g);
        let every = g.events.change_interval_s.max(0.05);
        let limit = if g.events.changes == 0 {
            u32::MAX
        } else {
            g.events.changes
        };
        let stop = Arc::new(AtomicBool::new(false));
        let made = Arc::new(AtomicU32::new(0));
        let error = Arc::new(Mutex::new(None));
        let (s2, m2, e2) = (stop.clone(), made.clone(), error.clone());
        let thread = std::thread::Builder::new()
            .name("bench-triggers".into())
            .spawn(move || {
                let mut k = 0u32;
                while !s2.load(Ordering::Relaxed) && k < limit {
                    let due_us =
                        start_unix_ms as f64 * 1000.0 + (from + f64::from(k) * every) * 1e6;
                    if (due_us - start_unix_ms as f64 * 1000.0) / 1e6 > until {
                        break;
                    }
                    let now = clock.now_us() as f64;
                    if now < due_us {
                        std::thread::sleep(Duration::from_micros(
                            ((due_us - now) as u64).min(100_000),
                        ));
                        continue;
                    }
                    match set_title(&trigger, &user, &password, &bench_title(k, clock.now_us())) {
                        Ok(()) => {
                            m2.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            *e2.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                            break;
                        }
                    }
                    k += 1;
                }
            })?;
        Ok(Triggers {
            stop,
            made,
            error,
            thread: Some(thread),
        })
    }

    /// Stops the changes.
    pub fn stop(mut self) -> (u32, Option<String>) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let e = self.error.lock().unwrap_or_else(|p| p.into_inner()).take();
        (self.made.load(Ordering::Relaxed), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_trigger_is_the_filtered_mount_on_its_server() {
        assert_eq!(
            default_trigger("http://127.0.0.1:8000/api/v1/events?mount=/live.mp3").as_deref(),
            Some("http://127.0.0.1:8000/live.mp3")
        );
        assert_eq!(default_trigger("http://h/api/v1/events"), None);
    }
}
