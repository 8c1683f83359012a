//! The stream description a source client announces in `ice-*`, `icy-*` and `x-audiocast-*`
//! headers, read as Icecast 2.4.4 `source.c:source_apply_mount` does: for each field the first
//! header present wins, and missing fields take Icecast's defaults.

use crate::http::find_header;

/// Stream description of one source, from its request headers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceInfo {
    /// Stream name; Icecast's default is "Unspecified name".
    pub name: String,
    /// Stream description; default "Unspecified description".
    pub description: String,
    /// Station URL, if any.
    pub url: Option<String>,
    /// Genre; default "various".
    pub genre: String,
    /// Nominal bitrate in kbit/s as announced (`ice-bitrate`/`icy-br`, or `bitrate=` in
    /// `ice-audio-info`), kept as text as Icecast does.
    pub bitrate: Option<String>,
    /// Whether the stream asked to be listed in directories (`ice-public: 1`).
    pub public: bool,
    /// `ice-audio-info` pairs (`bitrate`, `samplerate`, `channels`, ...), URL-decoded.
    pub audio_info: Vec<(String, String)>,
    /// The raw `ice-audio-info` value, if any.
    pub audio_info_raw: Option<String>,
    /// The `User-Agent` of the source client.
    pub user_agent: Option<String>,
}

fn first_of(headers: &[(String, String)], names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|n| find_header(headers, n))
        .map(str::to_owned)
}

impl SourceInfo {
    /// Reads the description from a source's request headers (Icecast 2.4.4 header order).
    pub fn from_headers(headers: &[(String, String)]) -> SourceInfo {
        let audio_info_raw = find_header(headers, "ice-audio-info").map(str::to_owned);
        let audio_info: Vec<(String, String)> = audio_info_raw
            .as_deref()
            .map(|v| {
                v.split(';')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| {
                        let dec = |s: &str| {
                            percent_encoding::percent_decode_str(s.trim())
                                .decode_utf8_lossy()
                                .into_owned()
                        };
                        (dec(k), dec(v))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let bitrate =
            first_of(headers, &["ice-bitrate", "icy-br", "x-audiocast-bitrate"]).or_else(|| {
                audio_info
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("bitrate") || k == "ice-bitrate")
                    .map(|(_, v)| v.clone())
            });
        let public = first_of(
            headers,
            &["ice-public", "icy-pub", "x-audiocast-public", "icy-public"],
        )
        .map(|v| v.trim() == "1" || v.trim().eq_ignore_ascii_case("true"))
        .unwrap_or(false);
        SourceInfo {
            name: first_of(headers, &["ice-name", "icy-name", "x-audiocast-name"])
                .unwrap_or_else(|| "Unspecified name".to_owned()),
            description: first_of(
                headers,
                &[
                    "ice-description",
                    "icy-description",
                    "x-audiocast-description",
                ],
            )
            .unwrap_or_else(|| "Unspecified description".to_owned()),
            url: first_of(headers, &["ice-url", "icy-url", "x-audiocast-url"]),
            genre: first_of(headers, &["ice-genre", "icy-genre", "x-audiocast-genre"])
                .unwrap_or_else(|| "various".to_owned()),
            bitrate,
            public,
            audio_info,
            audio_info_raw,
            user_agent: find_header(headers, "user-agent").map(str::to_owned),
        }
    }

    /// An `ice-audio-info` value, e.g. `samplerate`, if the source sent it.
    pub fn audio_info_value(&self, key: &str) -> Option<&str> {
        self.audio_info
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn first_header_wins_and_defaults_apply() {
        let info = SourceInfo::from_headers(&h(&[
            ("icy-name", "second"),
            ("ice-name", "first"),
            ("icy-pub", "1"),
            (
                "ice-audio-info",
                "ice-samplerate=44100;ice-bitrate=64;ice-channels=2",
            ),
        ]));
        assert_eq!(info.name, "first");
        assert_eq!(info.description, "Unspecified description");
        assert_eq!(info.genre, "various");
        assert!(info.public);
        assert_eq!(info.bitrate.as_deref(), Some("64"));
        assert_eq!(info.audio_info_value("ice-samplerate"), Some("44100"));
    }

    #[test]
    fn bitrate_header_beats_audio_info() {
        let info = SourceInfo::from_headers(&h(&[
            ("ice-audio-info", "bitrate=128%20;samplerate=44100"),
            ("icy-br", "96"),
        ]));
        assert_eq!(info.bitrate.as_deref(), Some("96"));
        assert_eq!(info.audio_info_value("bitrate"), Some("128 "));
        assert!(!info.public);
    }
}
