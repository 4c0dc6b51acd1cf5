//! One rank's trace as a typed dependency graph: every [`Node`] of a
//! [`RawTrace`] becomes an [`EtNode`] whose [`Op`] holds the attributes the
//! simulator uses, whose dependencies (`ctrl_deps` and `data_deps`
//! together) are indices, and the graph is checked: unique ids, no
//! dependency on a node the file lacks, no cycle.
//!
//! Unknown node types become [`Op::Nop`] (they keep the graph connected)
//! and unknown attributes are ignored; both are counted in [`Warnings`].
//! Attributes Chakra's converters write for bookkeeping (`rf_id`,
//! `op_schema`, ...) are known and ignored silently.
//!
//! Knows the schema only; nothing of the machine.

use std::collections::BTreeMap;

use super::io::RawTrace;
use super::schema::{CommType, Node, NodeType, Value};

/// What a node does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Computation: `num_ops` operations touching `tensor_size` bytes; on
    /// the host (`cpu`) it takes its measured duration.
    Compute {
        /// Operations (FLOPs).
        num_ops: u64,
        /// Bytes read and written.
        tensor_size: u64,
        /// `is_cpu_op`.
        cpu: bool,
    },
    /// A load from (`store == false`) or store to memory of `bytes`.
    Memory {
        /// Whether it stores.
        store: bool,
        /// Bytes moved.
        bytes: u64,
    },
    /// A collective of `bytes` per rank in process group `group` (`None`:
    /// every rank).
    Collective {
        /// Which.
        comm: CommType,
        /// `comm_size`: input bytes per rank.
        bytes: u64,
        /// `pg_name`.
        group: Option<String>,
    },
    /// A send of `bytes` to rank `peer` with `tag`.
    Send {
        /// The receiving rank.
        peer: usize,
        /// `comm_tag`.
        tag: u64,
        /// Bytes sent.
        bytes: u64,
    },
    /// A receive of `bytes` from rank `peer` with `tag`.
    Recv {
        /// The sending rank.
        peer: usize,
        /// `comm_tag`.
        tag: u64,
        /// Bytes received.
        bytes: u64,
    },
    /// Takes no time (metadata, unknown types).
    Nop,
}

/// One node of a rank's graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtNode {
    /// Its id in the file.
    pub id: u64,
    /// Its name (the trace slice's name).
    pub name: String,
    /// What it does.
    pub op: Op,
    /// `duration_micros`.
    pub duration_micros: u64,
    /// Indices of the nodes it waits for (sorted, unique).
    pub deps: Vec<usize>,
}

/// What was skipped or ignored while reading, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Warnings {
    /// Nodes of unknown types, by type value.
    pub unknown_types: BTreeMap<i32, u64>,
    /// Unknown attributes, by name.
    pub unknown_attributes: BTreeMap<String, u64>,
}

impl Warnings {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Warnings) {
        for (&k, &n) in &other.unknown_types {
            *self.unknown_types.entry(k).or_default() += n;
        }
        for (k, &n) in &other.unknown_attributes {
            *self.unknown_attributes.entry(k.clone()).or_default() += n;
        }
    }

    /// Skipped nodes.
    pub fn skipped_nodes(&self) -> u64 {
        self.unknown_types.values().sum()
    }

    /// Ignored attributes.
    pub fn ignored_attributes(&self) -> u64 {
        self.unknown_attributes.values().sum()
    }
}

/// One rank's checked graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankGraph {
    /// The nodes, in file order.
    pub nodes: Vec<EtNode>,
    /// What was skipped.
    pub warnings: Warnings,
}

/// Why a rank's trace is no graph the simulator can run; one line naming
/// node ids (the caller names the file).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// Two nodes share an id.
    #[error("node id {0} appears twice")]
    DuplicateId(u64),
    /// A dependency on a node the file does not have.
    #[error("node {node} (`{name}`) depends on node {dep}, which the file does not have")]
    MissingDep {
        /// The node's id.
        node: u64,
        /// Its name.
        name: String,
        /// The id it depends on.
        dep: u64,
    },
    /// A duration that takes the file's durations past the simulated
    /// clock's range.
    #[error(
        "node {node} (`{name}`): duration_micros {micros} takes the file's durations past \
         {MAX_TOTAL_MICROS} us, the simulated time range"
    )]
    PastTimeRange {
        /// The node's id.
        node: u64,
        /// Its name.
        name: String,
        /// Its duration.
        micros: u64,
    },
    /// Nodes that depend on each other, in execution order (each on the
    /// one before, the first on the last).
    #[error("dependency cycle through nodes {}", cycle_text(.0))]
    Cycle(Vec<u64>),
    /// An integer attribute holding something else.
    #[error(
        "node {node} (`{name}`): attribute {attribute} is {value:?}, expected a non-negative integer"
    )]
    NotAnInteger {
        /// The node's id.
        node: u64,
        /// Its name.
        name: String,
        /// The attribute.
        attribute: &'static str,
        /// What it holds.
        value: Value,
    },
    /// An attribute the node's type needs is not there.
    #[error("node {node} (`{name}`): attribute {attribute} is missing")]
    MissingAttribute {
        /// The node's id.
        node: u64,
        /// Its name.
        name: String,
        /// The attribute.
        attribute: &'static str,
    },
    /// A `comm_type` that is no Chakra collective.
    #[error("node {node} (`{name}`): comm_type {code} is no Chakra collective (0 to 9)")]
    UnknownCommType {
        /// The node's id.
        node: u64,
        /// Its name.
        name: String,
        /// The value.
        code: u64,
    },
}

