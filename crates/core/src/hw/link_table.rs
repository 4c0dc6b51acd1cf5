//! [`LinkTable`]: the fabric's [`Link`] of every directed edge, each made
//! the first time something crosses it.
//!
//! A machine of tens of millions of edges (254 SIPs of 16 × 16 cubes of 240
//! PEs has about 130 million) cannot hold an idle 128-byte link and its name
//! per edge: a run touches the links of the routes it uses. Each edge costs
//! one pointer until then (ADR-0050, ADR-0040's next
//! step). A link is the same whether made early or late: idle, named
//! `from->to`, sharing the [`LinkClass`] of its parameters.
//!
//! While `--explain` records, a link made is named to the recorder at
//! once with its class from its edge's kind (ADR-0051): the recorder sees
//! only the links a run makes.
//!
//! A route crosses its links at every flow: [`HeldLinks`] keeps their
//! addresses beside whatever the route keeps per hop, and a share of the
//! table, so that a hop reads its link without the per-edge slot
//! (ADR-0058: at 256 SIPs that slot was a cache miss per hop).
//!
//! One test hook lives here, where every link's parameters are made
//! (ADR-0086): `KERNBENCH_TEST_FAST_LINKS=F` (a whole number, at least 2)
//! serves every inter-SIP and UCIe link at `F` times its configured rate,
//! a deliberately broken cost for the tests that the physical bound
//! catches it. Unset (always, outside those tests) it changes nothing.
//!
//! Knows the machine's edges and the link model; nothing of routes or time.

use std::cell::{OnceCell, RefCell};
use std::ops::Index;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;

use super::explain::{self, Class};
use super::{HopParams, Link, LinkClass};
use crate::sim::SimTime;
use crate::topology::{EdgeId, EdgeKind, Machine};

/// The `--explain` class of a link of `kind`.
fn explain_class(kind: EdgeKind) -> Class {
    match kind {
        EdgeKind::InterSip => Class::InterSipLink,
        EdgeKind::Ucie => Class::Ucie,
        EdgeKind::Pcie | EdgeKind::Mgmt => Class::Pcie,
        EdgeKind::Noc | EdgeKind::Attach | EdgeKind::HbmPort => Class::Noc,
    }
}

/// The slots of a table: one per edge, its link boxed when made, never
/// unmade, shared with the [`HeldLinks`] that point into it.
type Slots = Rc<[OnceCell<Box<Link>>]>;

/// One lazily made [`Link`] per directed edge, indexed by edge index.
pub struct LinkTable {
    machine: Arc<Machine>,
    /// Never borrowed mutably (no `Rc::get_mut`): a made link stays where
    /// it is for as long as a share of the slots lives.
    links: Slots,
    /// The classes made so far: a machine has a handful (one per distinct
    /// set of link parameters), so a linear search finds one.
    classes: RefCell<Vec<Rc<LinkClass>>>,
}

impl LinkTable {
    /// A table of `machine`'s edges with no link made yet.
    pub fn new(machine: Arc<Machine>) -> LinkTable {
        let links = (0..machine.edges().len())
            .map(|_| OnceCell::new())
            .collect::<Slots>();
        LinkTable {
            machine,
            links,
            classes: RefCell::default(),
        }
    }

    /// When the last window any of `edges` is down for ends
    /// (`faults.down`, ADR-0115; the start when none is): until then a
    /// multi-packet flow over them books its hops whole, first come first
    /// served, instead of sharing them (ADR-0056), whose pushes do not see
    /// a held link.
    pub fn held_until(&self, edges: &[EdgeId]) -> SimTime {
        let outages = self.machine.outages();
        if !outages.has_windows() {
            return SimTime::ZERO;
        }
        edges
            .iter()
            .filter_map(|&e| outages.windows(e).last().map(|w| w.1))
            .max()
            .unwrap_or(SimTime::ZERO)
    }

    /// How many edges (made or not) the table has.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether the machine has no edge.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// The link of `edge`, made now if nothing crossed it before.
    pub fn get(&self, edge: EdgeId) -> &Link {
        self.at(edge.index())
    }

    /// The link of the edge at `index`.
    fn at(&self, index: usize) -> &Link {
        self.links[index].get_or_init(|| Box::new(self.make(index)))
    }

