//! `GET /admin/ui/reports` (admin credentials, as all of `/admin/ui/`): the admin web UI's
//! audience reports page (issue 23), the ledger's numbers for a date range and a mount:
//!
//! - a form sent with `GET` (so a report's URL can be shared): `from` and `to` (UTC days, both
//!   included, as `<input type=date>` sends them; Unix seconds, RFC 3339 or a
//!   `datetime-local` value are taken too), `mount` (every mount seen in the range, and the live
//!   ones), `group` (the table's grouping: `hour`, `day`, `country`, `path`, `agent`); without
//!   them, the last 7 days (today, UTC, and the six before) on every mount, by day;
//! - the totals: sessions, unique listeners, total listening hours (TLH), average time spent
//!   listening (ATSL) and peak listeners;
//! - charts drawn on the server (`report_charts.rs`): peak listeners per hour, listening hours
//!   per day, the top [`TOP_TRACKS`] tracks by performances, and listening hours per country,
//!   delivery path and player, each with its numbers in a table, or a note when there is
//!   nothing to show;
//! - the listening table in the chosen grouping, and CSV download links for the same range and
//!   mount (`/api/v1/reports/listening.csv`, `tracks.csv`, `sessions.csv`,
//!   `soundexchange.csv`, `ppl.csv`).
//!
//! The numbers come from the same report functions as the API (`ledger/report.rs`), asked
//! through [`crate::admin::reports::on_ledger`] on a blocking thread; the form's values become
//! a [`ReportRequest`] through the API's own parser, so the page takes what the API takes.
//! Without a ledger the page says so and how to turn one on. The form is parsed in
//! `report_form.rs`; it and the rendering ([`render`]) are pure; the handler only gathers and
//! answers.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::DateTime;
use throng_proto::http::parse_query;

use crate::admin::html::escape;
use crate::admin::report_charts::{self, Bar, ChartError};
use crate::admin::report_form::{api_query, day_of, Form};
use crate::admin::{auth, ui};
use crate::ctx::ServerCtx;
use crate::ledger::db::{Db, DbError};
use crate::ledger::report::{self, Group, Listening, ListeningRow, Tracks};
use crate::ledger::request::ReportRequest;

/// The page's path.
pub const PATH: &str = "/admin/ui/reports";

/// The page's title.
const TITLE: &str = "Audience reports";

/// Tracks in the top tracks chart and table.
pub const TOP_TRACKS: usize = 15;

/// Most hours or days a chart fills in with zeros; over a longer range, only the span with
/// data is drawn.
const MAX_FILLED: i64 = 24 * 400;

/// Everything the page shows, gathered on the ledger's blocking thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportData {
    /// `listening` by hour.
    pub hourly: Listening,
    /// `listening` by day (its total is the page's totals).
    pub daily: Listening,
    /// `listening` by country.
    pub countries: Listening,
    /// `listening` by delivery path.
    pub paths: Listening,
    /// `listening` by player.
    pub players: Listening,
    /// `tracks`.
    pub tracks: Tracks,
    /// Mounts listened to in the range (every mount, whatever the filter).
    pub mounts: Vec<String>,
}

impl ReportData {
    /// The listening report grouped by `g`.
    pub fn grouped(&self, g: Group) -> &Listening {
        match g {
            Group::Hour => &self.hourly,
            Group::Day => &self.daily,
            Group::Country => &self.countries,
            Group::Path => &self.paths,
            Group::Agent => &self.players,
        }
    }
}

/// Asks `db` for the reports of `req` at `now_ms` (the report functions of
/// `ledger/report.rs`, as the API answers them).
///
/// Errors: the database's.
pub fn gather(db: &mut Db, req: &ReportRequest, now_ms: i64) -> Result<ReportData, DbError> {
    let r = &req.range;
    Ok(ReportData {
        hourly: report::listening(db, r, Group::Hour)?,
        daily: report::listening(db, r, Group::Day)?,
        countries: report::listening(db, r, Group::Country)?,
        paths: report::listening(db, r, Group::Path)?,
        players: report::listening(db, r, Group::Agent)?,
        tracks: report::tracks(db, r, now_ms)?,
        mounts: report::mounts(db, r.from_ms, r.to_ms)?,
    })
}