/// `1 -> 2 -> 3 -> 1`: a cycle's ids, back to the first.
fn cycle_text(ids: &[u64]) -> String {
    let mut text: Vec<String> = ids.iter().map(u64::to_string).collect();
    text.extend(ids.first().map(u64::to_string));
    text.join(" -> ")
}

/// Attributes the simulator reads.
const USED: &[&str] = &[
    "is_cpu_op",
    "num_ops",
    "tensor_size",
    "comm_type",
    "comm_size",
    "comm_src",
    "comm_dst",
    "comm_tag",
    "pg_name",
];

/// Attributes Chakra writers add that do not change the timing here.
const KNOWN_IGNORED: &[&str] = &[
    "comm_priority",
    "involved_dim",
    "tensor_loc",
    "rf_id",
    "fw_parent",
    "seq_id",
    "scope",
    "tid",
    "fw_tid",
    "op_schema",
    "stream",
];

/// `raw` as a checked graph; the error is one line naming node ids (the
/// caller names the file).
pub fn build(raw: &RawTrace) -> Result<RankGraph, GraphError> {
    let mut warnings = Warnings::default();
    let mut index = BTreeMap::new();
    for (i, node) in raw.nodes.iter().enumerate() {
        if index.insert(node.id, i).is_some() {
            return Err(GraphError::DuplicateId(node.id));
        }
    }
    let mut nodes = Vec::with_capacity(raw.nodes.len());
    let mut total_micros = 0u64;
    for node in &raw.nodes {
        total_micros = within_time_range(total_micros, node)?;
        let op = op(node, &mut warnings)?;
        let mut deps = Vec::with_capacity(node.ctrl_deps.len() + node.data_deps.len());
        for dep in node.ctrl_deps.iter().chain(&node.data_deps) {
            let Some(&d) = index.get(dep) else {
                return Err(GraphError::MissingDep {
                    node: node.id,
                    name: shown(&node.name),
                    dep: *dep,
                });
            };
            deps.push(d);
        }
        deps.sort_unstable();
        deps.dedup();
        nodes.push(EtNode {
            id: node.id,
            name: node.name.clone(),
            op,
            duration_micros: node.duration_micros,
            deps,
        });
    }
    if let Some(cycle) = find_cycle(nodes.len(), |i| &nodes[i].deps) {
        return Err(GraphError::Cycle(
            cycle.iter().map(|&i| nodes[i].id).collect(),
        ));
    }
    Ok(RankGraph { nodes, warnings })
}

/// The most `duration_micros` a file's nodes may add up to: every node of
/// one rank in a row, still inside the simulated clock's range (2⁶³ ps,
/// about 106 days).
pub const MAX_TOTAL_MICROS: u64 = (1 << 63) / crate::sim::PS_PER_US;

/// `total` plus `node`'s duration, refused past [`MAX_TOTAL_MICROS`].
fn within_time_range(total: u64, node: &Node) -> Result<u64, GraphError> {
    total
        .checked_add(node.duration_micros)
        .filter(|&sum| sum <= MAX_TOTAL_MICROS)
        .ok_or_else(|| GraphError::PastTimeRange {
            node: node.id,
            name: shown(&node.name),
            micros: node.duration_micros,
        })
}

