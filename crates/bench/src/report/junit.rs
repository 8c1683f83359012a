//! The run as a JUnit XML file (`--junit FILE`), the report format CI systems read (GitLab,
//! Jenkins, GitHub Actions' test reporters): one `<testsuite>` per run, one `<testcase>` per
//! threshold (a `<failure>` with its value when it does not hold), one for the run's errors and
//! lost agents, and the verdict sentence and reasons as `<system-out>`. Written with quick-xml.

use crate::report::summary::RunReport;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

/// The JUnit XML of `runs` (a run, or a comparison's runs).
pub fn render(runs: &[&RunReport]) -> String {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let cases = |r: &RunReport| r.thresholds.len() + 1;
    let failed = |r: &RunReport| {
        r.thresholds.iter().filter(|o| !o.pass).count()
            + usize::from(!r.errors.is_empty() || !r.lost.is_empty())
    };
    let total: usize = runs.iter().map(|r| cases(r)).sum();
    let total_failed: usize = runs.iter().map(|r| failed(r)).sum();
    let mut root = BytesStart::new("testsuites");
    root.push_attribute(("name", "throng bench"));
    root.push_attribute(("tests", total.to_string().as_str()));
    root.push_attribute(("failures", total_failed.to_string().as_str()));
    let _ = w.write_event(Event::Start(root));
    for r in runs {
        let seconds = r.timeline.len().to_string();
        let mut suite = BytesStart::new("testsuite");
        suite.push_attribute(("name", format!("throng bench: {}", r.name).as_str()));
        suite.push_attribute(("tests", cases(r).to_string().as_str()));
        suite.push_attribute(("failures", failed(r).to_string().as_str()));
        suite.push_attribute(("errors", "0"));
        suite.push_attribute(("time", seconds.as_str()));
        suite.push_attribute(("timestamp", r.meta.started.as_str()));
        suite.push_attribute(("hostname", r.meta.host.as_str()));
        let _ = w.write_event(Event::Start(suite));
        for o in &r.thresholds {
            let mut case = BytesStart::new("testcase");
            let class = match &o.group {
                Some(g) => format!("throng-bench.{}.thresholds.{g}", r.name),
                None => format!("throng-bench.{}.thresholds", r.name),
            };
            case.push_attribute(("classname", class.as_str()));
            case.push_attribute(("name", o.name.as_str()));
            case.push_attribute(("time", "0"));
            if o.pass {
                let _ = w.write_event(Event::Empty(case));
                continue;
            }
            let _ = w.write_event(Event::Start(case));
            let mut f = BytesStart::new("failure");
            f.push_attribute(("message", format!("{}: {}", o.name, o.value_text).as_str()));
            f.push_attribute(("type", "threshold"));
            let _ = w.write_event(Event::Start(f));
            let _ = w.write_event(Event::Text(BytesText::new(&o.line())));
            let _ = w.write_event(Event::End(BytesEnd::new("failure")));
            let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
        }
        let mut case = BytesStart::new("testcase");
        let class = format!("throng-bench.{}", r.name);
        case.push_attribute(("classname", class.as_str()));
        case.push_attribute(("name", "the run completed (no error, no agent lost)"));
        case.push_attribute(("time", seconds.as_str()));
        let problems: Vec<String> = r
            .lost
            .iter()
            .map(|l| {
                format!(
                    "agent {} lost at {} s: {} listeners unaccounted for",
                    l.host, l.second, l.listeners
                )
            })
            .chain(r.errors.iter().cloned())
            .collect();
        if problems.is_empty() {
            let _ = w.write_event(Event::Empty(case));
        } else {
            let _ = w.write_event(Event::Start(case));
            let mut f = BytesStart::new("failure");
            f.push_attribute(("message", problems[0].as_str()));
            f.push_attribute(("type", "run"));
            let _ = w.write_event(Event::Start(f));
            let _ = w.write_event(Event::Text(BytesText::new(&problems.join("\n"))));
            let _ = w.write_event(Event::End(BytesEnd::new("failure")));
            let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
        }
        let mut out = r.verdict.clone();
        for why in &r.summary.fail_reasons {
            out.push_str("\nFAIL: ");
            out.push_str(why);
        }
        let _ = w.write_event(Event::Start(BytesStart::new("system-out")));
        let _ = w.write_event(Event::Text(BytesText::new(&out)));
        let _ = w.write_event(Event::End(BytesEnd::new("system-out")));
        let _ = w.write_event(Event::End(BytesEnd::new("testsuite")));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("testsuites")));
    let mut s = String::from_utf8(w.into_inner()).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::threshold::Outcome;

    #[test]
    fn thresholds_become_test_cases() {
        let r = RunReport {
            name: "station".into(),
            verdict: "FAIL: 9 of 10 listeners got ≥ 80 % of real time".into(),
            thresholds: vec![
                Outcome {
                    name: "ttfb.p99<500ms".into(),
                    value_text: "812 ms".into(),
                    pass: false,
                    ..Outcome::default()
                },
                Outcome {
                    name: "starved.count<1".into(),
                    value_text: "0".into(),
                    pass: true,
                    ..Outcome::default()
                },
            ],
            ..RunReport::default()
        };
        let x = render(&[&r]);
        assert!(
            x.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
            "{x}"
        );
        assert!(x.contains("tests=\"3\" failures=\"1\""), "{x}");
        assert!(x.contains("name=\"ttfb.p99&lt;500ms\""), "{x}");
        assert!(
            x.contains("<failure message=\"ttfb.p99&lt;500ms: 812 ms\" type=\"threshold\">"),
            "{x}"
        );
        assert!(
            x.contains("name=\"starved.count&lt;1\" time=\"0\"/>"),
            "{x}"
        );
    }
}
