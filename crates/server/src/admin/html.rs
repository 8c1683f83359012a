//! HTML pages of the admin interface. Icecast 2.4.4 renders `/admin/*.xsl` by running the XSLT
//! templates of its `adminroot` over the command's XML; Throng has no XSLT engine and renders
//! the same XML document as plain HTML instead: leaf elements as a name/value table, runs of
//! sibling records (e.g. `<listener>`) as one table with a column per field, and other
//! elements (e.g. `<source mount="…">`) as a heading over their contents.
//!
//! `manageauth.xsl` has its own page, like Icecast's `manageauth.xsl`: the message, the users
//! with a Delete link each, and a form to add one.
//!
//! Also the two fixed HTML bodies of Icecast 2.4.4: `client.c:client_send_error` (errors) and
//! `admin.c:html_success`.

use throng_proto::xml::Element;

/// Escapes `s` for HTML text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// The body of an Icecast 2.4.4 error reply with status `status`:
/// `<html><head><title>Error 400</title></head><body><b>400 - message</b></body></html>\r\n`
/// (the message is escaped here; Icecast inserts it raw).
pub fn error_page(status: u16, message: &str) -> String {
    format!(
        "<html><head><title>Error {status}</title></head><body><b>{status} - {}</b></body></html>\r\n",
        escape(message)
    )
}

/// The body Icecast 2.4.4 `html_success` sends (e.g. for `fallbacks`).
pub fn success_page(message: &str) -> String {
    format!(
        "<html><head><title>Admin request successful</title></head><body><p>{}</p></body></html>",
        escape(message)
    )
}

fn is_record(e: &Element) -> bool {
    e.attrs.is_empty() && !e.children.is_empty() && e.children.iter().all(|c| c.children.is_empty())
}

fn heading(e: &Element) -> String {
    let mut h = escape(&e.name);
    for (k, v) in &e.attrs {
        h.push_str(&format!(" {}={}", escape(k), escape(v)));
    }
    h
}

fn render(e: &Element, depth: usize, out: &mut String) {
    let leaves: Vec<&Element> = e
        .children
        .iter()
        .filter(|c| c.children.is_empty())
        .collect();
    if !leaves.is_empty() {
        out.push_str("<table>");
        for l in leaves {
            out.push_str(&format!(
                "<tr><th>{}</th><td>{}</td></tr>",
                escape(&l.name),
                escape(l.text.as_deref().unwrap_or(""))
            ));
        }
        out.push_str("</table>\n");
    }
    let nested: Vec<&Element> = e
        .children
        .iter()
        .filter(|c| !c.children.is_empty())
        .collect();
    let mut i = 0;
    while i < nested.len() {
        let first = nested[i];
        if is_record(first) {
            let run: Vec<&Element> = nested[i..]
                .iter()
                .take_while(|c| c.name == first.name && is_record(c))
                .copied()
                .collect();
            i += run.len();
            let mut cols: Vec<&str> = Vec::new();
            for r in &run {
                for c in &r.children {
                    if !cols.contains(&c.name.as_str()) {
                        cols.push(&c.name);
                    }
                }
            }
            out.push_str(&format!(
                "<h{0}>{1}</h{0}><table><tr>",
                depth.min(6),
                escape(&first.name)
            ));
            for c in &cols {
                out.push_str(&format!("<th>{}</th>", escape(c)));
            }
            out.push_str("</tr>");
            for r in &run {
                out.push_str("<tr>");
                for c in &cols {
                    let v = r
                        .children
                        .iter()
                        .find(|x| x.name == *c)
                        .and_then(|x| x.text.as_deref())
                        .unwrap_or("");
                    out.push_str(&format!("<td>{}</td>", escape(v)));
                }
                out.push_str("</tr>");
            }
            out.push_str("</table>\n");
        } else {
            i += 1;
            out.push_str(&format!("<h{0}>{1}</h{0}>\n", depth.min(6), heading(first)));
            render(first, depth + 1, out);
        }
    }
    // Elements with attributes but no content (e.g. `<source mount="/a"/>`).
    for c in e
        .children
        .iter()
        .filter(|c| c.children.is_empty() && c.text.is_none() && !c.attrs.is_empty())
    {
        out.push_str(&format!("<h{0}>{1}</h{0}>\n", depth.min(6), heading(c)));
    }
}

/// A complete HTML page titled `title` showing `doc` (an `<icestats>` or `<iceresponse>`).
pub fn page(title: &str, doc: &Element) -> String {
    let mut body = String::new();
    if doc.name == "iceresponse" {
        let text = |n: &str| {
            doc.children
                .iter()
                .find(|c| c.name == n)
                .and_then(|c| c.text.clone())
                .unwrap_or_default()
        };
        let ok = text("return") == "1";
        body.push_str(&format!(
            "<p class=\"{}\">{}</p>\n",
            if ok { "ok" } else { "failed" },
            escape(&text("message"))
        ));
    } else {
        render(doc, 2, &mut body);
    }
    wrap(title, &body)
}

