//! The ledger's tables and their versioned migrations. Version `n` of the schema is reached by
//! running [`MIGRATIONS`]`[0..n]` in order, each in its own transaction, and the version is
//! recorded in `ledger_meta`; a database written by a later build (a higher version) is refused
//! rather than misread. The same SQL serves SQLite and PostgreSQL.
//!
//! Tables:
//! - `sessions`: one row per listening session on any path (ICY, HLS, WHEP), written when it
//!   starts (`ended_ms` NULL) and completed when it ends. A relay or edge pulling a mount has
//!   `relay = 1` and is left out of every audience figure.
//! - `session_ends`: ends not yet folded into `sessions`. An end is appended here (one row at
//!   the table's tail, no index) and the writer folds this server's ends into their sessions
//!   once a minute (`writer.rs`), so a session's row is rewritten once per minute's batch of
//!   ends rather than once per commit. The view `session_rows` is `sessions` with these ends
//!   applied: reports read it (or the same join) and see every end at once.
//! - `audience_uniques`: unique listeners per hour and per UTC day, per mount and over all
//!   mounts (`mount` empty), counted by the writer as listeners arrive (`uniques.rs`); a
//!   database of version 1 gets them from its sessions.
//! - `plays`: the play log, one row per title change of a mount.
//! - `audience_minutes`: closed sessions' listening seconds per clock minute and group (see
//!   `minutes.rs`), which reports sum.
//! - `ledger_servers`: each server's last sign of life (`seen_ms`), the end given to its sessions
//!   left open by a crash.
//! - `ledger_salts`: the daily salt of `hashed` addresses, shared by the servers of a cluster.

use super::db::{Db, DbError, Dialect, Val};

