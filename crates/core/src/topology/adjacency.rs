//! Adjacency views: the machine graph seen through a filter on edge kinds,
//! one per purpose a route can have.
//!
//! | view | excludes | for |
//! |---|---|---|
//! | `all` | nothing | commands: host → IO_CPU → M_CPU over the management bus |
//! | `data` | `mgmt` | data: PE_DMA loads, stores, sends |
//! | `mcpu_dma` | `mgmt`, `inter_sip` | M_CPU.DMA copies: host ↔ device and inside one SIP (rank = SIP) |
//! | `cube_local` | `mgmt`, `ucie`, `inter_sip`, `pcie` | traffic that must stay inside one cube |
//!
//! This module knows edge kinds only.

use std::fmt;

use serde::Serialize;

use super::machine::{EdgeId, EdgeKind, Machine, NodeId};

/// Which edges a route may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum View {
    /// Every edge.
    All,
    /// Every edge but the management bus.
    Data,
    /// Data edges inside one SIP and to the host.
    McpuDma,
    /// Edges inside one cube.
    CubeLocal,
}

impl View {
    /// Every view.
    pub const ALL: [View; 4] = [View::All, View::Data, View::McpuDma, View::CubeLocal];

    /// The edge kinds this view leaves out.
    pub const fn excluded(self) -> &'static [EdgeKind] {
        match self {
            View::All => &[],
            View::Data => &[EdgeKind::Mgmt],
            View::McpuDma => &[EdgeKind::Mgmt, EdgeKind::InterSip],
            View::CubeLocal => &[
                EdgeKind::Mgmt,
                EdgeKind::Ucie,
                EdgeKind::InterSip,
                EdgeKind::Pcie,
            ],
        }
    }

    /// Whether a route in this view may use an edge of `kind`.
    pub fn allows(self, kind: EdgeKind) -> bool {
        !self.excluded().contains(&kind)
    }

    /// The view's name.
    pub const fn name(self) -> &'static str {
        match self {
            View::All => "all",
            View::Data => "data",
            View::McpuDma => "mcpu_dma",
            View::CubeLocal => "cube_local",
        }
    }
}

impl fmt::Display for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Machine {
    /// The edges leaving `node` that `view` allows, with the node each
    /// reaches, in edge-id order.
    pub fn neighbours(
        &self,
        node: NodeId,
        view: View,
    ) -> impl Iterator<Item = (EdgeId, NodeId)> + '_ {
        self.out_edges(node).iter().filter_map(move |&id| {
            let edge = self.edge(id);
            view.allows(edge.kind).then_some((id, edge.to))
        })
    }
}
