//! The ledger's two databases behind one small interface: SQLite (`rusqlite`, the embedded
//! default) and PostgreSQL (the synchronous `postgres` client, for a ledger shared by a
//! cluster). Statements are written once, in the SQL both understand: `$1`, `$2`… placeholders
//! (rewritten `?1`, `?2`… for SQLite, which numbers `$N` by first appearance), `BIGINT`, `DOUBLE PRECISION`, `TEXT`,
//! `INSERT … ON CONFLICT … DO UPDATE`, and explicit casts on aggregates (PostgreSQL's `SUM` of a
//! `BIGINT` is a `NUMERIC`). Values cross as [`Val`].

use std::collections::HashMap;
use std::path::Path;

use crate::config::LedgerDatabase;

/// Errors of the ledger's database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite failed (open, statement, constraint).
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed (connect, statement, constraint).
    #[error("postgres: {0}")]
    Postgres(#[from] postgres::Error),
    /// The SQLite file's directory cannot be created.
    #[error("{path}: {source}")]
    Dir {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The schema is newer than this build knows (a later Throng wrote it).
    #[error("ledger schema version {found} is newer than this build's {known}")]
    NewerSchema {
        /// Version in the database.
        found: i64,
        /// Newest version this build knows.
        known: i64,
    },
}

/// One value in or out of a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// An integer (SQLite INTEGER, PostgreSQL BIGINT or INTEGER).
    Int(i64),
    /// A float (REAL, DOUBLE PRECISION).
    Float(f64),
    /// Text.
    Text(String),
    /// NULL.
    Null,
}

impl Val {
    /// The integer, or 0 (NULL, text); floats are truncated.
    pub fn int(&self) -> i64 {
        match self {
            Val::Int(i) => *i,
            Val::Float(f) => *f as i64,
            _ => 0,
        }
    }

    /// The float, or 0.0 (NULL, text).
    pub fn float(&self) -> f64 {
        match self {
            Val::Int(i) => *i as f64,
            Val::Float(f) => *f,
            _ => 0.0,
        }
    }

    /// The text, if any (numbers are formatted).
    pub fn text(&self) -> Option<String> {
        match self {
            Val::Text(s) => Some(s.clone()),
            Val::Int(i) => Some(i.to_string()),
            Val::Float(f) => Some(f.to_string()),
            Val::Null => None,
        }
    }

    /// The integer, or `None` for NULL.
    pub fn opt_int(&self) -> Option<i64> {
        match self {
            Val::Null => None,
            v => Some(v.int()),
        }
    }
}

impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::Int(v)
    }
}
impl From<f64> for Val {
    fn from(v: f64) -> Val {
        Val::Float(v)
    }
}
impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::Text(v.to_owned())
    }
}
impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::Text(v)
    }
}
impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Val {
        v.map(Into::into).unwrap_or(Val::Null)
    }
}

/// The ledger's statements as rewritten for SQLite, by their `$N` text (foldhash: the writer
/// looks one up per statement it runs).
pub type SqliteSql = HashMap<String, String, foldhash::fast::RandomState>;

/// The SQLite text of `sql`, rewritten on first use.
fn rewritten<'a>(cache: &'a mut SqliteSql, sql: &str) -> &'a str {
    if !cache.contains_key(sql) {
        cache.insert(sql.to_owned(), sqlite_sql(sql));
    }
    &cache[sql]
}

/// Which SQL dialect a connection speaks (for the few statements that differ: DDL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite 3.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

/// An open ledger database.
pub enum Db {
    /// An SQLite file in WAL mode, with its statements' SQL as rewritten for SQLite (by the
    /// ledger's `$N` text, so a statement is rewritten once, not per call).
    Sqlite(rusqlite::Connection, SqliteSql),
    /// A PostgreSQL connection.
    Postgres(Box<postgres::Client>),
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Db({:?})", self.dialect())
    }
}

/// How long connecting to PostgreSQL may take.
pub const PG_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long one PostgreSQL statement may run (a report's query, a batch's statement).
pub const PG_STATEMENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Idle time before TCP keepalives probe a PostgreSQL connection.
pub const PG_KEEPALIVE_IDLE: std::time::Duration = std::time::Duration::from_secs(30);

