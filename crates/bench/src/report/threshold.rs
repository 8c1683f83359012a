//! Thresholds, as k6 has them: pass/fail criteria on a run's metrics, each reported ✔ or ✘
//! with its value, that together make the verdict (a CI gate: exit 0 when every one holds, 1
//! when one does not).
//!
//! A threshold names a metric, a statistic of it, a comparison and a limit, optionally for one
//! audience group: `ttfb.p99<500ms`, `starved.rate<0.1%`, `failed.count<1`,
//! `mouth-to-ear{group:webrtc}.p99<300ms`, `server-cpu-per-1000.value<5` (k6's `p(99)` is read
//! too). In a scenario file it is a `[[threshold]]` table (`metric`, `stat`, `below` or
//! `above`, `group`, `abort-on-fail`, `delay-abort-eval`). The metrics ([`Metric`]) are
//! durations (ms: `ttfb`, `gap`, `longest-gap`, `mouth-to-ear`, `event-latency`,
//! `tls-handshake`, `stalled-drop`; statistics `p50` … `p99.9`, `min`, `max`, `avg`, `count`),
//! listener shares (`starved`, `starved-rate`, `starved-gap`, `starved-loss`, `corrupt`,
//! `failed`, `troubled`, `down-at-end`, `missed`, `lost`; statistics `rate`, a share of the
//! listeners started (or of the units), and `count`), and single values (`media-rate`,
//! `server-cpu-per-1000`, `server-rss-per-listener`, `bench-cpu-per-1000`; statistic `value`).
//! Limits take units: `500ms`, `2s`, `250us`, `0.1%`, `2KiB`, or a plain number in the
//! metric's own unit (ms, a 0-to-1 share, a count, % of a core, bytes).

use crate::report::figures::{Hists, Summary};
use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// A run metric a threshold can name (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Time to first audio byte (ms).
    Ttfb,
    /// Gaps between arrivals (ms).
    Gap,
    /// Each session's longest gap (ms).
    LongestGap,
    /// Mouth-to-ear latency (ms).
    MouthToEar,
    /// Event-stream delivery latency (ms).
    EventLatency,
    /// TLS handshakes (ms).
    TlsHandshake,
    /// Stalled listeners: connect to the server's close (ms).
    StalledDrop,
    /// Listeners starved by any rule.
    Starved,
    /// Listeners `starved: rate`.
    StarvedRate,
    /// Listeners `starved: gap`.
    StarvedGap,
    /// Listeners `starved: loss`.
    StarvedLoss,
    /// Listeners `corrupt`.
    Corrupt,
    /// Listeners with a failed connection.
    Failed,
    /// Listeners starved, corrupt or failed.
    Troubled,
    /// Listeners neither streaming, connecting nor stalled at the end.
    DownAtEnd,
    /// Title changes subscribers missed (events).
    Missed,
    /// RTP packets lost (WebRTC).
    Lost,
    /// Steady media time over wall time (ratio; 1 = real time).
    MediaRate,
    /// Server CPU per 1,000 listeners over the hold (% of one core).
    ServerCpuPer1000,
    /// Server memory added per listener (bytes).
    ServerRssPerListener,
    /// The bench's CPU per 1,000 listeners over the hold (% of one core).
    BenchCpuPer1000,
}

/// What kind of value a metric has (its unit, its statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Durations in ms, read from a histogram.
    Duration,
    /// A count of listeners (or units), and its share.
    Share,
    /// One value.
    Value,
}

