//! One allocator per memory of a machine, speaking device addresses.

use std::collections::BTreeMap;

use crate::topology::{AddressError, AddressMap, MemSpace, TopologySpec};

use super::alloc::{AllocError, FirstFitAllocator};

/// What [`DeviceAllocators`] refused to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceAllocError {
    /// The allocator of the memory refused.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// The address does not decode to a memory of this machine.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The machine has no such memory.
    #[error("this machine has no memory {space}")]
    NoSuchMemory {
        /// The memory asked for.
        space: MemSpace,
    },
}

/// A [`FirstFitAllocator`] for every [`MemSpace`] of a machine: host DRAM,
/// and per cube its HBM, its SRAM and each PE's TCM. Allocations return
/// device addresses ([`AddressMap::encode`]); frees take them back.
#[derive(Debug, Clone)]
pub struct DeviceAllocators {
    map: AddressMap,
    units: BTreeMap<MemSpace, FirstFitAllocator>,
}

impl DeviceAllocators {
    /// Allocators for every memory of `spec`'s machine, each with blocks that
    /// are multiples of, and aligned to, `granule` (a power of two).
    pub fn new(spec: &TopologySpec, granule: u64) -> Result<Self, DeviceAllocError> {
        let map = AddressMap::new(spec)?;
        let units = spaces(spec)
            .map(|space| {
                let unit = FirstFitAllocator::new(space.node_name(), map.capacity(space), granule)?;
                Ok((space, unit))
            })
            .collect::<Result<_, AllocError>>()?;
        Ok(DeviceAllocators { map, units })
    }

    /// The machine's address map.
    pub fn address_map(&self) -> &AddressMap {
        &self.map
    }

    /// The allocator of `space`, if the machine has that memory.
    pub fn unit(&self, space: MemSpace) -> Option<&FirstFitAllocator> {
        self.units.get(&space)
    }

    /// Every memory and its allocator, in `MemSpace` order.
    pub fn units(&self) -> impl Iterator<Item = (MemSpace, &FirstFitAllocator)> {
        self.units.iter().map(|(&space, unit)| (space, unit))
    }

    /// Allocates `size` bytes in `space` at the granule alignment; returns
    /// the device address.
    pub fn alloc(&mut self, space: MemSpace, size: u64) -> Result<u64, DeviceAllocError> {
        let offset = self.unit_mut(space)?.alloc(size)?;
        Ok(self.map.encode(space, offset)?)
    }

    /// Allocates `size` bytes in `space` at a multiple of `align`; returns
    /// the device address.
    pub fn alloc_aligned(
        &mut self,
        space: MemSpace,
        size: u64,
        align: u64,
    ) -> Result<u64, DeviceAllocError> {
        let offset = self.unit_mut(space)?.alloc_aligned(size, align)?;
        Ok(self.map.encode(space, offset)?)
    }

    /// Frees the allocation that starts at device address `addr`.
    pub fn free(&mut self, addr: u64) -> Result<(), DeviceAllocError> {
        let (space, offset) = self.map.decode(addr)?;
        Ok(self.unit_mut(space)?.free(offset)?)
    }

    fn unit_mut(&mut self, space: MemSpace) -> Result<&mut FirstFitAllocator, DeviceAllocError> {
        self.units
            .get_mut(&space)
            .ok_or(DeviceAllocError::NoSuchMemory { space })
    }
}

/// Every memory of `spec`'s machine: host first, then per SIP and cube its
/// HBM, SRAM and PE TCMs.
fn spaces(spec: &TopologySpec) -> impl Iterator<Item = MemSpace> {
    let sips = spec.system().sips.count();
    let cubes = u32::try_from(spec.cubes_per_sip()).unwrap_or(u32::MAX);
    let pes = spec.cube().pes.get();
    let cube_spaces = (0..sips).flat_map(move |sip| {
        (0..cubes).flat_map(move |cube| {
            let tcms = (0..pes).map(move |pe| MemSpace::Tcm { sip, cube, pe });
            [MemSpace::Hbm { sip, cube }, MemSpace::Sram { sip, cube }]
                .into_iter()
                .chain(tcms)
        })
    });
    std::iter::once(MemSpace::Host).chain(cube_spaces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_spec() -> TopologySpec {
        TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap()
    }

    #[test]
    fn one_allocator_per_memory() {
        let spec = default_spec();
        let device = DeviceAllocators::new(&spec, 64).unwrap();
        let expected = 1 + spec.total_cubes() * (2 + u64::from(spec.cube().pes.get()));
        assert_eq!(device.units().count() as u64, expected);
        let tcm = MemSpace::Tcm {
            sip: 1,
            cube: 15,
            pe: 7,
        };
        let unit = device.unit(tcm).unwrap();
        assert_eq!(unit.unit(), "sip1.cube15.pe7.tcm");
        assert_eq!(unit.capacity(), spec.pe().tcm.capacity.get().bytes());
    }

    #[test]
    fn hbm_and_tcm_of_a_cube_are_separate() {
        let mut device = DeviceAllocators::new(&default_spec(), 64).unwrap();
        let hbm = MemSpace::Hbm { sip: 0, cube: 1 };
        let tcm = MemSpace::Tcm {
            sip: 0,
            cube: 1,
            pe: 0,
        };
        let a = device.alloc(hbm, 4096).unwrap();
        let b = device.alloc(tcm, 4096).unwrap();
        let map = device.address_map().clone();
        assert_eq!(map.decode(a).unwrap(), (hbm, 0));
        assert_eq!(map.decode(b).unwrap(), (tcm, 0));
        assert_eq!(
            device.unit(hbm).unwrap().free_bytes() + 4096,
            map.capacity(hbm)
        );
        device.free(a).unwrap();
        let err = device.free(a).unwrap_err();
        assert_eq!(err.to_string(), "sip0.cube1.hbm: double free of offset 0x0");
    }

    #[test]
    fn missing_memories_are_address_errors() {
        let mut device = DeviceAllocators::new(&default_spec(), 64).unwrap();
        let err = device
            .alloc(MemSpace::Sram { sip: 9, cube: 0 }, 64)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "this machine has no memory sip9.cube0.sram"
        );
        assert!(matches!(
            device.free(0x0000_0200_0000_0000),
            Err(DeviceAllocError::Address(_))
        ));
    }
}
