//! The ledger's reports, the same numbers for the API (`/api/v1/reports/…`), the admin
//! reports page and `throng report`:
//!
//! - [`listening`]: sessions, unique listeners, total listening hours (TLH), average time spent
//!   listening (ATSL) and peak listeners, per hour, day, country, path or player. Sessions and
//!   listening seconds come from the minute rollup (`audience_minutes`, closed sessions: a
//!   session counts once it has ended); unique listeners are distinct stored addresses per
//!   UTC day (per hour for `group=hour`), counted by the writer as they arrive
//!   (`audience_uniques`, `uniques.rs`), for every day the range touches, summed over its
//!   days (listener-days: under `hashed` a listener is one address per UTC day and cannot be
//!   recognised across days);
//!   peak listeners is the highest one-minute average of concurrent listeners.
//! - [`tracks`]: each title of the play log with its plays, performances (listeners tuned in
//!   while it played: each session that received any part of it, as SoundExchange counts
//!   "actual total performances") and the listening hours spent on it, from the sessions.
//!
//! Relays and edges pulling a mount are never counted. Times are Unix milliseconds in, RFC 3339
//! (UTC) out; ranges are half-open `[from, to)`.

use std::collections::HashMap;

use serde::Serialize;

use super::db::{Db, DbError, Val};
use super::uniques::{DAY_S, HOUR_S};

/// A report's range and mount filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// Start, Unix milliseconds (inclusive).
    pub from_ms: i64,
    /// End, Unix milliseconds (exclusive).
    pub to_ms: i64,
    /// Only this mount, if set.
    pub mount: Option<String>,
}

/// How [`listening`] groups its rows (`group=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Per clock hour (UTC); key the hour's start, RFC 3339.
    Hour,
    /// Per UTC day; key the day's start, RFC 3339.
    Day,
    /// Per country (ISO 3166-1 alpha-2, `unknown` without one).
    Country,
    /// Per delivery path (`icy`, `hls`, `whep`).
    Path,
    /// Per player family (`player.rs`).
    Agent,
}

impl Group {
    /// Parses `hour`, `day`, `country`, `path`, `agent`.
    pub fn parse(s: &str) -> Option<Group> {
        Some(match s {
            "hour" => Group::Hour,
            "day" => Group::Day,
            "country" => Group::Country,
            "path" => Group::Path,
            "agent" => Group::Agent,
            _ => return None,
        })
    }

    /// The column of `audience_minutes` a row's group is read from; none for a time grouping
    /// (its key is the minute's hour or day).
    fn minutes_column(self) -> Option<&'static str> {
        match self {
            Group::Hour | Group::Day => None,
            Group::Country => Some("country"),
            Group::Path => Some("path"),
            Group::Agent => Some("player"),
        }
    }

    fn is_time(self) -> bool {
        matches!(self, Group::Hour | Group::Day)
    }
}

/// One row of [`listening`] (and its total).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListeningRow {
    /// The group: an RFC 3339 time, a country code, a path or a player; `total` for the total.
    pub key: String,
    /// Sessions started.
    pub sessions: u64,
    /// Distinct listeners among them, per UTC day, summed over the days (listener-days).
    pub unique_listeners: u64,
    /// Total listening hours.
    pub tlh_hours: f64,
    /// Average time spent listening per session, minutes.
    pub atsl_minutes: f64,
    /// Highest one-minute average of concurrent listeners.
    pub peak_listeners: u64,
}

/// The listening report: rows in key order, and the total over the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listening {
    /// One row per group.
    pub rows: Vec<ListeningRow>,
    /// The whole range.
    pub total: ListeningRow,
}

/// One group's sums, fed the rollup's rows in minute order: the peak is the largest minute's
/// listening seconds, kept as the minutes go by (no per-minute table).
struct Acc {
    seconds: f64,
    sessions: u64,
    minute: i64,
    minute_seconds: f64,
    peak_seconds: f64,
}

impl Default for Acc {
    fn default() -> Acc {
        Acc {
            seconds: 0.0,
            sessions: 0,
            minute: i64::MIN,
            minute_seconds: 0.0,
            peak_seconds: 0.0,
        }
    }
}

impl Acc {
    /// Adds a rollup row of `minute` (rows come in minute order).
    fn add(&mut self, minute: i64, seconds: f64, sessions: u64) {
        if minute != self.minute {
            self.peak_seconds = self.peak_seconds.max(self.minute_seconds);
            self.minute = minute;
            self.minute_seconds = 0.0;
        }
        self.minute_seconds += seconds;
        self.seconds += seconds;
        self.sessions += sessions;
    }