/// A cycle of the graph of `n` nodes whose dependencies `deps(i)` gives,
/// if there is one: the nodes Kahn's algorithm cannot order, walked along
/// their unordered dependencies until one repeats; in execution order
/// (each depends on the one before, the first on the last), starting at
/// its smallest index.
pub fn find_cycle<'a>(n: usize, deps: impl Fn(usize) -> &'a [usize]) -> Option<Vec<usize>> {
    let order = topological_order(n, &deps);
    if order.len() == n {
        return None;
    }
    let mut done = vec![false; n];
    order.iter().for_each(|&i| done[i] = true);
    let start = (0..n).find(|&i| !done[i])?;
    let mut seen = BTreeMap::new();
    let mut path = Vec::new();
    let mut at = start;
    while !seen.contains_key(&at) {
        seen.insert(at, path.len());
        path.push(at);
        at = *deps(at).iter().find(|&&d| !done[d])?;
    }
    let mut cycle = path.split_off(seen[&at]);
    cycle.reverse();
    let first = (0..cycle.len()).min_by_key(|&i| cycle[i])?;
    cycle.rotate_left(first);
    Some(cycle)
}

/// Kahn's algorithm over `n` nodes whose dependencies `deps(i)` gives:
/// the nodes in an order where each follows its dependencies (smallest
/// index first among the ready); shorter than `n` if there is a cycle.
pub fn topological_order<'a>(n: usize, deps: impl Fn(usize) -> &'a [usize]) -> Vec<usize> {
    let mut waiting: Vec<usize> = (0..n).map(|i| deps(i).len()).collect();
    let mut children = vec![Vec::new(); n];
    for i in 0..n {
        for &d in deps(i) {
            children[d].push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &c in &children[i] {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                ready.insert(c);
            }
        }
    }
    order
}

/// The node's attributes this reader uses, by name; the names neither
/// used nor known to be ignored counted in `warnings`.
fn used_attributes<'a>(node: &'a Node, warnings: &mut Warnings) -> BTreeMap<&'a str, &'a Value> {
    let mut attrs: BTreeMap<&str, &Value> = BTreeMap::new();
    let mut ignore = |what: String| *warnings.unknown_attributes.entry(what).or_default() += 1;
    for attr in &node.attr {
        let name = attr.name.as_str();
        if USED.contains(&name) {
            let Some(value) = &attr.value else { continue };
            if attrs.contains_key(name) {
                ignore(format!("{name} (a second one)"));
            } else if !typed_as_used(name, value) {
                ignore(format!("{name} (of the wrong type)"));
            } else {
                attrs.insert(name, value);
            }
        } else if !KNOWN_IGNORED.contains(&name) {
            ignore(attr.name.clone());
        }
    }
    attrs
}

