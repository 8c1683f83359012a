//! Path resolution of an `icecast.xml` import, [`Resolver`]: Icecast resolves relative paths
//! against its working directory and, with `<chroot>1</chroot>`, every path inside
//! `<basedir>`; Throng cannot know that working directory, so relative paths resolve against
//! the XML file's directory instead. This file imports no other file of the import.

use std::path::PathBuf;

/// Turns paths of the XML into paths of this machine: relative ones against the XML file's
/// directory, and every one inside `basedir` when Icecast would chroot there.
#[derive(Debug, Clone)]
pub(super) struct Resolver {
    /// The XML file's directory.
    pub base: PathBuf,
    /// `<basedir>` (resolved against `base`) when Icecast would chroot into it.
    pub chroot: Option<PathBuf>,
}

impl Resolver {
    /// The path on this machine of `raw`, a path as written in the XML.
    pub fn path(&self, raw: &str) -> PathBuf {
        match &self.chroot {
            Some(root) => root.join(raw.trim_start_matches('/')),
            None => self.base.join(raw),
        }
    }
}
