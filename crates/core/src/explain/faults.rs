//! The machine's faults on the critical path (ADR-0106): for each fault of
//! `faults:`, the path's time on what it degrades — a link fault's edges
//! (by the names `--explain` gives links, `from->to`), a slow unit's
//! PE_GEMM, PE_MATH and PE_DMA issue, a straggler's wait
//! (`sip{R}.straggler`), a part down's wait for its repair or the links
//! its traffic was rerouted over (ADR-0115). Nothing for a healthy
//! machine.
//!
//! Knows the components' time on the critical path and the faults' names; nothing of how
//! either was made.

use super::{OnPath, Share};
use crate::hw::explain::Class;
use crate::topology::FaultsSpec;
use crate::topology::faults::{DownFault, entry};
use crate::topology::naming;

/// Each fault of `faults` with its time on `path`, in the order written
/// (links, compute, stragglers, down); `rerouted` names the links routes
/// took around parts down for good.
pub(super) fn shares(path: &[OnPath], faults: &FaultsSpec, rerouted: &[String]) -> Vec<Share> {
    let on = |hit: &dyn Fn(&OnPath) -> bool| path.iter().filter(|s| hit(s)).map(|s| s.ps).sum();
    let mut shares = Vec::new();
    for (name, fault) in faults.links.iter() {
        let link = &fault.link;
        let forward = format!("{}->{}", link.from, link.to);
        let back = format!("{}->{}", link.to, link.from);
        let hit = |s: &OnPath| s.name == forward || (link.both && s.name == back);
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
        let compute = |s: &OnPath| {
            [Class::PeMath, Class::DmaIssue]
                .iter()
                .any(|c| s.class == c.name())
        };
        let hit = |s: &OnPath| s.name.starts_with(&prefix) && compute(s);
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
            ps: on(&|s: &OnPath| s.name == wait),
        });
    }
    for (name, fault) in faults.down.iter() {
        shares.push(down_share(path, entry("down", name), fault, rerouted));
    }
    shares
}

/// The first six of `links`, those with the most time on `path` first
/// (ties in the order given), and how many more.
fn busiest_first(path: &[OnPath], links: &[String]) -> String {
    let time =
        |link: &String| -> u64 { path.iter().filter(|s| &s.name == link).map(|s| s.ps).sum() };
    let mut timed: Vec<(u64, &String)> = links.iter().map(|l| (time(l), l)).collect();
    timed.sort_by_key(|&(ps, _)| std::cmp::Reverse(ps));
    let names: Vec<&str> = timed.iter().take(6).map(|(_, l)| l.as_str()).collect();
    match links.len() {
        0 => "no link yet".to_owned(),
        1..=6 => names.join(", "),
        n => format!("{} and {} more", names.join(", "), n - 6),
    }
}

/// A part down: for good, the path's time on the links its traffic was
/// rerouted over (named, the first six); for a window, its time on the
/// part itself (the wait for the repair).
fn down_share(path: &[OnPath], entry: String, fault: &DownFault, rerouted: &[String]) -> Share {
    let on = |hit: &dyn Fn(&OnPath) -> bool| path.iter().filter(|s| hit(s)).map(|s| s.ps).sum();
    let what = fault.what();
    if fault.until.is_none() {
        let over = busiest_first(path, rerouted);
        return Share {
            name: format!("{entry}: {what} down for the run, rerouted over {over}"),
            class: "rerouted".to_owned(),
            ps: on(&|s: &OnPath| rerouted.contains(&s.name)),
        };
    }
    let hit: Box<dyn Fn(&OnPath) -> bool> = match &fault.link {
        Some(link) => {
            let forward = format!("{}->{}", link.from, link.to);
            let back = format!("{}->{}", link.to, link.from);
            let both = link.both;
            Box::new(move |s: &OnPath| s.name == forward || (both && s.name == back))
        }
        None => {
            let prefix = format!("{what}.");
            Box::new(move |s: &OnPath| s.name.starts_with(&prefix))
        }
    };
    Share {
        name: format!("{entry}: {what} down {}", fault.when()),
        class: "down".to_owned(),
        ps: on(&*hit),
    }
}
