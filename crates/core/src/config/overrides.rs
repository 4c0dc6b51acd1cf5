//! `--set key.path=value` overrides, applied to the YAML tree before it is
//! deserialized.
//!
//! An override replaces (or adds) one entry; the value is read as YAML, so
//! `--set system.sips.count=4`, `--set pe.clock="1.2 GHz"` and
//! `--set sip.cube_mesh={w: 2, h: 2}` all work, and an empty value sets
//! null (which unsets an optional key). Whether the path exists in the
//! schema is decided by deserialization itself: an unknown key is reported
//! with the `--set` argument as its origin. This module knows nothing of
//! the schema.

use std::sync::Arc;

use super::ConfigError;
use super::yaml::{self, Entry, Node, NodeKind, Origin};

/// The prefix that points an override at ccl.yaml instead of topology.yaml.
const CCL_PREFIX: &str = "ccl";

/// One parsed `--set key.path=value` argument.
#[derive(Debug, Clone)]
pub struct Override {
    arg: Arc<str>,
    path: Vec<String>,
    value: Node,
}

impl Override {
    /// Parses `key.path=value`.
    pub fn parse(arg: &str) -> Result<Self, ConfigError> {
        let fail = |message: String| ConfigError::Override {
            arg: arg.to_owned(),
            message,
        };
        let (key, value) = arg
            .split_once('=')
            .ok_or_else(|| fail("expected key.path=value, e.g. system.sips.count=4".into()))?;
        let path: Vec<String> = key.trim().split('.').map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            return Err(fail(format!(
                "`{key}` is not a key path like system.sips.count"
            )));
        }
        let arg: Arc<str> = Arc::from(arg);
        let mut value = yaml::parse(value, &arg)
            .map_err(|e| fail(format!("the value is not valid YAML: {}", e.message)))?;
        value.restamp(&Origin::Set {
            arg: Arc::clone(&arg),
        });
        Ok(Override { arg, path, value })
    }

    /// The key path this override sets, e.g. `system.sips.count`.
    pub fn path(&self) -> String {
        self.path.join(".")
    }

    /// This override with its first key removed if that key is `prefix`.
    fn strip_prefix(&self, prefix: &str) -> Option<Self> {
        match self.path.split_first() {
            Some((first, rest)) if first == prefix && !rest.is_empty() => Some(Override {
                arg: Arc::clone(&self.arg),
                path: rest.to_vec(),
                value: self.value.clone(),
            }),
            _ => None,
        }
    }

    fn error(&self, message: String) -> ConfigError {
        ConfigError::Override {
            arg: self.arg.to_string(),
            message,
        }
    }

    /// Sets the value in `root`, creating missing sections on the way.
    pub(crate) fn apply(&self, root: &mut Node) -> Result<(), ConfigError> {
        let origin = Origin::Set {
            arg: Arc::clone(&self.arg),
        };
        let mut node = root;
        for (depth, key) in self.path.iter().enumerate() {
            let entries = entries_mut(node).ok_or_else(|| {
                let section = self.path[..depth].join(".");
                self.error(format!(
                    "`{section}` is a single value, not a section with keys"
                ))
            })?;
            let index = find_or_insert(entries, key, &origin);
            let entry = &mut entries[index];
            if depth + 1 == self.path.len() {
                entry.key_origin = origin.clone();
            }
            node = &mut entry.value;
        }
        *node = self.value.clone();
        Ok(())
    }
}

/// The entries of a mapping node; a null node becomes an empty mapping.
fn entries_mut(node: &mut Node) -> Option<&mut Vec<Entry>> {
    if node.is_null() {
        node.kind = NodeKind::Map(Vec::new());
    }
    match &mut node.kind {
        NodeKind::Map(entries) => Some(entries),
        _ => None,
    }
}

fn find_or_insert(entries: &mut Vec<Entry>, key: &str, origin: &Origin) -> usize {
    if let Some(index) = entries.iter().position(|entry| entry.key == key) {
        return index;
    }
    entries.push(Entry {
        key: key.to_owned(),
        key_origin: origin.clone(),
        value: Node::empty_map(origin.clone()),
    });
    entries.len() - 1
}

