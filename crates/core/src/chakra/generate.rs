//! The traces `kernbench chakra-gen` writes: collective microbenchmarks
//! (one `COMM_COLL_NODE` per rank, like the ones ASTRA-sim ships) and one
//! transformer training step ([`step`]).
//!
//! Attributes are written in the kinds Chakra's own writers use
//! (`comm_type`, `comm_size` and `num_ops` as `int64`, `tensor_size` as
//! `uint64`, `comm_src`/`comm_dst`/`comm_tag` as `int32`), so any Chakra
//! reader accepts them.

pub mod memory;
pub mod step;

use super::io::RawTrace;
use super::schema::{Attribute, CommType, GlobalMetadata, Node, NodeType};

/// Why `chakra-gen` cannot write what it was asked for; one line naming
/// the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    /// `--collective` names no Chakra collective.
    #[error("--collective {name}: expected one of {}", names(&COLLECTIVES.map(super::world::comm_name)))]
    UnknownCollective {
        /// The name given.
        name: String,
    },
    /// `--model` names no model of [`step::MODELS`].
    #[error("--model {name}: expected one of {}", names(&step::MODELS.iter().map(|m| m.name).collect::<Vec<_>>()))]
    UnknownModel {
        /// The name given.
        name: String,
    },
    /// A count that must be positive is zero.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// A flag's value names nothing it takes (the message names it).
    #[error("{0}")]
    Flag(String),
    /// A rank's weights, gradients, optimizer state and activations do not
    /// fit its HBM.
    #[error(
        "rank {rank} (stage {stage}) needs {needed} B of HBM ({breakdown}), but a SIP holds \
         {capacity} B (cube.hbm.capacity x cubes): raise --tp or --pp, use --dp-mode zero, or \
         pass --ignore-memory to run anyway"
    )]
    Memory {
        /// The first rank that does not fit.
        rank: usize,
        /// Its pipeline stage.
        stage: usize,
        /// Bytes it needs.
        needed: u64,
        /// What they are.
        breakdown: String,
        /// Bytes a SIP's HBM holds.
        capacity: u64,
    },
    /// The layers do not split evenly over the pipeline stages.
    #[error("--layers {layers} must be a multiple of --pp {pp} (layers per stage)")]
    LayersPerStage {
        /// `--layers`.
        layers: usize,
        /// `--pp`.
        pp: usize,
    },
    /// The EP degree does not divide the DP degree and the experts.
    #[error(
        "--ep {ep} must divide --dp {dp} and {model}'s {experts} experts (the experts are \
         sharded over the DP replicas of a stage)"
    )]
    EpDivides {
        /// `--ep`.
        ep: usize,
        /// `--dp`.
        dp: usize,
        /// The model's name.
        model: &'static str,
        /// Its experts a layer (1: dense).
        experts: u64,
    },
    /// The TP degree does not divide the model's heads and hidden size.
    #[error("--tp {tp} must divide {model}'s {heads} heads and hidden size {hidden}")]
    TpDivides {
        /// `--tp`.
        tp: usize,
        /// The model's name.
        model: &'static str,
        /// Its attention heads.
        heads: u64,
        /// Its hidden size.
        hidden: u64,
    },
}

fn names(names: &[&str]) -> String {
    names.join(", ")
}

/// The collectives `--collective` names.
const COLLECTIVES: [CommType; 9] = [
    CommType::AllReduce,
    CommType::Reduce,
    CommType::AllGather,
    CommType::Gather,
    CommType::Scatter,
    CommType::Broadcast,
    CommType::AllToAll,
    CommType::ReduceScatter,
    CommType::Barrier,
];

/// The schema version written.
pub const VERSION: &str = "0.0.4";

/// A trace of `nodes`.
pub fn trace(nodes: Vec<Node>) -> RawTrace {
    RawTrace {
        metadata: GlobalMetadata {
            version: VERSION.to_owned(),
            attr: Vec::new(),
        },
        nodes,
    }
}

/// A `COMM_COLL_NODE` of `bytes` per rank, in process group `group` (if
/// any), after `deps`.
pub fn collective_node(
    (id, name): (u64, &str),
    comm: CommType,
    bytes: u64,
    group: Option<&str>,
    deps: Vec<u64>,
) -> Node {
    let mut attr = vec![
        Attribute::boolean("is_cpu_op", false),
        Attribute::int64("comm_type", comm as i64),
        Attribute::int64("comm_size", bytes as i64),
    ];
    if let Some(group) = group {
        attr.push(Attribute::string("pg_name", group));
    }
    Node::new((id, name), NodeType::CommColl, deps, attr)
}

/// A `COMP_NODE` of `num_ops` operations touching `tensor_size` bytes.
pub fn compute_node(
    (id, name): (u64, &str),
    num_ops: u64,
    tensor_size: u64,
    deps: Vec<u64>,
) -> Node {
    let attr = vec![
        Attribute::boolean("is_cpu_op", false),
        Attribute::int64("num_ops", num_ops as i64),
        Attribute::uint64("tensor_size", tensor_size),
    ];
    Node::new((id, name), NodeType::Comp, deps, attr)
}

/// A `COMM_SEND_NODE` (`send`) or `COMM_RECV_NODE` of `bytes` between
/// ranks `src` and `dst` with `tag`.
pub fn p2p_node(
    (id, name): (u64, &str),
    send: bool,
    (src, dst, tag): (usize, usize, u32),
    bytes: u64,
    deps: Vec<u64>,
) -> Node {
    let attr = vec![
        Attribute::boolean("is_cpu_op", false),
        Attribute::int32("comm_src", src as i32),
        Attribute::int32("comm_dst", dst as i32),
        Attribute::int32("comm_tag", tag as i32),
        Attribute::int64("comm_size", bytes as i64),
    ];
    let kind = match send {
        true => NodeType::CommSend,
        false => NodeType::CommRecv,
    };
    Node::new((id, name), kind, deps, attr)
}

/// One collective of `bytes` per rank on every one of `ranks` ranks.
pub fn collective(comm: CommType, bytes: u64, ranks: usize) -> Vec<RawTrace> {
    let name = super::world::comm_name(comm);
    (0..ranks)
        .map(|_| {
            trace(vec![collective_node(
                (0, name),
                comm,
                bytes,
                None,
                Vec::new(),
            )])
        })
        .collect()
}

/// The collective called `name` (`all_reduce`, `all_gather`, ...).
pub fn comm_type(name: &str) -> Result<CommType, GenError> {
    COLLECTIVES
        .into_iter()
        .find(|&c| super::world::comm_name(c) == name)
        .ok_or_else(|| GenError::UnknownCollective {
            name: name.to_owned(),
        })
}
