//! The error of an `icecast.xml` import, [`IcecastXmlError`]: the file cannot be read, is not
//! well-formed XML, is not an Icecast configuration, holds a value Icecast would not accept
//! either, or yields a configuration that fails validation. Every file of the import returns it;
//! this file imports no other file of the import.

use std::path::PathBuf;

use thiserror::Error;

use crate::config::ConfigError;

/// Errors importing an `icecast.xml`.
#[derive(Debug, Error)]
pub enum IcecastXmlError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not well-formed XML (the message gives the line and column).
    #[error("malformed XML: {0}")]
    Xml(String),
    /// The document has no element at all.
    #[error("the document has no root element")]
    NoRoot,
    /// The root element is not `<icecast>` (Icecast refuses such a file too).
    #[error("the root element is <{0}>, not <icecast>")]
    NotIcecast(String),
    /// A value cannot be used, e.g. a number that is not one.
    #[error("{path}: {value:?} is not {expected}")]
    BadValue {
        /// Element path, e.g. `icecast/limits/clients`.
        path: String,
        /// The value as written.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// No listen socket is left (TLS sockets are not supported).
    #[error("no usable <listen-socket>: Throng would not listen anywhere")]
    NoListenSocket,
    /// The resulting configuration is invalid (e.g. a queue-size below 1024 bytes).
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}
