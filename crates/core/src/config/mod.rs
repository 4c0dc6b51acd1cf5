//! Configuration loading: YAML text → overrides → typed values, with errors
//! that say where and what.
//!
//! A [`Document`] is one YAML file read into a tree that remembers the
//! position of every key (see `yaml`). `--set` [`Override`]s are applied to
//! that tree, then [`Document::deserialize`] produces the caller's serde
//! type with `deny_unknown_fields`. Any problem becomes a [`ConfigError`]
//! naming the file, line and column (or the `--set` argument), the key path
//! and what was expected. After deserialization, a caller's semantic checks
//! point at keys through [`Document::error_at`].
//!
//! [`read_capped`] reads any file a user hands in (this module's and other
//! readers'), with a size cap.
//!
//! [`units`] holds the quantity types (`"256 GB/s"`, `"8 ns"`, `"1 MiB"`).
//!
//! This module owns file handling, YAML, positions and units. It knows
//! nothing of the machine or the collectives: the schemas live in
//! `topology::spec` and `ccl::config`.

mod error;
mod overrides;
mod read;
pub mod units;
mod yaml;

use std::borrow::Cow;
use std::fmt::Display;
use std::path::PathBuf;
use std::sync::Arc;

use serde::de::DeserializeOwned;

pub use error::ConfigError;
pub use overrides::{Override, Overrides};
pub use read::{CONFIG_CAP, excerpt, read_capped, read_capped_bytes};
pub use yaml::Origin;

use yaml::{Node, NodeDe, NodeKind};

/// Where a configuration's text comes from.
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// A file on disk.
    File(PathBuf),
    /// Text in memory, e.g. the defaults embedded in the binary.
    Text {
        /// The name errors show, e.g. `<embedded configs/topology.yaml>`.
        name: Cow<'static, str>,
        /// The YAML text.
        text: Cow<'static, str>,
    },
}

impl ConfigSource {
    /// A configuration compiled into the binary from `file`.
    pub fn embedded(file: &str, text: &'static str) -> Self {
        ConfigSource::Text {
            name: Cow::Owned(format!("<embedded {file}>")),
            text: Cow::Borrowed(text),
        }
    }
}

/// One parsed YAML configuration, with the position of every key.
#[derive(Debug, Clone)]
pub struct Document {
    root: Node,
}

impl Document {
    /// Parses `text`; `name` is how errors refer to it.
    pub fn parse(text: &str, name: &str) -> Result<Self, ConfigError> {
        let root = yaml::parse(text, &Arc::from(name)).map_err(|e| ConfigError::Syntax {
            origin: e.origin,
            message: e.message,
        })?;
        Ok(Document { root })
    }

    /// Reads and parses `source`.
    pub fn read(source: &ConfigSource) -> Result<Self, ConfigError> {
        match source {
            ConfigSource::File(path) => {
                let text =
                    read_capped(path, CONFIG_CAP, "a configuration file").map_err(|source| {
                        ConfigError::Read {
                            path: path.clone(),
                            source,
                        }
                    })?;
                Document::parse(&text, &path.display().to_string())
            }
            ConfigSource::Text { name, text } => Document::parse(text, name),
        }
    }

    /// Reads `source` and applies `overrides` in order.
    pub fn load(source: &ConfigSource, overrides: &[Override]) -> Result<Self, ConfigError> {
        let mut document = Document::read(source)?;
        for one in overrides {
            one.apply(&mut document.root)?;
        }
        Ok(document)
    }

