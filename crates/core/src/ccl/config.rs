//! `CclConfig`: the validated, typed form of `configs/ccl.yaml`
//! (seed ADR-0032 D6, seed ADR-0050 D6).
//!
//! `defaults` says which algorithm runs and with what; `algorithms` maps a
//! name to its registry module (by default the entry's name), IPCQ
//! neighbour wiring (`wiring:`) and optional
//! overrides of the defaults. Algorithm-specific extras live in a typed
//! `params` map (integers, booleans, strings) that the algorithm itself
//! reads and checks. Maps are `BTreeMap`s, so iteration order is the name
//! order on every run.
//!
//! This module knows the ccl.yaml schema; it knows nothing of how an
//! algorithm runs.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use crate::config::units::{Count, NonZeroSize, Size};
use crate::config::{ConfigError, ConfigSource, Document, Override};
use crate::sim::SimDuration;
use crate::tl::{Backpressure, IpcqParams};

use super::collective::Collective;
use super::topology::Builtin;

const DEFAULT_FILE: &str = "configs/ccl.yaml";
const DEFAULT_YAML: &str = include_str!("../../../../configs/ccl.yaml");

/// Where IPCQ receive slots are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case", expecting = "tcm, hbm or sram")]
pub enum BufferKind {
    /// PE-local TCM.
    Tcm,
    /// The cube's HBM.
    Hbm,
    /// The cube's SRAM.
    Sram,
}

impl BufferKind {
    /// Every kind, as ccl.yaml spells them.
    pub const ALL: [BufferKind; 3] = [BufferKind::Tcm, BufferKind::Hbm, BufferKind::Sram];

    /// The ccl.yaml spelling.
    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Tcm => "tcm",
            BufferKind::Hbm => "hbm",
            BufferKind::Sram => "sram",
        }
    }
}

impl std::str::FromStr for BufferKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        BufferKind::ALL
            .into_iter()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| format!("`{text}` is not a buffer kind (tcm, hbm or sram)"))
    }
}

/// An algorithm-specific parameter value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ParamValue {
    /// A whole number.
    Integer(i64),
    /// `true` or `false`.
    Bool(bool),
    /// Anything else, as written (quantities such as `"4 KiB"` included).
    Text(String),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Integer(n) => n.fmt(f),
            ParamValue::Bool(b) => b.fmt(f),
            ParamValue::Text(text) => text.fmt(f),
        }
    }
}

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ParamVisitor;
        impl Visitor<'_> for ParamVisitor {
            type Value = ParamValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer, true/false or a string")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<ParamValue, E> {
                Ok(ParamValue::Bool(b))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<ParamValue, E> {
                Ok(ParamValue::Integer(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<ParamValue, E> {
                i64::try_from(n)
                    .map(ParamValue::Integer)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(n), &self))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<ParamValue, E> {
                Ok(ParamValue::Text(text.to_owned()))
            }
        }
        deserializer.deserialize_any(ParamVisitor)
    }
}

/// How blocked IPCQ senders wait (`ipcq.backpressure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", expecting = "poll or sleep")]
pub enum BackpressureMode {
    /// Re-check every `poll_interval`.
    Poll,
    /// Sleep until the credit arrives.
    Sleep,
}

/// `ipcq:` — the shape and protocol of the IPCQ rings; every key optional
/// (defaults: 4 slots of 64 KiB, sleep, 100 ns poll interval, no strict
/// validation). An algorithm entry's keys override the defaults' keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an ipcq mapping (slots, slot_size, backpressure, poll_interval, strict_validation)"
)]
pub struct IpcqSettings {
    /// Slots per ring.
    pub slots: Option<Count>,
    /// Bytes per slot: the largest message a ring carries.
    pub slot_size: Option<NonZeroSize>,
    /// How blocked senders wait.
    pub backpressure: Option<BackpressureMode>,
    /// The poll period of `backpressure: poll`.
    pub poll_interval: Option<SimDuration>,
    /// Check that every receive names the shape and dtype that was sent.
    pub strict_validation: Option<bool>,
}

