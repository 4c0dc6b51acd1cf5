//! MSCCL XML algorithms (issue 23 item 3, ADR-0035): a collective
//! algorithm whose schedule is an MSCCL algorithm file, the format
//! msccl-tools writes and the MSCCL runtime reads.
//!
//! `algorithms/msccl.rs` registers [`algorithm`] as the module `msccl`; a
//! ccl.yaml entry `module: msccl` with `params: {xml: FILE}` (or `run
//! --bench ccl_allreduce --msccl-xml FILE`) runs FILE. The file is read
//! and checked when the entry is resolved for a world
//! ([`CclAlgorithm::configure`]), so a bad file is a load-time error
//! naming its line ([`program`]); the configured algorithm wires each
//! rank's (peer, channel) connections to IPCQ directions ([`wiring`]) and
//! runs the program on every cube's share of the rank's data (`kernel`).
//!
//! MSCCL's gpu is a rank (= SIP). Knows the `ccl` contract, `tl` and the
//! file; nothing of the runtime or torch.

pub mod generate;
mod kernel;
pub mod program;
pub mod wiring;

use std::path::Path;
use std::rc::Rc;

use crate::ccl::helpers::MAX_CHUNK;
use crate::ccl::topology::{Builtin, NeighborMap, TopologyError};
use crate::ccl::{
    CclAlgorithm, Collective, ConfigureError, Endpoints, KernelArgs, ParamKind, ParamSpec, Params,
    WorldShape,
};
use crate::tl::{Dir, Grid, Kernel, KernelError, PeCoord};

use kernel::{Placement, TO_CUBE_RING};
pub use program::{Program, XmlError};
use wiring::Links;

/// The ccl.yaml `params` of `msccl`: `xml`, the algorithm file.
const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "xml",
    kind: ParamKind::Text,
}];

/// The `msccl` algorithm before its file is read (what the registry
/// returns); [`CclAlgorithm::configure`] reads it.
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    Box::new(Msccl { loaded: None })
}

/// The algorithm, with its program once configured.
struct Msccl {
    loaded: Option<Loaded>,
}

/// A read and wired program.
struct Loaded {
    program: Rc<Program>,
    links: Rc<Vec<Links>>,
    placement: Placement,
}

impl Msccl {
    /// Reads and wires the file `params.xml` names for `shape`'s world.
    fn load(
        collective: Collective,
        shape: &WorldShape,
        params: &Params,
    ) -> Result<Loaded, ConfigureError> {
        let file = params.text("xml").ok_or(ConfigureError::MissingParam {
            name: "xml",
            what: "the MSCCL algorithm file to run (ccl.yaml `params: {xml: FILE}`, or \
                   --msccl-xml FILE)",
        })?;
        let program = Program::load(Path::new(file), shape.n_sips as usize, collective)?;
        // Beside the cube ring on PE 0 if the directions suffice, else on
        // PE 1 (ADR-0035 D3).
        let ring: &[Dir] = if shape.cubes() > 1 {
            &[Dir::E, Dir::W]
        } else {
            &[]
        };
        let (links, placement) = match wiring::links(&program, ring) {
            Ok(links) => (links, Placement::Beside),
            Err(_) => {
                let links = wiring::links(&program, &[TO_CUBE_RING])?;
                (links, Placement::Apart)
            }
        };
        Ok(Loaded {
            program: Rc::new(program),
            links: Rc::new(links),
            placement,
        })
    }
}

impl CclAlgorithm for Msccl {
    fn collective(&self) -> Collective {
        self.loaded
            .as_ref()
            .map_or(Collective::AllReduce, |l| l.program.collective)
    }

