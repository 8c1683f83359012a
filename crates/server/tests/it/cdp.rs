//! A small Chrome DevTools Protocol client for the browser tests (`web_page.rs`): it starts
//! Debian's headless Chromium (`scripts/install-deps.sh` installs it) with
//! `--remote-debugging-pipe`, so the protocol runs over two pipes (file descriptors 3 and 4 of
//! the browser, messages as JSON ended by a NUL byte) with no port, no WebSocket and no
//! browser download. Tabs are attached in flat mode (`sessionId` on each message); every event
//! is kept so a test can look for console errors and uncaught exceptions.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The Chromium to use, if it exists: `THRONG_CHROMIUM`, else Debian's `/usr/bin/chromium`.
pub fn chromium_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("THRONG_CHROMIUM") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Whether a missing browser (or browser-side package) must fail the test instead of skipping
/// it: `THRONG_REQUIRE_BROWSER` is set (`scripts/test.sh` sets it, so CI fails on a missing
/// install).
pub fn browser_required() -> bool {
    std::env::var_os("THRONG_REQUIRE_BROWSER").is_some()
}

/// The Chromium to test with ([`chromium_path`]); `None` (the test is to be skipped, which is
/// said on stderr) when there is none, and a panic then when [`browser_required`].
pub fn chromium_or_skip() -> Option<PathBuf> {
    let path = chromium_path();
    if path.is_none() {
        assert!(
            !browser_required(),
            "chromium is not installed and THRONG_REQUIRE_BROWSER is set: run scripts/install-deps.sh"
        );
        eprintln!("SKIPPED: chromium is not installed (scripts/install-deps.sh installs it)");
    }
    path
}

/// A JS promise of the inbound-rtp audio stats (`{ received, lost, samples, concealed }`:
/// packets received and lost, samples decoded for output and those of them concealment made
/// up, at the track's rate; or `null` before there are any) of the `RTCPeerConnection` that the JS expression `pc` names (`null` too while
/// that is not set).
pub fn inbound_audio_stats(pc: &str) -> String {
    format!(
        r#"(async () => {{
        const pc = {pc};
        if (!pc) return null;
        let o = null;
        (await pc.getStats()).forEach(r => {{
            if (r.type === 'inbound-rtp' && r.kind === 'audio') {{
                o = {{ received: r.packetsReceived, lost: r.packetsLost,
                      samples: r.totalSamplesReceived, concealed: r.concealedSamples }};
            }}
        }});
        return o;
    }})()"#
    )
}

#[derive(Default)]
struct State {
    responses: HashMap<u64, Value>,
    events: Vec<Value>,
    closed: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

/// A headless Chromium driven over its debugging pipe, killed on drop.
pub struct Browser {
    child: Child,
    to_browser: Mutex<File>,
    shared: Arc<Shared>,
    next_id: Mutex<u64>,
    _profile: tempfile::TempDir,
}

/// One tab (a flat-mode session).
#[derive(Debug, Clone)]
pub struct Tab {
    /// The session id of its messages.
    pub session: String,
}

fn pipe() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two descriptors for pipe2 to fill.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    (fds[0], fds[1])
}

