//! Server-Sent Events (`text/event-stream`, WHATWG HTML §9.2 "Server-sent events") as Throng's
//! `/api/v1/events` writes them and as a client (the bench, tests) reads them: the response
//! head, one event's frame (`id:`, `event:`, `data:` lines and a blank line), the `retry:` line
//! and the heartbeat comment, the `Last-Event-ID` a reconnecting client sends, and an
//! incremental parser of the stream.

/// The first bytes of every event stream's body: the reconnection delay a browser's
/// `EventSource` uses after the connection drops (milliseconds, WHATWG HTML §9.2.6 `retry`).
pub const RETRY: &[u8] = b"retry: 3000\n\n";

/// The comment sent to an idle subscriber so proxies and browsers see the stream alive (a line
/// starting with `:` is ignored by `EventSource`, WHATWG HTML §9.2.6).
pub const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// The response head of an event stream: `200`, `text/event-stream`, not cached, not buffered
/// by nginx (`X-Accel-Buffering: no`), readable from any origin, no length (the body lasts as
/// long as the connection). `server_id` is the `Server:` value, `date` an IMF-fixdate.
pub fn response_head(server_id: &str, date: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\n\
         Server: {server_id}\r\n\
         Date: {date}\r\n\
         Content-Type: text/event-stream\r\n\
         Cache-Control: no-cache\r\n\
         X-Accel-Buffering: no\r\n\
         Access-Control-Allow-Origin: *\r\n\
         \r\n"
    )
    .into_bytes()
}

/// One event's frame: `id: <id>`, `event: <event>`, one `data:` line per line of `data`, and
/// the blank line that dispatches it. `event` must not contain a line break; `data` is JSON
/// written on one line by the caller (a line break in it would still be framed correctly, as
/// several `data:` lines the client joins with `\n`).
pub fn frame(id: u64, event: &str, data: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + event.len() + data.len() + 16);
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.to_string().as_bytes());
    out.extend_from_slice(b"\nevent: ");
    out.extend_from_slice(event.as_bytes());
    out.push(b'\n');
    for line in data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.trim_end_matches('\r').as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
    out
}

/// The id a reconnecting client resumes after: the `Last-Event-ID` header (what a browser's
/// `EventSource` sends, WHATWG HTML §9.2.4), else the `lastEventId` query parameter (for
/// clients that cannot set headers); `None` when absent or not a decimal `u64`.
pub fn last_event_id(header: Option<&str>, query: &[(String, String)]) -> Option<u64> {
    header
        .or_else(|| {
            query
                .iter()
                .find(|(k, _)| k == "lastEventId")
                .map(|(_, v)| v.as_str())
        })
        .and_then(|v| v.trim().parse().ok())
}

/// One event as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `id:` field, if the event had one.
    pub id: Option<String>,
    /// The `event:` field (`"message"` when absent, as `EventSource` names it).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// What the parser found in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A dispatched event.
    Event(Event),
    /// A comment line (`:` and what follows, leading space removed), e.g. `heartbeat`.
    Comment(String),
    /// A `retry:` field, in milliseconds.
    Retry(u64),
}

/// An incremental event-stream parser (WHATWG HTML §9.2.6 "Interpreting an event stream"):
/// feed it bytes as they arrive, take the items out.
#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    current: Event,
    has_data: bool,
    has_fields: bool,
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Parser {
        Parser::default()
    }

    /// Feeds `bytes`, calling `out` for every complete item. Lines end with `\n` (a `\r`
    /// before it is removed); an unfinished line waits for the next call.
    pub fn push(&mut self, bytes: &[u8], mut out: impl FnMut(Item)) {
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut out);
            self.line = line;
            self.line.clear();
        }
    }

    fn line_done(&mut self, line: &[u8], out: &mut impl FnMut(Item)) {
        if line.is_empty() {
            if self.has_data {
                let mut ev = std::mem::take(&mut self.current);
                if ev.event.is_empty() {
                    ev.event = "message".into();
                }
                out(Item::Event(ev));
            }
            self.current = Event::default();
            self.has_data = false;
            self.has_fields = false;
            return;
        }
        let text = String::from_utf8_lossy(line);
        if let Some(c) = text.strip_prefix(':') {
            out(Item::Comment(c.strip_prefix(' ').unwrap_or(c).to_owned()));
            return;
        }
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (&*text, ""),
        };
        self.has_fields = true;
        match field {
            "id" => self.current.id = Some(value.to_owned()),
            "event" => self.current.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "retry" => {
                if let Ok(ms) = value.parse() {
                    out(Item::Retry(ms));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Vec<Item> {
        let mut p = Parser::new();
        let mut items = Vec::new();
        // One byte at a time: nothing may depend on how reads split the stream.
        for b in bytes.chunks(1) {
            p.push(b, |i| items.push(i));
        }
        items
    }

    #[test]
    fn frames_parse_back() {
        let mut s = RETRY.to_vec();
        s.extend(frame(7, "title", r#"{"mount":"/a","title":"x"}"#));
        s.extend_from_slice(HEARTBEAT);
        s.extend(frame(8, "mount_stop", "{\"mount\":\"/a\"}"));
        assert_eq!(
            parse(&s),
            vec![
                Item::Retry(3000),
                Item::Event(Event {
                    id: Some("7".into()),
                    event: "title".into(),
                    data: r#"{"mount":"/a","title":"x"}"#.into(),
                }),
                Item::Comment("heartbeat".into()),
                Item::Event(Event {
                    id: Some("8".into()),
                    event: "mount_stop".into(),
                    data: "{\"mount\":\"/a\"}".into(),
                }),
            ]
        );
    }

    #[test]
    fn frame_layout_is_exact() {
        assert_eq!(
            frame(1, "listeners", "{}"),
            b"id: 1\nevent: listeners\ndata: {}\n\n".to_vec()
        );
        // A line break in data becomes two data lines, joined again by the client.
        let f = frame(2, "x", "a\nb");
        assert_eq!(f, b"id: 2\nevent: x\ndata: a\ndata: b\n\n".to_vec());
        let items = parse(&f);
        assert!(matches!(&items[0], Item::Event(e) if e.data == "a\nb"));
    }

    #[test]
    fn crlf_lines_and_default_event_name() {
        let items = parse(b"data: hi\r\n\r\n");
        assert_eq!(
            items,
            vec![Item::Event(Event {
                id: None,
                event: "message".into(),
                data: "hi".into()
            })]
        );
    }

    #[test]
    fn last_event_id_from_header_then_query() {
        let q = vec![("lastEventId".to_owned(), "12".to_owned())];
        assert_eq!(last_event_id(Some("5"), &q), Some(5));
        assert_eq!(last_event_id(None, &q), Some(12));
        assert_eq!(last_event_id(Some("x"), &q), None);
        assert_eq!(last_event_id(None, &[]), None);
    }

    #[test]
    fn head_has_the_stream_headers_and_no_length() {
        let h = String::from_utf8(response_head("Throng", "d")).unwrap();
        assert!(h.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(h.contains("Content-Type: text/event-stream\r\n"));
        assert!(h.contains("X-Accel-Buffering: no\r\n"));
        assert!(h.contains("Cache-Control: no-cache\r\n"));
        assert_eq!(h.matches("Access-Control-Allow-Origin").count(), 1);
        assert!(!h.to_ascii_lowercase().contains("content-length"));
        assert!(h.ends_with("\r\n\r\n"));
    }
}
