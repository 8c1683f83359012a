//! The JSON of each event type of `/api/v1/events` (one line each): `mount` (a public mount's
//! whole state), `title`, `listeners` and `mount_stop`. The field names are fixed: the station
//! page and browser players read them.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::mount::live::Mount;

/// The bitrate status documents show, in kbit/s: the source's declared one, else the one its
/// MP3 frames carry (the same rule as `admin/status.rs`).
fn bitrate(m: &Mount) -> Option<u32> {
    m.settings
        .info
        .bitrate
        .as_deref()
        .map(str::trim)
        .and_then(|b| b.parse().ok())
        .or_else(|| {
            let p = m.params().bitrate_kbps;
            (p > 0).then_some(p)
        })
}

/// `mount`: the whole public state of `m`; `base` is `http://host:port` of its `listenurl`.
pub fn mount(m: &Mount, base: &str) -> String {
    let description = m.description();
    let info = &description.info;
    json!({
        "mount": m.name,
        "name": info.name,
        "description": info.description,
        "genre": info.genre,
        "title": m.title(),
        "artist": m.ogg_tags.artist(),
        "listeners": m.listeners.load(Ordering::Relaxed),
        "bitrate": bitrate(m),
        "content_type": m.settings.content_type,
        "listenurl": format!("{base}{}", m.name),
    })
    .to_string()
}

/// `title`: the current title, artist (`null` unless known, e.g. an Ogg `ARTIST`), cover art
/// (`artwork`: the image URL the update gave, else `null`) and when it started (`at_unix`).
pub fn title(m: &Mount) -> String {
    json!({
        "mount": m.name,
        "title": m.title(),
        "artist": m.ogg_tags.artist(),
        "artwork": m.history.artwork(),
        "at_unix": chrono::Local::now().timestamp(),
    })
    .to_string()
}

/// `listeners`: the listener count `n` of mount `name`.
pub fn listeners(name: &str, n: u32) -> String {
    json!({ "mount": name, "listeners": n }).to_string()
}

/// `mount_stop`: mount `name` has stopped.
pub fn mount_stop(name: &str) -> String {
    json!({ "mount": name }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::live::test_support::test_mount;
    use throng_proto::format::Format;

    #[test]
    fn mount_event_has_the_fixed_fields() {
        let (m, _w) = test_mount("/live.mp3", Format::Mp3);
        m.set_title("A - B", None, crate::ledger::TitleSetter::Source);
        let v: serde_json::Value = serde_json::from_str(&mount(&m, "http://h:1")).unwrap();
        for k in [
            "mount",
            "name",
            "description",
            "genre",
            "title",
            "artist",
            "listeners",
            "bitrate",
            "content_type",
            "listenurl",
        ] {
            assert!(v.get(k).is_some(), "{k} missing");
        }
        assert_eq!(v["title"], "A - B");
        assert_eq!(v["artist"], serde_json::Value::Null);
        assert_eq!(v["listenurl"], "http://h:1/live.mp3");
        assert!(!mount(&m, "x").contains('\n'));
        let l: serde_json::Value = serde_json::from_str(&listeners("/a", 3)).unwrap();
        assert_eq!(l, serde_json::json!({"mount": "/a", "listeners": 3}));
    }
}