impl Db {
    /// Opens (and for SQLite creates, with its directory) the database `db`; SQLite gets WAL
    /// journaling, `synchronous = NORMAL` (a committed batch survives a process crash; WAL's
    /// documented trade-off is the last commits on power loss) and a 5 s busy timeout so a
    /// report reading the file never fails a write.
    ///
    /// Errors: [`DbError`] when the file or server cannot be opened.
    pub fn open(db: &LedgerDatabase) -> Result<Db, DbError> {
        match db {
            LedgerDatabase::Sqlite(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|source| DbError::Dir {
                        path: dir.display().to_string(),
                        source,
                    })?;
                }
                Ok(Db::Sqlite(open_sqlite(path)?, SqliteSql::default()))
            }
            LedgerDatabase::Postgres(url) => {
                // A server that does not answer is an error within these times, never a
                // writer or a report that hangs: connecting within PG_CONNECT_TIMEOUT, each
                // statement within PG_STATEMENT_TIMEOUT (`statement_timeout`, PostgreSQL
                // docs "Client Connection Defaults"), a dead peer found by TCP keepalives.
                let mut config: postgres::Config = url.parse()?;
                config
                    .connect_timeout(PG_CONNECT_TIMEOUT)
                    .keepalives(true)
                    .keepalives_idle(PG_KEEPALIVE_IDLE);
                let mut client = config.connect(postgres::NoTls)?;
                client.batch_execute(&format!(
                    "SET statement_timeout = {}",
                    PG_STATEMENT_TIMEOUT.as_millis()
                ))?;
                Ok(Db::Postgres(Box::new(client)))
            }
        }
    }

    /// Whether the connection is gone for good (a PostgreSQL server that restarted or closed
    /// it): the writer then opens a new one. An SQLite file never is.
    pub fn is_broken(&self) -> bool {
        match self {
            Db::Sqlite(..) => false,
            Db::Postgres(c) => c.is_closed(),
        }
    }

    /// The dialect of this connection.
    pub fn dialect(&self) -> Dialect {
        match self {
            Db::Sqlite(..) => Dialect::Sqlite,
            Db::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs statements with no parameters (DDL, `BEGIN`, `COMMIT`), separated by `;`.
    ///
    /// Errors: the database's.
    pub fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        match self {
            Db::Sqlite(c, _) => c.execute_batch(sql)?,
            Db::Postgres(c) => c.batch_execute(sql)?,
        }
        Ok(())
    }

    /// Runs one statement with `params`; returns the rows it changed.
    ///
    /// Errors: the database's.
    pub fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64, DbError> {
        match self {
            Db::Sqlite(c, cache) => {
                let mut st = c.prepare_cached(rewritten(cache, sql))?;
                let n = st.execute(rusqlite::params_from_iter(params))?;
                Ok(n as u64)
            }
            Db::Postgres(c) => {
                let boxed = pg_params(params);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|b| b.as_ref()).collect();
                Ok(c.execute(sql, &refs)?)
            }
        }
    }

    /// Runs a query with `params`; returns its rows as values.
    ///
    /// Errors: the database's.
    pub fn query(&mut self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, DbError> {
        let mut out = Vec::new();
        self.scan(sql, params, |r| out.push(r.to_vec()))?;
        Ok(out)
    }

    /// Runs a query with `params` and hands each row to `each` as it is read (SQLite streams
    /// them; a report over a large table then needs no memory per row).
    ///
    /// Errors: the database's.
    pub fn scan(
        &mut self,
        sql: &str,
        params: &[Val],
        mut each: impl FnMut(&[Val]),
    ) -> Result<(), DbError> {
        match self {
            Db::Sqlite(c, cache) => {
                let mut st = c.prepare_cached(rewritten(cache, sql))?;
                let n = st.column_count();
                let mut rows = st.query(rusqlite::params_from_iter(params))?;
                let mut r = Vec::with_capacity(n);
                while let Some(row) = rows.next()? {
                    r.clear();
                    for i in 0..n {
                        r.push(match row.get_ref(i)? {
                            rusqlite::types::ValueRef::Null => Val::Null,
                            rusqlite::types::ValueRef::Integer(v) => Val::Int(v),
                            rusqlite::types::ValueRef::Real(v) => Val::Float(v),
                            rusqlite::types::ValueRef::Text(t) => {
                                Val::Text(String::from_utf8_lossy(t).into_owned())
                            }
                            rusqlite::types::ValueRef::Blob(b) => {
                                Val::Text(String::from_utf8_lossy(b).into_owned())
                            }
                        });
                    }
                    each(&r);
                }
                Ok(())
            }
            Db::Postgres(c) => {
                let boxed = pg_params(params);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|b| b.as_ref()).collect();
                let rows = c.query(sql, &refs)?;
                let mut r = Vec::new();
                for row in rows {
                    r.clear();
                    for (i, col) in row.columns().iter().enumerate() {
                        use postgres::types::Type;
                        let t = col.type_();
                        let v = if *t == Type::INT8 {
                            row.try_get::<_, Option<i64>>(i)?.map(Val::Int)
                        } else if *t == Type::INT4 {
                            row.try_get::<_, Option<i32>>(i)?
                                .map(|v| Val::Int(v.into()))
                        } else if *t == Type::INT2 {
                            row.try_get::<_, Option<i16>>(i)?
                                .map(|v| Val::Int(v.into()))
                        } else if *t == Type::FLOAT8 {
                            row.try_get::<_, Option<f64>>(i)?.map(Val::Float)
                        } else if *t == Type::FLOAT4 {
                            row.try_get::<_, Option<f32>>(i)?
                                .map(|v| Val::Float(v.into()))
                        } else if *t == Type::BOOL {
                            row.try_get::<_, Option<bool>>(i)?
                                .map(|v| Val::Int(v.into()))
                        } else {
                            row.try_get::<_, Option<String>>(i)?.map(Val::Text)
                        };
                        r.push(v.unwrap_or(Val::Null));
                    }
                    each(&r);
                }
                Ok(())
            }
        }
    }
}

