//! Countries of client addresses, from an operator-provided MaxMind-format database
//! (GeoLite2-Country, GeoIP2-Country or DB-IP Lite Country `.mmdb`), read with the `maxminddb`
//! crate. Without a database, or for an address it does not know, the country is unknown.

use std::net::IpAddr;
use std::path::Path;

/// An opened country database.
pub struct Countries {
    reader: maxminddb::Reader<Vec<u8>>,
}

impl std::fmt::Debug for Countries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Countries")
    }
}

impl Countries {
    /// Opens `path`.
    ///
    /// Errors: the file cannot be read or is not a MaxMind DB, as `maxminddb` words it.
    pub fn open(path: &Path) -> Result<Countries, String> {
        maxminddb::Reader::open_readfile(path)
            .map(|reader| Countries { reader })
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The ISO 3166-1 alpha-2 code of `ip`'s country (`country.iso_code`, as GeoLite2 and
    /// DB-IP Lite write it), if the database knows it.
    pub fn country(&self, ip: IpAddr) -> Option<String> {
        let found: Option<maxminddb::geoip2::Country> =
            self.reader.lookup(ip.to_canonical()).ok().flatten();
        found
            .and_then(|c| c.country)
            .and_then(|c| c.iso_code)
            .filter(|code| code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic()))
            .map(|code| code.to_ascii_uppercase())
    }
}