    fn row(&self, key: String, unique: u64) -> ListeningRow {
        let peak = self.peak_seconds.max(self.minute_seconds) / 60.0;
        ListeningRow {
            key,
            sessions: self.sessions,
            unique_listeners: unique,
            tlh_hours: round4(self.seconds / 3600.0),
            atsl_minutes: if self.sessions == 0 {
                0.0
            } else {
                round3(self.seconds / 60.0 / self.sessions as f64)
            },
            peak_listeners: peak.round() as u64,
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Hours to 4 decimals (0.36 s).
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// RFC 3339 (UTC, seconds) of Unix seconds `t`.
pub fn rfc3339(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// Parses a report time: Unix seconds, or RFC 3339; returns Unix milliseconds.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<i64>() {
        return secs.checked_mul(1000);
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|d| d.timestamp_millis())
}

/// ` AND mount = $N` (N the next parameter) when the range has a mount, which it adds to
/// `params`; empty otherwise.
fn mount_filter(range: &Range, params: &mut Vec<Val>) -> String {
    match &range.mount {
        Some(m) => {
            params.push(Val::from(m.as_str()));
            format!(" AND mount = ${}", params.len())
        }
        None => String::new(),
    }
}

fn group_key(group: Group, v: &Val) -> String {
    if group.is_time() {
        rfc3339(v.int())
    } else {
        match v.text().unwrap_or_default() {
            s if s.is_empty() => "unknown".into(),
            s => s,
        }
    }
}

/// The minutes of `audience_minutes` (Unix seconds) covering `[from_ms, to_ms)`: the range
/// rounded out to whole minutes.
fn minute_bounds(from_ms: i64, to_ms: i64) -> (i64, i64) {
    (
        from_ms.div_euclid(60_000) * 60,
        (to_ms + 59_999).div_euclid(60_000) * 60,
    )
}

/// The listening report over `range`, grouped by `group`.
///
/// Errors: the database's.
pub fn listening(db: &mut Db, range: &Range, group: Group) -> Result<Listening, DbError> {
    let (from_min, to_min) = minute_bounds(range.from_ms, range.to_ms);
    let mut params = vec![Val::Int(from_min), Val::Int(to_min)];
    let filter = mount_filter(range, &mut params);
    // The rollup's rows in minute order (its key's order, read without sorting): summed per
    // minute by the database for a time grouping, one row per group and minute otherwise.
    let sql = match group.minutes_column() {
        None => format!(
            "SELECT minute, '', SUM(listener_seconds), CAST(SUM(sessions) AS BIGINT)
             FROM audience_minutes WHERE minute >= $1 AND minute < $2{filter}
             GROUP BY minute ORDER BY minute"
        ),
        Some(column) => format!(
            "SELECT minute, {column}, listener_seconds, sessions
             FROM audience_minutes WHERE minute >= $1 AND minute < $2{filter}
             ORDER BY minute"
        ),
    };
    let mut groups: HashMap<String, Acc> = HashMap::new();
    let mut order: Vec<(i64, String)> = Vec::new();
    let mut total = Acc::default();
    db.scan(&sql, &params, |r| {
        let (minute, secs, sessions) = (r[0].int(), r[2].float(), r[3].int().max(0) as u64);
        let (sort, k) = match group {
            Group::Hour => (minute.div_euclid(3600) * 3600, None),
            Group::Day => (minute.div_euclid(86_400) * 86_400, None),
            _ => (0, Some(group_key(group, &r[1]))),
        };
        let k = k.unwrap_or_else(|| rfc3339(sort));
        match groups.get_mut(&k) {
            Some(acc) => acc.add(minute, secs, sessions),
            None => {
                let mut acc = Acc::default();
                acc.add(minute, secs, sessions);
                order.push((sort, k.clone()));
                groups.insert(k, acc);
            }
        }
        total.add(minute, secs, sessions);
    })?;
    // Unique listeners: the writer's counters (`uniques.rs`), per hour for `group=hour` and per
    // UTC day otherwise, for the mount or over all mounts (mount ''), of every period the
    // range touches; the total is always the days' sum (listener-days).
    let (span, ukey) = match group {
        Group::Hour => (HOUR_S, "at_s"),
        Group::Day => (DAY_S, "at_s"),
        Group::Country => (DAY_S, "country"),
        Group::Path => (DAY_S, "path"),
        Group::Agent => (DAY_S, "player"),
    };
    let mount = Val::from(range.mount.clone().unwrap_or_default());
    let period = |span: i64| {
        [
            Val::Int(span),
            Val::Int(range.from_ms.div_euclid(1000).div_euclid(span) * span),
            Val::Int(range.to_ms.div_euclid(1000) + i64::from(range.to_ms % 1000 != 0)),
        ]
    };
    let mut uniques: HashMap<String, u64> = HashMap::new();
    let [s1, s2, s3] = period(span);
    for r in db.query(
        &format!(
            "SELECT {ukey}, CAST(SUM(listeners) AS BIGINT) FROM audience_uniques
             WHERE span_s = $1 AND at_s >= $2 AND at_s < $3 AND mount = $4 GROUP BY {ukey}"
        ),
        &[s1, s2, s3, mount.clone()],
    )? {
        *uniques.entry(group_key(group, &r[0])).or_default() += r[1].int().max(0) as u64;
    }
    let [d1, d2, d3] = period(DAY_S);
    let total_unique = db
        .query(
            "SELECT CAST(SUM(listeners) AS BIGINT) FROM audience_uniques
             WHERE span_s = $1 AND at_s >= $2 AND at_s < $3 AND mount = $4",
            &[d1, d2, d3, mount],
        )?
        .first()
        .map(|r| r[0].int().max(0) as u64)
        .unwrap_or(0);
    if group.is_time() {
        order.sort();
    } else {
        // Most listening first.
        order.sort_by(|a, b| {
            groups[&b.1]
                .seconds
                .total_cmp(&groups[&a.1].seconds)
                .then(a.1.cmp(&b.1))
        });
    }
    let rows = order
        .into_iter()
        .map(|(_, k)| {
            let u = uniques.get(&k).copied().unwrap_or(0);
            groups[&k].row(k, u)
        })
        .collect();
    Ok(Listening {
        rows,
        total: total.row("total".into(), total_unique),
    })
}

/// The mounts listened to in `[from_ms, to_ms)`, in name order: those with closed sessions in
/// the minute rollup (relays are never in it), for the reports page's mount filter.
///
/// Errors: the database's.
pub fn mounts(db: &mut Db, from_ms: i64, to_ms: i64) -> Result<Vec<String>, DbError> {
    let (from_min, to_min) = minute_bounds(from_ms, to_ms);
    Ok(db
        .query(
            "SELECT DISTINCT mount FROM audience_minutes WHERE minute >= $1 AND minute < $2
             ORDER BY mount",
            &[Val::Int(from_min), Val::Int(to_min)],
        )?
        .iter()
        .filter_map(|r| r[0].text())
        .collect())
}

/// One title of the tracks report, over all its plays in the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrackRow {
    /// The mount.
    pub mount: String,
    /// The artist (before ` - ` in the stream title), if any.
    pub artist: Option<String>,
    /// The title.
    pub title: String,
    /// Its first play in the range, RFC 3339.
    pub started: String,
    /// Times it was played.
    pub plays: u64,
    /// Listeners tuned in while it played, summed over its plays.
    pub performances: u64,
    /// Listening hours spent on it.
    pub tlh_hours: f64,
}

/// One play (a title from its change to the next change on its mount), for the per-play
/// CSV.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlayRow {
    /// The mount.
    pub mount: String,
    /// The artist, if any.
    pub artist: Option<String>,
    /// The title.
    pub title: String,
    /// Start, Unix milliseconds.
    pub started_ms: i64,
    /// End (the next title, or the range's end), Unix milliseconds.
    pub ended_ms: i64,
    /// Who set it (`source`, `admin`, `file`).
    pub set_by: String,
    /// The mount's listeners when it started.
    pub listeners_at_start: u64,
    /// Listeners tuned in while it played.
    pub performances: u64,
    /// Listening seconds spent on it.
    pub listening_seconds: f64,
    /// Performances per country, most first (`unknown` without a country).
    pub countries: Vec<(String, u64)>,
}