/// `name` as an error line shows it: control characters escaped (`\n`,
/// `\u{1b}`), so a node's name cannot break or forge a line (issue 40
/// item 16); other text as it is.
pub fn shown(name: &str) -> String {
    name.chars()
        .map(|c| match c.is_control() {
            true => c.escape_debug().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// Whether `value` has the type the runner reads `name` as: a string
/// `pg_name`, a boolean `is_cpu_op`; integers are checked where read
/// (a wrong one is an error there, not a warning).
fn typed_as_used(name: &str, value: &Value) -> bool {
    match name {
        "pg_name" => matches!(value, Value::Str(_)),
        "is_cpu_op" => matches!(value, Value::Bool(_)),
        _ => true,
    }
}

/// `node` lacks `attribute`.
fn missing(node: &Node, attribute: &'static str) -> GraphError {
    GraphError::MissingAttribute {
        node: node.id,
        name: shown(&node.name),
        attribute,
    }
}

/// The [`Op`] of `node`.
fn op(node: &Node, warnings: &mut Warnings) -> Result<Op, GraphError> {
    let attrs = used_attributes(node, warnings);
    let int = |attribute: &'static str| -> Result<Option<u64>, GraphError> {
        match attrs.get(attribute) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .map(Some)
                .ok_or_else(|| GraphError::NotAnInteger {
                    node: node.id,
                    name: shown(&node.name),
                    attribute,
                    value: (*value).clone(),
                }),
        }
    };
    let required = |attribute: &'static str| -> Result<u64, GraphError> {
        int(attribute)?.ok_or_else(|| missing(node, attribute))
    };
    let rank = |name: &'static str| -> Result<usize, GraphError> { Ok(required(name)? as usize) };
    let comm_bytes = || -> Result<u64, GraphError> {
        match (int("comm_size")?, int("tensor_size")?) {
            (Some(bytes), _) | (None, Some(bytes)) => Ok(bytes),
            (None, None) => Err(missing(node, "comm_size (or tensor_size)")),
        }
    };
    Ok(match NodeType::try_from(node.kind) {
        Ok(NodeType::Comp) => Op::Compute {
            num_ops: int("num_ops")?.unwrap_or(0),
            tensor_size: int("tensor_size")?.unwrap_or(0),
            cpu: matches!(attrs.get("is_cpu_op"), Some(Value::Bool(true))),
        },
        Ok(NodeType::MemLoad | NodeType::MemStore) => Op::Memory {
            store: node.kind == NodeType::MemStore as i32,
            bytes: int("tensor_size")?.unwrap_or(0),
        },
        Ok(NodeType::CommColl) => {
            let code = required("comm_type")?;
            let comm = i32::try_from(code)
                .ok()
                .and_then(|c| CommType::try_from(c).ok())
                .ok_or_else(|| GraphError::UnknownCommType {
                    node: node.id,
                    name: shown(&node.name),
                    code,
                })?;
            let bytes = match comm {
                CommType::Barrier => int("comm_size")?.unwrap_or(0),
                _ => required("comm_size")?,
            };
            let group = match attrs.get("pg_name") {
                Some(Value::Str(name)) if !name.is_empty() => Some(name.clone()),
                _ => None,
            };
            Op::Collective { comm, bytes, group }
        }
        Ok(NodeType::CommSend) => Op::Send {
            peer: rank("comm_dst")?,
            tag: int("comm_tag")?.unwrap_or(0),
            bytes: comm_bytes()?,
        },
        Ok(NodeType::CommRecv) => Op::Recv {
            peer: rank("comm_src")?,
            tag: int("comm_tag")?.unwrap_or(0),
            bytes: comm_bytes()?,
        },
        Ok(NodeType::Metadata) => Op::Nop,
        Ok(NodeType::Invalid) | Err(_) => {
            *warnings.unknown_types.entry(node.kind).or_default() += 1;
            Op::Nop
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chakra::schema::{Attribute, GlobalMetadata};

    fn node(id: u64, kind: NodeType, deps: &[u64], attr: Vec<Attribute>) -> Node {
        Node::new((id, &format!("n{id}")), kind, deps.to_vec(), attr)
    }

    fn raw(nodes: Vec<Node>) -> RawTrace {
        RawTrace {
            metadata: GlobalMetadata::default(),
            nodes,
        }
    }

    #[test]
    fn ops_read_their_attributes_in_any_integer_kind() {
        let coll = node(
            2,
            NodeType::CommColl,
            &[1],
            vec![
                Attribute::int64("comm_type", CommType::AllGather as i64),
                Attribute::uint64("comm_size", 4096),
                Attribute::string("pg_name", "tp0"),
                Attribute::int64("rf_id", 3),
                Attribute::int64("mystery", 3),
            ],
        );
        let comp = node(
            1,
            NodeType::Comp,
            &[],
            vec![Attribute::int64("num_ops", 10)],
        );
        let graph = build(&raw(vec![
            comp,
            coll,
            node(3, NodeType::Invalid, &[2], vec![]),
        ]))
        .unwrap();
        assert_eq!(graph.nodes[1].deps, [0]);
        assert_eq!(
            graph.nodes[1].op,
            Op::Collective {
                comm: CommType::AllGather,
                bytes: 4096,
                group: Some("tp0".to_owned())
            }
        );
        assert_eq!(graph.warnings.skipped_nodes(), 1);
        assert_eq!(graph.warnings.unknown_attributes["mystery"], 1);
        assert_eq!(graph.warnings.ignored_attributes(), 1, "rf_id is known");
    }

    #[test]
    fn bad_graphs_are_named_by_node_ids() {
        let cycle = raw(vec![
            node(1, NodeType::Comp, &[3], vec![]),
            node(2, NodeType::Comp, &[1], vec![]),
            node(3, NodeType::Comp, &[2], vec![]),
        ]);
        let error = build(&cycle).unwrap_err();
        assert_eq!(error, GraphError::Cycle(vec![1, 2, 3]));
        assert_eq!(
            error.to_string(),
            "dependency cycle through nodes 1 -> 2 -> 3 -> 1"
        );
        let dangling = raw(vec![node(1, NodeType::Comp, &[9], vec![])]);
        assert_eq!(
            build(&dangling).unwrap_err().to_string(),
            "node 1 (`n1`) depends on node 9, which the file does not have"
        );
        let twice = raw(vec![node(1, NodeType::Comp, &[], vec![]); 2]);
        assert_eq!(build(&twice).unwrap_err(), GraphError::DuplicateId(1));
        assert_eq!(
            build(&twice).unwrap_err().to_string(),
            "node id 1 appears twice"
        );
        let no_type = raw(vec![node(4, NodeType::CommColl, &[], vec![])]);
        assert_eq!(
            build(&no_type).unwrap_err().to_string(),
            "node 4 (`n4`): attribute comm_type is missing"
        );
        let send = raw(vec![node(
            5,
            NodeType::CommSend,
            &[],
            vec![Attribute::int64("comm_size", 8)],
        )]);
        assert_eq!(
            build(&send).unwrap_err().to_string(),
            "node 5 (`n5`): attribute comm_dst is missing"
        );
    }
}
