//! Neighbour tables for collectives: which endpoint sits in which direction.
//!
//! An algorithm names directions (`E`, `W`, `N`, `S` inside a SIP's cube
//! mesh, `global_E` ... between SIPs, seed ADR-0032 D3); the `wiring` field of
//! its ccl.yaml entry picks a builtin table, and the algorithm's optional
//! `neighbors` hook may keep, edit or replace it (author guide §3). From the
//! tables of all endpoints, [`Wiring::install`] derives the IPCQ rings: a send
//! from endpoint `r` in direction `D` lands at peer `p` in the ring labelled by
//! the direction in which `p` sees `r` — `opposite(D)` when that points back
//! at `r`, else the first of `p`'s directions that does (address-based
//! matching, seed ADR-0025), else `opposite(D)` as a receive-only ring. Two
//! senders landing in one ring of one endpoint is an install error.
//!
//! Pure functions of endpoint indices and sizes: nothing of PEs, memory or time.

use std::collections::BTreeMap;

pub use crate::tl::Dir;

impl Dir {
    /// Parses a direction name (`"E"`, `"global_N"`).
    pub fn parse(name: &str) -> Result<Dir, TopologyError> {
        Dir::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| TopologyError::UnknownDirection(name.to_owned()))
    }
}

/// One endpoint's table: direction → peer endpoint.
pub type NeighborMap = BTreeMap<Dir, usize>;

/// A builtin table (the `wiring` field of a ccl.yaml algorithm entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize)]
#[serde(
    rename_all = "snake_case",
    expecting = "none, ring_1d, ring_1d_unidir, mesh_2d, torus_2d or tree_binary"
)]
pub enum Builtin {
    /// No neighbours (algorithms that install their own with `neighbors`).
    None,
    /// A ring: E → endpoint + 1, W → endpoint − 1 (modulo the endpoint count).
    #[serde(rename = "ring_1d")]
    Ring1d,
    /// A one-way ring: E → endpoint + 1 only; the W ring receives.
    #[serde(rename = "ring_1d_unidir")]
    Ring1dUnidir,
    /// A `w × h` grid of endpoints without wrap (row-major): E/W/N/S.
    #[serde(rename = "mesh_2d")]
    Mesh2d,
    /// A `w × h` grid with wrap: E/W/N/S always present.
    #[serde(rename = "torus_2d")]
    Torus2d,
    /// A binary tree: N → parent, W → left child, E → right child.
    TreeBinary,
}

/// A neighbour table that cannot be built or installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A ccl.yaml `wiring` name that is not builtin.
    #[error(
        "unknown wiring \"{0}\" (expected none, ring_1d, ring_1d_unidir, mesh_2d, torus_2d or \
         tree_binary)"
    )]
    UnknownTopology(String),
    /// A direction name that does not exist.
    #[error("unknown direction \"{0}\" (expected E, W, N, S or global_E/W/N/S)")]
    UnknownDirection(String),
    /// A 2-D table whose grid does not hold the endpoints.
    #[error("{topology}: a {w}x{h} grid holds {} endpoints, not {endpoints}", w * h)]
    GridMismatch {
        /// The topology name.
        topology: &'static str,
        /// Grid width.
        w: usize,
        /// Grid height.
        h: usize,
        /// Endpoints to place.
        endpoints: usize,
    },
    /// A table entry naming an endpoint outside the world.
    #[error(
        "endpoint {endpoint}: direction {dir} names endpoint {peer}, but the world has \
         {endpoints} endpoints"
    )]
    PeerOutOfRange {
        /// The endpoint whose table is wrong.
        endpoint: usize,
        /// The direction.
        dir: Dir,
        /// The peer named.
        peer: usize,
        /// Endpoints in the world.
        endpoints: usize,
    },
    /// Two senders would land in the same ring of one endpoint.
    #[error(
        "endpoint {endpoint}: ring {label} would receive from both endpoint {first} and \
         endpoint {second}"
    )]
    RingConflict {
        /// The receiving endpoint.
        endpoint: usize,
        /// The ring's label.
        label: Dir,
        /// One sender.
        first: usize,
        /// The other sender.
        second: usize,
    },
}

impl Builtin {
    /// Parses a ccl.yaml `wiring` name.
    pub fn parse(name: &str) -> Result<Builtin, TopologyError> {
        Ok(match name {
            "none" => Builtin::None,
            "ring_1d" => Builtin::Ring1d,
            "ring_1d_unidir" => Builtin::Ring1dUnidir,
            "mesh_2d" => Builtin::Mesh2d,
            "torus_2d" => Builtin::Torus2d,
            "tree_binary" => Builtin::TreeBinary,
            other => return Err(TopologyError::UnknownTopology(other.to_owned())),
        })
    }