/// The tracks report: per title.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tracks {
    /// One row per (mount, artist, title), in order of first play.
    pub rows: Vec<TrackRow>,
}

/// The plays in `range`, each with its performances. A title repeated on a mount (a source
/// re-sending it, or the same change recorded by the origin and an edge) is one play.
///
/// Errors: the database's.
pub fn plays(db: &mut Db, range: &Range, now_ms: i64) -> Result<Vec<PlayRow>, DbError> {
    let mut params = vec![Val::Int(range.from_ms), Val::Int(range.to_ms)];
    let filter = mount_filter(range, &mut params);
    let found = db.query(
        &format!(
            "SELECT mount, at_ms, artist, title, set_by, listeners FROM plays
             WHERE at_ms >= $1 AND at_ms < $2{filter} ORDER BY mount, at_ms"
        ),
        &params,
    )?;
    let mut out: Vec<PlayRow> = Vec::new();
    for r in &found {
        let (mount, at, artist, title) = (
            r[0].text().unwrap_or_default(),
            r[1].int(),
            r[2].text(),
            r[3].text().unwrap_or_default(),
        );
        if let Some(last) = out.last() {
            if last.mount == mount && last.artist == artist && last.title == title {
                continue;
            }
        }
        out.push(PlayRow {
            mount,
            artist,
            title,
            started_ms: at,
            ended_ms: 0,
            set_by: r[4].text().unwrap_or_default(),
            listeners_at_start: r[5].int().max(0) as u64,
            performances: 0,
            listening_seconds: 0.0,
            countries: Vec::new(),
        });
    }
    // Each play ends where the next on its mount starts; the last at the next change after the
    // range, or the range's end (or now).
    let end_of_range = range.to_ms.min(now_ms);
    for i in 0..out.len() {
        let next = out
            .get(i + 1)
            .filter(|n| n.mount == out[i].mount)
            .map(|n| n.started_ms);
        out[i].ended_ms = match next {
            Some(n) => n,
            None => db
                .query(
                    "SELECT MIN(at_ms) FROM plays WHERE mount = $1 AND at_ms >= $2",
                    &[Val::from(out[i].mount.as_str()), Val::Int(range.to_ms)],
                )?
                .first()
                .and_then(|r| r[0].opt_int())
                .unwrap_or(end_of_range)
                .max(out[i].started_ms),
        };
    }
    if out.is_empty() {
        return Ok(out);
    }
    let first = out.iter().map(|p| p.started_ms).min().unwrap_or(0);
    let last = out.iter().map(|p| p.ended_ms).max().unwrap_or(0);
    let mut params = vec![Val::Int(first), Val::Int(last)];
    let filter = mount_filter(range, &mut params);
    // Ended sessions: those folded into `sessions` (by the index of ends) and those whose end
    // is still in `session_ends` (the last minute's); then the open ones.
    let mut sessions = db.query(
        &format!(
            "SELECT mount, started_ms, ended_ms, country FROM sessions
             WHERE relay = 0 AND ended_ms > $1 AND started_ms < $2{filter}
             UNION ALL
             SELECT mount, started_ms, ended_ms, country FROM (
                SELECT COALESCE(e.mount, s.mount) AS mount, s.started_ms, e.ended_ms,
                    s.country, s.relay
                FROM session_ends e JOIN sessions s ON s.server = e.server AND s.id = e.id
                WHERE s.ended_ms IS NULL) pending
             WHERE relay = 0 AND ended_ms > $1 AND started_ms < $2{filter}"
        ),
        &params,
    )?;
    let mut open_params = vec![Val::Int(last)];
    let open_filter = mount_filter(range, &mut open_params);
    // Open sessions, less those whose end is appended (counted above): at most a minute of
    // ends, read whole.
    let mut pending = std::collections::HashSet::new();
    db.scan("SELECT server, id FROM session_ends", &[], |r| {
        pending.insert((r[0].text().unwrap_or_default(), r[1].int()));
    })?;
    db.scan(
        &format!(
            "SELECT mount, started_ms, ended_ms, country, server, id FROM sessions
             WHERE relay = 0 AND ended_ms IS NULL AND started_ms < $1{open_filter}"
        ),
        &open_params,
        |r| {
            if !pending.contains(&(r[4].text().unwrap_or_default(), r[5].int())) {
                sessions.push(r[..4].to_vec());
            }
        },
    )?;
    // Plays of one mount are consecutive and disjoint: index them by mount, in time order.
    let mut by_mount: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, p) in out.iter().enumerate() {
        by_mount.entry(p.mount.clone()).or_default().push(i);
    }
    let mut countries: Vec<HashMap<String, u64>> = vec![HashMap::new(); out.len()];
    for s in &sessions {
        let mount = s[0].text().unwrap_or_default();
        let Some(idx) = by_mount.get(&mount) else {
            continue;
        };
        let (a, b) = (s[1].int(), s[2].opt_int().unwrap_or(now_ms));
        let country = s[3].text().unwrap_or_else(|| "unknown".into());
        // First play of the mount ending after the session starts.
        let start = idx.partition_point(|&i| out[i].ended_ms <= a);
        for &i in &idx[start..] {
            let p = &mut out[i];
            if p.started_ms >= b {
                break;
            }
            let overlap = b.min(p.ended_ms) - a.max(p.started_ms);
            if overlap > 0 {
                p.performances += 1;
                p.listening_seconds += overlap as f64 / 1000.0;
                *countries[i].entry(country.clone()).or_default() += 1;
            }
        }
    }
    for (p, c) in out.iter_mut().zip(countries) {
        let mut c: Vec<(String, u64)> = c.into_iter().collect();
        c.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        p.countries = c;
    }
    out.sort_by(|a, b| a.started_ms.cmp(&b.started_ms).then(a.mount.cmp(&b.mount)));
    Ok(out)
}

