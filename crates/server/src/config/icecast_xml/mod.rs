//! Import of an Icecast 2.4.4 `icecast.xml` into a Throng [`Config`](crate::config::Config)
//! (`throng serve --icecast-config` and `throng import-icecast`). The file is read the way Icecast
//! 2.4.4 `cfgfile.c` reads it: elements in document order (a later element overrides an earlier
//! one), the defaults of `_set_defaults` for everything absent (port 8000, 256 clients, 16 sources,
//! queue-size 512000 bytes, burst-size 65536 bytes, header-timeout 15 s, source-timeout 10 s, logs
//! in `/usr/local/icecast/logs`), `type="default"` mounts merged into every normal mount
//! (`merge_mounts`) and also kept as a last wildcard mount for mounts without their own
//! (`config_find_mount`). Relative paths resolve against the XML file's directory (Icecast uses its
//! working directory, which Throng cannot know), or inside `<basedir>` when `<chroot>` is on; log
//! names resolve inside `<logdir>` and intros inside `<webroot>`, as Icecast does.
//!
//! Nothing is dropped silently: every element Throng does not carry over is listed in
//! [`Import::unsupported`] with its path (`icecast/security/changeowner`) and why.
//!
//! Files: this one holds the entry points and re-exports the public types; `error.rs`,
//! `report.rs` ([`Import`], [`Unsupported`]), `resolver.rs`, `socket.rs`, `raw_mount.rs` and
//! `tree.rs` are leaves; `importer.rs` holds the import state, which `document.rs` (the
//! `<icecast>` root and the finishing pass), `sections.rs`, `listen.rs`, `relays.rs` and
//! `mounts.rs` extend. Apart from the unit tests, no file imports from this one, and the
//! imports among these files form no cycle (checked by `scripts/check-layers.py`).

mod document;
mod error;
mod importer;
mod listen;
mod mounts;
mod raw_mount;
mod relays;
mod report;
mod resolver;
mod sections;
mod socket;
mod tree;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use error::IcecastXmlError;
use importer::Importer;
pub use report::{Import, Unsupported, UnsupportedKind};

/// Reads and imports the file at `path`; relative paths inside resolve against its directory.
///
/// Errors: [`IcecastXmlError::Read`], then as [`parse`].
pub fn from_file(path: &Path) -> Result<Import, IcecastXmlError> {
    let text = std::fs::read_to_string(path).map_err(|source| IcecastXmlError::Read {
        path: path.to_owned(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    parse(&text, &dir)
}

/// Imports the text of an `icecast.xml` (pure: no file is touched). `base_dir` is the
/// directory relative paths resolve against (the XML file's own).
///
/// Errors: malformed XML, a root other than `<icecast>`, a value that is not a number where
/// Icecast expects one, no usable listen socket, or a configuration that fails
/// [`Config::validate`](crate::config::Config::validate).
pub fn parse(xml: &str, base_dir: &Path) -> Result<Import, IcecastXmlError> {
    let root = tree::parse(xml)?;
    if root.name != "icecast" {
        return Err(IcecastXmlError::NotIcecast(root.name));
    }
    let mut imp = Importer::new(base_dir);
    imp.root(&root)?;
    let mut import = imp.finish()?;
    import.config.station = import.config.station_from_mounts();
    Ok(import)
}
