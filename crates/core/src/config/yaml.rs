//! A YAML document as a tree that remembers where every key and value came
//! from, and a serde `Deserializer` over that tree.
//!
//! The text is read by `saphyr-parser` (pure-Rust YAML 1.2 events with
//! spans). Each node keeps an [`Origin`]: a file position, or the `--set`
//! argument that put it there. The deserializer tracks the key path as it
//! descends, so every error it reports says where (origin) and what
//! (`system.sips.w`) without a second pass. Plain scalars are typed on
//! demand: a string field receives the text as written, a number field the
//! YAML 1.2 core-schema number. Tags are rejected; anchors and aliases work,
//! within limits: a document may nest [`MAX_DEPTH`] collections deep and
//! hold [`MAX_VALUES`] values once aliases are expanded, so a small hostile
//! file (an alias bomb) is an error at the alias, not gigabytes of tree.
//!
//! This module owns YAML syntax and positions. It knows nothing of what the
//! keys mean.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span};
use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, Unexpected, Visitor};

/// Where a piece of configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A position in a file (or embedded text): 1-based line and column.
    File {
        /// The file's name as shown to the user.
        source: Arc<str>,
        /// Line, from 1.
        line: usize,
        /// Column in characters, from 1.
        column: usize,
    },
    /// A `--set key.path=value` command-line override.
    Set {
        /// The argument as given.
        arg: Arc<str>,
    },
}

impl Origin {
    fn at(source: &Arc<str>, span: Span) -> Self {
        Origin::File {
            source: Arc::clone(source),
            line: span.start.line(),
            column: span.start.col() + 1,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File {
                source,
                line,
                column,
            } => write!(f, "{source}:{line}:{column}"),
            Origin::Set { arg } => write!(f, "--set {arg}"),
        }
    }
}

/// Deepest nesting of mappings and sequences a document may have.
pub const MAX_DEPTH: usize = 64;

/// Most values (scalars, mappings, sequences) a document may hold once its
/// aliases are expanded; the embedded configurations hold a few hundred.
pub const MAX_VALUES: usize = 100_000;

/// One YAML value with its origin.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) origin: Origin,
    pub(crate) kind: NodeKind,
}

#[derive(Debug, Clone)]
pub(crate) enum NodeKind {
    /// A scalar as written; `plain` is false for quoted and block scalars,
    /// which are always strings.
    Scalar {
        text: String,
        plain: bool,
    },
    Map(Vec<Entry>),
    Seq(Vec<Node>),
}

/// One `key: value` pair of a mapping; the key's origin is where errors
/// about the entry point.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) key_origin: Origin,
    pub(crate) value: Node,
}

impl Node {
    /// An empty mapping.
    pub(crate) fn empty_map(origin: Origin) -> Node {
        Node {
            origin,
            kind: NodeKind::Map(Vec::new()),
        }
    }

    /// The YAML null (`~`, `null`, or nothing at all).
    pub(crate) fn is_null(&self) -> bool {
        matches!(&self.kind, NodeKind::Scalar { text, plain: true } if is_null_text(text))
    }

    /// Gives this node and everything under it the same origin.
    pub(crate) fn restamp(&mut self, origin: &Origin) {
        self.origin = origin.clone();
        match &mut self.kind {
            NodeKind::Scalar { .. } => {}
            NodeKind::Map(entries) => entries.iter_mut().for_each(|entry| {
                entry.key_origin = origin.clone();
                entry.value.restamp(origin);
            }),
            NodeKind::Seq(items) => items.iter_mut().for_each(|item| item.restamp(origin)),
        }
    }
}

/// A syntax problem at a position.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub(crate) origin: Origin,
    pub(crate) message: String,
}

/// Parses one YAML document; an empty text is a null document.
pub(crate) fn parse(text: &str, source: &Arc<str>) -> Result<Node, SyntaxError> {
    let mut builder = TreeBuilder::new(source);
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| scan_error(source, &e))?;
        builder.push(event, span)?;
    }
    Ok(builder.root.unwrap_or_else(|| Node {
        origin: Origin::File {
            source: Arc::clone(source),
            line: 1,
            column: 1,
        },
        kind: NodeKind::Scalar {
            text: String::new(),
            plain: true,
        },
    }))
}