impl IpcqSettings {
    /// These settings with `base`'s filling the keys left out.
    fn or(self, base: IpcqSettings) -> IpcqSettings {
        IpcqSettings {
            slots: self.slots.or(base.slots),
            slot_size: self.slot_size.or(base.slot_size),
            backpressure: self.backpressure.or(base.backpressure),
            poll_interval: self.poll_interval.or(base.poll_interval),
            strict_validation: self.strict_validation.or(base.strict_validation),
        }
    }

    /// The network parameters, defaults for the keys left out.
    pub fn params(&self) -> IpcqParams {
        let default = IpcqParams::default();
        IpcqParams {
            slots: self.slots.map_or(default.slots, |n| n.get() as usize),
            slot_bytes: self
                .slot_size
                .map_or(default.slot_bytes, |s| s.get().bytes()),
            backpressure: match self.backpressure {
                Some(BackpressureMode::Poll) => Backpressure::Poll,
                Some(BackpressureMode::Sleep) => Backpressure::Sleep,
                None => default.backpressure,
            },
            poll_interval: self.poll_interval.unwrap_or(default.poll_interval),
            strict_validation: self.strict_validation.unwrap_or(default.strict_validation),
        }
    }
}

/// `defaults:` — what runs unless an algorithm entry says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a defaults mapping (algorithm, buffer_kind, n_elem, optional world_size, ipcq, \
                 all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv, gather, \
                 scatter)"
)]
pub struct CclDefaults {
    /// The entry of `algorithms` that `all_reduce` runs.
    pub algorithm: String,
    /// Where IPCQ receive slots live.
    pub buffer_kind: BufferKind,
    /// Elements per tile.
    pub n_elem: Count,
    /// Rank count; `None` falls back to the topology's SIP count.
    pub world_size: Option<Count>,
    /// IPCQ ring shape and protocol.
    #[serde(default)]
    pub ipcq: IpcqSettings,
    /// The entry `all_gather` runs, if any.
    pub all_gather: Option<DefaultEntry>,
    /// The entry `reduce_scatter` runs, if any.
    pub reduce_scatter: Option<DefaultEntry>,
    /// The entry `broadcast` runs, if any.
    pub broadcast: Option<DefaultEntry>,
    /// The entry `reduce` runs, if any.
    pub reduce: Option<DefaultEntry>,
    /// The entry `all_to_all` runs, if any.
    pub all_to_all: Option<DefaultEntry>,
    /// The entry `send` / `recv` run, if any.
    pub send_recv: Option<DefaultEntry>,
    /// The entry `gather` runs, if any.
    pub gather: Option<DefaultEntry>,
    /// The entry `scatter` runs, if any.
    pub scatter: Option<DefaultEntry>,
}

impl CclDefaults {
    /// The entries that serve `collective` unless the caller names one,
    /// as size rules: `algorithm` for `all_reduce` (at every size), the
    /// key of that name for the others, none for custom kernels.
    pub fn rules_for(&self, collective: Collective) -> Option<Vec<SizeRule>> {
        let entry = match collective {
            Collective::AllReduce => return Some(vec![SizeRule::every(&self.algorithm)]),
            Collective::AllGather => &self.all_gather,
            Collective::ReduceScatter => &self.reduce_scatter,
            Collective::Broadcast => &self.broadcast,
            Collective::Reduce => &self.reduce,
            Collective::AllToAll => &self.all_to_all,
            Collective::SendRecv => &self.send_recv,
            Collective::Gather => &self.gather,
            Collective::Scatter => &self.scatter,
            Collective::Custom => return None,
        };
        entry.as_ref().map(DefaultEntry::rules)
    }
}

/// `defaults.<collective>:` as written: one entry at every size, or a
/// list of size rules (ADR-0113).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultEntry {
    /// `all_gather: ring_allgather`.
    One(String),
    /// `all_gather: [{up_to: "4 MiB", entry: intercube_allgather}, {entry: ring_allgather}]`.
    BySize(Vec<SizeRule>),
}

