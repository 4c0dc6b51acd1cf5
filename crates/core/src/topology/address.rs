//! The device address map: which memory a 64-bit address falls in.
//!
//! Every memory (host DRAM, each cube's HBM and SRAM, each PE's TCM) is a
//! [`MemSpace`] and owns one window of the global address space. An
//! address is four fields, most significant first:
//!
//! ```text
//! SIP     the SIP index; all ones = the host
//! cube    the cube index within the SIP
//! region  0x00 HBM, 0x01 SRAM, 0x10 + p the TCM of PE p
//! offset  the byte within the memory
//! ```
//!
//! The fields' widths ([`AddressBits`]) come from the machine (ADR-0038):
//! each gets the bits its count needs (the SIP field numbers the SIPs and
//! the host, the offset the largest memory), then the spare bits widen the
//! fields toward the classic 8/8/8/40 layout, offset first, then region,
//! cube and SIP. Every machine that fits the classic layout keeps it
//! (`0x0102_1700_0000_0040` is byte 0x40 of PE 7's TCM in cube 2 of SIP 1);
//! a larger one, e.g. 1,024 SIPs × 16 cubes, gets an 11-bit SIP field and a
//! 5-bit cube field. A machine whose fields need more than 64 bits is
//! refused, naming the counts and the bits each needs.
//!
//! Decoding is a few shifts and a bounds check against the configured
//! capacities, so it is O(1) and never consults a table.

use std::fmt;

use super::naming;
use super::spec::TopologySpec;

const REGION_HBM: u64 = 0x00;
const REGION_SRAM: u64 = 0x01;
const REGION_TCM: u64 = 0x10;

/// The widths of an address's four fields, most significant first; they
/// add up to 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct AddressBits {
    /// SIP index (all ones: the host).
    pub sip: u32,
    /// Cube index within the SIP.
    pub cube: u32,
    /// Region: HBM, SRAM or one PE's TCM.
    pub region: u32,
    /// Byte within the memory.
    pub offset: u32,
}

impl AddressBits {
    /// The layout of every machine up to 255 SIPs, 256 cubes per SIP, 240
    /// PEs per cube and 1 TiB per memory.
    pub const CLASSIC: AddressBits = AddressBits {
        sip: 8,
        cube: 8,
        region: 8,
        offset: 40,
    };

    /// The bits each field of `counts`' machine needs, no more.
    pub fn needed(counts: &MachineCounts) -> AddressBits {
        AddressBits {
            sip: bits_for(u64::from(counts.sips)),
            cube: bits_for(u64::from(counts.cubes_per_sip).saturating_sub(1)),
            region: bits_for(REGION_TCM + u64::from(counts.pes_per_cube).saturating_sub(1)),
            offset: bits_for(counts.largest_memory.saturating_sub(1)),
        }
    }

    /// The layout of `counts`' machine: what each field needs, widened
    /// toward [`CLASSIC`](Self::CLASSIC) (offset, region, cube, SIP) while
    /// bits remain; an error naming every field's need if they exceed 64.
    pub fn derive(counts: &MachineCounts) -> Result<AddressBits, AddressError> {
        let need = AddressBits::needed(counts);
        let total = need.sip + need.cube + need.region + need.offset;
        if total > 64 {
            return Err(AddressError::MachineTooLarge {
                key: need.key_to_blame(counts.largest_memory_key),
                what: format!(
                    "{} SIPs and the host need {} bits, {} cubes per SIP {}, \
                     {} PEs per cube {} (region), memories of up to {} bytes {} (offset): \
                     {total} bits, more than 64",
                    counts.sips,
                    need.sip,
                    counts.cubes_per_sip,
                    need.cube,
                    counts.pes_per_cube,
                    need.region,
                    counts.largest_memory,
                    need.offset
                ),
            });
        }
        let mut spare = 64 - total;
        let mut bits = need;
        let classic = AddressBits::CLASSIC;
        for (field, target) in [
            (&mut bits.offset, classic.offset),
            (&mut bits.region, classic.region),
            (&mut bits.cube, classic.cube),
            (&mut bits.sip, classic.sip),
        ] {
            let widen = target.saturating_sub(*field).min(spare);
            *field += widen;
            spare -= widen;
        }
        // The classic widths add up to 64, so no bit is left once every
        // field reached them; a field wider than classic used the rest.
        debug_assert_eq!(bits.sip + bits.cube + bits.region + bits.offset, 64);
        Ok(bits)
    }

