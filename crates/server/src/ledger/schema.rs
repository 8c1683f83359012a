//! The ledger's tables and their versioned migrations. Version `n` of the schema is reached by
//! running [`MIGRATIONS`]`[0..n]` in order, each in its own transaction, and the version is
//! recorded in `ledger_meta`; a database written by a later build (a higher version) is refused
//! rather than misread. The same SQL serves SQLite and PostgreSQL.
//!
//! Tables:
//! - `sessions`: one row per listening session on any path (ICY, HLS, WHEP), written when it
//!   starts (`ended_ms` NULL) and completed when it ends. A relay or edge pulling a mount has
//!   `relay = 1` and is left out of every audience figure.
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
        // it in key order without a lookup per row); PostgreSQL has no such clause.
        let sql = match db.dialect() {
            Dialect::Sqlite => sql.replace("/*WITHOUT_ROWID*/", " WITHOUT ROWID"),
            Dialect::Postgres => sql.replace("/*WITHOUT_ROWID*/", ""),
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
