//! The live progress of a run on standard error: on a terminal an indicatif bar redrawn every
//! second; without one (CI logs, a redirected run) one plain line every [`PLAIN_EVERY_S`]
//! seconds, so a long run is never silent until its final table:
//!
//! ```text
//! [  35s] stage 2/3 target 2000 | connected 2000 streaming 1998 | starved now 0 ever 0 | failed 0 | media 1.00× | server cpu 23%
//! ```

use crate::report::summary::{Row, Summary};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// Seconds between two plain progress lines.
pub const PLAIN_EVERY_S: u32 = 5;

/// The live progress (see the module comment).
pub struct Progress {
    bar: ProgressBar,
    /// Plain lines (no terminal, and progress wanted).
    plain: bool,
    stages: usize,
    name: String,
}

/// One progress line of `row` (a timeline row) at stage `stage` of `stages`.
pub fn line(row: &Row, stages: usize) -> String {
    let t = &row.total;
    let media = t.media_rate.map_or("–".into(), |v| format!("{v:.2}×"));
    let server = row
        .server
        .as_ref()
        .map(|s| format!(" | server cpu {:.0}%", s.cpu_user_pct + s.cpu_sys_pct))
        .unwrap_or_default();
    format!(
        "[{:>5}s] stage {}/{} target {} | connected {} streaming {} | starved now {} ever {} | corrupt {} | failed {} | media {media}{server}",
        row.second + 1,
        row.stage + 1,
        stages.max(1),
        t.want,
        t.connected(),
        t.streaming,
        t.starved,
        t.starved_total,
        t.corrupt_total,
        t.down,
    )
}

impl Progress {
    /// Progress for a run called `name` with `stages` stages and at most `peak` listeners:
    /// a bar on a terminal, plain lines otherwise; nothing when `enabled` is false.
    pub fn new(enabled: bool, name: &str, peak: u32, stages: usize) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let bar = if enabled && tty {
            ProgressBar::with_draw_target(Some(u64::from(peak)), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{elapsed_precise}] {bar:24} {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(name.to_owned());
        Progress {
            bar,
            plain: enabled && !tty,
            stages,
            name: name.to_owned(),
        }
    }

    /// Shows a new second of the run.
    pub fn update(&self, r: &Row) {
        if self.plain {
            if (r.second + 1).is_multiple_of(PLAIN_EVERY_S) {
                eprintln!("{}: {}", self.name, line(r, self.stages));
            }
            return;
        }
        self.bar.set_position(u64::from(r.total.connected()));
        self.bar.set_message(line(r, self.stages));
    }

    /// Clears the bar.
    pub fn finish(&self, _s: &Summary) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_says_where_the_run_is() {
        let mut r = Row {
            second: 34,
            stage: 1,
            ..Row::default()
        };
        r.total.want = 2000;
        r.total.streaming = 1998;
        r.total.media_rate = Some(1.0);
        let l = line(&r, 3);
        assert!(
            l.starts_with("[   35s] stage 2/3 target 2000 | connected 1998 streaming 1998"),
            "{l}"
        );
        assert!(l.contains("media 1.00×"), "{l}");
    }
}