fn scan_error(source: &Arc<str>, error: &ScanError) -> SyntaxError {
    let mark = error.marker();
    SyntaxError {
        origin: Origin::File {
            source: Arc::clone(source),
            line: mark.line(),
            column: mark.col() + 1,
        },
        message: format!("YAML syntax error: {}", error.info()),
    }
}

/// A mapping or sequence whose end event has not arrived yet.
/// `first_value` is the value count when it opened, so the values it holds
/// (aliases expanded) are the count at its end minus that.
enum Open {
    Map {
        origin: Origin,
        anchor: usize,
        first_value: usize,
        entries: Vec<Entry>,
        key: Option<(String, Origin)>,
    },
    Seq {
        origin: Origin,
        anchor: usize,
        first_value: usize,
        items: Vec<Node>,
    },
}

/// Builds the node tree from parser events.
struct TreeBuilder<'s> {
    source: &'s Arc<str>,
    open: Vec<Open>,
    /// Each anchor's node and how many values it holds.
    anchors: BTreeMap<usize, (Node, usize)>,
    /// Values so far, aliases counted at their expanded size.
    values: usize,
    root: Option<Node>,
}

impl<'s> TreeBuilder<'s> {
    fn new(source: &'s Arc<str>) -> Self {
        TreeBuilder {
            source,
            open: Vec::new(),
            anchors: BTreeMap::new(),
            values: 0,
            root: None,
        }
    }

    fn error(&self, span: Span, message: String) -> SyntaxError {
        SyntaxError {
            origin: Origin::at(self.source, span),
            message,
        }
    }

    /// Counts `n` more values, refusing to pass [`MAX_VALUES`].
    fn charge(&mut self, n: usize, span: Span) -> Result<(), SyntaxError> {
        self.values = self.values.saturating_add(n);
        if self.values > MAX_VALUES {
            return Err(self.error(
                span,
                format!(
                    "the document holds more than {MAX_VALUES} values once its aliases are \
                     expanded (an alias bomb?): use fewer or smaller aliases"
                ),
            ));
        }
        Ok(())
    }

    /// Checks that one more collection may open.
    fn deepen(&mut self, span: Span) -> Result<usize, SyntaxError> {
        if self.open.len() >= MAX_DEPTH {
            return Err(self.error(
                span,
                format!("mappings and sequences nest more than {MAX_DEPTH} deep"),
            ));
        }
        self.charge(1, span)?;
        Ok(self.values - 1)
    }

    fn push(&mut self, event: Event<'_>, span: Span) -> Result<(), SyntaxError> {
        let origin = Origin::at(self.source, span);
        match event {
            Event::DocumentStart(_) if self.root.is_some() => Err(self.error(
                span,
                "a configuration file holds one YAML document; remove the extra `---`".into(),
            )),
            Event::Scalar(_, _, _, Some(tag))
            | Event::MappingStart(_, Some(tag))
            | Event::SequenceStart(_, Some(tag)) => Err(self.error(
                span,
                format!(
                    "YAML tags ({}{}) are not supported here",
                    tag.handle, tag.suffix
                ),
            )),
            Event::Scalar(text, style, anchor, None) => {
                let plain = style == ScalarStyle::Plain;
                let kind = NodeKind::Scalar {
                    text: text.into_owned(),
                    plain,
                };
                self.charge(1, span)?;
                self.complete(Node { origin, kind }, anchor, 1)
            }
            Event::MappingStart(anchor, None) => {
                let first_value = self.deepen(span)?;
                self.open.push(Open::Map {
                    origin,
                    anchor,
                    first_value,
                    entries: Vec::new(),
                    key: None,
                });
                Ok(())
            }
            Event::SequenceStart(anchor, None) => {
                let first_value = self.deepen(span)?;
                self.open.push(Open::Seq {
                    origin,
                    anchor,
                    first_value,
                    items: Vec::new(),
                });
                Ok(())
            }
            Event::MappingEnd | Event::SequenceEnd => self.close(),
            Event::Alias(id) => self.alias(id, span),
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd => Ok(()),
        }
    }

    fn alias(&mut self, id: usize, span: Span) -> Result<(), SyntaxError> {
        let Some((node, size)) = self.anchors.get(&id) else {
            return Err(self.error(span, "alias to an unknown anchor".into()));
        };
        let (node, size) = (node.clone(), *size);
        self.charge(size, span)?;
        self.complete(node, 0, size)
    }