impl DefaultEntry {
    /// Its rules: a single entry is one rule with no `up_to`.
    pub fn rules(&self) -> Vec<SizeRule> {
        match self {
            DefaultEntry::One(entry) => vec![SizeRule::every(entry)],
            DefaultEntry::BySize(rules) => rules.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for DefaultEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = DefaultEntry;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an algorithm entry's name, or a list of size rules ({up_to, entry})")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<DefaultEntry, E> {
                Ok(DefaultEntry::One(name.to_owned()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<DefaultEntry, A::Error> {
                let mut rules = Vec::new();
                while let Some(rule) = seq.next_element()? {
                    rules.push(rule);
                }
                Ok(DefaultEntry::BySize(rules))
            }
        }
        deserializer.deserialize_any(EntryVisitor)
    }
}

/// One size rule of a `defaults.<collective>` list: calls whose input is
/// at most `up_to` bytes per rank run `entry` (the first rule that holds
/// wins; the last rule has no `up_to` and takes every larger call).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a size rule mapping (entry, and up_to on every rule but the last)"
)]
pub struct SizeRule {
    /// The largest input per rank this rule serves; `None`: any size.
    pub up_to: Option<Size>,
    /// The `algorithms` entry it runs.
    pub entry: String,
}

impl SizeRule {
    /// `entry` at every size.
    fn every(entry: &str) -> SizeRule {
        SizeRule {
            up_to: None,
            entry: entry.to_owned(),
        }
    }

    /// Whether a call of `bytes` of input per rank takes this rule.
    pub fn serves(&self, bytes: u64) -> bool {
        self.up_to.is_none_or(|limit| bytes <= limit.bytes())
    }
}

/// `algorithms.<name>:` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an algorithm mapping (wiring, optional module, buffer_kind, n_elem, world_size, root_cube, ipcq, params)"
)]
pub struct AlgorithmEntry {
    /// The algorithm's name in the algorithm registry; `None`: the entry's
    /// own name.
    pub module: Option<String>,
    /// IPCQ neighbour wiring installed before the kernel runs (required;
    /// `Option` only so that a file with the retired `topology:` key gets
    /// the error naming `wiring:` instead of "missing field").
    pub wiring: Option<Builtin>,
    /// The key `wiring` had before issue 25, kept only to refuse it by name.
    #[serde(default, rename = "topology")]
    retired_topology: Option<Retired>,
    /// Overrides `defaults.buffer_kind`.
    pub buffer_kind: Option<BufferKind>,
    /// Overrides `defaults.n_elem`.
    pub n_elem: Option<Count>,
    /// Overrides `defaults.world_size`.
    pub world_size: Option<Count>,
    /// The cube that gathers a SIP's partial result.
    pub root_cube: Option<u32>,
    /// Overrides keys of `defaults.ipcq`.
    #[serde(default)]
    pub ipcq: IpcqSettings,
    /// Algorithm-specific extras.
    #[serde(default)]
    pub params: BTreeMap<String, ParamValue>,
}

impl AlgorithmEntry {
    /// An entry as a program would write it: `module`, `wiring` and
    /// `params`, every other key left to `defaults`.
    pub fn new(module: &str, wiring: Builtin, params: BTreeMap<String, ParamValue>) -> Self {
        AlgorithmEntry {
            module: Some(module.to_owned()),
            wiring: Some(wiring),
            retired_topology: None,
            buffer_kind: None,
            n_elem: None,
            world_size: None,
            root_cube: None,
            ipcq: IpcqSettings::default(),
            params,
        }
    }
}

/// A key that is read only to be refused by its new name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retired;

impl<'de> Deserialize<'de> for Retired {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        de::IgnoredAny::deserialize(deserializer).map(|_| Retired)
    }
}

/// One algorithm with the defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Algorithm<'a> {
    /// The entry's name in ccl.yaml.
    pub name: &'a str,
    /// The algorithm's name in the algorithm registry.
    pub module: &'a str,
    /// IPCQ neighbour wiring.
    pub wiring: Builtin,
    /// Where IPCQ receive slots live.
    pub buffer_kind: BufferKind,
    /// Elements per tile.
    pub n_elem: Count,
    /// Rank count from ccl.yaml, if it sets one.
    pub world_size: Option<Count>,
    /// The cube that gathers a SIP's partial result.
    pub root_cube: Option<u32>,
    /// IPCQ ring shape and protocol.
    pub ipcq: IpcqParams,
    /// Algorithm-specific extras.
    pub params: &'a BTreeMap<String, ParamValue>,
}

impl Algorithm<'_> {
    /// The rank count: ccl.yaml's, else `sip_count` (seed ADR-0024 D1).
    pub fn world_size_or(&self, sip_count: u32) -> u32 {
        self.world_size.map_or(sip_count, Count::get)
    }
}