/// The values of a time-grouped report as `(Unix seconds, value)`, one point every `step`
/// seconds from the step holding `from_s` to the one holding `to_s - 1`, zero where it has no
/// row; over more than [`MAX_FILLED`] steps, only from its first row to its last.
pub fn filled(rows: &[(i64, f64)], from_s: i64, to_s: i64, step: i64) -> Vec<(i64, f64)> {
    let mut a = from_s.div_euclid(step) * step;
    let mut b = (to_s - 1).div_euclid(step) * step;
    if (b - a) / step > MAX_FILLED {
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Vec::new();
        };
        (a, b) = (first.0, last.0);
        if (b - a) / step > MAX_FILLED {
            return rows.to_vec();
        }
    }
    let values: HashMap<i64, f64> = rows.iter().copied().collect();
    (0..=((b - a) / step).max(0))
        .map(|i| {
            let t = a + i * step;
            (t, values.get(&t).copied().unwrap_or(0.0))
        })
        .collect()
}

/// The rows of a time-grouped report as `(Unix seconds, value of row)`.
fn time_rows(l: &Listening, value: impl Fn(&ListeningRow) -> f64) -> Vec<(i64, f64)> {
    l.rows
        .iter()
        .filter_map(|r| Some((report::parse_time(&r.key)? / 1000, value(r))))
        .collect()
}

/// How the page names a delivery path (`icy`, `hls`, `whep`) or a country left unknown.
fn key_text(group: Group, key: &str) -> String {
    match (group, key) {
        (Group::Path, "icy") => "ICY (HTTP)".into(),
        (Group::Path, "hls") => "HLS".into(),
        (Group::Path, "whep") => "WebRTC".into(),
        (Group::Hour, k) => report::parse_time(k)
            .and_then(DateTime::from_timestamp_millis)
            .map_or_else(|| k.to_owned(), |t| t.format("%Y-%m-%d %H:00").to_string()),
        (Group::Day, k) => report::parse_time(k).map_or_else(|| k.to_owned(), day_of),
        (_, k) => k.to_owned(),
    }
}

/// The column heading of a group's keys.
fn key_heading(group: Group) -> &'static str {
    match group {
        Group::Hour => "Hour (UTC)",
        Group::Day => "Day (UTC)",
        Group::Country => "Country",
        Group::Path => "Path",
        Group::Agent => "Player",
    }
}

/// The table's groupings: `group=` value and label.
const GROUPS: [(&str, Group, &str); 5] = [
    ("day", Group::Day, "Day"),
    ("hour", Group::Hour, "Hour"),
    ("country", Group::Country, "Country"),
    ("path", Group::Path, "Delivery path"),
    ("agent", Group::Agent, "Player"),
];

/// The `group=` value of `g`.
fn group_name(g: Group) -> &'static str {
    GROUPS
        .iter()
        .find(|(_, x, _)| *x == g)
        .map_or("day", |(n, _, _)| n)
}

/// The mount filter's choices: mounts seen in the range, live ones and the chosen one, in
/// name order, each once.
pub fn mount_choices(seen: &[String], live: &[String], chosen: Option<&str>) -> Vec<String> {
    let mut all: Vec<String> = seen
        .iter()
        .chain(live)
        .cloned()
        .chain(chosen.map(str::to_owned))
        .collect();
    all.sort();
    all.dedup();
    all
}