impl Metric {
    /// Every metric, with its name.
    pub const ALL: [(Metric, &'static str); 21] = [
        (Metric::Ttfb, "ttfb"),
        (Metric::Gap, "gap"),
        (Metric::LongestGap, "longest-gap"),
        (Metric::MouthToEar, "mouth-to-ear"),
        (Metric::EventLatency, "event-latency"),
        (Metric::TlsHandshake, "tls-handshake"),
        (Metric::StalledDrop, "stalled-drop"),
        (Metric::Starved, "starved"),
        (Metric::StarvedRate, "starved-rate"),
        (Metric::StarvedGap, "starved-gap"),
        (Metric::StarvedLoss, "starved-loss"),
        (Metric::Corrupt, "corrupt"),
        (Metric::Failed, "failed"),
        (Metric::Troubled, "troubled"),
        (Metric::DownAtEnd, "down-at-end"),
        (Metric::Missed, "missed"),
        (Metric::Lost, "lost"),
        (Metric::MediaRate, "media-rate"),
        (Metric::ServerCpuPer1000, "server-cpu-per-1000"),
        (Metric::ServerRssPerListener, "server-rss-per-listener"),
        (Metric::BenchCpuPer1000, "bench-cpu-per-1000"),
    ];

    /// The metric's name (`ttfb`, `starved`, ...).
    pub fn name(self) -> &'static str {
        Metric::ALL
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("?", |(_, n)| n)
    }

    /// The metric named `name`.
    pub fn from_name(name: &str) -> Option<Metric> {
        let n = name.trim().replace('_', "-");
        Metric::ALL.iter().find(|(_, x)| *x == n).map(|(m, _)| *m)
    }

    /// The metric's kind.
    pub fn kind(self) -> Kind {
        use Metric::*;
        match self {
            Ttfb | Gap | LongestGap | MouthToEar | EventLatency | TlsHandshake | StalledDrop => {
                Kind::Duration
            }
            Starved | StarvedRate | StarvedGap | StarvedLoss | Corrupt | Failed | Troubled
            | DownAtEnd | Missed | Lost => Kind::Share,
            MediaRate | ServerCpuPer1000 | ServerRssPerListener | BenchCpuPer1000 => Kind::Value,
        }
    }

    /// Whether a latency measured across hosts (its accuracy bounded by the clocks').
    pub fn crosses_clocks(self) -> bool {
        matches!(self, Metric::MouthToEar | Metric::EventLatency)
    }
}

/// A statistic of a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// A percentile (0 to 100).
    P(f64),
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// The mean.
    Avg,
    /// How many (values, listeners).
    Count,
    /// A share (0 to 1) of the listeners started, or of the units.
    Rate,
    /// The value of a single-valued metric.
    Value,
}

impl Stat {
    fn parse(s: &str) -> Option<Stat> {
        let s = s.trim();
        if let Some(inner) = s.strip_prefix("p(").and_then(|r| r.strip_suffix(')')) {
            return inner.trim().parse().ok().filter(valid_p).map(Stat::P);
        }
        if let Some(n) = s.strip_prefix('p') {
            return n.parse().ok().filter(valid_p).map(Stat::P);
        }
        match s {
            "min" => Some(Stat::Min),
            "max" => Some(Stat::Max),
            "avg" | "mean" => Some(Stat::Avg),
            "count" => Some(Stat::Count),
            "rate" => Some(Stat::Rate),
            "value" => Some(Stat::Value),
            "med" => Some(Stat::P(50.0)),
            _ => None,
        }
    }

    fn allowed(self, kind: Kind) -> bool {
        match kind {
            Kind::Duration => matches!(
                self,
                Stat::P(_) | Stat::Min | Stat::Max | Stat::Avg | Stat::Count
            ),
            Kind::Share => matches!(self, Stat::Rate | Stat::Count),
            Kind::Value => matches!(self, Stat::Value),
        }
    }
}

fn valid_p(p: &f64) -> bool {
    (0.0..=100.0).contains(p)
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stat::P(p) => write!(f, "p{p}"),
            Stat::Min => f.write_str("min"),
            Stat::Max => f.write_str("max"),
            Stat::Avg => f.write_str("avg"),
            Stat::Count => f.write_str("count"),
            Stat::Rate => f.write_str("rate"),
            Stat::Value => f.write_str("value"),
        }
    }
}

