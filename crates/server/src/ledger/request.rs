//! A report request, parsed once for both places that ask for reports: the API
//! (`GET /api/v1/reports/<name>?from=&to=&mount=&group=`, `admin/reports.rs`) and the command
//! line (`throng report <name> --from … --to …`). [`ReportRequest::parse`] is pure; [`run`]
//! answers it from a database.

use std::collections::HashMap;

use super::db::{Db, DbError};
use super::report::{self, parse_time, Group, Range};

/// Default span of a report without `from` (7 days, in ms).
pub const DEFAULT_SPAN_MS: i64 = 7 * 86_400_000;

/// Most rows of `sessions.csv` in one answer (1,000,000); a longer range is cut, in start
/// order, and says so in the `X-Throng-Truncated` header / on stderr.
pub const MAX_SESSION_ROWS: i64 = 1_000_000;

/// Which report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    /// `listening` (JSON) / `listening.csv`.
    Listening {
        /// CSV rather than JSON.
        csv: bool,
    },
    /// `tracks` (JSON) / `tracks.csv`.
    Tracks {
        /// CSV rather than JSON.
        csv: bool,
    },
    /// `plays` (JSON): the play log, one row per play with its performances.
    Plays,
    /// `sessions.csv`.
    Sessions,
    /// `soundexchange.csv`.
    SoundExchange,
    /// `ppl.csv`.
    Ppl,
}

impl ReportKind {
    /// The report named `name` (`listening`, `listening.csv`, `tracks`, `tracks.csv`, `plays`,
    /// `sessions.csv` or `sessions`, `soundexchange.csv` or `soundexchange`, `ppl.csv` or `ppl`).
    pub fn parse(name: &str) -> Option<ReportKind> {
        Some(match name {
            "listening" => ReportKind::Listening { csv: false },
            "listening.csv" => ReportKind::Listening { csv: true },
            "tracks" => ReportKind::Tracks { csv: false },
            "tracks.csv" => ReportKind::Tracks { csv: true },
            "plays" => ReportKind::Plays,
            "sessions" | "sessions.csv" => ReportKind::Sessions,
            "soundexchange" | "soundexchange.csv" => ReportKind::SoundExchange,
            "ppl" | "ppl.csv" => ReportKind::Ppl,
            _ => return None,
        })
    }
}

/// A parsed report request.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRequest {
    /// Which report.
    pub kind: ReportKind,
    /// Range and mount.
    pub range: Range,
    /// Grouping of `listening` (default `day`).
    pub group: Group,
    /// `NAME_OF_SERVICE` of `soundexchange.csv`.
    pub service: String,
    /// `TRANSMISSION_CATEGORY` of `soundexchange.csv` (empty unless given).
    pub category: String,
}

/// An answered report: its media type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportBody {
    /// `application/json` or `text/csv; charset=utf-8`.
    pub content_type: &'static str,
    /// The document.
    pub body: String,
    /// Rows were left out (`sessions.csv` over [`MAX_SESSION_ROWS`]).
    pub truncated: bool,
}

/// What a royalty report says where its request does not: the service's name and its
/// transmission category.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportDefaults {
    /// `NAME_OF_SERVICE`.
    pub service: String,
    /// `TRANSMISSION_CATEGORY` (may be empty).
    pub category: String,
}

impl ReportDefaults {
    /// As `config` sets them: `[ledger] service`, else `[station] name`, else `server-id`;
    /// `[ledger] category`, else empty.
    pub fn of(config: &crate::config::Config) -> ReportDefaults {
        let set = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let station = config.station.name.trim();
        ReportDefaults {
            service: set(&config.ledger.service)
                .or_else(|| (!station.is_empty()).then(|| station.to_owned()))
                .unwrap_or_else(|| config.server_id.clone()),
            category: set(&config.ledger.category).unwrap_or_default(),
        }
    }
}

impl ReportRequest {
    /// Parses `name` and the query `q` (`from`, `to`: Unix seconds or RFC 3339, `to` default
    /// now and `from` default 7 days before it; `mount`; `group`; `service`; `category`);
    /// `defaults` fill `service` and `category` when the query has none.
    ///
    /// Errors: a sentence naming the parameter that is wrong.
    pub fn parse(
        name: &str,
        q: &HashMap<String, String>,
        now_ms: i64,
        defaults: &ReportDefaults,
    ) -> Result<ReportRequest, String> {
        let kind = ReportKind::parse(name).ok_or_else(|| {
            format!(
                "unknown report {name:?}: listening, tracks, plays, sessions.csv, \
                 soundexchange.csv, ppl.csv (listening and tracks also as .csv)"
            )
        })?;
        let time = |key: &str| -> Result<Option<i64>, String> {
            match q.get(key).map(|s| s.trim()).filter(|s| !s.is_empty()) {
                None => Ok(None),
                Some(v) => parse_time(v).map(Some).ok_or_else(|| {
                    format!("`{key}` must be Unix seconds or an RFC 3339 time, got {v:?}")
                }),
            }
        };
        let to_ms = time("to")?.unwrap_or(now_ms);
        let from_ms = time("from")?.unwrap_or(to_ms - DEFAULT_SPAN_MS);
        if from_ms >= to_ms {
            return Err("`from` must be before `to`".into());
        }
        let group = match q.get("group").map(String::as_str) {
            None | Some("") => Group::Day,
            Some(g) => Group::parse(g).ok_or_else(|| {
                format!("`group` must be hour, day, country, path or agent, got {g:?}")
            })?,
        };
        let mount = q.get("mount").filter(|m| !m.is_empty()).cloned();
        if let Some(m) = &mount {
            if !m.starts_with('/') || m.len() > 1024 {
                return Err(format!(
                    "`mount` must be a mount name such as /live, got {m:?}"
                ));
            }
        }
        Ok(ReportRequest {
            kind,
            range: Range {
                from_ms,
                to_ms,
                mount,
            },
            group,
            service: q
                .get("service")
                .cloned()
                .unwrap_or_else(|| defaults.service.clone()),
            category: q
                .get("category")
                .cloned()
                .unwrap_or_else(|| defaults.category.clone()),
        })
    }
}