/// The form, filled with `from` and `to` (days), the mount `choices` with `mount` chosen, and
/// `group`.
fn form_html(from: &str, to: &str, choices: &[String], mount: &str, group: &str) -> String {
    let mut mounts = String::from("<option value=\"\">All mounts</option>");
    for m in choices {
        let _ = write!(
            mounts,
            "<option{}>{}</option>",
            if m == mount { " selected" } else { "" },
            escape(m)
        );
    }
    let mut groups = String::new();
    for (name, _, label) in GROUPS {
        let _ = write!(
            groups,
            "<option value=\"{name}\"{}>{label}</option>",
            if name == group { " selected" } else { "" }
        );
    }
    format!(
        "<section aria-labelledby=\"h-range\"><h2 id=\"h-range\">Range</h2>\
<form method=\"get\" action=\"{PATH}\" class=\"row\" id=\"report-form\">\
<label>From <input type=\"date\" name=\"from\" id=\"report-from\" value=\"{from}\"></label>\
<label>To <input type=\"date\" name=\"to\" id=\"report-to\" value=\"{to}\"></label>\
<label>Mount <select name=\"mount\" id=\"report-mount\">{mounts}</select></label>\
<label>Table by <select name=\"group\" id=\"report-group\">{groups}</select></label>\
<button type=\"submit\">Show</button></form>\
<p class=\"hint\">Days are UTC, both included. A session counts once it has ended; relays and \
edges are never counted.</p></section>",
        from = escape(from),
        to = escape(to),
    )
}

/// `x` with at most three decimals, as the API rounds it.
fn num(x: f64) -> String {
    let r = (x * 1000.0).round() / 1000.0;
    format!("{r}")
}

/// The totals of the range, each with its exact value in `data-value` (as the API's JSON has
/// it).
fn totals_html(t: &ListeningRow) -> String {
    // (key, label, exact value, value as shown, unit)
    let items = [
        (
            "sessions",
            "Sessions",
            t.sessions.to_string(),
            t.sessions.to_string(),
            "",
        ),
        (
            "unique_listeners",
            "Unique listeners",
            t.unique_listeners.to_string(),
            t.unique_listeners.to_string(),
            "",
        ),
        (
            "tlh_hours",
            "Listening hours (TLH)",
            t.tlh_hours.to_string(),
            num(t.tlh_hours),
            " h",
        ),
        (
            "atsl_minutes",
            "Time spent listening (ATSL)",
            t.atsl_minutes.to_string(),
            num(t.atsl_minutes),
            " min",
        ),
        (
            "peak_listeners",
            "Peak listeners",
            t.peak_listeners.to_string(),
            t.peak_listeners.to_string(),
            "",
        ),
    ];
    let mut out = String::from(
        "<section aria-labelledby=\"h-totals\"><h2 id=\"h-totals\">Totals</h2><dl class=\"summary\" id=\"report-totals\">",
    );
    for (key, label, exact, shown, unit) in items {
        let _ = write!(
            out,
            "<div><dt>{label}</dt><dd data-total=\"{key}\" data-value=\"{exact}\">{shown}{unit}</dd></div>"
        );
    }
    out.push_str("</dl><p class=\"hint\">ATSL is per session; peak listeners is the highest one-minute average of listeners at once.</p></section>");
    out
}

