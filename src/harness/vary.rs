//! What-if sweeps: `sweep --vary KEY=V1,V2,...` over any configuration
//! value `--set` accepts (a topology.yaml key, or a ccl.yaml key with the
//! `ccl.` prefix), in the units the YAML takes (`50 GB/s`, `8 ns`).
//!
//! [`Vary`] is one parsed `--vary` argument. [`configurations`] turns the
//! base configuration (the files and `--set` overrides) and the `--vary`
//! lists into one [`Variant`] per combination of values (the first
//! `--vary` outermost, the last varying fastest), each named by its
//! `(key, value)` fields, so every varied key becomes a column of the
//! results and a part of each curve's label. Every value is loaded, built
//! into a machine and checked the way `run` checks a configuration
//! *before* anything runs: a value the key does not take, a key no schema
//! has, an empty list or a value listed twice is a [`VaryError`] naming the
//! key and the value (ADR-0029).
//!
//! Knows the configuration mechanics and the runtime's configuration
//! check; nothing of the CLI or of what the keys mean.

use std::fmt;
use std::str::FromStr;

use super::sweep::Variant;
use crate::ccl::CclConfig;
use crate::config::{ConfigError, ConfigSource, Overrides};
use crate::topology::{Machine, TopologySpec};

/// One `--vary KEY=V1,V2,...`: a configuration key and its values, in
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vary {
    /// The key path as `--set` takes it (`system.inter_sip.bandwidth`,
    /// `ccl.defaults.algorithm`).
    pub key: String,
    /// Its values, as YAML text (`100 GB/s`).
    pub values: Vec<String>,
}

/// A `--vary` argument or value that cannot be swept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VaryError {
    /// Not `KEY=V1,V2,...`.
    #[error(
        "--vary {0}: expected KEY=V1,V2,..., e.g. 'system.inter_sip.bandwidth=50 GB/s,100 GB/s'"
    )]
    Syntax(String),
    /// No value, or an empty one in the list.
    #[error("--vary {key}: an empty value in `{key}={list}`; expected {key}=V1,V2,...")]
    Empty {
        /// The key.
        key: String,
        /// The list as given.
        list: String,
    },
    /// The same value twice in one list.
    #[error("--vary {key}: the value `{value}` is listed twice")]
    Repeated {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// The same key in two `--vary` arguments.
    #[error("--vary {key}: given twice; list all its values in one --vary")]
    KeyTwice {
        /// The key.
        key: String,
    },
    /// A value (or combination of values) the configuration refuses.
    #[error("--vary {assignment}: {message}")]
    Invalid {
        /// `key=value` (each varied key's, for a combination).
        assignment: String,
        /// Why, as the configuration check says it.
        message: String,
    },
}

impl FromStr for Vary {
    type Err = VaryError;

    fn from_str(text: &str) -> Result<Vary, VaryError> {
        let (key, list) = text
            .split_once('=')
            .ok_or_else(|| VaryError::Syntax(text.to_owned()))?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(VaryError::Syntax(text.to_owned()));
        }
        let values: Vec<String> = split_list(list)
            .into_iter()
            .map(|v| v.trim().to_owned())
            .collect();
        if values.iter().any(String::is_empty) {
            return Err(VaryError::Empty {
                key: key.to_owned(),
                list: list.to_owned(),
            });
        }
        for (i, value) in values.iter().enumerate() {
            if values[..i].contains(value) {
                return Err(VaryError::Repeated {
                    key: key.to_owned(),
                    value: value.clone(),
                });
            }
        }
        Ok(Vary {
            key: key.to_owned(),
            values,
        })
    }
}

impl fmt::Display for Vary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.values.join(","))
    }
}

/// `list` cut at its commas, except those inside YAML brackets or braces
/// (`{w: 2, h: 2}` is one value).
fn split_list(list: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    parts
}

/// The configuration every variant starts from: the two files and the
/// `--set` overrides (applied before the varied values, which win).
#[derive(Debug, Clone)]
pub struct Base<'a> {
    /// topology.yaml.
    pub topology: &'a ConfigSource,
    /// ccl.yaml.
    pub ccl: &'a ConfigSource,
    /// `key.path=value` overrides, in order (`ccl.`-prefixed for ccl.yaml).
    pub sets: &'a [String],
}

impl Base<'_> {
    /// The checked configuration with `extra` overrides after the base's.
    pub fn load(&self, extra: &[(String, String)]) -> Result<(TopologySpec, CclConfig), String> {
        let sets: Vec<String> = self
            .sets
            .iter()
            .cloned()
            .chain(extra.iter().map(|(k, v)| format!("{k}={v}")))
            .collect();
        let overrides = Overrides::parse(&sets).map_err(|e| describe(&e))?;
        let topology = TopologySpec::load(self.topology, &overrides.topology);
        let topology = topology.map_err(|e| describe(&e))?;
        let ccl = CclConfig::load(self.ccl, &overrides.ccl).map_err(|e| describe(&e))?;
        let machine = Machine::build(&topology).map_err(|e| e.to_string())?;
        crate::runtime::check_config(&machine, &ccl).map_err(|e| e.to_string())?;
        Ok((topology, ccl))
    }
}

