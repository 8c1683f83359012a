//! The reports as CSV files (written with the `csv` crate, RFC 4180 quoting):
//! `sessions.csv` (one row per session), `soundexchange.csv` (SoundExchange's report of use,
//! census reporting with actual total performances: one row per sound recording, with the
//! columns of SoundExchange's template), `ppl.csv` (one row per play with its listeners and
//! their countries, the per-play log that PPL/PRS, GEMA and IFPI returns ask for), and the
//! listening and tracks reports as tables.

use super::report::{rfc3339, Listening, PlayRow, SessionRow, Tracks};

fn finish(w: csv::Writer<Vec<u8>>) -> String {
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// `sessions.csv`: `id,server,mount,path,relay,started,ended,seconds,bytes,user_agent,referer,
/// user,end_reason,address,country` (times RFC 3339 UTC).
pub fn sessions_csv(rows: &[SessionRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
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
        let _ = w.write_record([
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
    finish(w)
}

/// `soundexchange.csv`: `NAME_OF_SERVICE,TRANSMISSION_CATEGORY,FEATURED_ARTIST,
/// SOUND_RECORDING_TITLE,ISRC,ALBUM_TITLE,MARKETING_LABEL,ACTUAL_TOTAL_PERFORMANCES,
/// PLAY_FREQUENCY`, SoundExchange's report-of-use columns. ISRC, album and label are left
/// empty: a stream title does not carry them (the station fills them in, or its automation's
/// export does).
pub fn soundexchange_csv(tracks: &Tracks, service: &str, category: &str) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
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
        let _ = w.write_record([
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
    finish(w)
}

/// `ppl.csv`: one row per play: `date,time,mount,artist,title,duration_seconds,performances,
/// listening_hours,countries` (UTC; countries as `GB:12;DE:3`).
pub fn ppl_csv(plays: &[PlayRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
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
        let _ = w.write_record([
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
    finish(w)
}

/// The listening report as CSV: `key,sessions,unique_listeners,tlh_hours,atsl_minutes,
/// peak_listeners`, its rows then `total`.
pub fn listening_csv(l: &Listening) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
        "key",
        "sessions",
        "unique_listeners",
        "tlh_hours",
        "atsl_minutes",
        "peak_listeners",
    ]);
    for r in l.rows.iter().chain(std::iter::once(&l.total)) {
        let _ = w.write_record([
            r.key.clone(),
            r.sessions.to_string(),
            r.unique_listeners.to_string(),
            r.tlh_hours.to_string(),
            r.atsl_minutes.to_string(),
            r.peak_listeners.to_string(),
        ]);
    }
    finish(w)
}

/// The tracks report as CSV: `mount,artist,title,started,plays,performances,tlh_hours`.
pub fn tracks_csv(t: &Tracks) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
        "mount",
        "artist",
        "title",
        "started",
        "plays",
        "performances",
        "tlh_hours",
    ]);
    for r in &t.rows {
        let _ = w.write_record([
            r.mount.clone(),
            r.artist.clone().unwrap_or_default(),
            r.title.clone(),
            r.started.clone(),
            r.plays.to_string(),
            r.performances.to_string(),
            r.tlh_hours.to_string(),
        ]);
    }
    finish(w)
}
