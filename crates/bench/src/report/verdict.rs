//! The verdict: every threshold judged ([`judge`]), the answer in one sentence, and why a run
//! FAILs in words, one line per reason: which rule (`starved: rate`, `starved: gap`,
//! `starved: loss`, `corrupt`), how many listeners and from which second, the failed
//! connections with their first kinds by count (`http-404 ×150`,
//! [`crate::stats::first_kinds`]), the listeners down at the end, each other threshold that
//! does not hold, and the run's errors. The console prints the sentence and these lines, the
//! HTML report opens with them, `report.json` has them as `verdict` and
//! `summary.fail_reasons`.

use crate::mode::Mode;
use crate::report::summary::{RunReport, Summary};
use crate::report::threshold::{Metric, Outcome, Threshold};
use crate::stats::{first_kinds, Rule};

/// `12,345`: a count with thousands separators, as the reports print counts.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in ms for a sentence (`0.8 ms`, `12 ms`, `1.4 s`).
pub fn ms_text(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.1} s", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// The rule lines of a summary: `starved: rate: 200 of 3,000 listeners, from 14 s`.
pub fn rule_lines(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    for rule in Rule::ALL {
        let c = s.rules.get(rule);
        if c.listeners == 0 {
            continue;
        }
        let when = c
            .first_s
            .map(|f| format!(", from {f} s"))
            .unwrap_or_default();
        let what = match rule {
            Rule::Rate => "less media than the minimum share of real time over the window",
            Rule::Gap => "a gap over the player's buffer",
            Rule::Loss => "RTP packets lost over the maximum share in a window",
            Rule::Corrupt => "frames, pages or blocks that do not chain",
        };
        out.push(format!(
            "{}: {} of {} listeners ({what}){when}",
            rule.label(),
            thousands(u64::from(c.listeners)),
            thousands(u64::from(s.started))
        ));
    }
    out
}

/// The line of an outcome that failed, in words where the metric has words.
fn outcome_line(o: &Outcome, t: &Threshold, s: &Summary) -> Vec<String> {
    let scope = o
        .group
        .as_ref()
        .map(|g| format!("group {g}: "))
        .unwrap_or_default();
    match t.metric {
        Metric::Starved | Metric::Corrupt if t.default => rule_lines(s)
            .into_iter()
            .filter(|l| (t.metric == Metric::Corrupt) == l.starts_with("corrupt"))
            .map(|l| format!("{scope}{l}"))
            .collect(),
        Metric::Failed if t.default => vec![format!(
            "{scope}{} connections failed ({} listeners asked for, {} had a failure): {}",
            thousands(s.failures_total),
            thousands(u64::from(s.listeners)),
            thousands(u64::from(s.failed_listeners)),
            first_kinds(&s.failures)
        )],
        Metric::DownAtEnd if t.default => vec![format!(
            "{scope}{} of {} listeners streaming at the end ({} connecting, {} stalled on purpose)",
            thousands(u64::from(s.final_streaming)),
            thousands(u64::from(s.want_at_end)),
            thousands(u64::from(s.final_connecting)),
            thousands(u64::from(s.stalled))
        )],
        Metric::Missed if t.default => vec![format!(
            "{scope}{} of {} title receipts missed",
            thousands(s.missed),
            thousands(s.missed + s.receipts)
        )],
        _ => vec![format!("{scope}threshold {}: {}", o.name, o.value_text)],
    }
}

/// Judges `thresholds` on `report` (each against its group's figures or the run's), and sets
/// its outcomes, its verdict (`summary.pass`: every threshold holds, no error, no lost host),
/// its reasons and its sentence. `min_rate` is the rate rule's share of real time (for the
/// sentence).
pub fn judge(report: &mut RunReport, thresholds: &[Threshold], min_rate: f64) {
    let mut outcomes = Vec::new();
    let mut reasons = Vec::new();
    for t in thresholds {
        let o = match report.figures(t.group.as_deref()) {
            Some((s, h)) => t.judge(s, h),
            None => Outcome {
                name: t.name(),
                metric: t.metric.name().into(),
                stat: t.stat.to_string(),
                group: t.group.clone(),
                limit: t.limit,
                value: None,
                value_text: format!("no group {:?}", t.group.as_deref().unwrap_or("")),
                pass: false,
                default: t.default,
            },
        };
        if !o.pass {
            let s = report
                .figures(t.group.as_deref())
                .map(|(s, _)| s.clone())
                .unwrap_or_default();
            reasons.extend(outcome_line(&o, t, &s));
        }
        outcomes.push(o);
    }
    for l in &report.lost {
        reasons.push(format!(
            "agent {} lost at {} s: {} listeners unaccounted for",
            l.host,
            l.second,
            thousands(u64::from(l.listeners))
        ));
    }
    for e in report.errors.iter().take(3) {
        reasons.push(format!("error: {e}"));
    }
    if report.errors.len() > 3 {
        reasons.push(format!("and {} more errors", report.errors.len() - 3));
    }
    let pass =
        outcomes.iter().all(|o| o.pass) && report.errors.is_empty() && report.lost.is_empty();
    if !pass && reasons.is_empty() {
        reasons.push("the verdict is FAIL (see report.json)".into());
    }
    report.summary.pass = pass;
    report.summary.fail_reasons = if pass { Vec::new() } else { reasons };
    for g in &mut report.groups {
        let mine: Vec<&Outcome> = outcomes
            .iter()
            .filter(|o| o.group.as_deref() == Some(g.name.as_str()))
            .collect();
        g.summary.pass = mine.iter().all(|o| o.pass);
    }
    report.thresholds = outcomes;
    report.verdict = sentence(report, min_rate);
}

