//! The small XML documents of Icecast's admin interface (`<icestats>`, `<iceresponse>`), built as
//! a tree and serialized byte for byte as Icecast 2.4.4 sends them: libxml2's
//! `xmlDocDumpMemory` of a document without a declared encoding. That is the declaration
//! `<?xml version="1.0"?>` and a newline, the root element on one line without indentation, then
//! a newline. Text escapes `<`, `>` and `&` (quotes stay literal); attribute values also escape
//! `"` and tab/newline/CR as character references; every non-ASCII character, and every control
//! character other than tab and newline, becomes a hexadecimal character reference (`é` →
//! `&#xE9;`), so the document is pure ASCII whatever the titles contain (libxml2 `xmlsave.c`:
//! `xmlEscapeEntities`, `xmlBufAttrSerializeTxtContent`).

use std::fmt::Write;

/// An element: a name, attributes in insertion order, then either text or child elements.
///
/// An element with neither text nor children serializes as `<name/>`; one whose text is the
/// empty string as `<name></name>` (libxml2 `xmlNewTextChild` with `""`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Element {
    /// Element name, e.g. `source`.
    pub name: String,
    /// Attributes, e.g. `("mount", "/live.mp3")`.
    pub attrs: Vec<(String, String)>,
    /// Text content of a leaf element.
    pub text: Option<String>,
    /// Child elements, in document order.
    pub children: Vec<Element>,
}

impl Element {
    /// An empty element `name`.
    pub fn new(name: &str) -> Element {
        Element {
            name: name.to_owned(),
            ..Element::default()
        }
    }

    /// A leaf element `name` holding `text`.
    pub fn leaf(name: &str, text: &str) -> Element {
        Element {
            name: name.to_owned(),
            text: Some(text.to_owned()),
            ..Element::default()
        }
    }

    /// Adds attribute `name="value"`.
    pub fn attr(mut self, name: &str, value: &str) -> Element {
        self.attrs.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Appends `child`.
    pub fn push(&mut self, child: Element) {
        self.children.push(child);
    }

    /// Appends the leaf `<name>text</name>`.
    pub fn push_leaf(&mut self, name: &str, text: &str) {
        self.children.push(Element::leaf(name, text));
    }

    /// The value of attribute `name`, if present.
    pub fn get_attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// This element serialized as a whole document (declaration, element, final newline).
    pub fn to_document(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\"?>\n");
        self.write_to(&mut out);
        out.push('\n');
        out
    }

    /// Appends this element, serialized, to `out`.
    pub fn write_to(&self, out: &mut String) {
        out.push('<');
        out.push_str(&self.name);
        for (k, v) in &self.attrs {
            out.push(' ');
            out.push_str(k);
            out.push_str("=\"");
            escape_attr(v, out);
            out.push('"');
        }
        match (&self.text, self.children.is_empty()) {
            (None, true) => out.push_str("/>"),
            (text, _) => {
                out.push('>');
                if let Some(t) = text {
                    escape_text(t, out);
                }
                for c in &self.children {
                    c.write_to(out);
                }
                out.push_str("</");
                out.push_str(&self.name);
                out.push('>');
            }
        }
    }
}

fn char_ref(c: char, out: &mut String) {
    let _ = write!(out, "&#x{:X};", c as u32);
}

/// Escapes element text as libxml2 does for a document without an encoding.
pub fn escape_text(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\t' | ' '..='\x7f' => out.push(c),
            _ => char_ref(c, out),
        }
    }
}

/// Escapes an attribute value as libxml2 does for a document without an encoding.
pub fn escape_attr(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            ' '..='\x7f' => out.push(c),
            _ => char_ref(c, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iceresponse_as_icecast_sends_it() {
        let mut r = Element::new("iceresponse");
        r.push_leaf("message", "Client 3 removed");
        r.push_leaf("return", "1");
        assert_eq!(
            r.to_document(),
            "<?xml version=\"1.0\"?>\n<iceresponse><message>Client 3 removed</message><return>1</return></iceresponse>\n"
        );
    }

    #[test]
    fn empty_text_and_no_content_differ() {
        let mut s = Element::new("source").attr("mount", "/a");
        s.push_leaf("fallback", "");
        let mut root = Element::new("icestats");
        root.push(s);
        root.push(Element::new("source").attr("mount", "/b"));
        let mut out = String::new();
        root.write_to(&mut out);
        assert_eq!(
            out,
            "<icestats><source mount=\"/a\"><fallback></fallback></source><source mount=\"/b\"/></icestats>"
        );
    }

    #[test]
    fn escapes_as_libxml2_without_encoding() {
        let mut out = String::new();
        escape_text("a<b>&\"c' Café ♪\r\n\t", &mut out);
        assert_eq!(out, "a&lt;b&gt;&amp;\"c' Caf&#xE9; &#x266A;&#xD;\n\t");
        let mut out = String::new();
        escape_attr("/x\"y<&>é\n\t\r", &mut out);
        assert_eq!(out, "/x&quot;y&lt;&amp;&gt;&#xE9;&#10;&#9;&#13;");
    }

    #[test]
    fn attributes_are_found() {
        let e = Element::new("source").attr("mount", "/m");
        assert_eq!(e.get_attr("mount"), Some("/m"));
        assert_eq!(e.get_attr("x"), None);
    }
}