/// The schema's migrations, oldest first; the schema version is their count.
pub const MIGRATIONS: &[&str] = &[
    // Version 1.
    "CREATE TABLE sessions (
        id BIGINT PRIMARY KEY,
        server TEXT NOT NULL,
        mount TEXT NOT NULL,
        path TEXT NOT NULL,
        relay BIGINT NOT NULL,
        started_ms BIGINT NOT NULL,
        ended_ms BIGINT,
        seconds DOUBLE PRECISION,
        bytes BIGINT,
        agent TEXT,
        player TEXT NOT NULL,
        referer TEXT,
        username TEXT,
        end_reason TEXT,
        address TEXT NOT NULL,
        country TEXT
    );
    CREATE INDEX sessions_started ON sessions (started_ms, relay, mount, address);
    CREATE INDEX sessions_ended ON sessions (ended_ms);
    CREATE INDEX sessions_open ON sessions (server, ended_ms);
    CREATE TABLE plays (
        server TEXT NOT NULL,
        mount TEXT NOT NULL,
        at_ms BIGINT NOT NULL,
        artist TEXT,
        title TEXT NOT NULL,
        set_by TEXT NOT NULL,
        listeners BIGINT NOT NULL
    );
    CREATE INDEX plays_at ON plays (at_ms);
    CREATE TABLE audience_minutes (
        minute BIGINT NOT NULL,
        server TEXT NOT NULL,
        mount TEXT NOT NULL,
        path TEXT NOT NULL,
        country TEXT NOT NULL,
        player TEXT NOT NULL,
        listener_seconds DOUBLE PRECISION NOT NULL,
        sessions BIGINT NOT NULL,
        PRIMARY KEY (minute, server, mount, path, country, player)
    )/*WITHOUT_ROWID*/;
    CREATE TABLE ledger_servers (
        server TEXT PRIMARY KEY,
        started_ms BIGINT NOT NULL,
        seen_ms BIGINT NOT NULL
    );
    CREATE TABLE ledger_salts (
        day BIGINT PRIMARY KEY,
        salt TEXT NOT NULL
    )",
    // Version 2: a session costs the writer fewer pages, and reports do not grow with the
    // sessions. A session's end is appended to `session_ends` and folded into its row once a
    // minute (`writer.rs`); `session_rows` is `sessions` with those ends applied. Unique
    // listeners are counted as they arrive (`audience_uniques`, `uniques.rs`); the sessions of
    // earlier versions are counted into it by the writer after start, a day at a time
    // ([`BACKFILL_KEY`]).
    // On SQLite (one server's file, time-ordered ids: `super::new_session_id`) `sessions` is
    // rebuilt once so that the id is the row id (`INTEGER PRIMARY KEY`: a start appends to the
    // table and needs no second index) and the indexes of ends and of open sessions hold only
    // ended and only open sessions (partial indexes, touched once per session). This rewrite
    // took 9.4 s for a million sessions (synthetic v1 rows, the same SQL run through SQLite
    // 3.40). PostgreSQL keeps its table and indexes (random ids, so the servers of a cluster
    // never collide).
    "/*SQLITE*/CREATE TABLE sessions_v2 (
        id INTEGER PRIMARY KEY,
        server TEXT NOT NULL,
        mount TEXT NOT NULL,
        path TEXT NOT NULL,
        relay BIGINT NOT NULL,
        started_ms BIGINT NOT NULL,
        ended_ms BIGINT,
        seconds DOUBLE PRECISION,
        bytes BIGINT,
        agent TEXT,
        player TEXT NOT NULL,
        referer TEXT,
        username TEXT,
        end_reason TEXT,
        address TEXT NOT NULL,
        country TEXT
    );
    INSERT INTO sessions_v2 SELECT id, server, mount, path, relay, started_ms, ended_ms,
        seconds, bytes, agent, player, referer, username, end_reason, address, country
        FROM sessions;
    DROP TABLE sessions;
    ALTER TABLE sessions_v2 RENAME TO sessions;
    CREATE INDEX sessions_started ON sessions (started_ms, relay, mount, address);
    CREATE INDEX sessions_ended ON sessions (ended_ms) WHERE ended_ms IS NOT NULL;
    CREATE INDEX sessions_open ON sessions (started_ms) WHERE ended_ms IS NULL;/*END*/
    CREATE TABLE session_ends (
        server TEXT NOT NULL,
        id BIGINT NOT NULL,
        mount TEXT,
        ended_ms BIGINT NOT NULL,
        seconds DOUBLE PRECISION NOT NULL,
        bytes BIGINT,
        end_reason TEXT NOT NULL
    );
    CREATE VIEW session_rows AS
        SELECT s.id, s.server, COALESCE(e.mount, s.mount) AS mount, s.path, s.relay,
            s.started_ms, COALESCE(s.ended_ms, e.ended_ms) AS ended_ms,
            COALESCE(s.seconds, e.seconds) AS seconds,
            CASE WHEN s.ended_ms IS NULL THEN e.bytes ELSE s.bytes END AS bytes,
            s.agent, s.player, s.referer, s.username,
            COALESCE(s.end_reason, e.end_reason) AS end_reason, s.address, s.country
        FROM sessions s LEFT JOIN session_ends e
            ON s.ended_ms IS NULL AND e.server = s.server AND e.id = s.id;
    CREATE TABLE audience_uniques (
        span_s BIGINT NOT NULL,
        at_s BIGINT NOT NULL,
        server TEXT NOT NULL,
        mount TEXT NOT NULL,
        path TEXT NOT NULL,
        country TEXT NOT NULL,
        player TEXT NOT NULL,
        listeners BIGINT NOT NULL,
        PRIMARY KEY (span_s, at_s, server, mount, path, country, player)
    )/*WITHOUT_ROWID*/;
    INSERT INTO ledger_meta (key, value)
        SELECT 'uniques_backfill', CAST(MIN(started_ms) AS TEXT) || ' ' || CAST(/*NOW_MS*/ AS TEXT)
        FROM sessions HAVING COUNT(*) > 0",
    // Version 3: the start-time index holds the start alone. It held the start, relay, mount
    // and address, so that a server reading its day's listeners back at start
    // (`Writer::load_uniques`) needed no table look-up; but every session start inserts into
    // it, and the wide entries made the file 15 % larger (`ledger_churn`: 12.4 against
    // 10.6 MiB; its CPU per session differed by less than the runs' own spread). The
    // read-back now looks each of the day's rows up, once per server start.
    "DROP INDEX sessions_started;
    CREATE INDEX sessions_started ON sessions (started_ms)",
];