/// The tracks report over `range`: [`plays`] summed per (mount, artist, title).
///
/// Errors: the database's.
pub fn tracks(db: &mut Db, range: &Range, now_ms: i64) -> Result<Tracks, DbError> {
    let mut rows: Vec<TrackRow> = Vec::new();
    let mut index: HashMap<(String, Option<String>, String), usize> = HashMap::new();
    let mut seconds: Vec<f64> = Vec::new();
    for p in plays(db, range, now_ms)? {
        let key = (p.mount.clone(), p.artist.clone(), p.title.clone());
        let i = *index.entry(key).or_insert_with(|| {
            rows.push(TrackRow {
                mount: p.mount.clone(),
                artist: p.artist.clone(),
                title: p.title.clone(),
                started: rfc3339(p.started_ms.div_euclid(1000)),
                plays: 0,
                performances: 0,
                tlh_hours: 0.0,
            });
            seconds.push(0.0);
            rows.len() - 1
        });
        rows[i].plays += 1;
        rows[i].performances += p.performances;
        seconds[i] += p.listening_seconds;
    }
    for (r, s) in rows.iter_mut().zip(seconds) {
        r.tlh_hours = round4(s / 3600.0);
    }
    Ok(Tracks { rows })
}

/// One session as `sessions.csv` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRow {
    /// Session id.
    pub id: i64,
    /// Server that served it.
    pub server: String,
    /// Mount (at its end).
    pub mount: String,
    /// `icy`, `hls`, `whep`.
    pub path: String,
    /// A relay or edge, not a listener.
    pub relay: bool,
    /// Start, Unix milliseconds.
    pub started_ms: i64,
    /// End, Unix milliseconds (`None` while open).
    pub ended_ms: Option<i64>,
    /// Seconds listened.
    pub seconds: Option<f64>,
    /// Bytes sent.
    pub bytes: Option<i64>,
    /// `User-Agent`.
    pub agent: Option<String>,
    /// `Referer`.
    pub referer: Option<String>,
    /// Authenticated user.
    pub user: Option<String>,
    /// End reason key.
    pub end_reason: Option<String>,
    /// The address as stored (`[ledger] address`).
    pub address: String,
    /// Country code.
    pub country: Option<String>,
}

