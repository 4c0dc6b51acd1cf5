//! The device address map: which memory a 64-bit address falls in.
//!
//! Every memory (host DRAM, each cube's HBM and SRAM, each PE's TCM) is a
//! [`MemSpace`] and owns one window of the global address space:
//!
//! ```text
//! bits 63..56  SIP index (0xFF = host)
//! bits 55..48  cube index within the SIP
//! bits 47..40  region: 0x00 HBM, 0x01 SRAM, 0x10 + p TCM of PE p
//! bits 39..0   offset within the memory (up to 1 TiB)
//! ```
//!
//! Decoding is a few shifts and a bounds check against the configured
//! capacities, so it is O(1) and never consults a table. The layout limits a
//! machine to 255 SIPs, 256 cubes per SIP, 240 PEs per cube and 1 TiB per
//! memory; [`AddressMap::new`] rejects machines beyond them.

use std::fmt;

use super::naming;
use super::spec::TopologySpec;

const SIP_SHIFT: u32 = 56;
const CUBE_SHIFT: u32 = 48;
const REGION_SHIFT: u32 = 40;
const OFFSET_MASK: u64 = (1 << REGION_SHIFT) - 1;
const HOST_SIP: u64 = 0xFF;
const REGION_HBM: u64 = 0x00;
const REGION_SRAM: u64 = 0x01;
const REGION_TCM: u64 = 0x10;
/// Most SIPs: the SIP field's values but the host's.
pub const MAX_SIPS: u64 = HOST_SIP - 1;
/// Most cubes per SIP: the cube field's values.
pub const MAX_CUBES: u32 = 0x100;
/// Most PEs per cube: the TCM regions.
pub const MAX_PES: u32 = 0x100 - REGION_TCM as u32;
/// Largest memory: the offset field.
pub const MAX_MEMORY: u64 = OFFSET_MASK + 1;

/// One memory that holds bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum MemSpace {
    /// Host DRAM.
    Host,
    /// The HBM stack of a cube.
    Hbm {
        /// SIP index.
        sip: u32,
        /// Cube index within the SIP.
        cube: u32,
    },
    /// The shared SRAM of a cube.
    Sram {
        /// SIP index.
        sip: u32,
        /// Cube index within the SIP.
        cube: u32,
    },
    /// The TCM of one PE.
    Tcm {
        /// SIP index.
        sip: u32,
        /// Cube index within the SIP.
        cube: u32,
        /// PE index within the cube.
        pe: u32,
    },
}

impl MemSpace {
    /// The name of the node that holds this memory.
    pub fn node_name(self) -> String {
        match self {
            MemSpace::Host => naming::HOST.to_owned(),
            MemSpace::Hbm { sip, cube } => naming::hbm(sip, cube),
            MemSpace::Sram { sip, cube } => naming::sram(sip, cube),
            MemSpace::Tcm { sip, cube, pe } => naming::tcm(sip, cube, pe),
        }
    }
}

impl fmt::Display for MemSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.node_name())
    }
}

/// An address or a memory that does not exist on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// The address decodes to a memory the machine does not have.
    #[error("address {addr:#018x} is not mapped: {reason}")]
    Unmapped {
        /// The address asked for.
        addr: u64,
        /// What does not exist (e.g. `sip 3 of 2`).
        reason: String,
    },
    /// An offset past the end of its memory.
    #[error("offset {offset:#x} is outside {space} (capacity {capacity} bytes)")]
    OutOfRange {
        /// The memory.
        space: MemSpace,
        /// The offset asked for.
        offset: u64,
        /// The memory's size.
        capacity: u64,
    },
    /// The machine is larger than the address layout can describe.
    #[error("the address map cannot describe this machine: {what}")]
    MachineTooLarge {
        /// The spec key to lower.
        key: &'static str,
        /// What is too large, and the limit.
        what: String,
    },
}

impl AddressError {
    /// The spec key to blame (empty for addresses, which are not spec).
    pub fn key(&self) -> &'static str {
        match self {
            AddressError::MachineTooLarge { key, .. } => key,
            AddressError::Unmapped { .. } | AddressError::OutOfRange { .. } => "",
        }
    }
}

/// The address layout of one machine: counts and capacities to check
/// addresses against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressMap {
    sips: u32,
    cubes_per_sip: u32,
    pes_per_cube: u32,
    hbm: u64,
    sram: u64,
    tcm: u64,
}

impl AddressMap {
    /// The address map of `spec`'s machine.
    pub fn new(spec: &TopologySpec) -> Result<Self, AddressError> {
        let map = AddressMap {
            sips: spec.system.sips.count().get(),
            cubes_per_sip: u32::try_from(spec.cubes_per_sip()).unwrap_or(u32::MAX),
            pes_per_cube: spec.cube.pes.get(),
            hbm: spec.cube.hbm.capacity.get().bytes(),
            sram: spec.cube.sram.capacity.get().bytes(),
            tcm: spec.pe.tcm.capacity.get().bytes(),
        };
        map.check_limits()?;
        Ok(map)
    }