/// A chart section: its heading, the chart (or `empty` when `has_data` is false, or a note
/// when it could not be drawn, logged) and the numbers as a table (`head`: column headings,
/// `rows`: cells, already escaped).
fn chart_section(
    id: &str,
    heading: &str,
    chart: Option<Result<String, ChartError>>,
    empty: &str,
    head: &[&str],
    rows: &[Vec<String>],
) -> String {
    let figure = match chart {
        None => format!("<p class=\"note\" data-empty>{}</p>", escape(empty)),
        Some(Ok(svg)) => format!("<figure>{svg}</figure>"),
        Some(Err(e)) => {
            tracing::error!("reports page: {e}");
            "<p class=\"note\">This chart could not be drawn; see the server log.</p>".into()
        }
    };
    let table = if rows.is_empty() {
        String::new()
    } else {
        let mut t = String::from(
            "<details><summary>Numbers</summary><div class=\"scroll\"><table><thead><tr>",
        );
        for h in head {
            let _ = write!(t, "<th scope=\"col\">{h}</th>");
        }
        t.push_str("</tr></thead><tbody>");
        for r in rows {
            t.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                let class = if i > 0 { " class=\"num\"" } else { "" };
                let _ = write!(t, "<td{class}>{c}</td>");
            }
            t.push_str("</tr>");
        }
        t.push_str("</tbody></table></div></details>");
        t
    };
    format!(
        "<section aria-labelledby=\"h-{id}\" id=\"{id}\" class=\"chart-box\"><h2 id=\"h-{id}\">{heading}</h2>{figure}{table}</section>"
    )
}

/// The note of a range without sessions.
const NO_SESSIONS: &str = "No sessions in this range.";

/// A group's listening hours as bars, with its table.
fn group_section(id: &str, heading: &str, group: Group, l: &Listening) -> String {
    let bars: Vec<Bar> = l
        .rows
        .iter()
        .map(|r| Bar {
            label: key_text(group, &r.key),
            value: r.tlh_hours,
        })
        .collect();
    let chart = (!bars.is_empty()).then(|| report_charts::bars(heading, "listening hours", &bars));
    let rows: Vec<Vec<String>> = l
        .rows
        .iter()
        .map(|r| {
            vec![
                escape(&key_text(group, &r.key)),
                r.sessions.to_string(),
                num(r.tlh_hours),
                r.peak_listeners.to_string(),
            ]
        })
        .collect();
    chart_section(
        id,
        heading,
        chart,
        NO_SESSIONS,
        &[key_heading(group), "Sessions", "TLH (h)", "Peak"],
        &rows,
    )
}