    /// How many links have been made.
    pub fn made(&self) -> usize {
        self.links.iter().filter(|l| l.get().is_some()).count()
    }

    /// Every link in edge order, making those not yet made.
    pub fn all(&self) -> impl Iterator<Item = &Link> {
        (0..self.links.len()).map(|i| self.at(i))
    }

    /// The links made so far, in edge order (`--explain`'s snapshots: a
    /// link made later starts idle, its counters at zero).
    pub fn made_links(&self) -> impl Iterator<Item = &Link> {
        self.links.iter().filter_map(|l| l.get().map(|l| &**l))
    }

    /// Names every link made so far to this thread's `--explain` recorder,
    /// with its class (a link made later is named when made).
    pub fn explain_classes(&self) {
        if !explain::recording() {
            return;
        }
        for (index, link) in self.links.iter().enumerate() {
            if let Some(link) = link.get() {
                let kind = self.machine.edge(EdgeId::from_index(index)).kind;
                explain::set_link(link.server(), explain_class(kind), index);
            }
        }
    }

    fn make(&self, index: usize) -> Link {
        let edge = self.machine.edge(EdgeId::from_index(index));
        let p = self.machine.link_params(edge);
        let mut params = HopParams::new(p.bandwidth, p.efficiency, p.latency, p.packet_overhead);
        if matches!(edge.kind, EdgeKind::InterSip | EdgeKind::Ucie) {
            params.bandwidth = broken_rate(params.bandwidth);
        }
        let name = self.machine.link_name(edge.from, edge.to);
        let link = Link::of_class(&name, self.class(params));
        let windows = self.machine.outages().windows(EdgeId::from_index(index));
        if !windows.is_empty() {
            link.server().hold(windows);
        }
        if explain::recording() {
            explain::set_link(link.server(), explain_class(edge.kind), index);
        }
        link
    }

    /// The shared class of `params`, made on first use.
    fn class(&self, params: HopParams) -> Rc<LinkClass> {
        let mut classes = self.classes.borrow_mut();
        if let Some(class) = classes.iter().find(|c| *c.params() == params) {
            return class.clone();
        }
        let class = LinkClass::new(params);
        classes.push(class.clone());
        class
    }
}

/// `rate` times the test hook's factor (see the module docs): `rate`
/// itself unless `KERNBENCH_TEST_FAST_LINKS` is a whole number of at
/// least 2.
fn broken_rate(rate: crate::config::units::Bandwidth) -> crate::config::units::Bandwidth {
    static FACTOR: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let factor = *FACTOR.get_or_init(|| {
        std::env::var("KERNBENCH_TEST_FAST_LINKS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&f| f >= 2)
            .unwrap_or(1)
    });
    rate.bytes_per_sec()
        .checked_mul(factor)
        .and_then(crate::config::units::Bandwidth::from_bytes_per_sec)
        .unwrap_or(rate)
}

/// How many edges a machine has at most for its links' lines to be left
/// unasked for ahead of a walk ([`HeldLinks::prefetch`], ADR-0068): at 16
/// SIPs (45,632 edges; about 19,000 links made, 2.4 MB) what a run
/// touches stays in the core's 2 MiB L2 and the hints would only cost
/// instructions; at 64 SIPs (182,528) and beyond it does not.
const FAR_EDGES: usize = 1 << 16;

/// What a walk over held links reads, asked for ahead of it
/// ([`HeldLinks::prefetch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ahead {
    /// The links' calendars: a walk of one packet.
    Calendars,
    /// The calendars and the flows in service on each link: a walk of
    /// several packets, which shares its hops with them (ADR-0056).
    CalendarsAndFlows,
}

impl Ahead {
    /// What a walk of `packets` packets reads.
    pub(crate) fn for_packets(packets: u64) -> Ahead {
        match packets > 1 {
            true => Ahead::CalendarsAndFlows,
            false => Ahead::Calendars,
        }
    }
}