/// The command line's `--set` arguments, split by the file they address.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Overrides of topology.yaml (`system.sips.count=4`).
    pub topology: Vec<Override>,
    /// Overrides of ccl.yaml, given with a `ccl.` prefix
    /// (`ccl.defaults.n_elem=16`), stored without it.
    pub ccl: Vec<Override>,
}

impl Overrides {
    /// Parses every argument, in order (a later one wins on the same key).
    /// An argument `@FILE` is every scalar of the YAML file `FILE` as an
    /// override in the file's order (an overlay such as `kernbench
    /// calibrate --out` writes; its `ccl:` section addresses ccl.yaml).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Self, ConfigError> {
        let mut expanded = Vec::new();
        for arg in args {
            match arg.as_ref().strip_prefix('@') {
                Some(file) => {
                    let source = super::ConfigSource::File(file.into());
                    expanded.extend(super::Document::read(&source)?.as_sets());
                }
                None => expanded.push(arg.as_ref().to_owned()),
            }
        }
        let mut overrides = Overrides::default();
        for arg in &expanded {
            let parsed = Override::parse(arg)?;
            match parsed.strip_prefix(CCL_PREFIX) {
                Some(ccl) => overrides.ccl.push(ccl),
                None => overrides.topology.push(parsed),
            }
        }
        Ok(overrides)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        yaml::parse(text, &Arc::from("t.yaml")).unwrap()
    }

    fn value_at<'a>(node: &'a Node, path: &[&str]) -> &'a Node {
        path.iter().fold(node, |node, key| match &node.kind {
            NodeKind::Map(entries) => &entries.iter().find(|e| e.key == *key).unwrap().value,
            _ => panic!("not a map"),
        })
    }

    fn text(node: &Node) -> &str {
        match &node.kind {
            NodeKind::Scalar { text, .. } => text,
            _ => panic!("not a scalar"),
        }
    }

    #[test]
    fn replaces_and_creates_entries() {
        let mut tree = root("a:\n  b: 1\n  c: 2\n");
        Override::parse("a.b=5").unwrap().apply(&mut tree).unwrap();
        Override::parse("a.d.e=hello world")
            .unwrap()
            .apply(&mut tree)
            .unwrap();
        assert_eq!(text(value_at(&tree, &["a", "b"])), "5");
        assert_eq!(text(value_at(&tree, &["a", "c"])), "2");
        assert_eq!(text(value_at(&tree, &["a", "d", "e"])), "hello world");
        let b = value_at(&tree, &["a", "b"]);
        assert_eq!(b.origin.to_string(), "--set a.b=5");
    }

    #[test]
    fn flow_values_and_null() {
        let mut tree = root("a: 1\n");
        Override::parse("m={w: 2, h: 3}")
            .unwrap()
            .apply(&mut tree)
            .unwrap();
        assert_eq!(text(value_at(&tree, &["m", "h"])), "3");
        Override::parse("a=").unwrap().apply(&mut tree).unwrap();
        assert!(value_at(&tree, &["a"]).is_null());
    }

    #[test]
    fn malformed_arguments_are_errors() {
        let no_eq = Override::parse("a.b").unwrap_err().to_string();
        assert!(
            no_eq.starts_with("--set a.b: expected key.path=value"),
            "{no_eq}"
        );
        assert!(Override::parse("a..b=1").is_err());
        assert!(Override::parse("=1").is_err());
        assert!(Override::parse("a=[1").is_err());
        let mut tree = root("a: 1\n");
        let through_value = Override::parse("a.b=2")
            .unwrap()
            .apply(&mut tree)
            .unwrap_err();
        assert!(through_value.to_string().contains("`a` is a single value"));
    }

    #[test]
    fn ccl_prefix_selects_the_ccl_file() {
        let sets = Overrides::parse(&["ccl.defaults.n_elem=16", "system.sips.count=4"]).unwrap();
        assert_eq!(sets.ccl.len(), 1);
        assert_eq!(sets.ccl[0].path(), "defaults.n_elem");
        assert_eq!(sets.topology[0].path(), "system.sips.count");
    }
}