/// The page's content for `req`, with `data` gathered at `now_ms` and the `live` mounts.
pub fn render(req: &ReportRequest, data: &ReportData, live: &[String], now_ms: i64) -> String {
    let r = &req.range;
    let mount = r.mount.as_deref().unwrap_or("");
    let choices = mount_choices(&data.mounts, live, r.mount.as_deref());
    let mut c = String::from(STYLE);
    c.push_str(&form_html(
        &day_of(r.from_ms),
        &day_of(r.to_ms - 1),
        &choices,
        mount,
        group_name(req.group),
    ));
    c.push_str(&totals_html(&data.daily.total));
    c.push_str("<div class=\"charts\">");
    // Listeners over time, per hour.
    let (from_s, to_s) = (
        r.from_ms.div_euclid(1000),
        r.to_ms.min(now_ms).div_euclid(1000),
    );
    let to_s = to_s.max(from_s + 1);
    let short_span = to_s - from_s <= 3 * 86_400;
    let hour_label = move |t: i64| {
        DateTime::from_timestamp(t, 0).map_or_else(String::new, |d| {
            d.format(if short_span { "%m-%d %H:00" } else { "%m-%d" })
                .to_string()
        })
    };
    let hourly = time_rows(&data.hourly, |x| x.peak_listeners as f64);
    let points = filled(&hourly, from_s, to_s, 3600);
    let heading = "Listeners over time (peak per hour)";
    let chart = (!hourly.is_empty())
        .then(|| report_charts::timeline(heading, "listeners", &points, &hour_label));
    let rows: Vec<Vec<String>> = data
        .hourly
        .rows
        .iter()
        .map(|x| {
            vec![
                escape(&key_text(Group::Hour, &x.key)),
                x.peak_listeners.to_string(),
                x.sessions.to_string(),
            ]
        })
        .collect();
    c.push_str(&chart_section(
        "listeners",
        heading,
        chart,
        NO_SESSIONS,
        &["Hour (UTC)", "Peak", "Sessions"],
        &rows,
    ));
    // Listening hours per day.
    let daily = time_rows(&data.daily, |x| x.tlh_hours);
    let cols: Vec<Bar> = filled(&daily, from_s, to_s, 86_400)
        .into_iter()
        .map(|(t, v)| Bar {
            label: DateTime::from_timestamp(t, 0)
                .map_or_else(String::new, |d| d.format("%m-%d").to_string()),
            value: v,
        })
        .collect();
    let heading = "Listening hours per day";
    let chart = (!daily.is_empty()).then(|| report_charts::columns(heading, "hours", &cols));
    let rows: Vec<Vec<String>> = data
        .daily
        .rows
        .iter()
        .map(|x| {
            vec![
                escape(&key_text(Group::Day, &x.key)),
                num(x.tlh_hours),
                x.sessions.to_string(),
                x.unique_listeners.to_string(),
                num(x.atsl_minutes),
            ]
        })
        .collect();
    c.push_str(&chart_section(
        "tlh",
        heading,
        chart,
        NO_SESSIONS,
        &["Day (UTC)", "TLH (h)", "Sessions", "Unique", "ATSL (min)"],
        &rows,
    ));
    // Top tracks by performances.
    let mut top: Vec<_> = data.tracks.rows.iter().collect();
    top.sort_by(|a, b| {
        b.performances
            .cmp(&a.performances)
            .then(b.tlh_hours.total_cmp(&a.tlh_hours))
            .then(a.started.cmp(&b.started))
    });
    top.truncate(TOP_TRACKS);
    let name = |t: &report::TrackRow| match &t.artist {
        Some(a) if !a.is_empty() => format!("{a} - {}", t.title),
        _ => t.title.clone(),
    };
    let bars: Vec<Bar> = top
        .iter()
        .map(|t| Bar {
            label: name(t),
            value: t.performances as f64,
        })
        .collect();
    let heading = format!("Top tracks (performances, top {TOP_TRACKS})");
    let chart = (!bars.is_empty()).then(|| report_charts::bars(&heading, "performances", &bars));
    let rows: Vec<Vec<String>> = top
        .iter()
        .map(|t| {
            vec![
                escape(&name(t)),
                escape(&t.mount),
                t.plays.to_string(),
                t.performances.to_string(),
                num(t.tlh_hours),
            ]
        })
        .collect();
    c.push_str(&chart_section(
        "tracks",
        &heading,
        chart,
        "No titles played in this range.",
        &["Track", "Mount", "Plays", "Performances", "TLH (h)"],
        &rows,
    ));
    c.push_str(&group_section(
        "countries",
        "Countries (listening hours)",
        Group::Country,
        &data.countries,
    ));
    c.push_str(&group_section(
        "paths",
        "Delivery paths (listening hours)",
        Group::Path,
        &data.paths,
    ));
    c.push_str(&group_section(
        "players",
        "Players (listening hours)",
        Group::Agent,
        &data.players,
    ));
    c.push_str("</div>");
    c.push_str(&table_html(req.group, data.grouped(req.group)));
    c.push_str(&downloads_html(req));
    c
}

/// The listening report in the form's grouping, as a table.
fn table_html(group: Group, l: &Listening) -> String {
    let mut out = format!(
        "<section aria-labelledby=\"h-table\"><h2 id=\"h-table\">Listening by {}</h2>",
        GROUPS
            .iter()
            .find(|(_, g, _)| *g == group)
            .map_or("day", |(_, _, label)| label)
            .to_lowercase()
    );
    if l.rows.is_empty() {
        let _ = write!(
            out,
            "<p class=\"note\" data-empty>{NO_SESSIONS}</p></section>"
        );
        return out;
    }
    let _ = write!(
        out,
        "<div class=\"scroll\"><table id=\"report-table\"><thead><tr><th scope=\"col\">{}</th>\
<th scope=\"col\">Sessions</th><th scope=\"col\">Unique listeners</th><th scope=\"col\">TLH (h)</th>\
<th scope=\"col\">ATSL (min)</th><th scope=\"col\">Peak</th></tr></thead><tbody>",
        key_heading(group)
    );
    let rows = l.rows.iter().map(|r| (r, false));
    for (r, total) in rows.chain([(&l.total, true)]) {
        let key = if total {
            "Total".to_owned()
        } else {
            key_text(group, &r.key)
        };
        let _ = write!(
            out,
            "<tr><th scope=\"row\">{}</th><td class=\"num\">{}</td><td class=\"num\">{}</td>\
<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&key),
            r.sessions,
            r.unique_listeners,
            num(r.tlh_hours),
            num(r.atsl_minutes),
            r.peak_listeners
        );
    }
    out.push_str("</tbody></table></div></section>");
    out
}