impl Browser {
    /// Starts Chromium at `path`, headless, with autoplay allowed without a gesture.
    pub fn launch(path: &std::path::Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (browser_reads, we_write) = pipe();
        let (we_read, browser_writes) = pipe();
        let mut cmd = Command::new(path);
        cmd.args([
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-component-update",
            "--disable-background-networking",
            "--disable-sync",
            "--autoplay-policy=no-user-gesture-required",
            "--use-fake-ui-for-media-stream",
            // A generated input for getUserMedia (the Go-live page, `whip.rs`).
            "--use-fake-device-for-media-stream",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Out of the way of 3 and 4 first, then onto them (dup2 clears CLOEXEC).
                let r = libc::fcntl(browser_reads, libc::F_DUPFD, 10);
                let w = libc::fcntl(browser_writes, libc::F_DUPFD, 10);
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        // SAFETY: the descriptors come from pipe2 above and are owned by nothing else.
        unsafe {
            libc::close(browser_reads);
            libc::close(browser_writes);
        }
        // SAFETY: as above; each File takes sole ownership of its descriptor.
        let (to_browser, mut from_browser) =
            unsafe { (File::from_raw_fd(we_write), File::from_raw_fd(we_read)) };
        let shared = Arc::new(Shared::default());
        let reader = shared.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = vec![0u8; 65536];
            loop {
                let n = match from_browser.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    let Ok(v) = serde_json::from_slice::<Value>(&msg[..msg.len() - 1]) else {
                        continue;
                    };
                    let mut st = reader.state.lock().unwrap();
                    match v.get("id").and_then(Value::as_u64) {
                        Some(id) => {
                            st.responses.insert(id, v);
                        }
                        None => st.events.push(v),
                    }
                    reader.cv.notify_all();
                }
            }
            reader.state.lock().unwrap().closed = true;
            reader.cv.notify_all();
        });
        Browser {
            child,
            to_browser: Mutex::new(to_browser),
            shared,
            next_id: Mutex::new(0),
            _profile: profile,
        }
    }

    /// Sends `method` with `params` (to the tab of `session`, if any) and waits up to 30 s for
    /// its result.
    ///
    /// Errors: the protocol error's message, or a timeout.
    pub fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let id = {
            let mut n = self.next_id.lock().unwrap();
            *n += 1;
            *n
        };
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to_browser
            .lock()
            .unwrap()
            .write_all(&bytes)
            .map_err(|e| format!("write to chromium: {e}"))?;
        let end = Instant::now() + Duration::from_secs(30);
        let mut st = self.shared.state.lock().unwrap();
        loop {
            if let Some(v) = st.responses.remove(&id) {
                return match v.get("error") {
                    Some(e) => Err(format!("{method}: {e}")),
                    None => Ok(v["result"].clone()),
                };
            }
            if st.closed {
                return Err(format!("{method}: chromium closed its pipe"));
            }
            let now = Instant::now();
            if now >= end {
                return Err(format!("{method}: no answer in 30 s"));
            }
            st = self.shared.cv.wait_timeout(st, end - now).unwrap().0;
        }
    }

    /// Opens a new tab on `about:blank` with the Page, Runtime, Log and Network domains on.
    pub fn new_tab(&self) -> Tab {
        let t = self
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .expect("createTarget");
        let target = t["targetId"].as_str().unwrap().to_owned();
        let a = self
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target, "flatten": true }),
            )
            .expect("attachToTarget");
        let tab = Tab {
            session: a["sessionId"].as_str().unwrap().to_owned(),
        };
        for domain in [
            "Page.enable",
            "Runtime.enable",
            "Log.enable",
            "Network.enable",
        ] {
            self.call(Some(&tab.session), domain, json!({}))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        tab
    }

    /// Sends extra headers (e.g. `Authorization`) with every request of `tab`.
    pub fn set_headers(&self, tab: &Tab, headers: Value) {
        self.call(
            Some(&tab.session),
            "Network.setExtraHTTPHeaders",
            json!({ "headers": headers }),
        )
        .expect("setExtraHTTPHeaders");
    }

    /// Navigates `tab` to `url` and waits for its `load` event (at most 30 s).
    pub fn navigate(&self, tab: &Tab, url: &str) {
        let before = self.shared.state.lock().unwrap().events.len();
        let r = self
            .call(Some(&tab.session), "Page.navigate", json!({ "url": url }))
            .expect("navigate");
        assert!(r.get("errorText").is_none(), "navigate {url}: {r}");
        self.wait_event(tab, "Page.loadEventFired", before);
    }

    /// Waits for event `method` of `tab` after the first `from` events (at most 30 s).
    fn wait_event(&self, tab: &Tab, method: &str, from: usize) {
        let end = Instant::now() + Duration::from_secs(30);
        let mut st = self.shared.state.lock().unwrap();
        loop {
            if st.events[from.min(st.events.len())..]
                .iter()
                .any(|e| e["method"] == method && e["sessionId"] == tab.session.as_str())
            {
                return;
            }
            let now = Instant::now();
            assert!(now < end && !st.closed, "no {method} in 30 s");
            st = self.shared.cv.wait_timeout(st, end - now).unwrap().0;
        }
    }

    /// Evaluates `expr` in `tab` (awaiting a promise) and returns its value.
    ///
    /// Errors: the exception it threw, or a protocol error.
    pub fn eval(&self, tab: &Tab, expr: &str) -> Result<Value, String> {
        let r = self.call(
            Some(&tab.session),
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(format!("{expr}: {e}"));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Evaluates `expr` every 50 ms until it is truthy (returns that value) or `timeout`.
    ///
    /// Errors: the last value seen (or error) when the time is up.
    pub fn wait_js(&self, tab: &Tab, expr: &str, timeout: Duration) -> Result<Value, String> {
        let end = Instant::now() + timeout;
        loop {
            let v = self.eval(tab, expr);
            let truthy = match &v {
                Ok(Value::Bool(b)) => *b,
                Ok(Value::Null) => false,
                Ok(Value::Number(n)) => n.as_f64() != Some(0.0),
                Ok(Value::String(s)) => !s.is_empty(),
                Ok(_) => true,
                Err(_) => false,
            };
            if truthy {
                return v;
            }
            if Instant::now() >= end {
                return Err(format!("`{expr}` not true within {timeout:?}: {v:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The console errors, uncaught exceptions and error log entries of `tab` so far.
    pub fn console_errors(&self, tab: &Tab) -> Vec<String> {
        let st = self.shared.state.lock().unwrap();
        st.events
            .iter()
            .filter(|e| e["sessionId"] == tab.session.as_str())
            .filter_map(|e| {
                let p = &e["params"];
                match e["method"].as_str()? {
                    "Runtime.exceptionThrown" => {
                        Some(format!("exception: {}", p["exceptionDetails"]))
                    }
                    "Runtime.consoleAPICalled"
                        if matches!(p["type"].as_str(), Some("error" | "assert")) =>
                    {
                        Some(format!("console.error: {}", p["args"]))
                    }
                    "Log.entryAdded" if p["entry"]["level"] == "error" => {
                        Some(format!("log: {} {}", p["entry"]["text"], p["entry"]["url"]))
                    }
                    _ => None,
                }
            })
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.call(None, "Browser.close", json!({}));
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The browser, or `None` (after saying why) when the test is to be skipped.
pub fn browser_or_skip() -> Option<Browser> {
    match chromium_path() {
        Some(p) => Some(Browser::launch(&p)),
        None if browser_required() => {
            panic!("chromium is not installed and THRONG_REQUIRE_BROWSER is set: run scripts/install-deps.sh")
        }
        None => {
            eprintln!(
                "SKIPPED: chromium is not installed (scripts/install-deps.sh installs it; set THRONG_REQUIRE_BROWSER to make this a failure)"
            );
            None
        }
    }
}
