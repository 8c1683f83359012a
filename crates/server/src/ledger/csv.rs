//! The reports as CSV files (written with the `csv` crate, RFC 4180 quoting):
//! `sessions.csv` (one row per session), `soundexchange.csv` (SoundExchange's report of use,
//! census reporting with actual total performances: one row per sound recording, with the
//! columns of SoundExchange's template), `ppl.csv` (one row per play with its listeners and
//! their countries, the per-play log that PPL/PRS, GEMA and IFPI returns ask for), and the
//! listening and tracks reports as tables.
//!
//! Every cell goes through one writer, `Sheet::row`, which neutralises spreadsheet formulas
//! (issue 42): titles, User-Agents, Referers and user names come from unauthenticated
//! listeners and sources, and the files are served as attachments that open in a spreadsheet,
//! so a cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage return is written with a
//! leading `'` (OWASP's "CSV Injection" guidance), which spreadsheets show as text and never
//! evaluate. A cell that is a plain decimal number (`-12`, `-0.5`) is a number, not a formula,
//! and is left as it is, so numeric columns stay numeric.

use std::borrow::Cow;

use super::report::{rfc3339, Listening, PlayRow, SessionRow, Tracks};

/// A CSV file being written in memory: every row goes through [`Sheet::row`].
struct Sheet(csv::Writer<Vec<u8>>);

impl Sheet {
    fn new() -> Sheet {
        Sheet(csv::Writer::from_writer(Vec::new()))
    }

    /// Writes one record, each cell [`neutralise`]d, then RFC 4180-quoted by the `csv` crate.
    fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let cells: Vec<String> = cells
            .into_iter()
            .map(|c| neutralise(c.as_ref()).into_owned())
            .collect();
        // Writing into a `Vec` cannot fail.
        let _ = self.0.write_record(&cells);
    }

    fn finish(self) -> String {
        let bytes = self.0.into_inner().unwrap_or_default();
        String::from_utf8(bytes).unwrap_or_default()
    }
}

/// `cell` as a CSV report writes it: with a leading `'` when it begins with `=`, `+`, `-`,
/// `@`, a tab or a carriage return (the characters that make a spreadsheet read a cell as a
/// formula, per OWASP's CSV injection guidance), unless it is a plain decimal number such as
/// `-12` or `-0.5` (digits with at most one `.`, after the sign); otherwise unchanged.
pub fn neutralise(cell: &str) -> Cow<'_, str> {
    let Some(first) = cell.chars().next() else {
        return Cow::Borrowed(cell);
    };
    if !matches!(first, '=' | '+' | '-' | '@' | '\t' | '\r') || is_plain_number(cell) {
        return Cow::Borrowed(cell);
    }
    Cow::Owned(format!("'{cell}"))
}

/// `-` followed by digits with at most one `.` among them, at least one digit in all.
fn is_plain_number(cell: &str) -> bool {
    let Some(rest) = cell.strip_prefix('-') else {
        return false;
    };
    let mut dots = 0;
    let mut digits = 0;
    for c in rest.chars() {
        match c {
            '0'..='9' => digits += 1,
            '.' => dots += 1,
            _ => return false,
        }
    }
    digits > 0 && dots <= 1
}

/// `sessions.csv`: `id,server,mount,path,relay,started,ended,seconds,bytes,user_agent,referer,
/// user,end_reason,address,country` (times RFC 3339 UTC).
pub fn sessions_csv(rows: &[SessionRow]) -> String {
    let mut w = Sheet::new();
    w.row([
        "id",
        "server",
        "mount",
        "path",
        "relay",
        "started",
        "ended",
        "seconds",
        "bytes",
        "user_agent",
        "referer",
        "user",
        "end_reason",
        "address",
        "country",
    ]);
    for r in rows {
        w.row([
            r.id.to_string(),
            r.server.clone(),
            r.mount.clone(),
            r.path.clone(),
            u8::from(r.relay).to_string(),
            rfc3339(r.started_ms.div_euclid(1000)),
            r.ended_ms
                .map(|e| rfc3339(e.div_euclid(1000)))
                .unwrap_or_default(),
            r.seconds.map(|s| format!("{s:.3}")).unwrap_or_default(),
            r.bytes.map(|b| b.to_string()).unwrap_or_default(),
            r.agent.clone().unwrap_or_default(),
            r.referer.clone().unwrap_or_default(),
            r.user.clone().unwrap_or_default(),
            r.end_reason.clone().unwrap_or_default(),
            r.address.clone(),
            r.country.clone().unwrap_or_default(),
        ]);
    }
    w.finish()
}

/// `soundexchange.csv`: `NAME_OF_SERVICE,TRANSMISSION_CATEGORY,FEATURED_ARTIST,
/// SOUND_RECORDING_TITLE,ISRC,ALBUM_TITLE,MARKETING_LABEL,ACTUAL_TOTAL_PERFORMANCES,
/// PLAY_FREQUENCY`, SoundExchange's report-of-use columns. ISRC, album and label are left
/// empty: a stream title does not carry them (the station fills them in, or its automation's
/// export does).
pub fn soundexchange_csv(tracks: &Tracks, service: &str, category: &str) -> String {
    let mut w = Sheet::new();
    w.row([
        "NAME_OF_SERVICE",
        "TRANSMISSION_CATEGORY",
        "FEATURED_ARTIST",
        "SOUND_RECORDING_TITLE",
        "ISRC",
        "ALBUM_TITLE",
        "MARKETING_LABEL",
        "ACTUAL_TOTAL_PERFORMANCES",
        "PLAY_FREQUENCY",
    ]);
    for t in &tracks.rows {
        w.row([
            service,
            category,
            t.artist.as_deref().unwrap_or(""),
            &t.title,
            "",
            "",
            "",
            &t.performances.to_string(),
            &t.plays.to_string(),
        ]);
    }
    w.finish()
}

