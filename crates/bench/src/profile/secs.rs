//! Durations as the bench writes them: `250ms`, `5s`, `2m`, `1h` or a plain number of seconds
//! (flags and scenario files alike).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// A duration in seconds, parsed from `250ms`, `5s`, `2m`, `1h` or a plain number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(into = "f64")]
pub struct Secs(pub f64);

/// A duration string that could not be parsed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("bad duration {0:?} (expected e.g. 500ms, 30s, 2m or a number of seconds)")]
pub struct BadDuration(pub String);

impl FromStr for Secs {
    type Err = BadDuration;
    fn from_str(s: &str) -> Result<Secs, BadDuration> {
        let t = s.trim();
        let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
            (n, 0.001)
        } else if let Some(n) = t.strip_suffix('s') {
            (n, 1.0)
        } else if let Some(n) = t.strip_suffix('m') {
            (n, 60.0)
        } else if let Some(n) = t.strip_suffix('h') {
            (n, 3600.0)
        } else {
            (t, 1.0)
        };
        match num.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Secs(v * mult)),
            _ => Err(BadDuration(s.to_owned())),
        }
    }
}

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}

impl From<Secs> for f64 {
    fn from(s: Secs) -> f64 {
        s.0
    }
}

impl<'de> Deserialize<'de> for Secs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Secs, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Num(v) if v >= 0.0 => Ok(Secs(v)),
            Raw::Num(v) => Err(serde::de::Error::custom(format!("negative duration {v}"))),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}
