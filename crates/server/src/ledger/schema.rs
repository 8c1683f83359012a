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
    // Version 2: a session costs the writer fewer pages. Ids are time-ordered
    // (`super::new_session_id`), and on SQLite the id is the row id itself (`INTEGER PRIMARY
    // KEY`: a start appends to the table, an end finds its row without a second index); on
    // PostgreSQL the key is (server, id), so servers sharing the ledger never collide. The
    // index of ends holds ended sessions only and the index of open sessions open ones only
    // (partial indexes). Ends are appended to `session_ends` and folded in once a minute.
    "CREATE TABLE sessions_v2 (
        id /*SESSION_ID*/,
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
        country TEXT/*SESSION_KEY*/
    );
    INSERT INTO sessions_v2 SELECT id, server, mount, path, relay, started_ms, ended_ms,
        seconds, bytes, agent, player, referer, username, end_reason, address, country
        FROM sessions;
    DROP TABLE sessions;
    ALTER TABLE sessions_v2 RENAME TO sessions;
    CREATE INDEX sessions_started ON sessions (started_ms, relay, mount, address);
    CREATE INDEX sessions_ended ON sessions (ended_ms) WHERE ended_ms IS NOT NULL;
    CREATE INDEX sessions_open ON sessions (started_ms) WHERE ended_ms IS NULL;
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
    INSERT INTO audience_uniques
        SELECT span_s, at_s, server, mount, path, country, player, COUNT(DISTINCT address)
        FROM (
            SELECT 3600 AS span_s, (started_ms / 3600000) * 3600 AS at_s, server, mount, path,
                COALESCE(country, '') AS country, player, address
                FROM sessions WHERE relay = 0
            UNION ALL
            SELECT 3600, (started_ms / 3600000) * 3600, server, '', path,
                COALESCE(country, ''), player, address FROM sessions WHERE relay = 0
            UNION ALL
            SELECT 86400, (started_ms / 86400000) * 86400, server, mount, path,
                COALESCE(country, ''), player, address FROM sessions WHERE relay = 0
            UNION ALL
            SELECT 86400, (started_ms / 86400000) * 86400, server, '', path,
                COALESCE(country, ''), player, address FROM sessions WHERE relay = 0
        ) earlier
        GROUP BY span_s, at_s, server, mount, path, country, player",
];

/// Brings `db` to the newest schema; returns the version it found (0 for a new database).
///
/// Errors: [`DbError::NewerSchema`] for a database of a later build; the database's own.
pub fn migrate(db: &mut Db) -> Result<i64, DbError> {
    db.batch("CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")?;
    let found = db
        .query(
            "SELECT value FROM ledger_meta WHERE key = $1",
            &[Val::from("schema_version")],
        )?
        .first()
        .and_then(|r| r[0].text())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    let known = MIGRATIONS.len() as i64;
    if found > known {
        return Err(DbError::NewerSchema { found, known });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        // SQLite keeps a rollup table clustered on its key (`WITHOUT ROWID`: a report reads
        // it in key order without a lookup per row); PostgreSQL has no such clause. A
        // session's id is SQLite's row id; PostgreSQL keys sessions by (server, id).
        let sql = match db.dialect() {
            Dialect::Sqlite => sql
                .replace("/*WITHOUT_ROWID*/", " WITHOUT ROWID")
                .replace("/*SESSION_ID*/", "INTEGER PRIMARY KEY")
                .replace("/*SESSION_KEY*/", ""),
            Dialect::Postgres => sql
                .replace("/*WITHOUT_ROWID*/", "")
                .replace("/*SESSION_ID*/", "BIGINT NOT NULL")
                .replace("/*SESSION_KEY*/", ",\n        PRIMARY KEY (server, id)"),
        };
        db.batch("BEGIN")?;
        let applied = db.batch(&sql).and_then(|()| {
            db.exec(
                "INSERT INTO ledger_meta (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[Val::from("schema_version"), Val::from((i + 1).to_string())],
            )
        });
        match applied {
            Ok(_) => db.batch("COMMIT")?,
            Err(e) => {
                let _ = db.batch("ROLLBACK");
                return Err(e);
            }
        }
    }
    Ok(found)
}