/// A migration's SQL for `dialect`: SQLite keeps `/*SQLITE*/…/*END*/` parts (without the
/// markers) and gets `WITHOUT ROWID` for `/*WITHOUT_ROWID*/` (a rollup table clustered on its
/// key: a report reads it in key order without a lookup per row); PostgreSQL drops both.
pub fn for_dialect(sql: &str, dialect: Dialect) -> String {
    match dialect {
        Dialect::Sqlite => sql
            .replace("/*SQLITE*/", "")
            .replace("/*END*/", "")
            .replace("/*WITHOUT_ROWID*/", " WITHOUT ROWID"),
        Dialect::Postgres => {
            let mut out = String::with_capacity(sql.len());
            let mut rest = sql;
            while let Some(at) = rest.find("/*SQLITE*/") {
                out.push_str(&rest[..at]);
                rest = rest[at..].split_once("/*END*/").map_or("", |(_, r)| r);
            }
            out.push_str(rest);
            out.replace("/*WITHOUT_ROWID*/", "")
        }
    }
}

/// The `ledger_meta` key of the unique-listener backfill still to do: `"FROM_MS UNTIL_MS"`,
/// the sessions started in `[FROM_MS, UNTIL_MS)` (those written before version 2) not yet
/// counted into `audience_uniques`. The writer advances it a UTC day at a time and removes it
/// when done; a day is claimed by changing the value, so servers sharing the ledger never
/// count one twice.
pub const BACKFILL_KEY: &str = "uniques_backfill";

/// Counts the sessions started in `[$1, $2)` into `audience_uniques` as the writer would have:
/// each listener (stored address) once per hour and day, per mount and over all mounts, with
/// the path, country and player of its first session in the period.
pub const BACKFILL_UNIQUES: &str = "INSERT INTO audience_uniques
    (span_s, at_s, server, mount, path, country, player, listeners)
    SELECT span_s, at_s, server, mount, path, country, player, COUNT(*) FROM (
        SELECT span_s, at_s, server, mount, path, country, player,
            ROW_NUMBER() OVER (PARTITION BY span_s, at_s, server, mount, address
                ORDER BY started_ms, id) AS n
        FROM (
            SELECT 3600 AS span_s, (started_ms / 3600000) * 3600 AS at_s, server, mount, path,
                COALESCE(country, '') AS country, player, address, started_ms, id
                FROM sessions WHERE relay = 0 AND started_ms >= $1 AND started_ms < $2
            UNION ALL
            SELECT 3600, (started_ms / 3600000) * 3600, server, '', path, COALESCE(country, ''),
                player, address, started_ms, id
                FROM sessions WHERE relay = 0 AND started_ms >= $1 AND started_ms < $2
            UNION ALL
            SELECT 86400, (started_ms / 86400000) * 86400, server, mount, path,
                COALESCE(country, ''), player, address, started_ms, id
                FROM sessions WHERE relay = 0 AND started_ms >= $1 AND started_ms < $2
            UNION ALL
            SELECT 86400, (started_ms / 86400000) * 86400, server, '', path,
                COALESCE(country, ''), player, address, started_ms, id
                FROM sessions WHERE relay = 0 AND started_ms >= $1 AND started_ms < $2
        ) periods
    ) firsts WHERE n = 1
    GROUP BY span_s, at_s, server, mount, path, country, player
    ON CONFLICT (span_s, at_s, server, mount, path, country, player) DO UPDATE SET
    listeners = audience_uniques.listeners + excluded.listeners";