/// The answer in one sentence: `PASS: 3,000 of 3,000 listeners got ≥ 80 % of real time, p99
/// TTFB 0.8 ms` (event subscribers get theirs: every change received, p99 delivery).
pub fn sentence(r: &RunReport, min_rate: f64) -> String {
    let word = if r.summary.pass { "PASS" } else { "FAIL" };
    let mut parts = Vec::new();
    let media: Vec<&Summary> = r
        .groups
        .iter()
        .filter(|g| g.mode != Mode::Events)
        .map(|g| &g.summary)
        .collect();
    let subs: Vec<&Summary> = r
        .groups
        .iter()
        .filter(|g| g.mode == Mode::Events)
        .map(|g| &g.summary)
        .collect();
    let sum =
        |v: &[&Summary], f: fn(&Summary) -> u32| v.iter().map(|s| u64::from(f(s))).sum::<u64>();
    if !media.is_empty() {
        let started = sum(&media, |s| s.started);
        let ok = started.saturating_sub(sum(&media, |s| s.troubled));
        let mut p = format!(
            "{} of {} listeners got ≥ {:.0} % of real time",
            thousands(ok),
            thousands(started),
            min_rate * 100.0
        );
        let mut bad = Vec::new();
        for (label, n) in [
            ("starved", sum(&media, |s| s.starved)),
            ("corrupt", sum(&media, |s| s.corrupt)),
            ("failed", sum(&media, |s| s.failed_listeners)),
        ] {
            if n > 0 {
                bad.push(format!("{} {label}", thousands(n)));
            }
        }
        if !bad.is_empty() {
            p.push_str(&format!(" ({})", bad.join(", ")));
        }
        if let Some(t) = r.hists.ttfb.quantile_ms(0.99) {
            p.push_str(&format!(", p99 TTFB {}", ms_text(t)));
        }
        parts.push(p);
    }
    if !subs.is_empty() {
        let started = sum(&subs, |s| s.started);
        let missed: u64 = subs.iter().map(|s| s.missed).sum();
        let mut p = format!(
            "{} event subscribers, {} title receipts missed",
            thousands(started),
            thousands(missed)
        );
        let lat = r.groups.iter().filter(|g| g.mode == Mode::Events).fold(
            crate::stats::Hist::new(),
            |mut h, g| {
                h.merge(&g.hists.event_latency);
                h
            },
        );
        if let Some(t) = lat.quantile_ms(0.99) {
            p.push_str(&format!(", p99 delivery {}", ms_text(t)));
        }
        parts.push(p);
    }
    if parts.is_empty() {
        parts.push("no listener ran".into());
    }
    let failed = r.thresholds.iter().filter(|o| !o.pass).count();
    let mut out = format!("{word}: {}", parts.join("; "));
    if failed > 0 {
        out.push_str(&format!(
            "; {failed} of {} thresholds failed",
            r.thresholds.len()
        ));
    }
    if !r.lost.is_empty() {
        out.push_str(&format!("; {} agents lost", r.lost.len()));
    }
    out
}

/// Every reason `report` FAILs (empty for a PASS): its summary's reasons.
pub fn reasons(report: &RunReport) -> Vec<String> {
    if report.summary.pass {
        Vec::new()
    } else {
        report.summary.fail_reasons.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::GroupReport;
    use crate::report::threshold::with_defaults;

    fn report(started: u32, starved: u32, first: u32) -> RunReport {
        let mut s = Summary {
            listeners: started,
            started,
            starved,
            troubled: starved,
            want_at_end: started,
            final_streaming: started,
            ..Summary::default()
        };
        s.rules.rate.listeners = starved;
        s.rules.rate.first_s = (starved > 0).then_some(first);
        s.starved_rate = starved;
        RunReport {
            summary: s.clone(),
            groups: vec![GroupReport {
                name: "icy".into(),
                summary: s,
                ..GroupReport::default()
            }],
            ..RunReport::default()
        }
    }

    #[test]
    fn a_pass_in_one_sentence() {
        let mut r = report(3000, 0, 0);
        r.hists.ttfb.record_us(800);
        judge(&mut r, &with_defaults(vec![], false, 1000.0, false), 0.8);
        assert!(r.summary.pass);
        assert_eq!(
            r.verdict,
            "PASS: 3,000 of 3,000 listeners got ≥ 80 % of real time, p99 TTFB 0.8 ms"
        );
        assert!(r.thresholds.iter().all(|o| o.pass));
    }

    #[test]
    fn a_fail_names_the_rule_the_count_and_the_second() {
        let mut r = report(3000, 200, 14);
        let given = vec![Threshold::parse("ttfb.p99<500ms").unwrap()];
        r.hists.ttfb.record_us(812_000);
        judge(&mut r, &with_defaults(given, false, 1000.0, false), 0.8);
        assert!(!r.summary.pass);
        let why = &r.summary.fail_reasons;
        assert!(
            why[0].starts_with("starved: rate: 200 of 3,000 listeners")
                && why[0].ends_with("from 14 s"),
            "{why:?}"
        );
        assert_eq!(why[1], "threshold ttfb.p99<500ms: 812 ms");
        assert!(
            r.verdict.starts_with(
                "FAIL: 2,800 of 3,000 listeners got ≥ 80 % of real time (200 starved)"
            ),
            "{}",
            r.verdict
        );
        assert!(
            r.verdict.ends_with("2 of 5 thresholds failed"),
            "{}",
            r.verdict
        );
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
