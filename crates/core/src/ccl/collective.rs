//! What an algorithm promises and what it asks for (issue 9 items 1 and 5,
//! issue 12 item 3): the [`Collective`] it implements, the [`ReduceOp`]s
//! its kernels combine with, the [`Requirements`] the process group checks
//! at `init_process_group`, and its ccl.yaml `params` ([`ParamSpec`] →
//! checked [`Params`]).
//!
//! Pure values: nothing of kernels, devices or the process group.

use std::collections::BTreeMap;
use std::fmt;

use crate::config::units::NonZeroSize;
use crate::mem::BinaryFn;

use super::ParamValue;

/// The collective an algorithm implements; the process group runs an
/// algorithm only for the call it declares (seed ADR-0047 D8's (algorithm,
/// method) pairs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Collective {
    /// `all_reduce`: every endpoint's tile becomes the reduction of all.
    AllReduce,
    /// `all_gather`: every endpoint's output holds every endpoint's input.
    AllGather,
    /// `reduce_scatter`: endpoint `e`'s output is the reduction of block
    /// `e` of every endpoint's input.
    ReduceScatter,
    /// `broadcast`: every endpoint's tile becomes the root endpoint's.
    Broadcast,
    /// `reduce`: the root endpoint's tile becomes the reduction of all.
    Reduce,
    /// `all_to_all`: block `j` of endpoint `e`'s output is block `e` of
    /// endpoint `j`'s input.
    AllToAll,
    /// `send` / `recv`: one rank's tiles copied to another rank's.
    SendRecv,
    /// `gather`: block `r` of every cube tile of the root rank's output is
    /// rank `r`'s tile of that cube.
    Gather,
    /// `scatter`: rank `r`'s tile of every cube is block `r` of the root
    /// rank's input tile of that cube.
    Scatter,
    /// A teaching or test kernel that is no `torch.distributed` call
    /// (`hello_send`); it runs through `Distributed::run_custom` only.
    Custom,
}

impl Collective {
    /// Every collective, in declaration order.
    pub const ALL: [Collective; 10] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllToAll,
        Collective::SendRecv,
        Collective::Gather,
        Collective::Scatter,
        Collective::Custom,
    ];

    /// The `torch.distributed` call (and ccl.yaml `defaults` key) it serves.
    pub const fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllToAll => "all_to_all",
            Collective::SendRecv => "send_recv",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
            Collective::Custom => "custom",
        }
    }

    /// Whether the call takes a [`ReduceOp`].
    pub const fn reduces(self) -> bool {
        matches!(
            self,
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce
        )
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A reduction operator (`torch.distributed.ReduceOp`). Kernels combine
/// two tiles with [`binary`](ReduceOp::binary) at every hop (computed in
/// `f32`, rounded once to the tile's dtype, `mem::Op`); `Avg` sums and then
/// scales by `1 / contributions` once at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReduceOp {
    /// Elementwise sum.
    Sum,
    /// Elementwise product.
    Product,
    /// Elementwise minimum.
    Min,
    /// Elementwise maximum.
    Max,
    /// Elementwise mean: the sum scaled by `1 / contributions`.
    Avg,
}

impl ReduceOp {
    /// Every operator.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Product,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Avg,
    ];

    /// The PE_MATH function that combines two partial results.
    pub const fn binary(self) -> BinaryFn {
        match self {
            ReduceOp::Sum | ReduceOp::Avg => BinaryFn::Add,
            ReduceOp::Product => BinaryFn::Mul,
            ReduceOp::Min => BinaryFn::Min,
            ReduceOp::Max => BinaryFn::Max,
        }
    }

    /// The lower-case name the CLI takes (`sum`, `prod`, `min`, `max`, `avg`).
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Product => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Avg => "avg",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(name: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|op| op.name() == name)
    }
}

impl std::str::FromStr for ReduceOp {
    type Err = String;

    /// A [`name`](ReduceOp::name); anything else is an error listing them.
    fn from_str(text: &str) -> Result<ReduceOp, String> {
        ReduceOp::parse(text).ok_or_else(|| {
            let names: Vec<_> = ReduceOp::ALL.iter().map(|op| op.name()).collect();
            format!(
                "`{text}` is not a reduction (expected one of {})",
                names.join(", ")
            )
        })
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Product => "PRODUCT",
            ReduceOp::Min => "MIN",
            ReduceOp::Max => "MAX",
            ReduceOp::Avg => "AVG",
        };
        write!(f, "ReduceOp.{name}")
    }
}

/// What an algorithm needs of the machine and ccl.yaml; the process group
/// refuses, at `init_process_group`, a configuration that cannot give it
/// (instead of a deadlock at run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirements {
    /// The fewest IPCQ slots per ring it runs with (`ipcq.slots`); 2 for
    /// an algorithm that forwards the slot it received while receiving
    /// the next.
    pub min_slots: usize,
}

impl Default for Requirements {
    fn default() -> Self {
        Requirements { min_slots: 1 }
    }
}

/// The type of one ccl.yaml `params` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A positive integer.
    Count,
    /// A positive number of bytes: an integer or a quantity (`"4 KiB"`).
    Size,
    /// `true` or `false`.
    Bool,
    /// A string (e.g. a file name).
    Text,
}

impl ParamKind {
    fn expected(self) -> &'static str {
        match self {
            ParamKind::Count => "a positive integer",
            ParamKind::Size => "a positive size (bytes, or a quantity such as \"4 KiB\")",
            ParamKind::Bool => "true or false",
            ParamKind::Text => "a string",
        }
    }
}