    fn close(&mut self) -> Result<(), SyntaxError> {
        let (node, anchor, first_value) = match self.open.pop() {
            Some(Open::Map {
                origin,
                anchor,
                first_value,
                entries,
                ..
            }) => (
                Node {
                    origin,
                    kind: NodeKind::Map(entries),
                },
                anchor,
                first_value,
            ),
            Some(Open::Seq {
                origin,
                anchor,
                first_value,
                items,
            }) => (
                Node {
                    origin,
                    kind: NodeKind::Seq(items),
                },
                anchor,
                first_value,
            ),
            None => return Ok(()),
        };
        self.complete(node, anchor, self.values - first_value)
    }

    /// Attaches a finished node of `size` values to its parent (or makes it
    /// the root).
    fn complete(&mut self, node: Node, anchor: usize, size: usize) -> Result<(), SyntaxError> {
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.open.last_mut() {
            None => self.root = Some(node),
            Some(Open::Seq { items, .. }) => items.push(node),
            Some(Open::Map { entries, key, .. }) => match key.take() {
                Some((key, key_origin)) => entries.push(Entry {
                    key,
                    key_origin,
                    value: node,
                }),
                None => *key = Some(map_key(entries, node)?),
            },
        }
        Ok(())
    }
}

/// Checks that `node` can be a key of a mapping holding `entries`.
fn map_key(entries: &[Entry], node: Node) -> Result<(String, Origin), SyntaxError> {
    let NodeKind::Scalar { text, .. } = node.kind else {
        return Err(SyntaxError {
            origin: node.origin,
            message: "mapping keys must be plain words, not mappings or sequences".into(),
        });
    };
    if let Some(first) = entries.iter().find(|entry| entry.key == text) {
        return Err(SyntaxError {
            origin: node.origin,
            message: format!(
                "duplicate key `{text}` (first given at {})",
                first.key_origin
            ),
        });
    }
    Ok((text, node.origin))
}

fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A deserialization failure, positioned by the innermost node that saw it.
#[derive(Debug)]
pub(crate) struct DeError {
    pub(crate) message: String,
    pub(crate) at: Option<(Origin, String)>,
}

impl DeError {
    fn located(mut self, origin: &Origin, path: &str) -> Self {
        if self.at.is_none() {
            self.at = Some((origin.clone(), path.to_owned()));
        }
        self
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

/// The longest string an error quotes whole (a whole file read as one
/// scalar, e.g. `--topology /etc/passwd`, is cut to this).
const QUOTE_MAX: usize = 60;

/// How a value that did not fit reads in a message: `"x"`, `-1`, `a mapping`.
fn describe(unexpected: Unexpected<'_>) -> String {
    match unexpected {
        Unexpected::Str(text) if text.chars().count() > QUOTE_MAX => {
            let cut: String = text.chars().take(QUOTE_MAX).collect();
            format!("{cut:?}... ({} B)", text.len())
        }
        Unexpected::Str(text) => format!("{text:?}"),
        Unexpected::Unsigned(n) => n.to_string(),
        Unexpected::Signed(n) => n.to_string(),
        Unexpected::Float(x) => x.to_string(),
        Unexpected::Bool(b) => b.to_string(),
        Unexpected::Unit => "nothing (null)".into(),
        Unexpected::Map => "a mapping".into(),
        Unexpected::Seq => "a sequence".into(),
        other => other.to_string(),
    }
}

fn one_of(expected: &'static [&'static str]) -> String {
    let names: Vec<String> = expected.iter().map(|name| format!("`{name}`")).collect();
    match names.len() {
        0 => "no keys here".into(),
        _ => format!("expected one of {}", names.join(", ")),
    }
}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        DeError {
            message: message.to_string(),
            at: None,
        }
    }
    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        Self::custom(format!(
            "expected {expected}, found {}",
            describe(unexpected)
        ))
    }
    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        Self::invalid_type(unexpected, expected)
    }
    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Self::custom(format!("unknown key `{field}`, {}", one_of(expected)))
    }
    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        Self::custom(format!("unknown value `{variant}`, {}", one_of(expected)))
    }
    fn missing_field(field: &'static str) -> Self {
        Self::custom(format!("missing key `{field}`"))
    }
}

