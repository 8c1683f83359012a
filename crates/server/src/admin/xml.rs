//! The XML documents of `/admin/*`, shaped exactly as Icecast 2.4.4 `admin.c` and `stats.c`
//! build them (element names, their case and order), from the facts in `data.rs`.
//! Serialization is `throng_proto::xml`.

use throng_proto::xml::Element;

use crate::admin::data::{MountEntry, Stats};
use crate::audience::ListenerRow;

/// `<iceresponse><message>…</message><return>1|0</return></iceresponse>`.
pub fn ice_response(message: &str, ok: bool) -> Element {
    let mut r = Element::new("iceresponse");
    r.push_leaf("message", message);
    r.push_leaf("return", if ok { "1" } else { "0" });
    r
}

/// `stats` (`stats.c:stats_get_xml`): `<icestats>` with the global stats, then one
/// `<source mount="…">` per mount holding its stats.
pub fn stats(s: &Stats) -> Element {
    let mut root = Element::new("icestats");
    for (k, v) in &s.global {
        root.push_leaf(k, v);
    }
    for m in &s.mounts {
        let mut src = Element::new("source").attr("mount", &m.mount);
        for (k, v) in &m.stats {
            src.push_leaf(k, v);
        }
        root.push(src);
    }
    root
}

/// `listmounts` (`admin_build_sourcelist`): `<icestats>`, with `<current_source>` first when
/// listing the destinations of `moveclients` from `current`, then per mount `<source mount>`
/// holding `<fallback>`, `<listeners>`, `[<authenticator>]`, `[<Connected>]`,
/// `[<content-type>]`.
pub fn source_list(entries: &[MountEntry], current: Option<&str>) -> Element {
    let mut root = Element::new("icestats");
    if let Some(c) = current {
        root.push_leaf("current_source", c);
    }
    for e in entries {
        let mut src = Element::new("source").attr("mount", &e.mount);
        src.push_leaf("fallback", e.fallback.as_deref().unwrap_or(""));
        src.push_leaf("listeners", &e.listeners.to_string());
        if let Some(a) = e.authenticator {
            src.push_leaf("authenticator", a);
        }
        if let Some(c) = e.connected_s {
            src.push_leaf("Connected", &c.to_string());
        }
        if let Some(ct) = &e.content_type {
            src.push_leaf("content-type", ct);
        }
        root.push(src);
    }
    root
}

/// `listclients` (`command_show_listeners`): `<icestats><source mount><Listeners>N</Listeners>`
/// then per listener `<listener><IP/><UserAgent/><Connected/><ID/>[<username/>]</listener>`
/// (`UserAgent` is `Unknown` when none was sent).
pub fn listeners(mount: &str, count: u32, rows: &[ListenerRow]) -> Element {
    let mut src = Element::new("source").attr("mount", mount);
    src.push_leaf("Listeners", &count.to_string());
    for r in rows {
        src.push(listener(r));
    }
    let mut root = Element::new("icestats");
    root.push(src);
    root
}

/// One `<listener>` of [`listeners`].
pub fn listener(r: &ListenerRow) -> Element {
    let mut l = Element::new("listener");
    l.push_leaf("IP", &r.ip.to_string());
    l.push_leaf("UserAgent", r.agent.as_deref().unwrap_or("Unknown"));
    l.push_leaf("Connected", &r.connected_secs.to_string());
    l.push_leaf("ID", &r.id.to_string());
    if let Some(u) = &r.user {
        l.push_leaf("username", u);
    }
    l
}

/// The document of [`listeners`] as a streamed listing sends it (`admin/listing.rs`): this
/// head, each [`listener`] serialized, then [`LISTENERS_TAIL`]; the same bytes as
/// `listeners(..).to_document()`.
pub fn listeners_head(mount: &str, count: u32) -> String {
    let doc = listeners(mount, count, &[]).to_document();
    doc.strip_suffix(LISTENERS_TAIL).unwrap_or(&doc).to_owned()
}

/// The end of a streamed [`listeners`] document.
pub const LISTENERS_TAIL: &str = "</source></icestats>\n";

