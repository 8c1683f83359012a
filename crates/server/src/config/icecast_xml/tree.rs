//! A minimal element tree of an `icecast.xml`, read with quick-xml's event reader: element names,
//! attributes, child elements and the text directly inside each element (text and CDATA joined,
//! entity and character references resolved), which is what Icecast 2.4.4 `cfgfile.c` reads
//! through libxml2's `xmlNodeListGetString` and `xmlGetProp`. Comments, processing
//! instructions and the DOCTYPE are skipped.

use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

use super::error::IcecastXmlError;

/// One element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// Tag name as written (namespace prefix included).
    pub name: String,
    /// Attributes in document order, values unescaped.
    pub attrs: Vec<(String, String)>,
    /// Child elements in document order.
    pub children: Vec<Element>,
    /// The text directly inside the element; `None` when there is none at all (libxml2 returns
    /// NULL there, so Icecast treats `<x></x>` and `<x/>` as "not set").
    pub text: Option<String>,
}

impl Element {
    fn open(start: &BytesStart<'_>) -> Result<Element, IcecastXmlError> {
        let mut attrs = Vec::new();
        for attr in start.attributes() {
            let attr = attr.map_err(|e| IcecastXmlError::Xml(e.to_string()))?;
            let value = attr
                .normalized_value(XmlVersion::Implicit1_0)
                .map_err(|e| IcecastXmlError::Xml(e.to_string()))?;
            attrs.push((attr.key.as_ref().to_owned(), value.into_owned()));
        }
        Ok(Element {
            name: start.name().as_ref().to_owned(),
            attrs,
            children: Vec::new(),
            text: None,
        })
    }

    fn push_text(&mut self, s: &str) {
        self.text.get_or_insert_with(String::new).push_str(s);
    }

    /// The value of attribute `name`, if present.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The element's text, `None` when absent or empty.
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref().filter(|t| !t.is_empty())
    }
}

/// `line L, column C` (both from 1, the column in characters) of byte `offset` of `text`, as
/// an editor shows it; an offset past the end is the end.
pub fn line_column(text: &str, offset: u64) -> String {
    let mut end = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[start..].chars().count() + 1;
    format!("line {line}, column {column}")
}

/// Deepest nesting of elements read (`<icecast>` is 1). Icecast's own files nest at most 4
/// deep (`icecast/mount/authentication/option`); the tree is dropped recursively, so a file
/// nested a million deep would otherwise overflow the stack (issue 42).
pub const MAX_DEPTH: usize = 64;

/// Parses a whole document and returns its root element.
///
/// Errors: [`IcecastXmlError::Xml`] for malformed XML (with its line and column) or elements
/// nested deeper than [`MAX_DEPTH`], and [`IcecastXmlError::NoRoot`] for a document without
/// any element.
pub fn parse(xml: &str) -> Result<Element, IcecastXmlError> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut place = |stack: &mut Vec<Element>, el: Element| -> Result<(), IcecastXmlError> {
        match stack.last_mut() {
            Some(parent) => parent.children.push(el),
            None if root.is_some() => {
                return Err(IcecastXmlError::Xml(format!(
                    "more than one root element (<{}>)",
                    el.name
                )))
            }
            None => root = Some(el),
        }
        Ok(())
    };
    let at = |reader: &Reader<&[u8]>, e: &dyn std::fmt::Display| {
        IcecastXmlError::Xml(format!(
            "{}: {e}",
            line_column(xml, reader.error_position())
        ))
    };
    loop {
        let event = reader.read_event().map_err(|e| at(&reader, &e))?;
        match event {
            Event::Start(start) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(at(
                        &reader,
                        &format!("elements nested deeper than {MAX_DEPTH}"),
                    ));
                }
                stack.push(Element::open(&start)?)
            }
            Event::Empty(start) => place(&mut stack, Element::open(&start)?)?,
            Event::End(_) => {
                // The reader checks end names, so an end tag always has an open element; a
                // malformed file must still be an error rather than a panic.
                let Some(el) = stack.pop() else {
                    return Err(at(&reader, &"end tag without a start tag"));
                };
                place(&mut stack, el)?;
            }
            Event::Text(t) => {
                if let Some(el) = stack.last_mut() {
                    el.push_text(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some(el) = stack.last_mut() {
                    el.push_text(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                let Some(el) = stack.last_mut() else {
                    continue;
                };
                let name = r.xml10_content();
                if let Some(c) = r.resolve_char_ref().map_err(|e| at(&reader, &e))? {
                    el.push_text(c.encode_utf8(&mut [0; 4]));
                } else if let Some(s) = quick_xml::escape::resolve_predefined_entity(&name) {
                    el.push_text(s);
                } else {
                    return Err(IcecastXmlError::Xml(format!(
                        "{}: unknown entity &{name};",
                        // The reader is past `&name;`: point at its `&`.
                        line_column(
                            xml,
                            reader
                                .buffer_position()
                                .saturating_sub(name.len() as u64 + 2)
                        )
                    )));
                }
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    if let Some(open) = stack.last() {
        return Err(IcecastXmlError::Xml(format!(
            "{}: element <{}> is not closed",
            line_column(xml, xml.len() as u64),
            open.name
        )));
    }
    root.ok_or(IcecastXmlError::NoRoot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_attributes_and_references() {
        let root = parse(
            "<?xml version=\"1.0\"?>\n<!-- c --><a x=\"1&amp;2\"><b>p&lt;w&#x41;<![CDATA[&z]]></b><c/><d></d></a>",
        )
        .unwrap();
        assert_eq!(root.name, "a");
        assert_eq!(root.attr("x"), Some("1&2"));
        assert_eq!(root.children[0].text(), Some("p<wA&z"));
        assert_eq!(root.children[1].text(), None);
        assert_eq!(root.children[2].text(), None);
    }

    #[test]
    fn a_document_nested_a_million_deep_is_an_error_not_a_crash() {
        let deep = format!("<icecast>{}", "<a>".repeat(1_000_000));
        let err = parse(&deep).unwrap_err().to_string();
        assert!(err.contains("nested deeper than 64"), "{err}");
        // As deep as the limit still parses.
        let ok = format!(
            "<icecast>{}{}</icecast>",
            "<a>".repeat(MAX_DEPTH - 1),
            "</a>".repeat(MAX_DEPTH - 1)
        );
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn malformed_documents_are_errors() {
        assert!(matches!(parse("<a><b></a>"), Err(IcecastXmlError::Xml(_))));
        assert!(matches!(parse("<a>"), Err(IcecastXmlError::Xml(_))));
        assert!(matches!(parse("</a>"), Err(IcecastXmlError::Xml(_))));
        assert!(matches!(
            parse("<!-- only -->"),
            Err(IcecastXmlError::NoRoot)
        ));
        assert!(matches!(
            parse("<a>&bogus;</a>"),
            Err(IcecastXmlError::Xml(_))
        ));
        assert!(matches!(parse("<a/><b/>"), Err(IcecastXmlError::Xml(_))));
    }

    #[test]
    fn errors_name_the_line_and_column() {
        let e = parse("<icecast>\n  <limits>\n    <clients>5</sources>\n").unwrap_err();
        assert!(e.to_string().contains("line 3, column "), "{e}");
        let e = parse("<a>\n é &bogus;</a>").unwrap_err().to_string();
        assert!(e.contains("line 2, column 4"), "{e}");
        assert_eq!(line_column("ab\ncd", 4), "line 2, column 2");
        assert_eq!(line_column("ab", 99), "line 1, column 3");
    }
}