    /// The spec key of the field that outgrew its classic width most.
    fn key_to_blame(&self, memory_key: &'static str) -> &'static str {
        let classic = AddressBits::CLASSIC;
        let over = [
            (self.sip.saturating_sub(classic.sip), "system.sips.count"),
            (self.cube.saturating_sub(classic.cube), "sip.cube_mesh"),
            (self.region.saturating_sub(classic.region), "cube.pes"),
            (self.offset.saturating_sub(classic.offset), memory_key),
        ];
        // The first of the largest excesses (max_by_key keeps the last).
        let most = over.iter().map(|(bits, _)| *bits).max().unwrap_or(0);
        over.iter()
            .find(|(bits, _)| *bits == most)
            .map_or("system.sips.count", |&(_, key)| key)
    }
}

/// Bits to write `value` (0 for 0).
fn bits_for(value: u64) -> u32 {
    u64::BITS - value.leading_zeros()
}

/// The counts and capacities an address map is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineCounts {
    /// SIPs.
    pub sips: u32,
    /// Cubes per SIP.
    pub cubes_per_sip: u32,
    /// PEs per cube.
    pub pes_per_cube: u32,
    /// Bytes of the largest memory (HBM, SRAM or TCM).
    pub largest_memory: u64,
    /// The spec key of that memory's capacity.
    pub largest_memory_key: &'static str,
}

impl MachineCounts {
    /// The counts and capacities of `spec`'s machine.
    pub fn of(spec: &TopologySpec) -> MachineCounts {
        let memories = [
            ("cube.hbm.capacity", spec.cube().hbm.capacity.get().bytes()),
            (
                "cube.sram.capacity",
                spec.cube().sram.capacity.get().bytes(),
            ),
            ("pe.tcm.capacity", spec.pe().tcm.capacity.get().bytes()),
        ];
        let (largest_memory_key, largest_memory) = memories
            .iter()
            .fold(memories[0], |best, &m| if m.1 > best.1 { m } else { best });
        MachineCounts {
            sips: spec.system().sips.count(),
            cubes_per_sip: u32::try_from(spec.cubes_per_sip()).unwrap_or(u32::MAX),
            pes_per_cube: spec.cube().pes.get(),
            largest_memory,
            largest_memory_key,
        }
    }
}

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

/// The address layout of one machine: its field widths, and the counts
/// and capacities to check addresses against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressMap {
    bits: AddressBits,
    sips: u32,
    cubes_per_sip: u32,
    pes_per_cube: u32,
    hbm: u64,
    sram: u64,
    tcm: u64,
    /// Where the cube and SIP fields start (the region starts at
    /// `bits.offset`).
    cube_shift: u32,
    sip_shift: u32,
    /// Each field's mask, worked out once: decoding is on every access.
    masks: Fields,
}

/// Fields of an address, unchecked (or, as [`AddressMap`]'s `masks`,
/// each field's mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fields {
    sip: u64,
    cube: u64,
    region: u64,
    offset: u64,
}

impl AddressMap {
    /// The address map of `spec`'s machine.
    pub fn new(spec: &TopologySpec) -> Result<Self, AddressError> {
        let counts = MachineCounts::of(spec);
        let bits = AddressBits::derive(&counts)?;
        let cube_shift = bits.offset + bits.region;
        Ok(AddressMap {
            bits,
            sips: counts.sips,
            cubes_per_sip: counts.cubes_per_sip,
            pes_per_cube: counts.pes_per_cube,
            hbm: spec.cube().hbm.capacity.get().bytes(),
            sram: spec.cube().sram.capacity.get().bytes(),
            tcm: spec.pe().tcm.capacity.get().bytes(),
            cube_shift,
            sip_shift: cube_shift + bits.cube,
            masks: Fields {
                sip: mask(bits.sip),
                cube: mask(bits.cube),
                region: mask(bits.region),
                offset: mask(bits.offset),
            },
        })
    }

    /// The widths of this machine's address fields.
    pub fn bits(&self) -> AddressBits {
        self.bits
    }

    /// The SIP field's value that names the host: all ones.
    fn host_sip(&self) -> u64 {
        self.masks.sip
    }

    /// Bytes in `space` (host DRAM: the whole window an offset can span).
    pub fn capacity(&self, space: MemSpace) -> u64 {
        match space {
            MemSpace::Host => self.masks.offset + 1,
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
            MemSpace::Host => (self.host_sip(), 0, 0),
            MemSpace::Hbm { sip, cube } => (u64::from(sip), u64::from(cube), REGION_HBM),
            MemSpace::Sram { sip, cube } => (u64::from(sip), u64::from(cube), REGION_SRAM),
            MemSpace::Tcm { sip, cube, pe } => {
                (u64::from(sip), u64::from(cube), REGION_TCM + u64::from(pe))
            }
        };
        Ok(sip << self.sip_shift | cube << self.cube_shift | region << self.bits.offset | offset)
    }

    /// The bits of `addr` that name its memory (SIP, cube, region): two
    /// addresses in one memory share them, two in different memories do
    /// not, and their order is the addresses' order. Says nothing of
    /// whether the memory exists.
    #[inline]
    pub fn memory_key(&self, addr: u64) -> u64 {
        addr >> self.bits.offset
    }

