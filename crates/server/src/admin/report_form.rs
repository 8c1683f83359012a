//! The audience reports page's form (`reports_page.rs`), parsed: `from` and `to` (UTC days,
//! both included, as `<input type=date>` sends them; a `datetime-local` value, Unix seconds or
//! RFC 3339 are taken too), `mount` and `group`, made a [`ReportRequest`] by the API's own
//! parser (`ledger/request.rs`), so the page takes what the API takes; and the API query of a
//! request, for the page's CSV links. Pure functions, unit-tested.

use std::collections::HashMap;
use std::fmt::Write as _;

use chrono::{DateTime, NaiveDate, NaiveDateTime};

use crate::ledger::report;
use crate::ledger::request::ReportRequest;

/// Days of the default range: today (UTC) and the six days before.
pub const DEFAULT_DAYS: i64 = 7;

/// A day, in milliseconds.
pub const DAY_MS: i64 = 86_400_000;

/// The report form as sent (each field as typed; empty when not sent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Form {
    /// `from`: first day (`YYYY-MM-DD`), or a time.
    pub from: String,
    /// `to`: last day (`YYYY-MM-DD`, included), or a time (excluded).
    pub to: String,
    /// `mount`: empty for every mount.
    pub mount: String,
    /// `group`: the table's grouping (`hour`, `day`, `country`, `path`, `agent`; empty: `day`).
    pub group: String,
}

/// Midnight (UTC) starting `d`, Unix milliseconds.
fn day_start_ms(d: NaiveDate) -> i64 {
    d.and_hms_opt(0, 0, 0)
        .map_or(0, |t| t.and_utc().timestamp_millis())
}

/// The UTC day of Unix milliseconds `ms`, as `YYYY-MM-DD`.
pub fn day_of(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// One bound of the range, Unix milliseconds: a day (`YYYY-MM-DD`: its start, or with `end`
/// the next day's start, so the day is included), a `datetime-local` value (UTC), Unix seconds
/// or RFC 3339 (`report::parse_time`, as the API). `None` when empty.
///
/// Errors: a sentence naming the field.
fn bound(key: &str, value: &str, end: bool) -> Result<Option<i64>, String> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    if let Ok(d) = NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        return Ok(Some(day_start_ms(d) + if end { DAY_MS } else { 0 }));
    }
    for f in ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(v, f) {
            return Ok(Some(t.and_utc().timestamp_millis()));
        }
    }
    report::parse_time(v).map(Some).ok_or_else(|| {
        format!("`{key}` must be a day (YYYY-MM-DD), Unix seconds or an RFC 3339 time, got {v:?}")
    })
}

impl Form {
    /// The form's fields in query `q` (decoded pairs; the last of a repeated field wins).
    pub fn from_query(q: &[(String, String)]) -> Form {
        let mut f = Form::default();
        for (k, v) in q {
            match k.as_str() {
                "from" => f.from = v.clone(),
                "to" => f.to = v.clone(),
                "mount" => f.mount = v.clone(),
                "group" => f.group = v.clone(),
                _ => {}
            }
        }
        f
    }

    /// The listening report request of the form at `now_ms` for the station `service`: the
    /// days made times (the default `to` is the end of today, UTC; the default `from`
    /// [`DEFAULT_DAYS`] before `to`), then parsed by the API's [`ReportRequest::parse`].
    ///
    /// Errors: a sentence naming the field that is wrong.
    pub fn request(&self, now_ms: i64, service: &str) -> Result<ReportRequest, String> {
        let to = match bound("to", &self.to, true)? {
            Some(t) => t,
            None => now_ms.div_euclid(DAY_MS) * DAY_MS + DAY_MS,
        };
        let from = bound("from", &self.from, false)?.unwrap_or(to - DEFAULT_DAYS * DAY_MS);
        let secs = |ms: i64| ms.div_euclid(1000).to_string();
        let q: HashMap<String, String> = [
            ("from", secs(from)),
            ("to", secs(to)),
            ("mount", self.mount.trim().to_owned()),
            ("group", self.group.trim().to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let defaults = crate::ledger::request::ReportDefaults {
            service: service.to_owned(),
            category: String::new(),
        };
        ReportRequest::parse("listening", &q, now_ms, &defaults)
    }
}

/// The API query of `req` (`from`, `to` as RFC 3339, `mount` if any), percent-encoded.
pub fn api_query(req: &ReportRequest) -> String {
    let enc = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let mut q = format!(
        "from={}&to={}",
        enc(&report::rfc3339(req.range.from_ms.div_euclid(1000))),
        enc(&report::rfc3339(req.range.to_ms.div_euclid(1000)))
    );
    if let Some(m) = &req.range.mount {
        let _ = write!(q, "&mount={}", enc(m));
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::report::{Group, Range};

    const NOW: i64 = 1_764_000_000_000; // 2025-11-24T16:00:00Z

    fn form(pairs: &[(&str, &str)]) -> Form {
        Form::from_query(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>(),
        )
    }

    fn request() -> ReportRequest {
        form(&[
            ("from", "2025-11-20"),
            ("to", "2025-11-24"),
            ("mount", "/live"),
        ])
        .request(NOW, "S")
        .unwrap()
    }

    #[test]
    fn days_are_whole_utc_days_and_the_default_is_the_last_seven() {
        let r = request();
        assert_eq!(
            r.range,
            Range {
                from_ms: 1_763_596_800_000, // 2025-11-20T00:00:00Z
                to_ms: 1_764_028_800_000,   // 2025-11-25T00:00:00Z: the 24th included
                mount: Some("/live".into()),
            }
        );
        assert_eq!(r.group, Group::Day);
        let d = form(&[]).request(NOW, "S").unwrap();
        assert_eq!(d.range.to_ms, 1_764_028_800_000, "the end of today");
        assert_eq!(d.range.to_ms - d.range.from_ms, 7 * DAY_MS);
        assert_eq!(d.range.mount, None);
        assert_eq!(day_of(d.range.from_ms), "2025-11-18");
        assert_eq!(day_of(d.range.to_ms - 1), "2025-11-24");
        // Times as the API takes them, and datetime-local values.
        let t = form(&[
            ("from", "1763600000"),
            ("to", "2025-11-21T06:30"),
            ("group", "hour"),
        ])
        .request(NOW, "S")
        .unwrap();
        assert_eq!(t.range.from_ms, 1_763_600_000_000);
        assert_eq!(t.range.to_ms, 1_763_706_600_000);
        assert_eq!(t.group, Group::Hour);
    }

    #[test]
    fn bad_fields_are_named() {
        for (pairs, field) in [
            (vec![("from", "yesterday")], "`from`"),
            (vec![("to", "2025-13-45")], "`to`"),
            (vec![("group", "week")], "`group`"),
            (vec![("mount", "live")], "`mount`"),
            (
                vec![("from", "2025-11-24"), ("to", "2025-11-20")],
                "`from` must be before",
            ),
        ] {
            let e = form(&pairs).request(NOW, "S").unwrap_err();
            assert!(e.contains(field), "{pairs:?}: {e}");
        }
    }

    #[test]
    fn api_queries_carry_the_range_and_mount() {
        assert_eq!(
            api_query(&request()),
            "from=2025%2D11%2D20T00%3A00%3A00Z&to=2025%2D11%2D25T00%3A00%3A00Z&mount=%2Flive"
        );
    }
}