/// ccl.yaml as written, before its cross-references are checked.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a ccl mapping with defaults and algorithms"
)]
struct CclFile {
    defaults: CclDefaults,
    algorithms: BTreeMap<String, AlgorithmEntry>,
}

/// The checked ccl.yaml: the default algorithm exists and every entry names
/// a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CclConfig {
    defaults: CclDefaults,
    algorithms: BTreeMap<String, AlgorithmEntry>,
}

impl CclConfig {
    /// The algorithms compiled into the binary from `configs/ccl.yaml`.
    pub fn default_source() -> ConfigSource {
        ConfigSource::embedded(DEFAULT_FILE, DEFAULT_YAML)
    }

    /// Reads `source`, applies `overrides` (paths without the `ccl.`
    /// prefix) and checks the result.
    pub fn load(source: &ConfigSource, overrides: &[Override]) -> Result<Self, ConfigError> {
        CclConfig::from_document(&Document::load(source, overrides)?)
    }

    /// Deserializes and checks a parsed ccl document.
    pub fn from_document(document: &Document) -> Result<Self, ConfigError> {
        let CclFile {
            defaults,
            algorithms,
        } = document.deserialize()?;
        for (name, entry) in &algorithms {
            if name.trim().is_empty() {
                return Err(document.error_at("algorithms", "an algorithm name is empty"));
            }
            if entry.module.as_deref().is_some_and(|m| m.trim().is_empty()) {
                let path = format!("algorithms.{name}.module");
                return Err(document.error_at(&path, "must name an algorithm module"));
            }
            if entry.retired_topology.is_some() {
                let path = format!("algorithms.{name}.topology");
                let message = "`topology` is now called `wiring` (the IPCQ neighbour table; \
                               same values: none, ring_1d, ring_1d_unidir, mesh_2d, torus_2d, \
                               tree_binary)";
                return Err(document.error_at(&path, message));
            }
            if entry.wiring.is_none() {
                let path = format!("algorithms.{name}");
                let message = "missing `wiring` (none, ring_1d, ring_1d_unidir, mesh_2d, \
                               torus_2d or tree_binary)";
                return Err(document.error_at(&path, message));
            }
        }
        for collective in Collective::ALL {
            let Some(rules) = defaults.rules_for(collective) else {
                continue;
            };
            check_rules(document, collective, &rules, &algorithms)?;
        }
        Ok(CclConfig {
            defaults,
            algorithms,
        })
    }

    /// The `defaults:` section.
    pub fn defaults(&self) -> &CclDefaults {
        &self.defaults
    }

    /// Every entry's name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.algorithms.keys().map(String::as_str)
    }

    /// The algorithm called `name`, with defaults filled in.
    pub fn algorithm(&self, name: &str) -> Option<Algorithm<'_>> {
        let (name, entry) = self.algorithms.get_key_value(name)?;
        Some(Algorithm {
            name,
            module: entry.module.as_deref().unwrap_or(name),
            wiring: entry.wiring.expect("checked when the config is built"),
            buffer_kind: entry.buffer_kind.unwrap_or(self.defaults.buffer_kind),
            n_elem: entry.n_elem.unwrap_or(self.defaults.n_elem),
            world_size: entry.world_size.or(self.defaults.world_size),
            root_cube: entry.root_cube,
            ipcq: entry.ipcq.or(self.defaults.ipcq).params(),
            params: &entry.params,
        })
    }

    /// The algorithm `defaults.algorithm` names.
    pub fn default_algorithm(&self) -> Algorithm<'_> {
        self.algorithm(&self.defaults.algorithm)
            .expect("defaults.algorithm is checked to name an entry when the config is built")
    }

    /// This configuration with every algorithm's IPCQ slots in `kind`
    /// (the default and every entry's own `buffer_kind`): what a sweep over
    /// buffer kinds runs.
    pub fn with_buffer_kind(&self, kind: BufferKind) -> CclConfig {
        let mut config = self.clone();
        config.defaults.buffer_kind = kind;
        for entry in config.algorithms.values_mut() {
            entry.buffer_kind = None;
        }
        config
    }

    /// This configuration with the entry `name` added (or replaced).
    pub fn with_algorithm(&self, name: &str, entry: AlgorithmEntry) -> CclConfig {
        let mut config = self.clone();
        config.algorithms.insert(name.to_owned(), entry);
        config
    }

    /// The names of all algorithms, in order.
    pub fn algorithm_names(&self) -> impl Iterator<Item = &str> {
        self.algorithms.keys().map(String::as_str)
    }
}