/// Brings `db` to the newest schema; returns the version it found (0 for a new database).
/// Each migration runs in a transaction that first takes the database's write lock (SQLite
/// `BEGIN IMMEDIATE`, a PostgreSQL advisory lock) and reads the version again, so servers
/// starting together on one ledger migrate it once.
///
/// Errors: [`DbError::NewerSchema`] for a database of a later build; the database's own.
pub fn migrate(db: &mut Db) -> Result<i64, DbError> {
    db.batch("CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")?;
    let known = MIGRATIONS.len() as i64;
    let mut first = None;
    loop {
        match db.dialect() {
            Dialect::Sqlite => db.batch("BEGIN IMMEDIATE")?,
            Dialect::Postgres => {
                db.batch("BEGIN")?;
                // Any constant both sides agree on: the ledger's migrations.
                db.batch("SELECT pg_advisory_xact_lock(2023112302)")?;
            }
        }
        let step = (|| {
            let found = db
                .query(
                    "SELECT value FROM ledger_meta WHERE key = $1",
                    &[Val::from("schema_version")],
                )?
                .first()
                .and_then(|r| r[0].text())
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            if found > known {
                return Err(DbError::NewerSchema { found, known });
            }
            first.get_or_insert(found);
            let Some(sql) = MIGRATIONS.get(found as usize) else {
                return Ok(false);
            };
            let sql = for_dialect(sql, db.dialect())
                .replace("/*NOW_MS*/", &super::message::now_ms().to_string());
            db.batch(&sql)?;
            db.exec(
                "INSERT INTO ledger_meta (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[
                    Val::from("schema_version"),
                    Val::from((found + 1).to_string()),
                ],
            )?;
            Ok(true)
        })();
        match step {
            Ok(more) => {
                db.batch("COMMIT")?;
                if !more {
                    break;
                }
            }
            Err(e) => {
                let _ = db.batch("ROLLBACK");
                return Err(e);
            }
        }
    }
    let found = first.unwrap_or(0);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_only_parts_are_kept_for_sqlite_and_dropped_for_postgresql() {
        let sql = "A;/*SQLITE*/B;/*END*/C/*WITHOUT_ROWID*/;/*SQLITE*/D/*END*/";
        assert_eq!(for_dialect(sql, Dialect::Sqlite), "A;B;C WITHOUT ROWID;D");
        assert_eq!(for_dialect(sql, Dialect::Postgres), "A;C;");
    }

    #[test]
    fn a_version_1_ledger_keeps_its_sessions_and_gets_its_unique_listeners_to_count() {
        let mut db = Db::Sqlite(
            rusqlite::Connection::open_in_memory().unwrap(),
            Default::default(),
        );
        db.batch(
            "CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT INTO ledger_meta VALUES ('schema_version', '1')",
        )
        .unwrap();
        db.batch(&for_dialect(MIGRATIONS[0], Dialect::Sqlite))
            .unwrap();
        db.batch(
            "INSERT INTO sessions (id, server, mount, path, relay, started_ms, ended_ms, player,
             address) VALUES (-5, 's', '/m', 'icy', 0, 1000, 2000, 'VLC', 'a'),
             (77, 's', '/m', 'icy', 0, 1500, NULL, 'VLC', 'a')",
        )
        .unwrap();
        assert_eq!(migrate(&mut db).unwrap(), 1);
        let rows = db
            .query("SELECT id, ended_ms FROM sessions ORDER BY id", &[])
            .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0][0].int(), rows[0][1].int()), (-5, 2000));
        assert_eq!(rows[1][1], Val::Null);
        let backfill = db
            .query(
                "SELECT value FROM ledger_meta WHERE key = $1",
                &[Val::from(BACKFILL_KEY)],
            )
            .unwrap();
        assert!(backfill[0][0].text().unwrap().starts_with("1000 "));
        // Migrating again finds the current version and does nothing.
        assert_eq!(migrate(&mut db).unwrap(), MIGRATIONS.len() as i64);
    }
}