    fn check_limits(&self) -> Result<(), AddressError> {
        let too_large = |key, what: String| Err(AddressError::MachineTooLarge { key, what });
        if u64::from(self.sips) > MAX_SIPS {
            return too_large(
                "system.sips.count",
                format!("{} SIPs (at most {MAX_SIPS})", self.sips),
            );
        }
        if self.cubes_per_sip > MAX_CUBES {
            return too_large(
                "sip.cube_mesh",
                format!("{} cubes per SIP (at most {MAX_CUBES})", self.cubes_per_sip),
            );
        }
        if self.pes_per_cube > MAX_PES {
            return too_large(
                "cube.pes",
                format!("{} PEs per cube (at most {MAX_PES})", self.pes_per_cube),
            );
        }
        let memories = [
            ("cube.hbm.capacity", self.hbm),
            ("cube.sram.capacity", self.sram),
            ("pe.tcm.capacity", self.tcm),
        ];
        match memories.iter().find(|(_, c)| *c > MAX_MEMORY) {
            Some(&(key, bytes)) => {
                too_large(key, format!("a memory of {bytes} bytes (at most 1 TiB)"))
            }
            None => Ok(()),
        }
    }

    /// Bytes in `space` (host DRAM: the whole 1 TiB window).
    pub fn capacity(&self, space: MemSpace) -> u64 {
        match space {
            MemSpace::Host => MAX_MEMORY,
            MemSpace::Hbm { .. } => self.hbm,
            MemSpace::Sram { .. } => self.sram,
            MemSpace::Tcm { .. } => self.tcm,
        }
    }

    /// The address of `offset` within `space`.
    pub fn encode(&self, space: MemSpace, offset: u64) -> Result<u64, AddressError> {
        self.check_space(space, None)?;
        let capacity = self.capacity(space);
        if offset >= capacity {
            return Err(AddressError::OutOfRange {
                space,
                offset,
                capacity,
            });
        }
        let (sip, cube, region) = match space {
            MemSpace::Host => (HOST_SIP, 0, 0),
            MemSpace::Hbm { sip, cube } => (u64::from(sip), u64::from(cube), REGION_HBM),
            MemSpace::Sram { sip, cube } => (u64::from(sip), u64::from(cube), REGION_SRAM),
            MemSpace::Tcm { sip, cube, pe } => {
                (u64::from(sip), u64::from(cube), REGION_TCM + u64::from(pe))
            }
        };
        Ok(sip << SIP_SHIFT | cube << CUBE_SHIFT | region << REGION_SHIFT | offset)
    }

    /// The bits of `addr` that name its memory (SIP, cube, region): two
    /// addresses in one memory share them, two in different memories do
    /// not. Says nothing of whether the memory exists.
    pub fn memory_key(addr: u64) -> u32 {
        (addr >> REGION_SHIFT) as u32
    }

    /// The memory and offset an address falls in.
    #[inline]
    pub fn decode(&self, addr: u64) -> Result<(MemSpace, u64), AddressError> {
        match self.decode_valid(addr) {
            Some(found) => Ok(found),
            None => self.decode_checked(addr),
        }
    }

    /// [`decode`](Self::decode) of an address that names an existing
    /// memory and an offset inside it (every access of a correct program:
    /// a few shifts and compares); `None` for any other address.
    #[inline]
    fn decode_valid(&self, addr: u64) -> Option<(MemSpace, u64)> {
        let field = |shift: u32| ((addr >> shift) & 0xFF) as u32;
        let (sip, cube, region) = (field(SIP_SHIFT), field(CUBE_SHIFT), field(REGION_SHIFT));
        let offset = addr & OFFSET_MASK;
        if u64::from(sip) == HOST_SIP || sip >= self.sips || cube >= self.cubes_per_sip {
            return None;
        }
        let (space, capacity) = match u64::from(region) {
            REGION_HBM => (MemSpace::Hbm { sip, cube }, self.hbm),
            REGION_SRAM => (MemSpace::Sram { sip, cube }, self.sram),
            r if r >= REGION_TCM && r - REGION_TCM < u64::from(self.pes_per_cube) => {
                let pe = (r - REGION_TCM) as u32;
                (MemSpace::Tcm { sip, cube, pe }, self.tcm)
            }
            _ => return None,
        };
        (offset < capacity).then_some((space, offset))
    }