/// Links of one [`LinkTable`] held by address, each with the caller's
/// `T` (a route's per-hop constants), in the order given: what a route
/// reads at every crossing, without the table's per-edge slot.
pub(crate) struct HeldLinks<T> {
    /// Keeps every link of `items` alive, and tells which table they
    /// are of.
    slots: Slots,
    /// Whether the table is of more than [`FAR_EDGES`] edges: only then
    /// does [`prefetch`](Self::prefetch) ask for anything.
    far: bool,
    /// Links of `slots` (made before being held, never unmade, boxed:
    /// they do not move) and the caller's values.
    items: Box<[(NonNull<Link>, T)]>,
}

impl<T> HeldLinks<T> {
    /// The links of `edges` in `table` (made now if nothing crossed them
    /// before), each with what `value` makes of it.
    pub(crate) fn try_new<E>(
        table: &LinkTable,
        edges: &[EdgeId],
        mut value: impl FnMut(EdgeId, &Link) -> Result<T, E>,
    ) -> Result<Self, E> {
        let items = edges
            .iter()
            .map(|&edge| {
                let link = table.get(edge);
                Ok((NonNull::from(link), value(edge, link)?))
            })
            .collect::<Result<_, E>>()?;
        Ok(HeldLinks {
            slots: table.links.clone(),
            far: table.len() > FAR_EDGES,
            items,
        })
    }

    /// Whether these are links of `table`.
    pub(crate) fn are_of(&self, table: &LinkTable) -> bool {
        Rc::ptr_eq(&self.slots, &table.links)
    }

    /// How many links are held.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Asks for every held link's first cache line, its calendar, and
    /// for a walk of several packets ([`Ahead::CalendarsAndFlows`]) the
    /// first entries of the flows in service on it (their address is in
    /// the link's second line, read here), ahead of a walk
    /// that reads them one after another (ADR-0068): each hop's booking
    /// waits for the one before it, so without the hints the core meets
    /// their misses one at a time; these loads do not wait for each other.
    /// Nothing on a machine of at most [`FAR_EDGES`] edges.
    #[inline(always)]
    pub(crate) fn prefetch(&self, ahead: Ahead) {
        if self.far {
            self.prefetch_all(ahead);
        }
    }

    /// [`prefetch`](Self::prefetch) on a far machine (out of line, so
    /// that the walks it precedes are compiled as they were without it).
    #[inline(never)]
    fn prefetch_all(&self, ahead: Ahead) {
        for (link, _) in self.iter() {
            crate::sim::prefetch(link.server());
            if ahead == Ahead::CalendarsAndFlows {
                link.flows().prefetch();
            }
        }
    }

    /// The links and their values, in order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = (&Link, &T)> + Clone {
        self.items.iter().map(|(link, value)| {
            // SAFETY: `link` points at a boxed link of `self.slots` (made
            // by `LinkTable::get` in `try_new`, the only place items are
            // made). A slot's box is never replaced or dropped while the
            // slots live: `OnceCell` is set once, and the slots are only
            // ever shared (`Rc`), never borrowed mutably; `self` holds a
            // share, so the link outlives the `&self` borrow returned.
            (unsafe { link.as_ref() }, value)
        })
    }
}

impl Index<usize> for LinkTable {
    type Output = Link;

    /// The link of the edge at `index`, made on first use.
    fn index(&self, index: usize) -> &Link {
        self.at(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySpec;

    fn table() -> LinkTable {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        LinkTable::new(Arc::new(Machine::build(&spec).unwrap()))
    }

    #[test]
    fn links_are_made_when_first_asked_for_and_only_once() {
        let table = table();
        assert_eq!(table.made(), 0);
        let first: *const Link = &table[3];
        assert_eq!(table.made(), 1);
        assert!(std::ptr::eq(first, &table[3]));
        assert_eq!(table.made(), 1);
        assert_eq!(table.all().count(), table.len());
        assert_eq!(table.made(), table.len());
    }

    #[test]
    fn a_link_is_named_after_its_edge_and_links_of_equal_parameters_share_a_class() {
        let table = table();
        let machine = table.machine.clone();
        let edge = machine.edge(EdgeId::from_index(0));
        let name = format!(
            "{}->{}",
            machine.node(edge.from).name,
            machine.node(edge.to).name
        );
        assert_eq!(table[0].name(), name);
        let reverse = table.get(edge.reverse);
        assert_eq!(table[0].params(), reverse.params());
        assert_eq!(table.classes.borrow().len(), 1);
    }
}
