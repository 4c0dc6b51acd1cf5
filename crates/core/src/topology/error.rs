//! Why a machine cannot be compiled.

use super::address::AddressError;
use super::faults::FaultError;
use super::layout::LayoutError;
use super::link::LinkError;

/// A spec that does not give a buildable machine. [`TopologyError::key`]
/// names the spec key to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// The cube NoC cannot be laid out.
    #[error("{key}: {0}", key = .0.key())]
    Layout(#[from] LayoutError),
    /// A hop's latency overflows.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The address map cannot describe the machine.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// More nodes or edges than 32-bit ids can number.
    #[error("the machine has {count} {what}, more than 32-bit ids can number")]
    TooLarge {
        /// `nodes` or `edges`.
        what: &'static str,
        /// How many.
        count: usize,
    },
    /// A fault of `faults:` names no part of the machine.
    #[error("{key}: {message}", key = .0.key, message = .0.message)]
    Fault(#[from] FaultError),
    /// Two nodes got one name (a bug in the naming scheme).
    #[error("two nodes are named {0}")]
    DuplicateName(String),
}

impl TopologyError {
    /// The spec key to blame (empty when no single key is).
    pub fn key(&self) -> &str {
        match self {
            TopologyError::Layout(error) => error.key(),
            TopologyError::Link(error) => error.key,
            TopologyError::Address(error) => error.key(),
            TopologyError::Fault(error) => &error.key,
            TopologyError::TooLarge { .. } | TopologyError::DuplicateName(_) => "",
        }
    }
}