    /// [`decode`](Self::decode) of any address, each case checked in turn
    /// so that an error says what is wrong with it.
    #[cold]
    fn decode_checked(&self, addr: u64) -> Result<(MemSpace, u64), AddressError> {
        let field = |shift: u32| (addr >> shift) & 0xFF;
        let offset = addr & OFFSET_MASK;
        let (sip, cube, region) = (field(SIP_SHIFT), field(CUBE_SHIFT), field(REGION_SHIFT));
        let unmapped = |reason: String| AddressError::Unmapped { addr, reason };
        let space = if sip == HOST_SIP {
            if cube != 0 || region != 0 {
                return Err(unmapped("host addresses have no cube or region".to_owned()));
            }
            MemSpace::Host
        } else {
            let (sip, cube) = (sip as u32, cube as u32);
            match region {
                REGION_HBM => MemSpace::Hbm { sip, cube },
                REGION_SRAM => MemSpace::Sram { sip, cube },
                r if r >= REGION_TCM => MemSpace::Tcm {
                    sip,
                    cube,
                    pe: (r - REGION_TCM) as u32,
                },
                r => return Err(unmapped(format!("region {r:#x} is not a memory"))),
            }
        };
        self.check_space(space, Some(addr))?;
        let capacity = self.capacity(space);
        if offset >= capacity {
            return Err(unmapped(format!(
                "offset {offset:#x} is past the end of {space} ({capacity} bytes)"
            )));
        }
        Ok((space, offset))
    }

    /// Errors unless `space` exists on this machine.
    fn check_space(&self, space: MemSpace, addr: Option<u64>) -> Result<(), AddressError> {
        let (sip, cube, pe) = match space {
            MemSpace::Host => return Ok(()),
            MemSpace::Hbm { sip, cube } | MemSpace::Sram { sip, cube } => (sip, cube, None),
            MemSpace::Tcm { sip, cube, pe } => (sip, cube, Some(pe)),
        };
        let reason = if sip >= self.sips {
            format!("sip {sip} does not exist (the machine has {})", self.sips)
        } else if cube >= self.cubes_per_sip {
            format!(
                "cube {cube} does not exist (a SIP has {})",
                self.cubes_per_sip
            )
        } else if let Some(pe) = pe.filter(|&pe| pe >= self.pes_per_cube) {
            format!("pe {pe} does not exist (a cube has {})", self.pes_per_cube)
        } else {
            return Ok(());
        };
        Err(match addr {
            Some(addr) => AddressError::Unmapped { addr, reason },
            None => AddressError::Unmapped { addr: 0, reason },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> AddressMap {
        AddressMap::new(&TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()).unwrap()
    }

    #[test]
    fn encode_and_decode_round_trip() {
        let map = map();
        for space in [
            MemSpace::Host,
            MemSpace::Hbm { sip: 1, cube: 15 },
            MemSpace::Sram { sip: 0, cube: 3 },
            MemSpace::Tcm {
                sip: 1,
                cube: 2,
                pe: 7,
            },
        ] {
            let addr = map.encode(space, 4096).unwrap();
            assert_eq!(map.decode(addr).unwrap(), (space, 4096));
        }
    }

    #[test]
    fn layout_is_as_documented() {
        let addr = map()
            .encode(
                MemSpace::Tcm {
                    sip: 1,
                    cube: 2,
                    pe: 7,
                },
                0x40,
            )
            .unwrap();
        assert_eq!(addr, 0x0102_1700_0000_0040);
    }

    #[test]
    fn missing_memories_and_offsets_are_errors() {
        let map = map();
        let err = map.decode(0x0500_0000_0000_0000).unwrap_err();
        assert!(err.to_string().contains("sip 5 does not exist"), "{err}");
        let err = map
            .encode(
                MemSpace::Tcm {
                    sip: 0,
                    cube: 0,
                    pe: 8,
                },
                0,
            )
            .unwrap_err();
        assert!(err.to_string().contains("pe 8 does not exist"), "{err}");
        let err = map
            .encode(MemSpace::Sram { sip: 0, cube: 0 }, 32 << 20)
            .unwrap_err();
        assert!(matches!(err, AddressError::OutOfRange { .. }), "{err}");
        assert!(
            map.decode(0x0000_0200_0000_0000).is_err(),
            "region 2 is not a memory"
        );
    }

    /// Default machine: 2 SIPs, 16 cubes, 8 PEs, 32 MiB of SRAM per cube.
    #[test]
    fn decode_names_what_is_wrong_with_an_address() {
        let map = map();
        let cases: [(u64, &str); 8] = [
            (
                0x0102_1700_0000_0040,
                "Ok(Tcm { sip: 1, cube: 2, pe: 7 }, 0x40)",
            ),
            (0xFF00_0000_0000_1000, "Ok(Host, 0x1000)"),
            (0x0100_0000_0000_0000, "Ok(Hbm { sip: 1, cube: 0 }, 0x0)"),
            (
                0xFF01_0000_0000_0000,
                "host addresses have no cube or region",
            ),
            (0x0200_0000_0000_0000, "sip 2 does not exist"),
            (0x0010_0000_0000_0000, "cube 16 does not exist"),
            (0x0000_1800_0000_0000, "pe 8 does not exist"),
            (0x0000_0100_0200_0000, "offset 0x2000000 is past the end"),
        ];
        for (addr, expect) in cases {
            let got = match map.decode(addr) {
                Ok((space, offset)) => format!("Ok({space:?}, {offset:#x})"),
                Err(error) => error.to_string(),
            };
            assert!(got.contains(expect), "{addr:#018x}: {got}");
        }
    }
}