    /// Where `addr`'s memory is in a dense two-level numbering of the
    /// machine's memories, `(cube, memory)`: `cube` counts the cubes SIP
    /// by SIP, the host after the last (below
    /// [`cube_slots`](Self::cube_slots)); `memory` is HBM 0, SRAM 1, PE
    /// `p`'s TCM `2 + p` (the host's DRAM 0), below
    /// [`memory_slots`](Self::memory_slots). `None` when the fields name
    /// no memory of the machine; the offset is not checked. A few shifts
    /// and compares, for lookups on every access.
    #[inline]
    pub fn memory_slot(&self, addr: u64) -> Option<(usize, usize)> {
        let Fields {
            sip, cube, region, ..
        } = self.fields(addr);
        if sip == self.host_sip() {
            return (cube == 0 && region == 0).then_some((self.host_slot(), 0));
        }
        if sip >= u64::from(self.sips) || cube >= u64::from(self.cubes_per_sip) {
            return None;
        }
        let memory = match region {
            REGION_HBM | REGION_SRAM => region,
            r if r >= REGION_TCM && r - REGION_TCM < u64::from(self.pes_per_cube) => {
                r - REGION_TCM + 2
            }
            _ => return None,
        };
        let cube = sip * u64::from(self.cubes_per_sip) + cube;
        Some((cube as usize, memory as usize))
    }

    /// The number of first-level slots of [`memory_slot`](Self::memory_slot):
    /// the machine's cubes and the host.
    pub fn cube_slots(&self) -> usize {
        self.host_slot() + 1
    }

    /// The number of second-level slots of
    /// [`memory_slot`](Self::memory_slot): the memories of a cube.
    pub fn memory_slots(&self) -> usize {
        self.pes_per_cube as usize + 2
    }

    /// The host's first-level slot: after the last cube's.
    fn host_slot(&self) -> usize {
        self.sips as usize * self.cubes_per_sip as usize
    }