/// `updatemetadata` (`command_updatemetadata`): `<icestats><source mount="…"/></icestats>`, the
/// document Icecast's metadata form is rendered from.
pub fn mount_only(mount: &str) -> Element {
    let mut root = Element::new("icestats");
    root.push(Element::new("source").attr("mount", mount));
    root
}

/// `manageauth` (`command_manageauth`): `<icestats><source mount="…">` holding one
/// `<User><username>…</username></User>` per user (`htpasswd_userlist`), then, after an add or
/// delete, `<iceresponse><message>…</message></iceresponse>` as a sibling of `<source>` (no
/// `<return>`, unlike the other commands' responses).
pub fn manage_auth(mount: &str, users: &[String], message: Option<&str>) -> Element {
    let mut src = Element::new("source").attr("mount", mount);
    for u in users {
        let mut user = Element::new("User");
        user.push_leaf("username", u);
        src.push(user);
    }
    let mut root = Element::new("icestats");
    root.push(src);
    if let Some(m) = message {
        let mut r = Element::new("iceresponse");
        r.push_leaf("message", m);
        root.push(r);
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_listing_is_the_same_document() {
        let rows: Vec<ListenerRow> = (1..=3)
            .map(|id| ListenerRow {
                id,
                path: crate::audience::AudiencePath::Icy,
                ip: "192.0.2.1".parse().unwrap(),
                agent: (id != 2).then(|| "a<b".to_owned()),
                referer: None,
                user: (id == 3).then(|| "fan".to_owned()),
                connected_secs: 5,
                mount: "/a&b".into(),
                requested_mount: "/a&b".into(),
                lag_bytes: 0,
                sent: 9,
            })
            .collect();
        let mut streamed = listeners_head("/a&b", 3);
        for r in &rows {
            listener(r).write_to(&mut streamed);
        }
        streamed.push_str(LISTENERS_TAIL);
        assert_eq!(streamed, listeners("/a&b", 3, &rows).to_document());
        let mut empty = listeners_head("/m", 0);
        empty.push_str(LISTENERS_TAIL);
        assert_eq!(empty, listeners("/m", 0, &[]).to_document());
    }

    #[test]
    fn listclients_shape() {
        let rows = vec![ListenerRow {
            path: crate::audience::AudiencePath::Icy,
            id: 7,
            ip: "10.0.0.1".parse().unwrap(),
            agent: None,
            referer: None,
            user: Some("bob".into()),
            connected_secs: 12,
            mount: "/a".into(),
            requested_mount: "/a".into(),
            lag_bytes: 0,
            sent: 0,
        }];
        assert_eq!(
            listeners("/a", 1, &rows).to_document(),
            "<?xml version=\"1.0\"?>\n<icestats><source mount=\"/a\"><Listeners>1</Listeners>\
             <listener><IP>10.0.0.1</IP><UserAgent>Unknown</UserAgent><Connected>12</Connected>\
             <ID>7</ID><username>bob</username></listener></source></icestats>\n"
        );
    }

    #[test]
    fn listmounts_shape() {
        let e = MountEntry {
            mount: "/a".into(),
            fallback: None,
            listeners: 2,
            authenticator: None,
            connected_s: Some(5),
            content_type: Some("audio/mpeg".into()),
            hidden: false,
            live: true,
        };
        let mut out = String::new();
        source_list(&[e], Some("/b")).write_to(&mut out);
        assert_eq!(
            out,
            "<icestats><current_source>/b</current_source><source mount=\"/a\"><fallback></fallback>\
             <listeners>2</listeners><Connected>5</Connected><content-type>audio/mpeg</content-type>\
             </source></icestats>"
        );
    }

    #[test]
    fn manageauth_shape() {
        assert_eq!(
            manage_auth("/a", &["ann".into(), "b&b".into()], Some("User added")).to_document(),
            "<?xml version=\"1.0\"?>\n<icestats><source mount=\"/a\"><User><username>ann</username>\
             </User><User><username>b&amp;b</username></User></source><iceresponse>\
             <message>User added</message></iceresponse></icestats>\n"
        );
        assert_eq!(
            manage_auth("/a", &[], None).to_document(),
            "<?xml version=\"1.0\"?>\n<icestats><source mount=\"/a\"/></icestats>\n"
        );
    }
}