/// The comparison of a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Op {
    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Lt => value < limit,
            Op::Le => value <= limit,
            Op::Gt => value > limit,
            Op::Ge => value >= limit,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// One threshold (see the module comment).
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The metric.
    pub metric: Metric,
    /// Its statistic.
    pub stat: Stat,
    /// The comparison.
    pub op: Op,
    /// The limit, in the metric's unit (ms, a 0-to-1 share, a count, % of a core, bytes).
    pub limit: f64,
    /// The group it applies to (`None`: the whole run).
    pub group: Option<String>,
    /// Stop the run as soon as it fails (k6's `abortOnFail`).
    pub abort_on_fail: bool,
    /// Do not abort before this many seconds into the run (k6's `delayAbortEval`).
    pub delay_abort_eval_s: f64,
    /// One of the defaults (today's verdict), not given by the user.
    pub default: bool,
}

/// A threshold that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ThresholdError {
    /// The expression is not `METRIC[{group:NAME}].STAT OP LIMIT`.
    #[error("threshold {0:?}: expected METRIC.STAT<LIMIT, e.g. ttfb.p99<500ms")]
    Syntax(String),
    /// No such metric.
    #[error("threshold {expr:?}: no metric {name:?} (metrics: {all})")]
    Metric {
        /// The expression.
        expr: String,
        /// The name given.
        name: String,
        /// Every metric's name.
        all: String,
    },
    /// The statistic does not apply to the metric.
    #[error("threshold {expr:?}: {stat} does not apply to {metric} (use {allowed})")]
    Stat {
        /// The expression.
        expr: String,
        /// The statistic given.
        stat: String,
        /// The metric.
        metric: String,
        /// The statistics that apply.
        allowed: &'static str,
    },
    /// The limit is not a number with a unit that suits the metric.
    #[error("threshold {expr:?}: bad limit {limit:?} ({why})")]
    Limit {
        /// The expression.
        expr: String,
        /// The limit given.
        limit: String,
        /// What is wrong.
        why: &'static str,
    },
}

fn all_names() -> String {
    Metric::ALL
        .iter()
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

fn allowed_stats(kind: Kind) -> &'static str {
    match kind {
        Kind::Duration => "p50, p90, p95, p99, p99.9, min, max, avg or count",
        Kind::Share => "rate or count",
        Kind::Value => "value",
    }
}

/// Reads a limit with its unit for a metric of `kind`.
fn parse_limit(text: &str, kind: Kind, metric: Metric) -> Result<f64, &'static str> {
    let t = text.trim().replace([' ', '_'], "");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(t.len());
    // "1e3ms": an 'e' may be the exponent; "5s" has no 'e'. Units never start with 'e'.
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| "not a number")?;
    if !v.is_finite() {
        return Err("not a finite number");
    }
    let unit = unit.to_ascii_lowercase();
    let scaled = match (kind, unit.as_str()) {
        (_, "") => v,
        (Kind::Duration, "ms") => v,
        (Kind::Duration, "s") => v * 1000.0,
        (Kind::Duration, "us" | "µs") => v / 1000.0,
        (Kind::Duration, "m" | "min") => v * 60_000.0,
        (Kind::Share, "%") => v / 100.0,
        (Kind::Value, "%") if metric == Metric::MediaRate => v / 100.0,
        (Kind::Value, "b") if metric == Metric::ServerRssPerListener => v,
        (Kind::Value, "kib") if metric == Metric::ServerRssPerListener => v * 1024.0,
        (Kind::Value, "kb") if metric == Metric::ServerRssPerListener => v * 1000.0,
        (Kind::Value, "mib") if metric == Metric::ServerRssPerListener => v * 1024.0 * 1024.0,
        (Kind::Duration, _) => return Err("durations take ms, s, us or m"),
        (Kind::Share, _) => return Err("shares take % or a plain number (0 to 1)"),
        (Kind::Value, _) => return Err("this metric takes a plain number (bytes: B, KiB, MiB)"),
    };
    Ok(scaled)
}