/// `ppl.csv`: one row per play: `date,time,mount,artist,title,duration_seconds,performances,
/// listening_hours,countries` (UTC; countries as `GB:12;DE:3`).
pub fn ppl_csv(plays: &[PlayRow]) -> String {
    let mut w = Sheet::new();
    w.row([
        "date",
        "time",
        "mount",
        "artist",
        "title",
        "duration_seconds",
        "performances",
        "listening_hours",
        "countries",
    ]);
    for p in plays {
        let at = rfc3339(p.started_ms.div_euclid(1000));
        let (date, time) = at.split_once('T').unwrap_or((&at, ""));
        let countries: Vec<String> = p
            .countries
            .iter()
            .map(|(c, n)| format!("{c}:{n}"))
            .collect();
        w.row([
            date.to_owned(),
            time.trim_end_matches('Z').to_owned(),
            p.mount.clone(),
            p.artist.clone().unwrap_or_default(),
            p.title.clone(),
            ((p.ended_ms - p.started_ms).max(0) / 1000).to_string(),
            p.performances.to_string(),
            format!("{:.3}", p.listening_seconds / 3600.0),
            countries.join(";"),
        ]);
    }
    w.finish()
}

/// The listening report as CSV: `key,sessions,unique_listeners,tlh_hours,atsl_minutes,
/// peak_listeners`, its rows then `total`.
pub fn listening_csv(l: &Listening) -> String {
    let mut w = Sheet::new();
    w.row([
        "key",
        "sessions",
        "unique_listeners",
        "tlh_hours",
        "atsl_minutes",
        "peak_listeners",
    ]);
    for r in l.rows.iter().chain(std::iter::once(&l.total)) {
        w.row([
            r.key.clone(),
            r.sessions.to_string(),
            r.unique_listeners.to_string(),
            r.tlh_hours.to_string(),
            r.atsl_minutes.to_string(),
            r.peak_listeners.to_string(),
        ]);
    }
    w.finish()
}

/// The tracks report as CSV: `mount,artist,title,started,plays,performances,tlh_hours`.
pub fn tracks_csv(t: &Tracks) -> String {
    let mut w = Sheet::new();
    w.row([
        "mount",
        "artist",
        "title",
        "started",
        "plays",
        "performances",
        "tlh_hours",
    ]);
    for r in &t.rows {
        w.row([
            r.mount.clone(),
            r.artist.clone().unwrap_or_default(),
            r.title.clone(),
            r.started.clone(),
            r.plays.to_string(),
            r.performances.to_string(),
            r.tlh_hours.to_string(),
        ]);
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::report::TrackRow;

    fn track(artist: Option<&str>, title: &str) -> TrackRow {
        TrackRow {
            mount: "/live.mp3".into(),
            artist: artist.map(str::to_owned),
            title: title.into(),
            started: "2026-01-01T00:00:00Z".into(),
            plays: 1,
            performances: 2,
            tlh_hours: 0.5,
        }
    }

    #[test]
    fn a_formula_title_reaches_soundexchange_csv_as_text() {
        let tracks = Tracks {
            rows: vec![
                track(Some("Artist"), "=HYPERLINK(\"x\")"),
                track(Some("@SUM(A1:A9)"), "+cmd|' /C calc'!A0"),
                track(None, "Plain - Title"),
            ],
        };
        let csv = soundexchange_csv(&tracks, "Test FM", "-cat");
        let lines: Vec<&str> = csv.lines().collect();
        // The csv crate quotes the cell (it holds `"`), the `'` leads inside the quotes.
        assert_eq!(
            lines[1], "Test FM,'-cat,Artist,\"'=HYPERLINK(\"\"x\"\")\",,,,2,1",
            "{csv}"
        );
        assert_eq!(
            lines[2],
            "Test FM,'-cat,'@SUM(A1:A9),'+cmd|' /C calc'!A0,,,,2,1"
        );
        assert_eq!(lines[3], "Test FM,'-cat,,Plain - Title,,,,2,1");
        // Parsed back as a spreadsheet would read the file: text, never a formula.
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        let first = r.records().next().unwrap().unwrap();
        assert_eq!(&first[3], "'=HYPERLINK(\"x\")");
    }

    #[test]
    fn every_trigger_character_is_neutralised_and_numbers_are_not() {
        for cell in [
            "=1+1", "+1", "-1+1", "@A1", "\tx", "\rx", "-", "-.", "--1", "-1.2.3",
        ] {
            assert_eq!(neutralise(cell), format!("'{cell}"), "{cell:?}");
        }
        for cell in ["", "a=b", "Song", "12", "-12", "-0.5", "-.5", " =x", "'=x"] {
            assert_eq!(neutralise(cell), cell, "{cell:?}");
        }
    }

    #[test]
    fn user_agents_and_referers_of_sessions_csv_are_neutralised() {
        let row = SessionRow {
            id: 7,
            server: "a".into(),
            mount: "/m".into(),
            path: "icy".into(),
            relay: false,
            started_ms: 0,
            ended_ms: Some(1000),
            seconds: Some(1.0),
            bytes: Some(10),
            agent: Some("=cmd|' /C calc'!A0".into()),
            referer: Some("@evil".into()),
            user: Some("-2+3".into()),
            end_reason: None,
            address: "192.0.2.1".into(),
            country: None,
        };
        let csv = sessions_csv(&[row]);
        let line = csv.lines().nth(1).unwrap();
        assert!(
            line.ends_with(",'=cmd|' /C calc'!A0,'@evil,'-2+3,,192.0.2.1,"),
            "{line}"
        );
    }
}