/// The sessions started in `range` (relays included, marked), oldest first, at most `limit`.
///
/// Errors: the database's.
pub fn sessions(db: &mut Db, range: &Range, limit: i64) -> Result<Vec<SessionRow>, DbError> {
    let mut params = vec![Val::Int(range.from_ms), Val::Int(range.to_ms)];
    let filter = mount_filter(range, &mut params);
    let n = params.len() + 1;
    params.push(Val::Int(limit));
    let rows = db.query(
        &format!(
            "SELECT id, server, mount, path, relay, started_ms, ended_ms, seconds, bytes, agent,
             referer, username, end_reason, address, country FROM session_rows
             WHERE started_ms >= $1 AND started_ms < $2{filter} ORDER BY started_ms, id LIMIT ${n}"
        ),
        &params,
    )?;
    Ok(rows
        .into_iter()
        .map(|r| SessionRow {
            id: r[0].int(),
            server: r[1].text().unwrap_or_default(),
            mount: r[2].text().unwrap_or_default(),
            path: r[3].text().unwrap_or_default(),
            relay: r[4].int() != 0,
            started_ms: r[5].int(),
            ended_ms: r[6].opt_int(),
            seconds: match r[7] {
                Val::Null => None,
                ref v => Some(v.float()),
            },
            bytes: r[8].opt_int(),
            agent: r[9].text(),
            referer: r[10].text(),
            user: r[11].text(),
            end_reason: r[12].text(),
            address: r[13].text().unwrap_or_default(),
            country: r[14].text(),
        })
        .collect())
}