    #[inline]
    fn fields(&self, addr: u64) -> Fields {
        let field = |shift: u32, mask: u64| (addr >> shift) & mask;
        let masks = &self.masks;
        Fields {
            sip: field(self.sip_shift, masks.sip),
            cube: field(self.cube_shift, masks.cube),
            region: field(self.bits.offset, masks.region),
            offset: addr & masks.offset,
        }
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
        let Fields {
            sip,
            cube,
            region,
            offset,
        } = self.fields(addr);
        if sip >= u64::from(self.sips) || cube >= u64::from(self.cubes_per_sip) {
            return None;
        }
        let (sip, cube) = (sip as u32, cube as u32);
        let (space, capacity) = match region {
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
        let Fields {
            sip,
            cube,
            region,
            offset,
        } = self.fields(addr);
        let unmapped = |reason: String| AddressError::Unmapped { addr, reason };
        let space = if sip == self.host_sip() {
            if cube != 0 || region != 0 {
                return Err(unmapped("host addresses have no cube or region".to_owned()));
            }
            MemSpace::Host
        } else {
            // Fields are at most 32 bits wide: the counts are u32.
            let (sip, cube) = (sip as u32, cube as u32);
            match region {
                REGION_HBM => MemSpace::Hbm { sip, cube },
                REGION_SRAM => MemSpace::Sram { sip, cube },
                r if r >= REGION_TCM => MemSpace::Tcm {
                    sip,
                    cube,
                    pe: u32::try_from(r - REGION_TCM).unwrap_or(u32::MAX),
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

/// The low `width` bits set.
#[inline]
fn mask(width: u32) -> u64 {
    1u64.checked_shl(width).map_or(u64::MAX, |bit| bit - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> AddressMap {
        AddressMap::new(&TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()).unwrap()
    }

    /// The default cube (16 cubes of 8 PEs, 16 GiB of HBM) on `sips` SIPs.
    fn counts(sips: u32) -> MachineCounts {
        MachineCounts {
            sips,
            cubes_per_sip: 16,
            pes_per_cube: 8,
            largest_memory: 16 << 30,
            largest_memory_key: "cube.hbm.capacity",
        }
    }

    fn layout(sip: u32, cube: u32, region: u32, offset: u32) -> AddressBits {
        AddressBits {
            sip,
            cube,
            region,
            offset,
        }
    }

    #[test]
    fn each_field_needs_the_bits_of_its_largest_value() {
        // 1,024 SIPs and the host: 1,025 values, 11 bits; cubes 0..=15: 4;
        // regions up to 0x10 + 7 = 0x17: 5; offsets below 2^34: 34.
        assert_eq!(AddressBits::needed(&counts(1024)), layout(11, 4, 5, 34));
        // 255 SIPs leave the all-ones 0xFF for the host; 256 do not.
        assert_eq!(AddressBits::needed(&counts(255)).sip, 8);
        assert_eq!(AddressBits::needed(&counts(256)).sip, 9);
        assert_eq!(AddressBits::needed(&counts(1)).sip, 1);
    }

    #[test]
    fn spare_bits_widen_toward_the_classic_layout() {
        for sips in [1, 2, 254, 255] {
            assert_eq!(
                AddressBits::derive(&counts(sips)).unwrap(),
                AddressBits::CLASSIC
            );
        }
        // 1,024: needs 11 + 4 + 5 + 34 = 54; the 10 spare bits take the
        // offset to 40 (6), the region to 8 (3), the cube to 5 (1).
        assert_eq!(
            AddressBits::derive(&counts(1024)).unwrap(),
            layout(11, 5, 8, 40)
        );
        // 4,096: 13 + 4 + 5 + 34 = 56; 8 spare: offset 40 (6), region 7 (2).
        assert_eq!(
            AddressBits::derive(&counts(4096)).unwrap(),
            layout(13, 4, 7, 40)
        );
    }

    #[test]
    fn a_machine_past_64_bits_is_refused_naming_counts_and_bits() {
        // 2^31 SIPs need 32 bits; with 4 + 5 + 34 that is 75.
        let err = AddressBits::derive(&counts(1 << 31)).unwrap_err();
        assert_eq!(err.key(), "system.sips.count");
        let text = err.to_string();
        for part in [
            "2147483648 SIPs and the host need 32 bits",
            "16 cubes per SIP 4",
            "8 PEs per cube 5",
            "17179869184 bytes 34",
            "75 bits, more than 64",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let huge = MachineCounts {
            largest_memory: 1 << 62,
            largest_memory_key: "cube.sram.capacity",
            ..counts(2)
        };
        assert_eq!(
            AddressBits::derive(&huge).unwrap_err().key(),
            "cube.sram.capacity"
        );
    }

    fn map_of(sets: &[&str]) -> AddressMap {
        let sets: Vec<String> = sets.iter().map(|s| (*s).to_owned()).collect();
        let overrides = crate::config::Overrides::parse(&sets).unwrap();
        let spec = TopologySpec::load(&TopologySpec::default_source(), &overrides.topology);
        AddressMap::new(&spec.unwrap()).unwrap()
    }

    #[test]
    fn a_wide_machine_round_trips_every_field_at_its_largest() {
        let map = map_of(&["system.sips.count=1024"]);
        assert_eq!(map.bits(), layout(11, 5, 8, 40));
        let last = MemSpace::Tcm {
            sip: 1023,
            cube: 15,
            pe: 7,
        };
        let addr = map.encode(last, 0x40).unwrap();
        // SIP at bit 53, cube at 48, region at 40.
        assert_eq!(addr, 1023 << 53 | 15 << 48 | 0x17 << 40 | 0x40);
        assert_eq!(map.decode(addr).unwrap(), (last, 0x40));
        let host = map.encode(MemSpace::Host, 8).unwrap();
        assert_eq!(host, 0x7FF << 53 | 8, "the host is the all-ones SIP");
        assert_eq!(map.decode(host).unwrap(), (MemSpace::Host, 8));
        assert_eq!(map.capacity(MemSpace::Host), 1 << 40);
        let err = map.decode(1024 << 53).unwrap_err();
        assert!(err.to_string().contains("sip 1024 does not exist"), "{err}");
        // Memory keys order as the addresses do.
        assert!(map.memory_key(addr) > map.memory_key(addr - (1 << 48)));
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
    fn every_memory_has_its_own_slot_and_other_addresses_none() {
        let map = map();
        let (sips, cubes, pes) = (2, 16, 8);
        let mut spaces = vec![MemSpace::Host];
        for (sip, cube) in (0..sips).flat_map(|s| (0..cubes).map(move |c| (s, c))) {
            spaces.push(MemSpace::Hbm { sip, cube });
            spaces.push(MemSpace::Sram { sip, cube });
            spaces.extend((0..pes).map(|pe| MemSpace::Tcm { sip, cube, pe }));
        }
        let mut slots = std::collections::BTreeSet::new();
        for space in spaces {
            let addr = map.encode(space, 64).unwrap();
            let (cube, memory) = map.memory_slot(addr).unwrap();
            assert!(cube < map.cube_slots() && memory < map.memory_slots());
            assert!(slots.insert((cube, memory)), "{space} shares a slot");
            assert_eq!(map.memory_slot(addr - 64), Some((cube, memory)));
        }
        assert_eq!(slots.len(), 1 + 2 * 16 * 10);
        for addr in [
            0x0200_0000_0000_0000,
            0x0010_0000_0000_0000,
            0x0001_0800_0000_0000,
        ] {
            assert_eq!(map.memory_slot(addr), None, "{addr:#x}");
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