impl Threshold {
    /// Reads `METRIC[{group:NAME}].STAT OP LIMIT` (the `--threshold` form).
    ///
    /// Errors: see [`ThresholdError`].
    pub fn parse(expr: &str) -> Result<Threshold, ThresholdError> {
        let e = expr.trim();
        let syntax = || ThresholdError::Syntax(expr.to_owned());
        let at = e.find(['<', '>']).ok_or_else(syntax)?;
        let (lhs, rest) = e.split_at(at);
        let (op, limit) = if let Some(l) = rest.strip_prefix("<=") {
            (Op::Le, l)
        } else if let Some(l) = rest.strip_prefix(">=") {
            (Op::Ge, l)
        } else if let Some(l) = rest.strip_prefix('<') {
            (Op::Lt, l)
        } else if let Some(l) = rest.strip_prefix('>') {
            (Op::Gt, l)
        } else {
            return Err(syntax());
        };
        // METRIC{group:NAME}.STAT, the stat possibly `p(99)` (with its own dot: `p(99.9)`).
        let lhs = lhs.trim();
        let (metric_part, stat_part) = match lhs.find("}.") {
            Some(i) => (&lhs[..=i], &lhs[i + 2..]),
            None => lhs.split_once('.').ok_or_else(syntax)?,
        };
        let (name, group) = match metric_part.split_once('{') {
            Some((n, tags)) => {
                let tags = tags.strip_suffix('}').ok_or_else(syntax)?;
                let (k, v) = tags.split_once(':').ok_or_else(syntax)?;
                if k.trim() != "group" {
                    return Err(syntax());
                }
                (n, Some(v.trim().to_owned()))
            }
            None => (metric_part, None),
        };
        Threshold::new(name, stat_part, op, limit, group, expr)
    }

    /// A threshold from its parts (the scenario file's `[[threshold]]`).
    ///
    /// Errors: see [`ThresholdError`].
    pub fn new(
        metric: &str,
        stat: &str,
        op: Op,
        limit: &str,
        group: Option<String>,
        expr: &str,
    ) -> Result<Threshold, ThresholdError> {
        let m = Metric::from_name(metric).ok_or_else(|| ThresholdError::Metric {
            expr: expr.to_owned(),
            name: metric.trim().to_owned(),
            all: all_names(),
        })?;
        let stat_err = || ThresholdError::Stat {
            expr: expr.to_owned(),
            stat: stat.trim().to_owned(),
            metric: m.name().to_owned(),
            allowed: allowed_stats(m.kind()),
        };
        let s = Stat::parse(stat).ok_or_else(stat_err)?;
        if !s.allowed(m.kind()) {
            return Err(stat_err());
        }
        let kind = if s == Stat::Count {
            Kind::Value
        } else {
            m.kind()
        };
        let limit_v = parse_limit(limit, kind, m).map_err(|why| ThresholdError::Limit {
            expr: expr.to_owned(),
            limit: limit.trim().to_owned(),
            why,
        })?;
        Ok(Threshold {
            metric: m,
            stat: s,
            op,
            limit: limit_v,
            group,
            abort_on_fail: false,
            delay_abort_eval_s: 0.0,
            default: false,
        })
    }

    /// The threshold as `--threshold` writes it (`ttfb.p99<500ms`).
    pub fn name(&self) -> String {
        let group = self
            .group
            .as_ref()
            .map(|g| format!("{{group:{g}}}"))
            .unwrap_or_default();
        format!(
            "{}{group}.{}{}{}",
            self.metric.name(),
            self.stat,
            self.op.text(),
            self.limit_text()
        )
    }

    /// The limit with its unit.
    pub fn limit_text(&self) -> String {
        match (self.metric.kind(), self.stat) {
            (_, Stat::Count) => fmt_num(self.limit),
            (Kind::Duration, _) => format!("{}ms", fmt_num(self.limit)),
            (Kind::Share, _) => format!("{}%", fmt_num(self.limit * 100.0)),
            (Kind::Value, _) if self.metric == Metric::ServerRssPerListener => {
                format!("{}B", fmt_num(self.limit))
            }
            _ => fmt_num(self.limit),
        }
    }

