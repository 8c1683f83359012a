//! The result of an `icecast.xml` import: [`Import`], the equivalent configuration with the
//! list of what it leaves out, each entry an [`Unsupported`] element or attribute with its path,
//! the reason ([`UnsupportedKind`]) and a note for the operator. This file imports no other file
//! of the import.

use std::fmt;

use crate::config::Config;

/// The result of an import: the equivalent configuration, and what it leaves out.
#[derive(Debug, Clone)]
pub struct Import {
    /// The configuration, validated. Passwords absent from the XML stay unset (generated at
    /// start-up, as always in Throng).
    pub config: Config,
    /// Every element or attribute not carried over: in document order, then those that
    /// depend on the whole file (top-level port, basedir, master, shoutcast settings). Those
    /// of kind [`UnsupportedKind::Accepted`] are no warning ([`Unsupported::warns`]).
    pub unsupported: Vec<Unsupported>,
}

/// One element (or attribute) of the XML that the imported configuration does not carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// Slash-separated path from the root, e.g. `icecast/security/changeowner`; an attribute ends
    /// in `/@name`, an `<option>` in `[@name=...]`.
    pub path: String,
    /// The element or attribute name (the last segment of `path`).
    pub name: String,
    /// What it belongs to, e.g. `mount /live.mp3`, when the path alone does not tell.
    pub context: Option<String>,
    /// Why it is left out.
    pub kind: UnsupportedKind,
    /// What it does in Icecast, or what to use in Throng instead.
    pub note: String,
}

/// Why an element is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsupportedKind {
    /// Icecast 2.4.4 acts on it; Throng has no equivalent.
    NotSupported,
    /// Icecast 2.4.4 does nothing with it either (parsed but unused, or discarded as invalid).
    IgnoredByIcecast,
    /// Not an Icecast 2.4.4 element (a typo, or another server's extension); Icecast ignores it.
    Unknown,
    /// Accepted without a warning: it has no meaning in Throng, or Throng already does what it
    /// asks (e.g. `<charset>UTF8</charset>`, `<adminroot>`); listed for the record only.
    Accepted,
}

impl Unsupported {
    /// Whether the operator is warned about it (every kind but [`UnsupportedKind::Accepted`]).
    pub fn warns(&self) -> bool {
        self.kind != UnsupportedKind::Accepted
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(c) = &self.context {
            write!(f, " ({c})")?;
        }
        let kind = match self.kind {
            UnsupportedKind::NotSupported => "not supported",
            UnsupportedKind::IgnoredByIcecast => "ignored by Icecast too",
            UnsupportedKind::Unknown => "unknown to Icecast 2.4.4",
            UnsupportedKind::Accepted => "accepted",
        };
        write!(f, ": {kind}: {}", self.note)
    }
}