/// CSV download links of the API for the range and mount of `req` (`listening.csv` in its
/// grouping).
fn downloads_html(req: &ReportRequest) -> String {
    let q = api_query(req);
    let files = [
        (
            format!("listening.csv?{q}&group={}", group_name(req.group)),
            "listening.csv",
            "the table above",
        ),
        (format!("tracks.csv?{q}"), "tracks.csv", "per title"),
        (format!("sessions.csv?{q}"), "sessions.csv", "every session"),
        (
            format!("soundexchange.csv?{q}"),
            "soundexchange.csv",
            "SoundExchange report of use",
        ),
        (format!("ppl.csv?{q}"), "ppl.csv", "per play, PPL/PRS style"),
    ];
    let mut out = String::from(
        "<section aria-labelledby=\"h-csv\"><h2 id=\"h-csv\">Download (CSV)</h2><ul class=\"downloads\">",
    );
    for (href, name, what) in files {
        let _ = write!(
            out,
            "<li><a href=\"/api/v1/reports/{}\" download data-csv=\"{name}\">{name}</a> <span class=\"hint\">{what}</span></li>",
            escape(&href)
        );
    }
    out.push_str("</ul></section>");
    out
}

/// The page's own styles (the charts scale to the page's width; nothing is wider than a
/// phone).
const STYLE: &str = "<style>\
.top nav{flex-wrap:wrap}\
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,32rem),1fr));gap:0 1rem}\
.charts section,main section{min-width:0}\
figure{margin:0}\
svg.chart{display:block;width:100%;height:auto;border-radius:8px}\
.note{color:var(--muted);font-style:italic}\
details{margin-top:.6rem}\
summary{cursor:pointer;color:var(--muted)}\
.downloads{list-style:none;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:.6rem 1.4rem}\
#report-form input,#report-form select{min-width:0;max-width:100%}\
#report-form label{max-width:100%}\
pre{white-space:pre-wrap;overflow-wrap:anywhere}\
</style>";

/// The page's content when the server keeps no ledger: what is missing and how to turn it on.
fn no_ledger_html() -> String {
    format!(
        "{STYLE}<section aria-labelledby=\"h-none\" id=\"no-ledger\"><h2 id=\"h-none\">No audience ledger</h2>\
<p>This server keeps no audience ledger, so there is nothing to report. Turn it on in the \
configuration file and restart the server:</p>\
<pre><code>[ledger]\ndatabase = \"sqlite:///var/lib/throng/ledger.db\"</code></pre>\
<p class=\"hint\"><code>throng serve</code> keeps one in its state directory unless \
<code>database = \"off\"</code>; a cluster can share one on PostgreSQL \
(<code>database = \"postgres://user:password@host/db\"</code>). See docs/operators.md.</p></section>"
    )
}