/// `parent.key`, or `key` at the top.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// Deserializes one node; `at` is where errors about it point (the key of a
/// mapping entry, else the node itself) and `path` its key path.
#[derive(Clone, Copy)]
pub(crate) struct NodeDe<'a> {
    pub(crate) node: &'a Node,
    pub(crate) at: &'a Origin,
    pub(crate) path: &'a str,
}

impl<'a> NodeDe<'a> {
    fn locate<T>(self, result: Result<T, DeError>) -> Result<T, DeError> {
        result.map_err(|e| e.located(self.at, self.path))
    }

    fn scalar_text(self) -> Option<&'a str> {
        match &self.node.kind {
            NodeKind::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    fn visit_node<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Map(entries) => visitor.visit_map(MapDe {
                entries: entries.iter(),
                pending: None,
                path: self.path,
            }),
            NodeKind::Seq(items) => visitor.visit_seq(SeqDe {
                items: items.iter().enumerate(),
                path: self.path,
            }),
            NodeKind::Scalar { text, plain: true } => visit_plain(text, visitor),
            NodeKind::Scalar { text, plain: false } => visitor.visit_str(text),
        }
    }
}

/// Hands a plain scalar to `visitor` typed by the YAML 1.2 core schema.
fn visit_plain<'de, V: Visitor<'de>>(text: &str, visitor: V) -> Result<V::Value, DeError> {
    if is_null_text(text) {
        return visitor.visit_unit();
    }
    match text {
        "true" | "True" | "TRUE" => return visitor.visit_bool(true),
        "false" | "False" | "FALSE" => return visitor.visit_bool(false),
        _ => {}
    }
    if let Some(n) = parse_integer(text) {
        return match u64::try_from(n) {
            Ok(n) => visitor.visit_u64(n),
            Err(_) => visitor.visit_i64(n),
        };
    }
    match parse_float(text) {
        Some(x) => visitor.visit_f64(x),
        None => visitor.visit_str(text),
    }
}

/// `[-+]?[0-9]+`, `0x[0-9a-fA-F]+` or `0o[0-7]+` within `i64`.
fn parse_integer(text: &str) -> Option<i64> {
    if let Some(hex) = text.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    if let Some(octal) = text.strip_prefix("0o") {
        return i64::from_str_radix(octal, 8).ok();
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    let decimal = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    decimal.then(|| text.parse().ok()).flatten()
}

/// A number with a point or exponent, e.g. `0.9`, `1e3`.
fn parse_float(text: &str) -> Option<f64> {
    let numeric = text.bytes().any(|b| b.is_ascii_digit())
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    numeric.then(|| text.parse().ok()).flatten()
}

impl<'de> Deserializer<'de> for NodeDe<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.locate(self.visit_node(visitor))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.scalar_text() {
            Some(text) => self.locate(visitor.visit_str(text)),
            None => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            self.locate(visitor.visit_none())
        } else {
            self.locate(visitor.visit_some(self))
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.locate(visitor.visit_newtype_struct(self))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.scalar_text() {
            Some(text) => {
                let variant: StrDeserializer<'_, DeError> = text.into_deserializer();
                self.locate(visitor.visit_enum(variant))
            }
            None => self.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct ignored_any
    }
}

/// The entries of a mapping, each deserialized with its own key path.
struct MapDe<'a> {
    entries: std::slice::Iter<'a, Entry>,
    pending: Option<&'a Entry>,
    path: &'a str,
}

impl<'de> de::MapAccess<'de> for MapDe<'_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some(entry);
        let key: StrDeserializer<'_, DeError> = entry.key.as_str().into_deserializer();
        seed.deserialize(key)
            .map(Some)
            .map_err(|e| e.located(&entry.key_origin, &join(self.path, &entry.key)))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some(entry) = self.pending.take() else {
            return Err(de::Error::custom(
                "a mapping value was requested before its key",
            ));
        };
        let path = join(self.path, &entry.key);
        let value = NodeDe {
            node: &entry.value,
            at: &entry.key_origin,
            path: &path,
        };
        value.locate(seed.deserialize(value))
    }
}

/// The items of a sequence, with paths `parent[i]`.
struct SeqDe<'a> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Node>>,
    path: &'a str,
}