/// Mount `name` as the path of an `href` or `src` attribute: percent-encoded
/// ([`throng_proto::mount_name::href_path`]), then HTML-escaped (a no-op on that output, kept
/// so the attribute stays safe whatever the encoding leaves).
pub fn href(name: &str) -> String {
    escape(&throng_proto::mount_name::href_path(name))
}

/// Characters escaped in a query-string value of a link.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

fn query_value(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, QUERY_VALUE).to_string()
}

/// The `manageauth.xsl` page of `mount` (what Icecast 2.4.4's `manageauth.xsl` shows): the
/// message of an add or delete, the users with a link deleting each
/// (`manageauth.xsl?mount=…&username=…&action=delete`), and a form adding one (`GET` with
/// `username`, `password`, `mount`, `action=add`).
pub fn manage_auth_page(mount: &str, users: &[String], message: Option<&str>) -> String {
    let mut body = String::new();
    if let Some(m) = message {
        body.push_str(&format!("<p class=\"message\">{}</p>\n", escape(m)));
    }
    body.push_str(&format!("<h2>Mountpoint {}</h2>\n", escape(mount)));
    if !users.is_empty() {
        body.push_str("<table><tr><th>User</th><th>Action</th></tr>");
        for u in users {
            let href = format!(
                "manageauth.xsl?mount={}&username={}&action=delete",
                query_value(mount),
                query_value(u)
            );
            body.push_str(&format!(
                "<tr><td>{}</td><td><a href=\"{}\">Delete</a></td></tr>",
                escape(u),
                escape(&href)
            ));
        }
        body.push_str("</table>\n");
    }
    body.push_str(&format!(
        "<form method=\"get\" action=\"/admin/manageauth.xsl\"><fieldset><legend>Add new user</legend>\
         <p><label for=\"username\">Username:</label> <input type=\"text\" id=\"username\" name=\"username\"/></p>\
         <p><label for=\"password\">Password:</label> <input type=\"password\" id=\"password\" name=\"password\"/></p>\
         <input type=\"hidden\" name=\"mount\" value=\"{}\"/><input type=\"hidden\" name=\"action\" value=\"add\"/>\
         <input type=\"submit\" value=\"Add\"/></fieldset></form>\n",
        escape(mount)
    ));
    wrap("Manage Authentication", &body)
}

/// A complete HTML page titled `title` around `body`.
fn wrap(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>body{{font-family:sans-serif}}table{{border-collapse:collapse;margin:.5em 0}}\
         th,td{{border:1px solid #ccc;padding:2px 8px;text-align:left}}</style></head>\
         <body><h1>{t}</h1>\n{body}</body></html>\n",
        t = escape(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icecast_fixed_bodies() {
        assert_eq!(
            error_page(400, "Source does not exist"),
            "<html><head><title>Error 400</title></head><body><b>400 - Source does not exist</b></body></html>\r\n"
        );
        assert_eq!(
            success_page("Fallback configured"),
            "<html><head><title>Admin request successful</title></head><body><p>Fallback configured</p></body></html>"
        );
    }

    #[test]
    fn records_become_one_table_and_sources_headings() {
        let mut src = Element::new("source").attr("mount", "/a<b>");
        src.push_leaf("Listeners", "2");
        for (ip, agent) in [("1.2.3.4", "VLC"), ("5.6.7.8", "<script>")] {
            let mut l = Element::new("listener");
            l.push_leaf("IP", ip);
            l.push_leaf("UserAgent", agent);
            src.push(l);
        }
        let mut root = Element::new("icestats");
        root.push_leaf("host", "localhost");
        root.push(src);
        let html = page("Listeners", &root);
        assert!(html.contains("<tr><th>host</th><td>localhost</td></tr>"));
        assert!(html.contains("<h2>source mount=/a&lt;b&gt;</h2>"));
        assert!(html.contains("<tr><th>IP</th><th>UserAgent</th></tr>"));
        assert!(html.contains("<tr><td>5.6.7.8</td><td>&lt;script&gt;</td></tr>"));
        assert!(!html.contains("<script>"));
    }

    #[test]
    fn responses_become_a_paragraph() {
        let mut r = Element::new("iceresponse");
        r.push_leaf("message", "Client 3 not found");
        r.push_leaf("return", "0");
        assert!(page("Response", &r).contains("<p class=\"failed\">Client 3 not found</p>"));
    }

    #[test]
    fn manageauth_page_links_and_form() {
        let html = manage_auth_page("/a b", &["o'neil&co".into()], Some("User added"));
        assert!(html.contains("<p class=\"message\">User added</p>"));
        assert!(html.contains(
            "<a href=\"manageauth.xsl?mount=/a%20b&amp;username=o%27neil%26co&amp;action=delete\">Delete</a>"
        ));
        assert!(html.contains("<td>o&#39;neil&amp;co</td>"));
        assert!(html.contains("<input type=\"hidden\" name=\"mount\" value=\"/a b\"/>"));
        assert!(!manage_auth_page("/a", &[], None).contains("<table>"));
    }
}