/// `GET /admin/ui/reports`: the reports page (see the module comment). 401 without admin
/// credentials, 400 (with the form and the reason) for a bad field, 500 when the database
/// fails (logged).
pub async fn page(
    State(ctx): State<Arc<ServerCtx>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if !auth::is_admin(&ctx, auth::credentials(&headers).as_ref()) {
        return crate::admin::icecast::unauthorized(&ctx);
    }
    if ctx.ledger.is_none() {
        return ui::page(&ctx, TITLE, None, &no_ledger_html());
    }
    let now = crate::ledger::now_ms();
    let form = Form::from_query(&parse_query(query.as_deref().unwrap_or("")));
    let config = ctx.config();
    let live: Vec<String> = ctx.registry.list().iter().map(|m| m.name.clone()).collect();
    let answer = |status: StatusCode, content: &str| {
        let mut r = ui::page(&ctx, TITLE, None, content);
        *r.status_mut() = status;
        r
    };
    let req = match form.request(now, &config.server_id) {
        Ok(r) => r,
        Err(why) => {
            let choices = mount_choices(
                &[],
                &live,
                Some(form.mount.as_str()).filter(|m| !m.is_empty()),
            );
            let content = format!(
                "{STYLE}<p class=\"flash err\" role=\"alert\">{}</p>{}",
                escape(&why),
                form_html(&form.from, &form.to, &choices, &form.mount, &form.group)
            );
            return answer(StatusCode::BAD_REQUEST, &content);
        }
    };
    let job = req.clone();
    match crate::admin::reports::on_ledger(config, move |db| gather(db, &job, now)).await {
        Ok(data) => answer(StatusCode::OK, &render(&req, &data, &live, now)),
        Err(e) => {
            tracing::error!("reports page failed: {e}");
            answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                "<p class=\"flash err\" role=\"alert\">The report failed; see the server log.</p>",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::report::TrackRow;

    const NOW: i64 = 1_764_000_000_000; // 2025-11-24T16:00:00Z

    fn row(key: &str, sessions: u64, tlh: f64, peak: u64) -> ListeningRow {
        ListeningRow {
            key: key.into(),
            sessions,
            unique_listeners: sessions,
            tlh_hours: tlh,
            atsl_minutes: if sessions == 0 {
                0.0
            } else {
                tlh * 60.0 / sessions as f64
            },
            peak_listeners: peak,
        }
    }

    fn listening(rows: Vec<ListeningRow>) -> Listening {
        let total = row(
            "total",
            rows.iter().map(|r| r.sessions).sum(),
            rows.iter().map(|r| r.tlh_hours).sum(),
            rows.iter().map(|r| r.peak_listeners).max().unwrap_or(0),
        );
        Listening { rows, total }
    }

    fn request() -> ReportRequest {
        let q = [
            ("from", "2025-11-20"),
            ("to", "2025-11-24"),
            ("mount", "/live"),
        ];
        Form::from_query(&q.map(|(k, v)| (k.to_owned(), v.to_owned())))
            .request(NOW, "S")
            .unwrap()
    }

    fn data() -> ReportData {
        ReportData {
            hourly: listening(vec![
                row("2025-11-21T10:00:00Z", 2, 0.5, 2),
                row("2025-11-21T13:00:00Z", 1, 0.2, 1),
            ]),
            daily: listening(vec![row("2025-11-21T00:00:00Z", 3, 0.7, 2)]),
            countries: listening(vec![row("DE", 2, 0.5, 2), row("unknown", 1, 0.2, 1)]),
            paths: listening(vec![row("icy", 3, 0.7, 2)]),
            players: listening(vec![row("VLC", 3, 0.7, 2)]),
            tracks: Tracks {
                rows: (0..20)
                    .map(|i| TrackRow {
                        mount: "/live".into(),
                        artist: Some("Band <b>".into()),
                        title: format!("Song {i:02}"),
                        started: "2025-11-21T10:00:00Z".into(),
                        plays: 1,
                        performances: i,
                        tlh_hours: 0.01,
                    })
                    .collect(),
            },
            mounts: vec!["/live".into(), "/old".into()],
        }
    }

    #[test]
    fn time_series_are_filled_with_zeros() {
        let rows = [(3600, 2.0), (4 * 3600, 1.0)];
        assert_eq!(
            filled(&rows, 0, 5 * 3600, 3600),
            vec![
                (0, 0.0),
                (3600, 2.0),
                (7200, 0.0),
                (10_800, 0.0),
                (14_400, 1.0)
            ]
        );
        // A range far longer than the data: only the span with data.
        let far = filled(&rows, 0, 100 * 365 * 86_400, 3600);
        assert_eq!(far.first(), Some(&(3600, 2.0)));
        assert_eq!(far.len(), 4);
        assert!(filled(&[], 0, 100 * 365 * 86_400, 3600).is_empty());
    }

    #[test]
    fn mount_choices_are_sorted_and_unique() {
        assert_eq!(
            mount_choices(
                &["/b".into(), "/a".into()],
                &["/a".into(), "/c".into()],
                Some("/z")
            ),
            vec!["/a", "/b", "/c", "/z"]
        );
    }

    #[test]
    fn the_page_shows_totals_charts_and_csv_links_for_the_range() {
        let html = render(&request(), &data(), &["/now".into()], NOW);
        assert!(html.contains("name=\"from\" id=\"report-from\" value=\"2025-11-20\""));
        assert!(html.contains("name=\"to\" id=\"report-to\" value=\"2025-11-24\""));
        assert!(html.contains("<option selected>/live</option>"), "{html}");
        assert!(
            html.contains("<option>/old</option><option>/now</option>")
                || html.contains("<option>/now</option><option>/old</option>")
        );
        assert!(html.contains("data-total=\"sessions\" data-value=\"3\">3</dd>"));
        assert!(html.contains("data-total=\"tlh_hours\" data-value=\"0.7\">0.7 h</dd>"));
        // Six charts, each an accessible image.
        assert_eq!(html.matches("<svg role=\"img\"").count(), 6, "{html}");
        assert!(!html.contains("data-empty"));
        // Top 15 tracks only, most performances first; names escaped.
        assert!(html.contains("Band &lt;b&gt; - Song 19"));
        assert!(!html.contains("Song 04"), "only the top 15");
        assert!(html.find("Song 19").unwrap() < html.find("Song 18").unwrap());
        assert!(!html.contains("<b>"));
        // CSV links for the same range and mount.
        let q = "from=2025%2D11%2D20T00%3A00%3A00Z&amp;to=2025%2D11%2D25T00%3A00%3A00Z&amp;mount=%2Flive";
        for f in ["tracks.csv", "sessions.csv", "soundexchange.csv", "ppl.csv"] {
            assert!(
                html.contains(&format!("href=\"/api/v1/reports/{f}?{q}\"")),
                "{f}: {html}"
            );
        }
        assert!(html.contains(&format!(
            "href=\"/api/v1/reports/listening.csv?{q}&amp;group=day\""
        )));
        assert!(html.contains("<th scope=\"row\">Total</th>"));
    }

    #[test]
    fn an_empty_range_says_so_instead_of_drawing_axes() {
        let empty = ReportData {
            hourly: listening(vec![]),
            daily: listening(vec![]),
            countries: listening(vec![]),
            paths: listening(vec![]),
            players: listening(vec![]),
            tracks: Tracks { rows: vec![] },
            mounts: vec![],
        };
        let html = render(&request(), &empty, &[], NOW);
        assert!(!html.contains("<svg"), "{html}");
        assert_eq!(html.matches(NO_SESSIONS).count(), 6, "{html}");
        assert!(html.contains("No titles played in this range."));
        assert!(html.contains("data-total=\"sessions\" data-value=\"0\""));
    }

    #[test]
    fn without_a_ledger_the_page_says_how_to_turn_it_on() {
        let html = no_ledger_html();
        assert!(html.contains("[ledger]\ndatabase = \"sqlite:///var/lib/throng/ledger.db\""));
    }
}