fn json<T: serde::Serialize>(v: &T) -> ReportBody {
    ReportBody {
        content_type: "application/json",
        body: serde_json::to_string_pretty(v).unwrap_or_default(),
        truncated: false,
    }
}

fn csv(body: String) -> ReportBody {
    ReportBody {
        content_type: "text/csv; charset=utf-8",
        body,
        truncated: false,
    }
}

/// Answers `req` from `db` at `now_ms`.
///
/// Errors: the database's.
pub fn run(db: &mut Db, req: &ReportRequest, now_ms: i64) -> Result<ReportBody, DbError> {
    let r = &req.range;
    Ok(match req.kind {
        ReportKind::Listening { csv: false } => json(&report::listening(db, r, req.group)?),
        ReportKind::Listening { csv: true } => csv(super::csv::listening_csv(&report::listening(
            db, r, req.group,
        )?)),
        ReportKind::Tracks { csv: false } => json(&report::tracks(db, r, now_ms)?),
        ReportKind::Tracks { csv: true } => {
            csv(super::csv::tracks_csv(&report::tracks(db, r, now_ms)?))
        }
        ReportKind::Plays => {
            let plays = report::plays(db, r, now_ms)?;
            json(&serde_json::json!({ "rows": plays }))
        }
        ReportKind::Sessions => {
            let rows = report::sessions(db, r, MAX_SESSION_ROWS + 1)?;
            let truncated = rows.len() as i64 > MAX_SESSION_ROWS;
            let rows = &rows[..rows.len().min(MAX_SESSION_ROWS as usize)];
            ReportBody {
                truncated,
                ..csv(super::csv::sessions_csv(rows))
            }
        }
        ReportKind::SoundExchange => csv(super::csv::soundexchange_csv(
            &report::tracks(db, r, now_ms)?,
            &req.service,
            &req.category,
        )),
        ReportKind::Ppl => csv(super::csv::ppl_csv(&report::plays(db, r, now_ms)?)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s() -> ReportDefaults {
        ReportDefaults {
            service: "S".into(),
            category: "B".into(),
        }
    }

    #[test]
    fn the_service_is_the_ledgers_else_the_stations_else_the_server_id() {
        let mut c = crate::config::Config::from_toml("server-id = \"Throng test\"\n").unwrap();
        assert_eq!(ReportDefaults::of(&c).service, "Throng test");
        assert_eq!(ReportDefaults::of(&c).category, "");
        c.station.name = "Radio Nowhere".into();
        assert_eq!(ReportDefaults::of(&c).service, "Radio Nowhere");
        c.ledger.service = Some("Nowhere Media LLC".into());
        c.ledger.category = Some("B".into());
        let d = ReportDefaults::of(&c);
        assert_eq!(
            (d.service.as_str(), d.category.as_str()),
            ("Nowhere Media LLC", "B")
        );
        // A request's own values win.
        let q: HashMap<String, String> = [
            ("service".to_owned(), "X".to_owned()),
            ("category".to_owned(), "A".to_owned()),
        ]
        .into();
        let r = ReportRequest::parse("soundexchange.csv", &q, 0, &d).unwrap();
        assert_eq!((r.service.as_str(), r.category.as_str()), ("X", "A"));
    }

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_the_last_seven_days_by_day() {
        let r = ReportRequest::parse("listening", &q(&[]), 1_000_000_000_000, &s()).unwrap();
        assert_eq!(r.range.to_ms, 1_000_000_000_000);
        assert_eq!(r.range.from_ms, 1_000_000_000_000 - DEFAULT_SPAN_MS);
        assert_eq!(r.group, Group::Day);
        assert_eq!(r.service, "S");
        assert_eq!(r.category, "B");
    }

    #[test]
    fn times_are_unix_seconds_or_rfc3339() {
        let r = ReportRequest::parse(
            "tracks.csv",
            &q(&[
                ("from", "1700000000"),
                ("to", "2023-11-15T00:00:00Z"),
                ("mount", "/live"),
            ]),
            0,
            &s(),
        )
        .unwrap();
        assert_eq!(r.kind, ReportKind::Tracks { csv: true });
        assert_eq!(r.range.from_ms, 1_700_000_000_000);
        assert_eq!(r.range.to_ms, 1_700_006_400_000);
        assert_eq!(r.range.mount.as_deref(), Some("/live"));
    }

    #[test]
    fn bad_requests_name_the_parameter() {
        let e = ReportRequest::parse("listening", &q(&[("from", "yesterday")]), 0, &s());
        assert!(e.unwrap_err().contains("`from`"));
        let e = ReportRequest::parse("listening", &q(&[("group", "week")]), 0, &s());
        assert!(e.unwrap_err().contains("`group`"));
        let e = ReportRequest::parse("listening", &q(&[("from", "20"), ("to", "10")]), 0, &s());
        assert!(e.unwrap_err().contains("before"));
        assert!(ReportRequest::parse("nope", &q(&[]), 0, &s()).is_err());
        let e = ReportRequest::parse("listening", &q(&[("mount", "live")]), 0, &s());
        assert!(e.unwrap_err().contains("`mount`"));
    }
}