/// `defaults.<collective>`'s rules name entries of `algorithms`, each
/// rule but the last has an `up_to` above the one before, and the last
/// has none (every call is served).
fn check_rules(
    document: &Document,
    collective: Collective,
    rules: &[SizeRule],
    algorithms: &BTreeMap<String, AlgorithmEntry>,
) -> Result<(), ConfigError> {
    let key = match collective {
        Collective::AllReduce => "algorithm",
        other => other.name(),
    };
    let listed = rules.len() > 1 || rules.first().is_some_and(|r| r.up_to.is_some());
    let at = |i: usize, field: &str| match listed {
        true => format!("defaults.{key}[{i}].{field}"),
        false => format!("defaults.{key}"),
    };
    if rules.is_empty() {
        let message = "an empty list: name an entry, or give size rules ({up_to, entry})";
        return Err(document.error_at(&format!("defaults.{key}"), message));
    }
    let mut below = None;
    for (i, rule) in rules.iter().enumerate() {
        if !algorithms.contains_key(&rule.entry) {
            let known: Vec<String> = algorithms.keys().map(|name| format!("`{name}`")).collect();
            let message = format!(
                "`{}` is not an entry of `algorithms` (defined: {})",
                rule.entry,
                known.join(", ")
            );
            return Err(document.error_at(&at(i, "entry"), message));
        }
        let last = i + 1 == rules.len();
        match (rule.up_to, last) {
            (Some(_), true) => {
                let message =
                    "the last size rule must have no `up_to` (it takes every larger call)";
                return Err(document.error_at(&at(i, "up_to"), message));
            }
            (None, false) => {
                let message = "only the last size rule may leave out `up_to`";
                return Err(document.error_at(&at(i, "entry"), message));
            }
            (Some(up_to), false) => match below {
                Some(before) if up_to <= before => {
                    let message = format!(
                        "{up_to} is not above the rule before's {before} (rules go from small \
                         calls to large)"
                    );
                    return Err(document.error_at(&at(i, "up_to"), message));
                }
                _ => below = Some(up_to),
            },
            (None, true) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<CclConfig, ConfigError> {
        let source = ConfigSource::Text {
            name: "ccl.yaml".into(),
            text: text.to_owned().into(),
        };
        CclConfig::load(&source, &[])
    }

    #[test]
    fn embedded_defaults_resolve() {
        let config = CclConfig::load(&CclConfig::default_source(), &[]).unwrap();
        let algorithm = config.default_algorithm();
        assert_eq!(algorithm.name, "intercube_allreduce");
        assert_eq!(algorithm.wiring, Builtin::None);
        assert_eq!(algorithm.module, "intercube_allreduce");
        assert_eq!(algorithm.root_cube, None);
        assert_eq!(algorithm.n_elem.get(), 8);
        let names: Vec<&str> = config.algorithm_names().collect();
        assert_eq!(
            names,
            [
                "chain_broadcast",
                "chain_reduce",
                "hello_send",
                "intercube_allgather",
                "intercube_allreduce",
                "intercube_alltoall",
                "intercube_broadcast",
                "intercube_reduce",
                "intercube_reducescatter",
                "lrab_hierarchical_allreduce",
                "mesh_allreduce",
                "p2p_copy",
                "p2p_gather",
                "p2p_scatter",
                "rd_allreduce",
                "rhd_allreduce",
                "ring_allgather",
                "ring_allreduce",
                "ring_alltoall",
                "ring_reducescatter",
                "ring_rsag_allreduce",
                "tree_allreduce"
            ]
        );
        let defaults = config.defaults();
        let entries = |c| {
            let rules = defaults.rules_for(c).unwrap_or_default();
            rules
                .into_iter()
                .map(|r| (r.up_to.map(Size::bytes), r.entry))
                .collect::<Vec<_>>()
        };
        let one = |entry: &str| vec![(None, entry.to_owned())];
        let by_size = |small: &str, large: &str| {
            vec![(Some(1 << 20), small.to_owned()), (None, large.to_owned())]
        };
        // ADR-0113's table: the two-level algorithm up to 1 MiB per rank.
        let (gather, scatter) = (Collective::AllGather, Collective::ReduceScatter);
        assert_eq!(
            entries(gather),
            by_size("intercube_allgather", "ring_allgather")
        );
        assert_eq!(
            entries(scatter),
            by_size("intercube_reducescatter", "ring_reducescatter")
        );
        let all_to_all = vec![
            (Some(2 << 20), "intercube_alltoall".to_owned()),
            (None, "ring_alltoall".to_owned()),
        ];
        assert_eq!(entries(Collective::AllToAll), all_to_all);
        assert_eq!(entries(Collective::Broadcast), one("intercube_broadcast"));
        assert_eq!(entries(Collective::Reduce), one("intercube_reduce"));
        assert_eq!(entries(Collective::SendRecv), one("p2p_copy"));
        assert_eq!(entries(Collective::Gather), one("p2p_gather"));
        assert_eq!(entries(Collective::Scatter), one("p2p_scatter"));
        assert!(defaults.rules_for(Collective::Custom).is_none());
    }

    /// `defaults.<collective>` size rules: checked at load, each error at
    /// its rule's key.
    #[test]
    fn size_rules_are_checked_at_their_key() {
        let check = |rules: &str, expect: &str| {
            let text = format!(
                "defaults: {{algorithm: a, buffer_kind: tcm, n_elem: 8, all_gather: {rules}}}\n\
                 algorithms:\n  a: {{wiring: ring_1d}}\n  b: {{wiring: ring_1d}}\n"
            );
            let error = load(&text).map(drop).map_err(|e| e.to_string());
            match expect {
                "ok" => assert_eq!(error, Ok(()), "{rules}"),
                _ => {
                    let error = error.expect_err(rules);
                    assert!(error.contains(expect), "{rules}: {error}");
                }
            }
        };
        check("[{up_to: 1 MiB, entry: a}, {entry: b}]", "ok");
        check("[{entry: b}]", "ok");
        check("[]", "defaults.all_gather: an empty list");
        check(
            "[{up_to: 1 MiB, entry: a}]",
            "defaults.all_gather[0].up_to: the last size rule",
        );
        check(
            "[{entry: a}, {entry: b}]",
            "defaults.all_gather[0].entry: only the last",
        );
        check(
            "[{up_to: 2 MiB, entry: a}, {up_to: 1 MiB, entry: b}, {entry: a}]",
            "defaults.all_gather[1].up_to: 1 MiB is not above the rule before's 2 MiB",
        );
        check(
            "[{up_to: 1 MiB, entry: c}, {entry: b}]",
            "defaults.all_gather[0].entry: `c` is not an entry",
        );
        check(
            "[{up_to: 1 MiB, entry: a, size: 3}, {entry: b}]",
            "defaults.all_gather[0].size: unknown key `size`",
        );
        check("c", "defaults.all_gather: `c` is not an entry");
    }

    #[test]
    fn entries_override_defaults_and_world_size_falls_back() {
        let config = load(
            "defaults: {algorithm: a, buffer_kind: hbm, n_elem: 4, world_size: 3}\n\
             algorithms:\n  a: {module: m, wiring: ring_1d, n_elem: 16}\n  \
             b: {module: m, wiring: mesh_2d, world_size: 8, params: {chunks: 4, tag: x}}\n",
        )
        .unwrap();
        let a = config.algorithm("a").unwrap();
        assert_eq!((a.buffer_kind, a.n_elem.get()), (BufferKind::Hbm, 16));
        assert_eq!(a.world_size_or(2), 3);
        let b = config.algorithm("b").unwrap();
        assert_eq!(b.world_size.unwrap().get(), 8);
        assert_eq!(b.params["chunks"], ParamValue::Integer(4));
        assert_eq!(b.params["tag"], ParamValue::Text("x".into()));
        assert!(config.algorithm("c").is_none());
    }

    #[test]
    fn default_algorithm_must_exist() {
        let error = load(
            "defaults:\n  algorithm: tree\n  buffer_kind: tcm\n  n_elem: 8\n\
             algorithms:\n  ring: {module: ring, wiring: ring_1d}\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            error,
            "ccl.yaml:2:3: defaults.algorithm: `tree` is not an entry of `algorithms` \
             (defined: `ring`)"
        );
    }

    #[test]
    fn bad_values_are_positioned() {
        let text = "defaults: {algorithm: r, buffer_kind: l2, n_elem: 8}\n\
                    algorithms:\n  r: {module: r, wiring: ring_1d}\n";
        let error = load(text).unwrap_err().to_string();
        assert!(error.starts_with("ccl.yaml:1:26: defaults.buffer_kind: unknown value `l2`"));
        let text = "defaults: {algorithm: r, buffer_kind: tcm, n_elem: 8}\n\
                    algorithms:\n  r: {module: \"\", wiring: ring_1d, params: {f: 1.5}}\n";
        let error = load(text).unwrap_err().to_string();
        assert!(
            error.contains("algorithms.r.params.f: expected an integer"),
            "{error}"
        );
    }

    #[test]
    fn ipcq_settings_merge_key_by_key_over_the_defaults() {
        let config = load(
            "defaults:\n  algorithm: a\n  buffer_kind: tcm\n  n_elem: 8\n  \
             ipcq: {slots: 2, backpressure: poll, poll_interval: \"50 ns\"}\n\
             algorithms:\n  a: {module: m, wiring: ring_1d, ipcq: {slots: 8, strict_validation: true}}\n  \
             b: {module: m, wiring: ring_1d}\n",
        )
        .unwrap();
        let a = config.algorithm("a").unwrap().ipcq;
        assert_eq!(a.slots, 8);
        assert_eq!(a.backpressure, Backpressure::Poll);
        assert_eq!(a.poll_interval, SimDuration::from_ns(50));
        assert!(a.strict_validation);
        assert_eq!(a.slot_bytes, IpcqParams::default().slot_bytes);
        let b = config.algorithm("b").unwrap().ipcq;
        assert_eq!((b.slots, b.strict_validation), (2, false));
        let embedded = CclConfig::load(&CclConfig::default_source(), &[]).unwrap();
        assert_eq!(embedded.default_algorithm().ipcq, IpcqParams::default());
    }

    #[test]
    fn module_defaults_to_the_entry_name() {
        let config = load(
            "defaults: {algorithm: ring, buffer_kind: tcm, n_elem: 8}\n\
             algorithms:\n  ring: {wiring: ring_1d}\n  two: {module: ring, wiring: none}\n",
        )
        .unwrap();
        assert_eq!(config.algorithm("ring").unwrap().module, "ring");
        assert_eq!(config.algorithm("two").unwrap().module, "ring");
    }

    #[test]
    fn the_retired_topology_key_is_refused_naming_wiring() {
        let text = "defaults: {algorithm: r, buffer_kind: tcm, n_elem: 8}\n\
                    algorithms:\n  r: {module: r, topology: ring_1d}\n";
        let error = load(text).unwrap_err().to_string();
        assert!(
            error.starts_with(
                "ccl.yaml:3:18: algorithms.r.topology: `topology` is now called `wiring`"
            ),
            "{error}"
        );
        let text = "defaults: {algorithm: r, buffer_kind: tcm, n_elem: 8}\n\
                    algorithms:\n  r: {module: r}\n";
        let error = load(text).unwrap_err().to_string();
        assert!(error.contains("algorithms.r: missing `wiring`"), "{error}");
        let text = "defaults: {algorithm: r, buffer_kind: tcm, n_elem: 8}\n\
                    algorithms:\n  r: {wiring: mesh_2d_no_wrap}\n";
        let error = load(text).unwrap_err().to_string();
        assert!(
            error.contains("algorithms.r.wiring: unknown value `mesh_2d_no_wrap`"),
            "{error}"
        );
    }

    #[test]
    fn bad_ipcq_settings_are_positioned() {
        let text = "defaults: {algorithm: r, buffer_kind: tcm, n_elem: 8, ipcq: {backpressure: spin}}\n\
                    algorithms:\n  r: {module: r, wiring: ring_1d}\n";
        let error = load(text).unwrap_err().to_string();
        assert!(error.contains("defaults.ipcq.backpressure"), "{error}");
        assert!(error.contains("`poll`, `sleep`"), "{error}");
    }
}