    fn kernel(&self) -> Kernel<KernelArgs, ()> {
        let Some(loaded) = &self.loaded else {
            return Kernel::new("msccl", |_, _| async {
                Err(KernelError::failed(
                    "msccl: no algorithm file was read (params.xml)",
                ))
            });
        };
        let (program, links) = (loaded.program.clone(), loaded.links.clone());
        let placement = loaded.placement;
        Kernel::new("msccl", move |tl, args| {
            kernel::run(tl, args, program.clone(), links.clone(), placement)
        })
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn configure(
        &self,
        collective: Collective,
        shape: &WorldShape,
        params: &Params,
    ) -> Result<Option<Box<dyn CclAlgorithm>>, ConfigureError> {
        let loaded = Msccl::load(collective, shape, params)?;
        Ok(Some(Box::new(Msccl {
            loaded: Some(loaded),
        })))
    }

    /// PE 0 holds the tile (the whole tile in TCM) and, beside the cube
    /// ring, the program's piece buffers (a padded input, the output unless
    /// in place, scratch: chunks of at most a message of [`MAX_CHUNK`] over
    /// the largest `cnt`) and a message's combined copy; apart, PE 1 holds
    /// its share (at most the tile) and the same.
    fn tcm_bytes(&self, tile_bytes: u64, _params: &Params) -> u64 {
        let Some(loaded) = &self.loaded else {
            return tile_bytes;
        };
        let p = &loaded.program;
        let scratch = p.gpus.iter().map(|g| g.scratch_chunks).max().unwrap_or(0);
        let buffers = if p.inplace { 1 } else { 2 } * p.nchunks + scratch;
        // A chunk is rounded up to whole elements (4 B at most).
        let chunk = tile_bytes
            .div_ceil(p.nchunks as u64)
            .min(kernel::message_cap(MAX_CHUNK) / p.max_cnt() as u64)
            + 4;
        tile_bytes + buffers as u64 * chunk + 2 * MAX_CHUNK
    }

    /// PE 0 of every cube of every SIP, and PE 1 when the program runs
    /// apart ([`Placement`]).
    fn endpoints(&self, shape: &WorldShape) -> Result<Endpoints, TopologyError> {
        let pes = self.pes();
        let cube_ring = Builtin::Ring1d.tables(shape.cubes() as usize, None)?;
        let at = |sip: u32, cube: u32, pe: u32| ((sip * shape.cubes() + cube) * pes + pe) as usize;
        let mut coords = Vec::new();
        let mut tables = Vec::new();
        for sip in 0..shape.n_sips {
            for cube in 0..shape.cubes() {
                let ring = cube_ring[cube as usize].iter();
                let mut own: Vec<NeighborMap> =
                    vec![ring.map(|(&d, &c)| (d, at(sip, c as u32, 0))).collect()];
                if pes == 2 {
                    own[0].insert(TO_CUBE_RING.opposite(), at(sip, cube, 1));
                    own.push(NeighborMap::from([(TO_CUBE_RING, at(sip, cube, 0))]));
                }
                if let Some(loaded) = &self.loaded {
                    let gpu = own.last_mut().expect("one PE at least");
                    let links = loaded.links[sip as usize].iter();
                    gpu.extend(
                        links.map(|(&(peer, _), &dir)| (dir, at(peer as u32, cube, pes - 1))),
                    );
                }
                for (pe, table) in own.into_iter().enumerate() {
                    coords.push(PeCoord {
                        sip,
                        cube,
                        pe: pe as u32,
                    });
                    tables.push(table);
                }
            }
        }
        Ok(Endpoints { coords, tables })
    }

    fn grid(&self, cube_w: u32, cube_h: u32) -> Grid {
        Grid {
            pes: self.pes(),
            cubes: cube_w * cube_h,
        }
    }
}

impl Msccl {
    /// PEs per cube: 2 when the program runs apart from the cube ring.
    fn pes(&self) -> u32 {
        match self.loaded.as_ref().map(|l| l.placement) {
            Some(Placement::Apart) => 2,
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::SipArrangement;

    #[test]
    fn an_entry_without_its_file_is_refused_naming_the_param() {
        let shape = WorldShape {
            n_sips: 2,
            cube_w: 1,
            cube_h: 1,
            sip_arrangement: SipArrangement::Ring { n: 2 },
            builtin: Builtin::None,
            root_cube: None,
        };
        let error = algorithm()
            .configure(Collective::AllReduce, &shape, &Params::default())
            .err()
            .expect("no params.xml");
        assert!(matches!(
            error,
            ConfigureError::MissingParam { name: "xml", .. }
        ));
        assert_eq!(
            error.to_string(),
            "params.xml: the MSCCL algorithm file to run (ccl.yaml `params: {xml: FILE}`, or \
             --msccl-xml FILE)"
        );
    }
}