    /// The name used in ccl.yaml.
    pub const fn name(self) -> &'static str {
        match self {
            Builtin::None => "none",
            Builtin::Ring1d => "ring_1d",
            Builtin::Ring1dUnidir => "ring_1d_unidir",
            Builtin::Mesh2d => "mesh_2d",
            Builtin::Torus2d => "torus_2d",
            Builtin::TreeBinary => "tree_binary",
        }
    }

    /// The tables of all `endpoints` endpoints. 2-D tables place
    /// endpoints row-major on `grid` (`(w, h)`), or on the square grid when
    /// `grid` is `None` (an error if `endpoints` is not a square).
    pub fn tables(
        self,
        endpoints: usize,
        grid: Option<(usize, usize)>,
    ) -> Result<Vec<NeighborMap>, TopologyError> {
        let all = 0..endpoints;
        Ok(match self {
            Builtin::None => all.map(|_| NeighborMap::new()).collect(),
            Builtin::Ring1d => all.map(|e| ring(e, endpoints, true)).collect(),
            Builtin::Ring1dUnidir => all.map(|e| ring(e, endpoints, false)).collect(),
            Builtin::TreeBinary => all.map(|e| tree(e, endpoints)).collect(),
            Builtin::Mesh2d | Builtin::Torus2d => {
                let (w, h) = self.grid(endpoints, grid)?;
                let wrap = self == Builtin::Torus2d;
                all.map(|e| grid_map(e, w, h, wrap)).collect()
            }
        })
    }

    fn grid(
        self,
        endpoints: usize,
        grid: Option<(usize, usize)>,
    ) -> Result<(usize, usize), TopologyError> {
        let side = (endpoints as f64).sqrt().round() as usize;
        let (w, h) = grid.unwrap_or((side, side));
        if w * h == endpoints {
            Ok((w, h))
        } else {
            Err(TopologyError::GridMismatch {
                topology: self.name(),
                w,
                h,
                endpoints,
            })
        }
    }
}

fn ring(endpoint: usize, n: usize, both_ways: bool) -> NeighborMap {
    let mut map = NeighborMap::new();
    if n > 1 {
        map.insert(Dir::E, (endpoint + 1) % n);
        if both_ways {
            map.insert(Dir::W, (endpoint + n - 1) % n);
        }
    }
    map
}

fn tree(endpoint: usize, n: usize) -> NeighborMap {
    let mut map = NeighborMap::new();
    if endpoint > 0 {
        map.insert(Dir::N, (endpoint - 1) / 2);
    }
    for (dir, child) in [(Dir::W, 2 * endpoint + 1), (Dir::E, 2 * endpoint + 2)] {
        if child < n {
            map.insert(dir, child);
        }
    }
    map
}

/// Row-major grid neighbours; with `wrap`, a dimension of 2 has one link
/// pair (E and W name the same peer) and a dimension of 1 none.
fn grid_map(endpoint: usize, w: usize, h: usize, wrap: bool) -> NeighborMap {
    let (x, y) = (endpoint % w, endpoint / w);
    let at = |x: usize, y: usize| y * w + x;
    let mut map = NeighborMap::new();
    let steps = [
        (Dir::E, x + 1 < w, (x + 1) % w, y, w),
        (Dir::W, x > 0, (x + w - 1) % w, y, w),
        (Dir::S, y + 1 < h, x, (y + 1) % h, h),
        (Dir::N, y > 0, x, (y + h - 1) % h, h),
    ];
    for (dir, inside, nx, ny, extent) in steps {
        if inside || (wrap && extent > 1) {
            map.insert(dir, at(nx, ny));
        }
    }
    map
}

/// The rings one endpoint has: where each send direction lands, and who
/// feeds each receive ring.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EndpointWiring {
    /// Send direction → (peer endpoint, label of the peer's ring it lands in).
    pub sends: BTreeMap<Dir, (usize, Dir)>,
    /// Receive ring label → the endpoint that sends into it.
    pub receives: BTreeMap<Dir, usize>,
}

/// The installed rings of every endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wiring {
    endpoints: Vec<EndpointWiring>,
}

impl Wiring {
    /// Derives the rings from every endpoint's table (see the module docs).
    pub fn install(tables: &[NeighborMap]) -> Result<Wiring, TopologyError> {
        let n = tables.len();
        let mut endpoints = vec![EndpointWiring::default(); n];
        for (endpoint, table) in tables.iter().enumerate() {
            for (&dir, &peer) in table {
                if peer >= n {
                    return Err(TopologyError::PeerOutOfRange {
                        endpoint,
                        dir,
                        peer,
                        endpoints: n,
                    });
                }
                let label = landing_label(&tables[peer], endpoint, dir);
                if let Some(&first) = endpoints[peer].receives.get(&label) {
                    return Err(TopologyError::RingConflict {
                        endpoint: peer,
                        label,
                        first,
                        second: endpoint,
                    });
                }
                endpoints[peer].receives.insert(label, endpoint);
                endpoints[endpoint].sends.insert(dir, (peer, label));
            }
        }
        Ok(Wiring { endpoints })
    }