/// `sql` with its `$N` placeholders written `?N` for SQLite: SQLite numbers `$name`
/// parameters by first appearance, not by the digits, so `… = $2 WHERE id = $1` would bind
/// the wrong values; `?N` is bound to the N-th value. (The ledger's SQL has no `$` in
/// string literals.)
fn sqlite_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether the SQLite file at `path` holds an audience ledger (its `ledger_meta` table),
/// read without writing a byte: a read-only connection, no pragma (`false` for a missing,
/// empty or foreign file).
pub fn sqlite_holds_ledger(path: &Path) -> bool {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let Ok(c) = rusqlite::Connection::open_with_flags(path, flags) else {
        return false;
    };
    c.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger_meta'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .is_ok_and(|n| n == 1)
}

/// Opens an SQLite file with the ledger's settings.
fn open_sqlite(path: &Path) -> Result<rusqlite::Connection, rusqlite::Error> {
    let c = rusqlite::Connection::open(path)?;
    c.busy_timeout(std::time::Duration::from_secs(5))?;
    c.pragma_update(None, "journal_mode", "WAL")?;
    c.pragma_update(None, "synchronous", "NORMAL")?;
    // Checkpoint every 8,192 pages (32 MiB of WAL) instead of SQLite's 1,000: the pages a
    // batch rewrites each time (the tails of the tables, the rollup, the open sessions) are
    // copied back and synced once per checkpoint, so fewer checkpoints cost less per session.
    c.pragma_update(None, "wal_autocheckpoint", 8192)?;
    // A 32 MiB page cache (SQLite's default is 2 MiB): the open sessions' rows and the
    // indexes' hot pages stay in memory instead of being read back for every end.
    c.pragma_update(None, "cache_size", -32_768)?;
    // Statement journals (a multi-row statement's undo, e.g. the fold's `UPDATE … FROM`) in
    // memory rather than in a temporary file written page by page.
    c.pragma_update(None, "temp_store", "MEMORY")?;
    c.set_prepared_statement_cache_capacity(64);
    Ok(c)
}

/// A value bound to an SQLite statement by reference (no copy of its text).
impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ValueRef;
        Ok(rusqlite::types::ToSqlOutput::Borrowed(match self {
            Val::Int(i) => ValueRef::Integer(*i),
            Val::Float(f) => ValueRef::Real(*f),
            Val::Text(s) => ValueRef::Text(s.as_bytes()),
            Val::Null => ValueRef::Null,
        }))
    }
}

fn pg_params(params: &[Val]) -> Vec<Box<dyn postgres::types::ToSql + Sync>> {
    params
        .iter()
        .map(|v| -> Box<dyn postgres::types::ToSql + Sync> {
            match v {
                Val::Int(i) => Box::new(*i),
                Val::Float(f) => Box::new(*f),
                Val::Text(s) => Box::new(s.clone()),
                Val::Null => Box::new(Option::<String>::None),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_keep_their_numbers_on_sqlite() {
        assert_eq!(
            sqlite_sql("UPDATE t SET a = $2 WHERE id = $1 AND b = $12"),
            "UPDATE t SET a = ?2 WHERE id = ?1 AND b = ?12"
        );
        let mut db = Db::Sqlite(
            rusqlite::Connection::open_in_memory().unwrap(),
            SqliteSql::default(),
        );
        db.batch("CREATE TABLE t (id BIGINT, a TEXT)").unwrap();
        db.exec(
            "INSERT INTO t (id, a) VALUES ($1, $2)",
            &[Val::Int(1), Val::from("x")],
        )
        .unwrap();
        db.exec(
            "UPDATE t SET a = $2 WHERE id = $1",
            &[Val::Int(1), Val::from("y")],
        )
        .unwrap();
        let rows = db
            .query("SELECT a FROM t WHERE id = $1", &[Val::Int(1)])
            .unwrap();
        assert_eq!(rows, vec![vec![Val::from("y")]]);
    }
}