    /// The document as `T`; unknown keys are errors if `T` denies them.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let root = NodeDe {
            node: &self.root,
            at: &self.root.origin,
            path: "",
        };
        T::deserialize(root).map_err(|e| {
            let (origin, path) =
                e.at.unwrap_or_else(|| (self.root.origin.clone(), String::new()));
            invalid(origin, &path, e.message)
        })
    }

    /// An error about the key at `path` (`system.sips.w`), positioned at
    /// that key, or at its nearest written ancestor if it was left out. For
    /// a section, the `--set` arguments that changed keys directly in it are
    /// named too, since they may be the cause.
    pub fn error_at(&self, path: &str, message: impl Display) -> ConfigError {
        let (origin, node) = self.find(path);
        let mut message = message.to_string();
        let sets = set_arguments(node);
        if !sets.is_empty() {
            message = format!("{message} (with {})", sets.join(", "));
        }
        invalid(origin.clone(), path, message)
    }

    /// The scalar written at `path` (`system.inter_sip.bandwidth`), as
    /// written; `None` when the key is absent or holds a mapping or a
    /// list.
    pub fn scalar_at(&self, path: &str) -> Option<&str> {
        let mut node = &self.root;
        for key in path.split('.') {
            let NodeKind::Map(entries) = &node.kind else {
                return None;
            };
            node = &entries.iter().find(|entry| entry.key == key)?.value;
        }
        match &node.kind {
            NodeKind::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Every scalar of the document as a `--set` argument
    /// (`key.path=value`), in the document's order: the file as an
    /// overlay of overrides (`--set @FILE`). A list is one value, written
    /// back as a flow sequence of its scalars.
    pub fn as_sets(&self) -> Vec<String> {
        let mut sets = Vec::new();
        leaves(&self.root, &mut Vec::new(), &mut sets);
        sets
    }

    /// The origin and node at `path`, or of its nearest existing ancestor.
    /// A key may index a list: `links[0]` is item 0 of `links`.
    fn find(&self, path: &str) -> (&Origin, &Node) {
        let mut node = &self.root;
        let mut origin = &self.root.origin;
        for step in path.split('.') {
            let (key, item) = list_item(step);
            let NodeKind::Map(entries) = &node.kind else {
                break;
            };
            let Some(entry) = entries.iter().find(|entry| entry.key == key) else {
                break;
            };
            origin = &entry.key_origin;
            node = &entry.value;
            if let (Some(i), NodeKind::Seq(items)) = (item, &node.kind)
                && let Some(at) = items.get(i)
            {
                origin = &at.origin;
                node = at;
            }
        }
        (origin, node)
    }
}

/// `key[i]` as (`key`, `Some(i)`); any other step as (`step`, `None`).
fn list_item(step: &str) -> (&str, Option<usize>) {
    let indexed = step
        .strip_suffix(']')
        .and_then(|s| s.split_once('['))
        .and_then(|(key, i)| Some((key, i.parse().ok()?)));
    match indexed {
        Some((key, i)) => (key, Some(i)),
        None => (step, None),
    }
}

/// The scalars under `node` as `path=value` into `out`.
fn leaves(node: &Node, path: &mut Vec<String>, out: &mut Vec<String>) {
    match &node.kind {
        NodeKind::Map(entries) => {
            for entry in entries {
                path.push(entry.key.clone());
                leaves(&entry.value, path, out);
                path.pop();
            }
        }
        NodeKind::Scalar { text, .. } if !path.is_empty() => {
            out.push(format!("{}={text}", path.join(".")));
        }
        NodeKind::Seq(items) if !path.is_empty() => {
            let items: Vec<&str> = items
                .iter()
                .filter_map(|item| match &item.kind {
                    NodeKind::Scalar { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            out.push(format!("{}=[{}]", path.join("."), items.join(", ")));
        }
        _ => {}
    }
}

/// The `--set` arguments behind the direct entries of a mapping node.
fn set_arguments(node: &Node) -> Vec<String> {
    let NodeKind::Map(entries) = &node.kind else {
        return Vec::new();
    };
    let sets = entries.iter().filter_map(|entry| match &entry.key_origin {
        Origin::Set { arg } => Some(format!("--set {arg}")),
        Origin::File { .. } => None,
    });
    let mut sets: Vec<String> = sets.collect();
    sets.dedup();
    sets
}

fn invalid(origin: Origin, path: &str, message: String) -> ConfigError {
    let path = if path.is_empty() {
        "(top level)".to_owned()
    } else {
        path.to_owned()
    };
    ConfigError::Invalid {
        origin,
        path,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        link: Link,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Link {
        bandwidth: units::Bandwidth,
        latency: crate::sim::SimDuration,
    }

    const SAMPLE: &str = "link:\n  bandwidth: 256 GB/s\n  latency: \"2 ns\"\n";

    fn sample(overrides: &[&str]) -> Result<Sample, ConfigError> {
        let sets: Vec<Override> = overrides
            .iter()
            .map(|s| Override::parse(s).unwrap())
            .collect();
        let source = ConfigSource::Text {
            name: "s.yaml".into(),
            text: SAMPLE.into(),
        };
        Document::load(&source, &sets)?.deserialize()
    }

    #[test]
    fn units_deserialize_from_plain_and_quoted_scalars() {
        let sample = sample(&[]).unwrap();
        assert_eq!(sample.link.bandwidth.to_string(), "256 GB/s");
        assert_eq!(sample.link.latency.as_ps(), 2_000);
    }

    #[test]
    fn unit_errors_name_file_line_path_and_expectation() {
        let error = sample(&["link.latency=8 GB"]).unwrap_err().to_string();
        assert!(
            error.starts_with("--set link.latency=8 GB: link.latency: "),
            "{error}"
        );
        assert!(error.contains("`GB` is a unit of a size"), "{error}");
        let text = "link:\n  bandwidth: 256\n  latency: 2 ns\n";
        let error = Document::parse(text, "s.yaml")
            .unwrap()
            .deserialize::<Sample>()
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("s.yaml:2:3: link.bandwidth: \"256\" has no unit"),
            "{error}"
        );
    }

    #[test]
    fn unknown_override_path_names_the_argument() {
        let error = sample(&["link.colour=red"]).unwrap_err().to_string();
        assert!(
            error.starts_with("--set link.colour=red: link.colour: unknown key `colour`"),
            "{error}"
        );
    }

    #[test]
    fn error_at_points_at_the_key_or_its_section() {
        let document = Document::parse(SAMPLE, "s.yaml").unwrap();
        let at_key = document.error_at("link.latency", "too slow").to_string();
        assert_eq!(at_key, "s.yaml:3:3: link.latency: too slow");
        let absent = document.error_at("link.width", "missing").to_string();
        assert_eq!(absent, "s.yaml:1:1: link.width: missing");
    }

    #[test]
    fn section_errors_name_the_overrides_inside() {
        let source = ConfigSource::Text {
            name: "s.yaml".into(),
            text: SAMPLE.into(),
        };
        let sets = [Override::parse("link.latency=3 ns").unwrap()];
        let document = Document::load(&source, &sets).unwrap();
        let error = document.error_at("link", "inconsistent").to_string();
        assert_eq!(
            error,
            "s.yaml:1:1: link: inconsistent (with --set link.latency=3 ns)"
        );
    }

    #[test]
    fn a_document_gives_its_scalars_and_its_leaves_as_sets() {
        let document = Document::parse(SAMPLE, "s.yaml").unwrap();
        assert_eq!(document.scalar_at("link.bandwidth"), Some("256 GB/s"));
        assert_eq!(document.scalar_at("link"), None);
        assert_eq!(document.scalar_at("link.width"), None);
        assert_eq!(
            document.as_sets(),
            ["link.bandwidth=256 GB/s", "link.latency=2 ns"]
        );
    }

    #[test]
    fn unreadable_file_is_an_error() {
        let source = ConfigSource::File("/nonexistent/kernbench.yaml".into());
        let error = Document::read(&source).unwrap_err().to_string();
        assert!(
            error.starts_with("cannot read /nonexistent/kernbench.yaml"),
            "{error}"
        );
    }
}