    /// The rings of `endpoint`.
    pub fn endpoint(&self, endpoint: usize) -> Option<&EndpointWiring> {
        self.endpoints.get(endpoint)
    }

    /// Number of endpoints.
    pub fn endpoints(&self) -> usize {
        self.endpoints.len()
    }
}

/// The label of the ring at a receiver (whose table is `receiver`) that a
/// send from `sender` in direction `dir` lands in.
fn landing_label(receiver: &NeighborMap, sender: usize, dir: Dir) -> Dir {
    let back = dir.opposite();
    if receiver.get(&back) == Some(&sender) {
        return back;
    }
    receiver
        .iter()
        .find(|&(_, &peer)| peer == sender)
        .map_or(back, |(&label, _)| label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(Dir, usize)]) -> NeighborMap {
        entries.iter().copied().collect()
    }

    #[test]
    fn ring_of_four_sends_east_into_the_peers_west_ring() {
        let wiring = Wiring::install(&Builtin::Ring1d.tables(4, None).unwrap()).unwrap();
        let e0 = wiring.endpoint(0).unwrap();
        assert_eq!(e0.sends[&Dir::E], (1, Dir::W));
        assert_eq!(e0.sends[&Dir::W], (3, Dir::E));
        assert_eq!(e0.receives[&Dir::W], 3);
    }

    #[test]
    fn ring_of_two_keeps_both_directions_apart() {
        let wiring = Wiring::install(&Builtin::Ring1d.tables(2, None).unwrap()).unwrap();
        let e0 = wiring.endpoint(0).unwrap();
        assert_eq!(e0.sends[&Dir::E], (1, Dir::W));
        assert_eq!(e0.sends[&Dir::W], (1, Dir::E));
    }

    #[test]
    fn unidirectional_ring_only_sends_east() {
        let wiring = Wiring::install(&Builtin::Ring1dUnidir.tables(3, None).unwrap()).unwrap();
        let e1 = wiring.endpoint(1).unwrap();
        assert_eq!(e1.sends.keys().collect::<Vec<_>>(), [&Dir::E]);
        assert_eq!(e1.receives, map(&[(Dir::W, 0)]));
    }

    #[test]
    fn tree_children_land_in_their_own_rings_at_the_parent() {
        let wiring = Wiring::install(&Builtin::TreeBinary.tables(3, None).unwrap()).unwrap();
        let root = wiring.endpoint(0).unwrap();
        assert_eq!(root.receives, map(&[(Dir::E, 2), (Dir::W, 1)]));
        assert_eq!(wiring.endpoint(2).unwrap().sends[&Dir::N], (0, Dir::E));
    }

    #[test]
    fn grids_follow_their_wrap_rules() {
        let mesh = Builtin::Mesh2d.tables(6, Some((3, 2))).unwrap();
        assert_eq!(mesh[0], map(&[(Dir::E, 1), (Dir::S, 3)]));
        let torus = Builtin::Torus2d.tables(9, None).unwrap();
        assert_eq!(
            torus[0],
            map(&[(Dir::E, 1), (Dir::W, 2), (Dir::S, 3), (Dir::N, 6)])
        );
        let error = Builtin::Torus2d.tables(6, None).unwrap_err().to_string();
        assert!(
            error.contains("2x2 grid holds 4 endpoints, not 6"),
            "{error}"
        );
    }

    #[test]
    fn bad_tables_are_install_errors() {
        let out_of_range = Wiring::install(&[map(&[(Dir::E, 5)])]).unwrap_err();
        assert!(out_of_range.to_string().contains("names endpoint 5"));
        let conflict =
            Wiring::install(&[map(&[(Dir::E, 2)]), map(&[(Dir::E, 2)]), NeighborMap::new()])
                .unwrap_err();
        assert!(
            matches!(conflict, TopologyError::RingConflict { endpoint: 2, .. }),
            "{conflict}"
        );
    }

    #[test]
    fn names_round_trip() {
        for dir in Dir::ALL {
            assert_eq!(Dir::parse(dir.name()).unwrap(), dir);
            assert_eq!(dir.opposite().opposite(), dir);
        }
        assert!(Builtin::parse("hypercube").is_err());
        assert_eq!(Builtin::parse("torus_2d").unwrap().name(), "torus_2d");
    }
}
