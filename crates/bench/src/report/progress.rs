//! The live progress display (indicatif): started, streaming, starved, failed, server CPU.

use crate::report::summary::{Row, Summary};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A progress bar over listeners started; hidden when disabled or stderr is not a terminal.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` listeners, labelled `name`.
    pub fn new(enabled: bool, name: &str, total: u32) -> Progress {
        let bar = if enabled && std::io::stderr().is_terminal() {
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:24} {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(name.to_owned());
        Progress { bar }
    }

    /// Shows the latest totals.
    pub fn update(&self, r: &Row) {
        let c = &r.counts;
        self.bar.set_position(c.started as u64);
        let server = match &r.server {
            Some(s) => format!(
                " | server cpu {:.0}%us {:.0}%sy rss {} MB",
                s.cpu_user_pct,
                s.cpu_sys_pct,
                s.rss_bytes / 1_000_000
            ),
            None => String::new(),
        };
        self.bar.set_message(format!(
            "streaming {} | stalled {} | connecting {} | starved {} (ever {}) | failed {}{server}",
            c.streaming, c.stalled, c.connecting, c.starved, c.starved_total, c.failed
        ));
    }

    /// Clears the bar and prints a one-line verdict.
    pub fn finish(&self, s: &Summary) {
        self.bar.finish_and_clear();
        if !self.bar.is_hidden() {
            eprintln!(
                "{}: {} starved, {} failures, peak {} streaming",
                if s.pass { "PASS" } else { "FAIL" },
                s.starved,
                s.failures_total,
                s.peak_streaming
            );
        }
    }
}
