//! Icecast's YP directory protocol, pure (Icecast 2.4/2.5 `yp.c`): the `add`, `touch` and
//! `remove` form bodies a server POSTs to a directory's `yp-url`, and the reply headers it reads
//! (`YPResponse: 1` for success, `YPMessage`, the `SID` an add returns, `TouchFreq`).

use throng_proto::url_auth::escape;

/// What a directory listing says about a mount.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// `admin` of the server.
    pub admin: String,
    /// `sn`: the stream name.
    pub name: String,
    /// `genre`.
    pub genre: String,
    /// `cpswd`: the mount's cluster password (empty when none).
    pub cluster_password: String,
    /// `desc`.
    pub description: String,
    /// `url`: the station's web page.
    pub url: String,
    /// `listenurl`: where listeners go.
    pub listen_url: String,
    /// `type`: the content type.
    pub content_type: String,
    /// `stype`: the codec (`MP3`, `AAC`, `Vorbis`, `Opus`).
    pub subtype: String,
    /// `b`: bitrate in kbit/s.
    pub bitrate: String,
    /// `samplerate`.
    pub samplerate: String,
    /// `channels`.
    pub channels: String,
    /// `audioinfo`: the raw `ice-audio-info`.
    pub audio_info: String,
    /// `sourceinstance`: an id of this feed.
    pub instance: String,
}

/// The body of `action=add`, fields in Icecast 2.5's order, escaped as Icecast escapes them.
pub fn add_body(l: &Listing) -> String {
    let e = |s: &str| escape(s);
    format!(
        "action=add&admin={}&sn={}&genre={}&cpswd={}&desc={}&url={}&listenurl={}&type={}\
         &stype={}&language=&sourceinstance={}&b={}&samplerate={}&channels={}&audioinfo={}",
        e(&l.admin),
        e(&l.name),
        e(&l.genre),
        e(&l.cluster_password),
        e(&l.description),
        e(&l.url),
        e(&l.listen_url),
        e(&l.content_type),
        e(&l.subtype),
        e(&l.instance),
        e(&l.bitrate),
        e(&l.samplerate),
        e(&l.channels),
        e(&l.audio_info),
    )
}

/// The body of `action=touch`: the session `sid`, the current title `st`, the listeners and
/// the most allowed.
pub fn touch_body(sid: &str, l: &Listing, title: &str, listeners: u32, max: u32) -> String {
    format!(
        "action=touch&sid={}&st={}&listeners={listeners}&max_listeners={max}&stype={}\
         &samplerate={}&channels={}",
        escape(sid),
        escape(title),
        escape(&l.subtype),
        escape(&l.samplerate),
        escape(&l.channels),
    )
}

/// The body of `action=remove`.
pub fn remove_body(sid: &str) -> String {
    format!("action=remove&sid={}", escape(sid))
}

/// What a directory answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// `YPResponse: 1` was sent.
    pub ok: bool,
    /// `YPMessage`, if any.
    pub message: Option<String>,
    /// `SID` (an add's session id).
    pub sid: Option<String>,
    /// `TouchFreq` in seconds, at least 30 (Icecast's floor).
    pub touch_freq: Option<u64>,
}

/// Reads a directory's reply headers, as Icecast's `handle_returned_header`.
pub fn read_reply(headers: &[(String, String)]) -> Reply {
    let mut r = Reply::default();
    for (k, v) in headers {
        let v = v.trim();
        match k.to_ascii_lowercase().as_str() {
            "ypresponse" => r.ok = v.starts_with('1'),
            "ypmessage" => r.message = Some(v.to_owned()),
            "sid" => r.sid = Some(v.to_owned()),
            "touchfreq" => r.touch_freq = Some(v.parse::<u64>().unwrap_or(0).max(30)),
            _ => {}
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_as_icecast_writes_them() {
        let l = Listing {
            admin: "ops@example.org".into(),
            name: "Café Radio".into(),
            genre: "Jazz".into(),
            listen_url: "http://radio.example.org:8000/live.mp3".into(),
            content_type: "audio/mpeg".into(),
            subtype: "MP3".into(),
            bitrate: "128".into(),
            ..Listing::default()
        };
        let add = add_body(&l);
        assert!(
            add.starts_with(
                "action=add&admin=ops%40example%2eorg&sn=Caf%c3%a9%20Radio&genre=Jazz&cpswd=&"
            ),
            "{add}"
        );
        assert!(add.contains("&listenurl=http%3a%2f%2fradio%2eexample%2eorg%3a8000%2flive%2emp3&type=audio%2fmpeg&stype=MP3&"), "{add}");
        assert_eq!(
            touch_body("s1", &l, "A - B", 3, 100),
            "action=touch&sid=s1&st=A%20%2d%20B&listeners=3&max_listeners=100&stype=MP3&samplerate=&channels="
        );
        assert_eq!(remove_body("s1"), "action=remove&sid=s1");
    }

    #[test]
    fn replies_are_read_like_icecast() {
        let h = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        let r = read_reply(&[
            h("YPResponse", "1"),
            h("SID", "abc"),
            h("TouchFreq", "5"),
            h("YPMessage", "OK"),
        ]);
        assert_eq!(
            r,
            Reply {
                ok: true,
                message: Some("OK".into()),
                sid: Some("abc".into()),
                touch_freq: Some(30)
            }
        );
        assert!(!read_reply(&[h("YPResponse", "0")]).ok);
    }
}