/// One `params` key an algorithm reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamSpec {
    /// The key.
    pub name: &'static str,
    /// Its type.
    pub kind: ParamKind,
}

/// A `params` map that does not fit the algorithm's [`ParamSpec`]s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// A key the algorithm does not read.
    #[error("params.{key}: `{module}` has no such parameter (it takes: {known})")]
    Unknown {
        /// The algorithm module.
        module: String,
        /// The key.
        key: String,
        /// The keys it takes (`none`).
        known: String,
    },
    /// A value of the wrong type.
    #[error("params.{key}: `{value}` is not {expected}")]
    Invalid {
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// What the key takes.
        expected: &'static str,
    },
}

/// A checked `params` value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Param {
    Count(u64),
    Size(u64),
    Bool(bool),
    Text(String),
}

/// An algorithm's checked ccl.yaml `params`: only keys it declared, each of
/// its declared type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    values: BTreeMap<String, Param>,
}

impl Params {
    /// Checks `raw` against `specs` (the keys `module` declares).
    pub fn check(
        module: &str,
        specs: &[ParamSpec],
        raw: &BTreeMap<String, ParamValue>,
    ) -> Result<Params, ParamError> {
        let mut values = BTreeMap::new();
        for (key, value) in raw {
            let Some(spec) = specs.iter().find(|s| s.name == key) else {
                let known: Vec<_> = specs.iter().map(|s| s.name).collect();
                return Err(ParamError::Unknown {
                    module: module.to_owned(),
                    key: key.clone(),
                    known: if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    },
                });
            };
            let param = parse(spec.kind, value).ok_or_else(|| ParamError::Invalid {
                key: key.clone(),
                value: value.to_string(),
                expected: spec.kind.expected(),
            })?;
            values.insert(key.clone(), param);
        }
        Ok(Params { values })
    }

    /// A `Count` parameter, if set.
    pub fn count(&self, name: &str) -> Option<u64> {
        match self.values.get(name)? {
            Param::Count(n) => Some(*n),
            _ => None,
        }
    }

    /// These parameters with the `Size` parameter `name` set to `bytes`.
    pub(crate) fn with_size(&self, name: &str, bytes: u64) -> Params {
        let mut values = self.values.clone();
        values.insert(name.to_owned(), Param::Size(bytes));
        Params { values }
    }

    /// A `Size` parameter in bytes, if set.
    pub fn size(&self, name: &str) -> Option<u64> {
        match self.values.get(name)? {
            Param::Size(bytes) => Some(*bytes),
            _ => None,
        }
    }

    /// A `Text` parameter, if set.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.values.get(name)? {
            Param::Text(text) => Some(text),
            _ => None,
        }
    }

    /// A `Bool` parameter, if set.
    pub fn flag(&self, name: &str) -> Option<bool> {
        match self.values.get(name)? {
            Param::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

fn parse(kind: ParamKind, value: &ParamValue) -> Option<Param> {
    match (kind, value) {
        (ParamKind::Count, ParamValue::Integer(n)) if *n > 0 => Some(Param::Count(*n as u64)),
        (ParamKind::Size, ParamValue::Integer(n)) if *n > 0 => Some(Param::Size(*n as u64)),
        (ParamKind::Size, ParamValue::Text(text)) => {
            let size: NonZeroSize = text.parse().ok()?;
            Some(Param::Size(size.get().bytes()))
        }
        (ParamKind::Bool, ParamValue::Bool(b)) => Some(Param::Bool(*b)),
        (ParamKind::Text, ParamValue::Text(text)) => Some(Param::Text(text.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            name: "chunk",
            kind: ParamKind::Size,
        },
        ParamSpec {
            name: "pipelined",
            kind: ParamKind::Bool,
        },
    ];

    fn raw(pairs: &[(&str, ParamValue)]) -> BTreeMap<String, ParamValue> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn params_are_typed_and_unknown_keys_are_named() {
        let ok = raw(&[
            ("chunk", ParamValue::Text("4 KiB".into())),
            ("pipelined", ParamValue::Bool(true)),
        ]);
        let params = Params::check("ring", SPECS, &ok).unwrap();
        assert_eq!(params.size("chunk"), Some(4096));
        assert_eq!(params.flag("pipelined"), Some(true));
        assert_eq!(params.count("chunk"), None);
        let unknown = raw(&[("chunks", ParamValue::Integer(2))]);
        let error = Params::check("ring", SPECS, &unknown).unwrap_err();
        assert_eq!(
            error.to_string(),
            "params.chunks: `ring` has no such parameter (it takes: chunk, pipelined)"
        );
        let zero = raw(&[("chunk", ParamValue::Integer(0))]);
        let error = Params::check("ring", SPECS, &zero).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("params.chunk: `0` is not a positive size")
        );
        let none = Params::check("hello", &[], &unknown)
            .unwrap_err()
            .to_string();
        assert!(none.ends_with("(it takes: none)"), "{none}");
    }

    #[test]
    fn reduce_ops_parse_and_combine() {
        for op in ReduceOp::ALL {
            assert_eq!(ReduceOp::parse(op.name()), Some(op));
        }
        assert_eq!(ReduceOp::parse("mean"), None);
        assert_eq!(
            "mean".parse::<ReduceOp>().unwrap_err(),
            "`mean` is not a reduction (expected one of sum, prod, min, max, avg)"
        );
        assert_eq!("prod".parse::<ReduceOp>(), Ok(ReduceOp::Product));
        assert_eq!(ReduceOp::Avg.binary(), BinaryFn::Add);
        assert_eq!(ReduceOp::Product.binary(), BinaryFn::Mul);
    }
}
