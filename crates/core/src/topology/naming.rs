//! Node names: the one owner of the naming scheme. Every other module builds
//! and parses names through these functions, never with its own `format!`.
//!
//! `host`, `sip{s}.io_cpu`, `sip{s}.pcie_ep`, `sip{s}.cube{c}.r{row}c{col}`
//! (NoC routers), `sip{s}.cube{c}.pe{p}`, `sip{s}.cube{c}.hbm` and its
//! pseudo-channels `sip{s}.cube{c}.hbm.pc{k}`, `sip{s}.cube{c}.sram`,
//! `sip{s}.cube{c}.mcpu`, `sip{s}.cube{c}.mcpu.dma`, UCIe ports
//! `sip{s}.cube{c}.ucie.{n,s,e,w}`, a PE's TCM `sip{s}.cube{c}.pe{p}.tcm`,
//! and a SIP's inter-SIP ports `sip{s}.inter_sip.{n,s,e,w}`.

use std::fmt;

/// The host.
pub const HOST: &str = "host";

/// A side of a cube, for its UCIe port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Side {
    /// North: towards row 0.
    N,
    /// South: towards the last row.
    S,
    /// East: towards the last column.
    E,
    /// West: towards column 0.
    W,
}

impl Side {
    /// All four sides in the order N, S, E, W.
    pub const ALL: [Side; 4] = [Side::N, Side::S, Side::E, Side::W];

    /// The side facing this one across a link.
    pub const fn opposite(self) -> Side {
        match self {
            Side::N => Side::S,
            Side::S => Side::N,
            Side::E => Side::W,
            Side::W => Side::E,
        }
    }

    /// Lower-case letter used in names.
    pub const fn letter(self) -> &'static str {
        match self {
            Side::N => "n",
            Side::S => "s",
            Side::E => "e",
            Side::W => "w",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.letter())
    }
}

/// A piece of a name: text, or a number written in decimal.
#[derive(Clone, Copy)]
enum Part<'a> {
    Text(&'a str),
    Number(u32),
}
use Part::{Number as N, Text as T};

/// The name made of `parts`, written without the formatting machinery
/// (set-up names every node of the machine: a `format!` costs ten times
/// as much, ADR-0061).
fn name(parts: &[Part<'_>]) -> String {
    let mut name = String::with_capacity(40);
    for &part in parts {
        match part {
            Part::Text(text) => name.push_str(text),
            Part::Number(number) => name.push_str(itoa::Buffer::new().format(number)),
        }
    }
    name
}

/// `sip{s}`.
pub fn sip(sip: u32) -> String {
    name(&[T("sip"), N(sip)])
}

/// `sip{s}.io_cpu`.
pub fn io_cpu(sip: u32) -> String {
    name(&[T("sip"), N(sip), T(".io_cpu")])
}

/// `sip{s}.pcie_ep`.
pub fn pcie_ep(sip: u32) -> String {
    name(&[T("sip"), N(sip), T(".pcie_ep")])
}

/// `sip{s}.cube{c}`.
pub fn cube(sip: u32, cube: u32) -> String {
    name(&[T("sip"), N(sip), T(".cube"), N(cube)])
}

/// `sip{s}.cube{c}.r{row}c{col}`: a NoC router.
pub fn router(sip: u32, cube: u32, row: u32, col: u32) -> String {
    name(&[
        T("sip"),
        N(sip),
        T(".cube"),
        N(cube),
        T(".r"),
        N(row),
        T("c"),
        N(col),
    ])
}

/// `sip{s}.cube{c}.pe{p}`.
pub fn pe(sip: u32, cube: u32, pe: u32) -> String {
    name(&[T("sip"), N(sip), T(".cube"), N(cube), T(".pe"), N(pe)])
}

/// `sip{s}.cube{c}.pe{p}.tcm`.
pub fn tcm(sip: u32, cube: u32, pe: u32) -> String {
    name(&[
        T("sip"),
        N(sip),
        T(".cube"),
        N(cube),
        T(".pe"),
        N(pe),
        T(".tcm"),
    ])
}

/// `sip{s}.cube{c}.hbm`: the HBM controller.
pub fn hbm(sip: u32, cube: u32) -> String {
    name(&[T("sip"), N(sip), T(".cube"), N(cube), T(".hbm")])
}

/// `sip{s}.cube{c}.hbm.pc{k}`: one pseudo-channel.
pub fn hbm_pc(sip: u32, cube: u32, pc: u32) -> String {
    name(&[T("sip"), N(sip), T(".cube"), N(cube), T(".hbm.pc"), N(pc)])
}

/// `sip{s}.cube{c}.sram`.
pub fn sram(sip: u32, cube: u32) -> String {
    name(&[T("sip"), N(sip), T(".cube"), N(cube), T(".sram")])
}

/// `sip{s}.cube{c}.mcpu`.
pub fn mcpu(sip: u32, cube: u32) -> String {
    name(&[T("sip"), N(sip), T(".cube"), N(cube), T(".mcpu")])
}

/// `sip{s}.cube{c}.mcpu.dma`.
pub fn mcpu_dma(sip: u32, cube: u32) -> String {
    name(&[T("sip"), N(sip), T(".cube"), N(cube), T(".mcpu.dma")])
}

/// `sip{s}.cube{c}.ucie.{n,s,e,w}`.
pub fn ucie(sip: u32, cube: u32, side: Side) -> String {
    name(&[
        T("sip"),
        N(sip),
        T(".cube"),
        N(cube),
        T(".ucie."),
        T(side.letter()),
    ])
}

/// `sip{s}.inter_sip.{n,s,e,w}`: the SIP's port towards its neighbour on
/// `side`.
pub fn sip_port(sip: u32, side: Side) -> String {
    name(&[T("sip"), N(sip), T(".inter_sip."), T(side.letter())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_scheme() {
        assert_eq!(router(0, 3, 1, 2), "sip0.cube3.r1c2");
        assert_eq!(hbm_pc(1, 15, 31), "sip1.cube15.hbm.pc31");
        assert_eq!(ucie(0, 0, Side::E), "sip0.cube0.ucie.e");
        assert_eq!(mcpu_dma(2, 4), "sip2.cube4.mcpu.dma");
        assert_eq!(tcm(0, 1, 7), "sip0.cube1.pe7.tcm");
        assert_eq!(sip_port(1, Side::W), "sip1.inter_sip.w");
        assert_eq!(pe(4_294_967_295, 10, 0), "sip4294967295.cube10.pe0");
    }

    #[test]
    fn opposite_sides_pair_up() {
        for side in Side::ALL {
            assert_eq!(side.opposite().opposite(), side);
            assert_ne!(side.opposite(), side);
        }
    }
}
