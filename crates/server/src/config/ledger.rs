//! `[ledger]`: where the audience ledger (`crate::ledger`) keeps every listening session and
//! title change, how it stores client addresses, where countries come from, and how long rows
//! are kept.
//!
//! ```toml
//! [ledger]
//! database = "sqlite:///var/lib/throng/ledger.db"   # or "postgres://user:pw@host/db", or "off"
//! address = "hashed"          # "full" | "truncated" (/24, /48) | "hashed" (salt rotated daily)
//! geoip = "/usr/share/GeoIP/GeoLite2-Country.mmdb"  # MaxMind-format country database
//! retention-days = 400        # 0 keeps rows for ever
//! server = "edge-1"           # this server's name in a shared ledger (default HOST:PORT)
//! playlistlog = "/var/log/throng/playlist.log"      # Icecast's playlistlog file, optional
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How a session's client address is stored (`[ledger] address`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AddressPolicy {
    /// The address as seen (`192.0.2.7`).
    Full,
    /// The network only: IPv4 cut to /24 (`192.0.2.0/24`), IPv6 to /48.
    Truncated,
    /// A keyed hash (SHA-256 of a salt and the address, 16 hex digits) with a salt drawn at
    /// random for each UTC day and shared through the database, so a listener is the same
    /// within a day on every server of a cluster and cannot be followed across days. The
    /// default: the address itself is never stored.
    #[default]
    Hashed,
}

impl AddressPolicy {
    /// The policy as written in the configuration: `full`, `truncated`, `hashed`.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressPolicy::Full => "full",
            AddressPolicy::Truncated => "truncated",
            AddressPolicy::Hashed => "hashed",
        }
    }
}

/// `[ledger]`: the audience ledger's database and policies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct LedgerConfig {
    /// `sqlite:///abs/path.db`, `sqlite://relative.db`, `postgres://…` (or `postgresql://…`),
    /// or `off`. Unset: `throng serve` uses `sqlite://STATE_DIR/ledger.db` (see
    /// `config/source.rs`); a configuration built in code has no ledger.
    pub database: Option<String>,
    /// How client addresses are stored (default `hashed`).
    pub address: AddressPolicy,
    /// A MaxMind-format country database (GeoLite2-Country or DB-IP Lite `.mmdb`); without
    /// one every country is unknown.
    pub geoip: Option<PathBuf>,
    /// Days sessions and plays are kept (0, the default, keeps them for ever); older rows are
    /// deleted once an hour.
    pub retention_days: u32,
    /// This server's name in the ledger (default the machine's host name and the port of the
    /// first listen address, `HOST:PORT`).
    pub server: Option<String>,
    /// Also append title changes to this file in Icecast's `playlistlog` format
    /// (`time|mount|listeners|title`, as Icecast 2.4.4 `logging.c` `logging_playlist`).
    pub playlistlog: Option<PathBuf>,
    /// `NAME_OF_SERVICE` of the SoundExchange report of use (default `[station] name`, else
    /// `server-id`); a report's `service` overrides it. The PPL file has no service column.
    pub service: Option<String>,
    /// `TRANSMISSION_CATEGORY` of the SoundExchange report of use (SoundExchange's codes,
    /// e.g. `B` for a non-subscription webcaster; empty unless set); a report's `category`
    /// overrides it.
    pub category: Option<String>,
}

/// Where the ledger is stored, parsed from [`LedgerConfig::database`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerDatabase {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection string (`postgres://…`, as the `postgres` crate takes it).
    Postgres(String),
}

impl LedgerDatabase {
    /// Parses a `database` value; `None` for `off` (and the empty string).
    ///
    /// Errors: a message naming what was expected, for any other scheme.
    pub fn parse(url: &str) -> Result<Option<LedgerDatabase>, String> {
        let url = url.trim();
        if url.is_empty() || url.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err("ledger.database: sqlite:// needs a file path".into());
            }
            return Ok(Some(LedgerDatabase::Sqlite(PathBuf::from(path))));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Some(LedgerDatabase::Postgres(url.to_owned())));
        }
        Err(format!(
            "ledger.database: expected sqlite:///path, postgres://… or off, got {url:?}"
        ))
    }

    /// The database for logs: the SQLite path, or the PostgreSQL URL without its password.
    pub fn display(&self) -> String {
        match self {
            LedgerDatabase::Sqlite(p) => format!("sqlite://{}", p.display()),
            LedgerDatabase::Postgres(url) => redact_password(url),
        }
    }
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((auth, host)) = rest.split_once('@') else {
        return url.to_owned();
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls_parse() {
        assert_eq!(LedgerDatabase::parse("off"), Ok(None));
        assert_eq!(
            LedgerDatabase::parse("sqlite:///var/lib/throng/ledger.db"),
            Ok(Some(LedgerDatabase::Sqlite(
                "/var/lib/throng/ledger.db".into()
            )))
        );
        assert_eq!(
            LedgerDatabase::parse("postgresql://u:p@h/db"),
            Ok(Some(LedgerDatabase::Postgres(
                "postgresql://u:p@h/db".into()
            )))
        );
        assert!(LedgerDatabase::parse("mysql://x").is_err());
        assert!(LedgerDatabase::parse("sqlite://").is_err());
    }

    #[test]
    fn passwords_are_not_displayed() {
        let db = LedgerDatabase::Postgres("postgres://throng:s3cret@db.example/ledger".into());
        assert_eq!(db.display(), "postgres://throng:***@db.example/ledger");
    }
}
