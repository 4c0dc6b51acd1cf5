//! The machine's faults on the critical path (ADR-0106): for each fault of
//! `faults:`, the path's time on what it degrades — a link fault's edges
//! (by the names `--explain` gives links, `from->to`), a slow unit's
//! PE_GEMM, PE_MATH and PE_DMA issue, a straggler's wait
//! (`sip{R}.straggler`). Nothing for a healthy machine.
//!
//! Knows the critical path's steps and the faults' names; nothing of how
//! either was made.

use super::{Share, Step};
use crate::hw::explain::Class;
use crate::topology::FaultsSpec;
use crate::topology::faults::entry;
use crate::topology::naming;

/// Each fault of `faults` with its time on `path`, in the order written
/// (links, compute, stragglers).
pub(super) fn shares(path: &[Step], faults: &FaultsSpec) -> Vec<Share> {
    let on =
        |hit: &dyn Fn(&Step) -> bool| path.iter().filter(|s| hit(s)).map(|s| s.duration_ps).sum();
    let mut shares = Vec::new();
    for (name, fault) in faults.links.iter() {
        let link = &fault.link;
        let forward = format!("{}->{}", link.from, link.to);
        let back = format!("{}->{}", link.to, link.from);
        let hit = |s: &Step| s.component == forward || (link.both && s.component == back);
        shares.push(Share {
            name: format!(
                "{}: {link} (bandwidth x{}, +{})",
                entry("links", name),
                fault.bandwidth_factor,
                fault.extra_latency
            ),
            class: "link".to_owned(),
            ps: on(&hit),
        });
    }
    for (name, fault) in faults.compute.iter() {
        let prefix = format!("{}.", fault.at);
        let compute = |s: &Step| {
            [Class::PeMath, Class::DmaIssue]
                .iter()
                .any(|c| s.class == c.name())
        };
        let hit = |s: &Step| s.component.starts_with(&prefix) && compute(s);
        shares.push(Share {
            name: format!(
                "{}: {} (slowdown {})",
                entry("compute", name),
                fault.at,
                fault.slowdown
            ),
            class: "compute".to_owned(),
            ps: on(&hit),
        });
    }
    for (name, straggler) in faults.stragglers.iter() {
        let wait = format!("{}.straggler", naming::sip(straggler.rank));
        let call = straggler
            .call
            .map_or_else(|| "every call".to_owned(), |c| format!("call {c}"));
        shares.push(Share {
            name: format!(
                "{}: rank {} {} late to {} ({call})",
                entry("stragglers", name),
                straggler.rank,
                straggler.late,
                straggler.collective.name()
            ),
            class: "straggler".to_owned(),
            ps: on(&|s: &Step| s.component == wait),
        });
    }
    shares
}