    /// A value of this threshold's statistic, with its unit, for a report.
    pub fn value_text(&self, v: f64) -> String {
        match (self.metric.kind(), self.stat) {
            (_, Stat::Count) => fmt_num(v),
            (Kind::Duration, _) => {
                let d = if v >= 100.0 {
                    0
                } else if v >= 10.0 {
                    1
                } else {
                    2
                };
                format!("{v:.d$} ms")
            }
            (Kind::Share, _) => format!("{} %", fmt_num(v * 100.0)),
            (Kind::Value, _) if self.metric == Metric::ServerRssPerListener => {
                format!("{} B", fmt_num(v))
            }
            (Kind::Value, _) if self.metric == Metric::MediaRate => format!("{}×", fmt_num(v)),
            _ => fmt_num(v),
        }
    }

    /// The statistic's value in `s` and `h` (a group's or the run's), `None` when there is
    /// none (no value recorded, no server sampled).
    pub fn value(&self, s: &Summary, h: &Hists) -> Option<f64> {
        use Metric::*;
        let hist = match self.metric {
            Ttfb => Some(&h.ttfb),
            Gap => Some(&h.gap),
            LongestGap => Some(&h.longest_gap),
            MouthToEar => Some(&h.m2e),
            EventLatency => Some(&h.event_latency),
            TlsHandshake => Some(&h.handshake),
            StalledDrop => Some(&h.stalled_drop),
            _ => None,
        };
        if let Some(hist) = hist {
            return match self.stat {
                Stat::P(p) => hist.quantile_ms(p / 100.0),
                Stat::Min => hist.min_ms(),
                Stat::Max => hist.max_ms(),
                Stat::Avg => hist.mean_ms(),
                Stat::Count => Some(hist.count() as f64),
                _ => None,
            };
        }
        let listeners = f64::from(s.started.max(1));
        let (count, of) = match self.metric {
            Starved => (f64::from(s.starved), listeners),
            StarvedRate => (f64::from(s.starved_rate), listeners),
            StarvedGap => (f64::from(s.starved_gap), listeners),
            StarvedLoss => (f64::from(s.starved_loss), listeners),
            Corrupt => (f64::from(s.corrupt), listeners),
            Failed => (f64::from(s.failed_listeners), listeners),
            Troubled => (f64::from(s.troubled), listeners),
            DownAtEnd => (f64::from(s.down_at_end), f64::from(s.want_at_end.max(1))),
            Missed => (s.missed as f64, (s.missed + s.receipts).max(1) as f64),
            Lost => (s.lost_units as f64, (s.lost_units + s.units).max(1) as f64),
            MediaRate => return s.media_rate,
            ServerCpuPer1000 => return s.server_cpu_pct_per_1000,
            ServerRssPerListener => return s.server_rss_per_listener,
            BenchCpuPer1000 => return s.bench_cpu_pct_per_1000,
            _ => return None,
        };
        match self.stat {
            Stat::Count => Some(count),
            Stat::Rate => Some(count / of),
            _ => None,
        }
    }

    /// Judges the threshold on `s` and `h`.
    pub fn judge(&self, s: &Summary, h: &Hists) -> Outcome {
        let value = self.value(s, h);
        Outcome {
            name: self.name(),
            metric: self.metric.name().to_owned(),
            stat: self.stat.to_string(),
            group: self.group.clone(),
            limit: self.limit,
            value,
            value_text: value.map_or("no value".into(), |v| self.value_text(v)),
            pass: value.is_some_and(|v| self.op.holds(v, self.limit)),
            default: self.default,
        }
    }
}