/// What a configuration error says, without the `--set` origin the varied
/// value is given (the caller names the `--vary` instead).
fn describe(error: &ConfigError) -> String {
    match error {
        ConfigError::Invalid {
            origin: crate::config::Origin::Set { .. },
            path,
            message,
        } => format!("{path}: {message}"),
        ConfigError::Override { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// One variant per combination of the `varies` values over `base`, every
/// value and combination loaded and checked first (see the module docs);
/// the base alone, with no fields, when nothing is varied.
pub fn configurations(base: &Base<'_>, varies: &[Vary]) -> Result<Vec<Variant>, VaryError> {
    for (i, vary) in varies.iter().enumerate() {
        if varies[..i].iter().any(|v| v.key == vary.key) {
            return Err(VaryError::KeyTwice {
                key: vary.key.clone(),
            });
        }
        if vary.values.is_empty() {
            return Err(VaryError::Empty {
                key: vary.key.clone(),
                list: String::new(),
            });
        }
        for value in &vary.values {
            let one = [(vary.key.clone(), value.clone())];
            base.load(&one).map_err(|message| invalid(&one, message))?;
        }
    }
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for vary in varies {
        combos = combos
            .into_iter()
            .flat_map(|combo| {
                vary.values.iter().map(move |value| {
                    let mut next = combo.clone();
                    next.push((vary.key.clone(), value.clone()));
                    next
                })
            })
            .collect();
    }
    combos
        .into_iter()
        .map(|fields| {
            let (topology, ccl) = base
                .load(&fields)
                .map_err(|message| invalid(&fields, message))?;
            Ok(Variant {
                fields,
                topology,
                ccl,
            })
        })
        .collect()
}

fn invalid(fields: &[(String, String)], message: String) -> VaryError {
    VaryError::Invalid {
        assignment: assignment(fields),
        message,
    }
}

/// A variant's fields as `--vary` writes them: `key=value`, space-separated.
pub fn assignment(fields: &[(String, String)]) -> String {
    let pairs: Vec<_> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base_with<'a>(
        topology: &'a ConfigSource,
        ccl: &'a ConfigSource,
        sets: &'a [String],
    ) -> Base<'a> {
        Base {
            topology,
            ccl,
            sets,
        }
    }

    #[test]
    fn a_list_splits_at_commas_outside_brackets() {
        let vary: Vary = "system.inter_sip.bandwidth=50 GB/s, 100 GB/s"
            .parse()
            .unwrap();
        assert_eq!(vary.key, "system.inter_sip.bandwidth");
        assert_eq!(vary.values, ["50 GB/s", "100 GB/s"]);
        let mesh: Vary = "sip.cube_mesh={w: 2, h: 2},{w: 1, h: 1}".parse().unwrap();
        assert_eq!(mesh.values, ["{w: 2, h: 2}", "{w: 1, h: 1}"]);
    }

    #[test]
    fn malformed_arguments_name_the_key() {
        for (text, want) in [
            ("system.sips.count", "expected KEY=V1"),
            ("=1,2", "expected KEY=V1"),
            ("a..b=1", "expected KEY=V1"),
            (
                "system.sips.count=",
                "--vary system.sips.count: an empty value",
            ),
            (
                "system.sips.count=2,,4",
                "--vary system.sips.count: an empty value",
            ),
            ("system.sips.count=2,2", "`2` is listed twice"),
        ] {
            let error = text.parse::<Vary>().unwrap_err().to_string();
            assert!(error.contains(want), "{text}: {error}");
            assert!(!error.contains('\n'), "{text}: {error}");
        }
    }

    #[test]
    fn each_combination_is_a_variant_named_by_its_values() {
        let (topology, ccl) = (TopologySpec::default_source(), CclConfig::default_source());
        let sets = vec!["system.sips.count=4".to_owned()];
        let varies: Vec<Vary> = [
            "system.inter_sip.bandwidth=25 GB/s,400 GB/s",
            "ccl.defaults.algorithm=ring_allreduce,tree_allreduce",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let variants = configurations(&base_with(&topology, &ccl, &sets), &varies).unwrap();
        let names: Vec<_> = variants
            .iter()
            .map(|v| format!("{}|{}", v.fields[0].1, v.fields[1].1))
            .collect();
        assert_eq!(
            names,
            [
                "25 GB/s|ring_allreduce",
                "25 GB/s|tree_allreduce",
                "400 GB/s|ring_allreduce",
                "400 GB/s|tree_allreduce"
            ]
        );
        // The base's --set still holds, and the varied value is applied.
        assert!(
            variants
                .iter()
                .all(|v| v.topology.system().sips.count() == 4)
        );
        let gbps = |v: &Variant| v.topology.system().inter_sip.bandwidth;
        assert_eq!(gbps(&variants[0]), "25 GB/s".parse().unwrap());
        assert_eq!(gbps(&variants[3]), "400 GB/s".parse().unwrap());
        let none = configurations(&base_with(&topology, &ccl, &sets), &[]).unwrap();
        assert_eq!(none.len(), 1);
        assert!(none[0].fields.is_empty());
    }

    #[test]
    fn a_value_the_key_does_not_take_is_refused_naming_both() {
        let (topology, ccl) = (TopologySpec::default_source(), CclConfig::default_source());
        let base = base_with(&topology, &ccl, &[]);
        for (text, want) in [
            ("nope.key=1,2", "--vary nope.key=1: "),
            (
                "system.inter_sip.bandwidth=100 GB/s,fast",
                "--vary system.inter_sip.bandwidth=fast: ",
            ),
            (
                "ccl.defaults.algorithm=no_such",
                "--vary ccl.defaults.algorithm=no_such: ",
            ),
        ] {
            let vary: Vary = text.parse().unwrap();
            let error = configurations(&base, &[vary]).unwrap_err().to_string();
            assert!(error.starts_with(want), "{text}: {error}");
            assert!(!error.contains('\n'), "{text}: {error}");
        }
        let twice: Vec<Vary> = ["system.sips.count=2", "system.sips.count=4"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let error = configurations(&base, &twice).unwrap_err();
        assert!(matches!(error, VaryError::KeyTwice { .. }), "{error}");
    }
}