impl<'de> de::SeqAccess<'de> for SeqDe<'_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some((index, node)) = self.items.next() else {
            return Ok(None);
        };
        let path = format!("{}[{index}]", self.path);
        let item = NodeDe {
            node,
            at: &node.origin,
            path: &path,
        };
        item.locate(seed.deserialize(item)).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    fn tree(text: &str) -> Result<Node, SyntaxError> {
        parse(text, &Arc::from("t.yaml"))
    }

    fn load<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, DeError> {
        let root = tree(text).unwrap();
        T::deserialize(NodeDe {
            node: &root,
            at: &root.origin,
            path: "",
        })
    }

    fn located(error: &DeError) -> String {
        let (origin, path) = error.at.as_ref().unwrap();
        format!("{origin}: {path}: {}", error.message)
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        inner: Inner,
        name: Option<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: u32,
        flag: bool,
        kind: Kind,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Alpha,
        Beta,
    }

    #[test]
    fn typed_scalars_and_options() {
        let outer: Outer = load("inner: {n: 3, flag: true, kind: beta}\nname: 42\n").unwrap();
        assert_eq!(outer.inner.n, 3);
        assert!(outer.inner.flag);
        assert_eq!(outer.inner.kind, Kind::Beta);
        assert_eq!(outer.name.as_deref(), Some("42"));
        let outer: Outer = load("inner: {n: 3, flag: false, kind: alpha}\nname: ~\n").unwrap();
        assert_eq!(outer.name, None);
    }

    #[test]
    fn errors_carry_position_and_path() {
        let error = load::<Outer>("inner:\n  n: x\n  flag: true\n  kind: alpha\n").unwrap_err();
        assert_eq!(
            located(&error),
            "t.yaml:2:3: inner.n: expected u32, found \"x\""
        );
        let error =
            load::<Outer>("inner:\n  n: 1\n  flag: true\n  kind: alpha\n  bogus: 1\n").unwrap_err();
        assert_eq!(
            located(&error),
            "t.yaml:5:3: inner.bogus: unknown key `bogus`, expected one of `n`, `flag`, `kind`"
        );
        let error = load::<Outer>("inner:\n  n: 1\n  flag: true\n  kind: gamma\n").unwrap_err();
        assert!(located(&error).starts_with("t.yaml:4:3: inner.kind: unknown value `gamma`"));
        let error = load::<Outer>("inner:\n  n: 1\n  kind: alpha\n").unwrap_err();
        assert_eq!(located(&error), "t.yaml:1:1: inner: missing key `flag`");
    }

    #[test]
    fn quoted_numbers_stay_strings() {
        let error = load::<Inner>("n: \"3\"\nflag: true\nkind: alpha\n").unwrap_err();
        assert!(error.message.contains("found \"3\""), "{error}");
    }

    #[test]
    fn sequences_and_aliases() {
        let map: BTreeMap<String, Vec<i64>> = load("a: &x [1, -2, 0x10]\nb: *x\n").unwrap();
        assert_eq!(map["a"], vec![1, -2, 16]);
        assert_eq!(map["b"], map["a"]);
        let error = load::<BTreeMap<String, Vec<u8>>>("a:\n  - 1\n  - 300\n").unwrap_err();
        assert_eq!(located(&error), "t.yaml:3:5: a[1]: expected u8, found 300");
    }

    #[test]
    fn syntax_problems_are_positioned() {
        let dup = tree("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(dup.origin.to_string(), "t.yaml:3:1");
        assert!(
            dup.message
                .contains("duplicate key `a` (first given at t.yaml:1:1)")
        );
        let bad = tree("a: b: c\n").unwrap_err();
        assert_eq!(bad.origin.to_string(), "t.yaml:1:5");
        assert!(tree("--- 1\n--- 2\n").is_err());
        assert!(tree("a: !!str 1\n").unwrap_err().message.contains("tags"));
        assert!(tree("").unwrap().is_null());
    }

    #[test]
    fn alias_bombs_stop_at_the_value_limit() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..9 {
            let prev = format!("*a{}", level - 1);
            let items = [prev.as_str(); 10].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        let error = tree(&text).unwrap_err();
        assert!(
            error.message.contains("more than 100000 values"),
            "{}",
            error.message
        );
        assert!(
            error.origin.to_string().starts_with("t.yaml:5:"),
            "{}",
            error.origin
        );
        let modest = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n";
        assert!(tree(modest).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        let error = tree(&deep).unwrap_err();
        assert!(
            error.message.contains("nest more than 64 deep"),
            "{}",
            error.message
        );
        let fine = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(tree(&fine).is_ok());
    }
}