/// A number without trailing zeros (`0.1`, `500`, `12.35`).
fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A threshold judged (`thresholds` in `report.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The threshold (`ttfb.p99<500ms`).
    pub name: String,
    /// Its metric.
    pub metric: String,
    /// Its statistic.
    pub stat: String,
    /// Its group (`None`: the whole run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The limit (the metric's unit).
    pub limit: f64,
    /// The value found (`None`: no value to judge, which fails).
    pub value: Option<f64>,
    /// The value with its unit.
    pub value_text: String,
    /// Whether it holds.
    pub pass: bool,
    /// One of the default thresholds (today's verdict).
    #[serde(default)]
    pub default: bool,
}

impl Outcome {
    /// `✔ ttfb.p99<500ms: 0.8 ms` / `✘ …`.
    pub fn line(&self) -> String {
        format!(
            "{} {}: {}",
            if self.pass { "✔" } else { "✘" },
            self.name,
            self.value_text
        )
    }
}

/// The defaults, today's verdict: no listener starved, corrupt or failed, every listener the
/// stages want up at the end; for event subscribers no change missed and the p99 delivery within
/// `max_event_latency_ms`. A default gives way to any threshold the user sets on the same
/// metric (and group); `no_defaults` drops them all.
pub fn with_defaults(
    given: Vec<Threshold>,
    events: bool,
    max_event_latency_ms: f64,
    no_defaults: bool,
) -> Vec<Threshold> {
    if no_defaults {
        return given;
    }
    let mut out = Vec::new();
    let mut defaults = vec![
        (Metric::Starved, Stat::Count, 1.0),
        (Metric::Corrupt, Stat::Count, 1.0),
        (Metric::Failed, Stat::Count, 1.0),
        (Metric::DownAtEnd, Stat::Count, 1.0),
    ];
    if events {
        defaults.push((Metric::Missed, Stat::Count, 1.0));
        defaults.push((Metric::EventLatency, Stat::P(99.0), max_event_latency_ms));
    }
    for (metric, stat, limit) in defaults {
        let overridden = given
            .iter()
            .any(|t| t.metric == metric && t.group.is_none());
        if !overridden {
            out.push(Threshold {
                metric,
                stat,
                op: if stat == Stat::Count { Op::Lt } else { Op::Le },
                limit,
                group: None,
                abort_on_fail: false,
                delay_abort_eval_s: 0.0,
                default: true,
            });
        }
    }
    out.extend(given);
    out
}

/// A `[[threshold]]` table of a scenario file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ThresholdTable {
    /// The metric's name.
    pub metric: String,
    /// The statistic (`p99`, `p(99)`, `rate`, `count`, `max`, `value`, ...).
    pub stat: String,
    /// Holds when the value is below this (a number, or text with a unit).
    #[serde(default)]
    pub below: Option<toml::Value>,
    /// Holds when the value is above this.
    #[serde(default)]
    pub above: Option<toml::Value>,
    /// Only this group (by name).
    #[serde(default)]
    pub group: Option<String>,
    /// Stop the run as soon as it fails.
    #[serde(default)]
    pub abort_on_fail: bool,
    /// Do not abort before this long into the run (`"10s"`).
    #[serde(default)]
    pub delay_abort_eval: Option<crate::profile::Secs>,
}

impl ThresholdTable {
    /// The threshold of this table.
    ///
    /// Errors: see [`ThresholdError`]; `below` and `above` both or neither given is a syntax
    /// error.
    pub fn threshold(&self) -> Result<Threshold, ThresholdError> {
        let text = |v: &toml::Value| match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => other.to_string(),
        };
        let (op, limit) = match (&self.below, &self.above) {
            (Some(b), None) => (Op::Lt, text(b)),
            (None, Some(a)) => (Op::Gt, text(a)),
            _ => {
                return Err(ThresholdError::Syntax(format!(
                    "[[threshold]] metric = {:?}: give one of below or above",
                    self.metric
                )))
            }
        };
        let expr = format!(
            "{}.{}{}{}",
            self.metric,
            self.stat,
            if op == Op::Lt { "<" } else { ">" },
            limit
        );
        let mut t = Threshold::new(
            &self.metric,
            &self.stat,
            op,
            &limit,
            self.group.clone(),
            &expr,
        )?;
        t.abort_on_fail = self.abort_on_fail;
        t.delay_abort_eval_s = self.delay_abort_eval.map_or(0.0, |d| d.0);
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_parse_with_units_and_groups() {
        let t = Threshold::parse("ttfb.p99<500ms").unwrap();
        assert_eq!(
            (t.metric, t.stat, t.op, t.limit),
            (Metric::Ttfb, Stat::P(99.0), Op::Lt, 500.0)
        );
        assert_eq!(t.name(), "ttfb.p99<500ms");
        let t = Threshold::parse("ttfb.p(99.9) < 1.5s").unwrap();
        assert_eq!((t.stat, t.limit), (Stat::P(99.9), 1500.0));
        let t = Threshold::parse("starved.rate<0.1%").unwrap();
        assert!((t.limit - 0.001).abs() < 1e-12);
        assert_eq!(t.name(), "starved.rate<0.1%");
        let t = Threshold::parse("mouth-to-ear{group:webrtc}.p99<=300ms").unwrap();
        assert_eq!(t.group.as_deref(), Some("webrtc"));
        assert_eq!(t.op, Op::Le);
        let t = Threshold::parse("server-rss-per-listener.value<2KiB").unwrap();
        assert_eq!(t.limit, 2048.0);
        let t = Threshold::parse("failed.count<1").unwrap();
        assert_eq!((t.stat, t.limit), (Stat::Count, 1.0));
    }

    #[test]
    fn bad_expressions_say_why() {
        let e = Threshold::parse("ttfb<5").unwrap_err().to_string();
        assert!(e.contains("METRIC.STAT"), "{e}");
        let e = Threshold::parse("tfb.p99<5ms").unwrap_err().to_string();
        assert!(e.contains("no metric \"tfb\"") && e.contains("ttfb"), "{e}");
        let e = Threshold::parse("starved.p99<5").unwrap_err().to_string();
        assert!(e.contains("rate or count"), "{e}");
        let e = Threshold::parse("ttfb.p99<5kg").unwrap_err().to_string();
        assert!(e.contains("durations take"), "{e}");
        let e = Threshold::parse("ttfb.p101<5ms").unwrap_err().to_string();
        assert!(e.contains("does not apply"), "{e}");
    }

    #[test]
    fn defaults_give_way_to_the_users_thresholds() {
        let given = vec![Threshold::parse("failed.rate<0.1%").unwrap()];
        let all = with_defaults(given, false, 1000.0, false);
        let names: Vec<String> = all.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "starved.count<1",
                "corrupt.count<1",
                "down-at-end.count<1",
                "failed.rate<0.1%"
            ]
        );
        assert!(all[0].default && !all[3].default);
        assert_eq!(with_defaults(vec![], true, 1000.0, false).len(), 6);
        assert!(with_defaults(vec![], true, 1000.0, true).is_empty());
    }

    #[test]
    fn tables_read_like_expressions() {
        let t: ThresholdTable = toml::from_str(
            "metric = \"ttfb\"\nstat = \"p99\"\nbelow = \"500ms\"\nabort-on-fail = true",
        )
        .unwrap();
        let t = t.threshold().unwrap();
        assert_eq!(t.name(), "ttfb.p99<500ms");
        assert!(t.abort_on_fail);
        let t: ThresholdTable =
            toml::from_str("metric = \"starved\"\nstat = \"rate\"\nbelow = 0.001").unwrap();
        assert!((t.threshold().unwrap().limit - 0.001).abs() < 1e-12);
        let t: ThresholdTable = toml::from_str("metric = \"ttfb\"\nstat = \"p99\"").unwrap();
        assert!(t.threshold().is_err());
    }
}
