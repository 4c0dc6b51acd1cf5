//! One collective of the process group, resolved at `init_process_group`
//! (seed ADR-0047 D3, per (algorithm, method) pair of D8): the ccl.yaml
//! entry, its algorithm from the registry, the world it runs in, its
//! checked `params` and its wired endpoints — everything that could refuse
//! the configuration is checked here, before any rank runs. The IPCQ
//! network is installed on first use (slots cost memory only for the
//! collectives a run calls).
//!
//! Also builds a call's [`KernelArgs`] from the rank's tensors
//! ([`Plan::kernel_args`]): one tile per cube, all of one size.
//!
//! Uses `ccl`, `device` and tensors; nothing of the `torch.distributed`
//! facade above it.

use std::cell::OnceCell;
use std::rc::Rc;

use super::distributed::DistError;
use super::tensor::Tensor;
use crate::ccl::helpers::check_chunk;
use crate::ccl::install::{check_slot_memory, install_endpoints, tcm_slot_bytes};
use crate::ccl::registry;
use crate::ccl::topology::Wiring;
use crate::ccl::{
    Algorithm, BufferKind, CallArgs, CclAlgorithm, CclConfig, Collective, Endpoints, KernelArgs,
    Params, ReduceOp, Root, WorldShape, wired_endpoints,
};
use crate::device::Device;
use crate::tl::{Grid, IpcqNetwork, IpcqParams};
use crate::topology::Machine;

/// A resolved collective: see the module docs.
pub(super) struct Plan {
    /// The ccl.yaml entry.
    pub entry: String,
    /// Elements per tile from ccl.yaml (`n_elem`).
    pub n_elem: usize,
    /// Ranks (= SIPs).
    pub world_size: usize,
    algorithm: Box<dyn CclAlgorithm>,
    shape: WorldShape,
    params: Rc<Params>,
    endpoints: Endpoints,
    buffer_kind: BufferKind,
    ipcq: IpcqParams,
    network: OnceCell<Rc<IpcqNetwork>>,
    /// The SIP of each group rank of a sub-group (`new_group`) or a job
    /// (ADR-0116); `None`: group rank = SIP.
    members: Option<Rc<[u32]>>,
    /// Why its IPCQ slots do not fit the memory they go in, if they do
    /// not: refused when a call needs the plan ([`Plan::usable`]), so a
    /// machine that cannot hold one default's slots runs the others
    /// (ADR-0113).
    slots_unfit: Option<String>,
}

/// What one call passes to [`Plan::kernel_args`].
pub(super) struct Call<'a> {
    /// The tensor whose tiles are read (and written, in place).
    pub input: &'a Tensor,
    /// The out-of-place destination, if any.
    pub output: Option<&'a Tensor>,
    /// The reduction operator.
    pub op: ReduceOp,
    /// The root (or peer) rank.
    pub root: u32,
    /// The SIP that runs the kernel: the caller's.
    pub sip: u32,
}

impl<'a> Call<'a> {
    /// An in-place call from SIP `sip`.
    pub fn in_place(tensor: &'a Tensor, op: ReduceOp, root: u32, sip: u32) -> Call<'a> {
        Call {
            input: tensor,
            output: None,
            op,
            root,
            sip,
        }
    }

    /// An out-of-place call from SIP `sip`.
    pub fn out_of_place(input: &'a Tensor, output: &'a Tensor, op: ReduceOp, sip: u32) -> Call<'a> {
        Call {
            output: Some(output),
            ..Call::in_place(input, op, 0, sip)
        }
    }
}

impl Plan {
    /// Resolves ccl.yaml's `entry` as the algorithm of `collective` on
    /// `machine`; every refusal names the entry. For a sub-group
    /// (`members`: the SIP of each group rank; `None`: the world) the
    /// world is `members.len()` ranks on a logical ring of those SIPs, in
    /// that order.
    pub fn resolve_in(
        machine: &Machine,
        ccl: &CclConfig,
        (collective, entry): (Collective, &str),
        members: Option<&[u32]>,
    ) -> Result<Plan, DistError> {
        let (config, mut algorithm, params) = Plan::check_entry(ccl, entry)?;
        let world_size = match members {
            Some(members) => members.len(),
            None => world_size(machine, &config)?,
        };
        let shape = match members {
            Some(_) => WorldShape::ring(
                machine.spec(),
                world_size as u32,
                config.wiring,
                config.root_cube,
            ),
            None => WorldShape::new(
                machine.spec(),
                world_size as u32,
                config.wiring,
                config.root_cube,
            ),
        }
        .map_err(|e| refusal(entry, e.to_string()))?;
        if let Some(configured) = algorithm
            .configure(collective, &shape, &params)
            .map_err(|reason| refusal(entry, reason.to_string()))?
        {
            algorithm = configured;
        }
        let implements = algorithm.collective();
        if implements != collective {
            return Err(DistError::WrongCollective {
                entry: entry.to_owned(),
                implements,
                call: collective,
            });
        }
        check_requirements(entry, algorithm.as_ref(), &config)?;
        algorithm
            .supports(&shape, &params)
            .map_err(|reason| refusal(entry, format!("`{}` requires: {reason}", config.module)))?;
        check_chunk_fits_slot(entry, &params, config.ipcq)?;
        let mut endpoints = wired_endpoints(algorithm.as_ref(), &shape)?;
        if let Some(members) = members {
            for coord in &mut endpoints.coords {
                coord.sip = members[coord.sip as usize];
            }
        }
        Wiring::install(&endpoints.tables)?;
        let slots = check_slot_memory(machine.spec(), &endpoints, config.buffer_kind, config.ipcq);
        Ok(Plan {
            slots_unfit: slots.err().map(|e| e.to_string()),
            entry: entry.to_owned(),
            n_elem: config.n_elem.get() as usize,
            world_size,
            algorithm,
            shape,
            params: Rc::new(params),
            endpoints,
            buffer_kind: config.buffer_kind,
            ipcq: config.ipcq,
            network: OnceCell::new(),
            members: members.map(Rc::from),
        })
    }

    /// This plan, if a call can run it: its IPCQ slots fit their memory
    /// (else the refusal naming the entry and the memory).
    pub fn usable(&self) -> Result<&Plan, DistError> {
        match &self.slots_unfit {
            Some(reason) => Err(refusal(&self.entry, reason.clone())),
            None => Ok(self),
        }
    }

    /// The checks of ccl.yaml's `entry` that do not depend on the machine:
    /// it exists, its module is a registered algorithm and its `params`
    /// are the algorithm's. Whether it can serve a machine is known only
    /// when it is resolved for one ([`Plan::resolve`]).
    pub fn check_entry<'c>(
        ccl: &'c CclConfig,
        entry: &str,
    ) -> Result<(Algorithm<'c>, Box<dyn CclAlgorithm>, Params), DistError> {
        let config = ccl.algorithm(entry).ok_or_else(|| DistError::NoSuchEntry {
            name: entry.to_owned(),
            known: ccl.algorithm_names().collect::<Vec<_>>().join(", "),
        })?;
        let algorithm = registry::find(config.module)?;
        let params = Params::check(config.module, algorithm.params(), config.params)
            .map_err(|e| refusal(entry, e.to_string()))?;
        if algorithm.chunking().is_some() {
            check_chunk(&params).map_err(|reason| {
                refusal(entry, format!("`{}` requires: {reason}", config.module))
            })?;
        }
        Ok((config, algorithm, params))
    }

    /// The IPCQ network, installed on `device` at the first call.
    pub fn network(&self, device: &Device) -> Result<Rc<IpcqNetwork>, DistError> {
        if let Some(network) = self.network.get() {
            return Ok(network.clone());
        }
        let network = install_endpoints(device, &self.endpoints, self.buffer_kind, self.ipcq)
            .map_err(|e| DistError::Install(e.to_string()))?;
        Ok(self.network.get_or_init(|| network).clone())
    }

    /// IPCQ messages sent over this plan's network (0 if not installed).
    pub fn ipcq_messages(&self) -> u64 {
        self.network.get().map_or(0, |network| network.messages())
    }

    /// TCM bytes one endpoint needs for a tile of `tile_bytes`
    /// ([`CclAlgorithm::tcm_bytes`] with this entry's `params`), with the
    /// IPCQ slots that share its TCM when `buffer_kind` is `tcm`.
    /// A streamed tile is cut, as at run time (`helpers::message_bytes`),
    /// into chunks of at most one slot unless `params.chunk` says.
    pub fn tcm_bytes(&self, tile_bytes: u64) -> u64 {
        let slots = tcm_slot_bytes(&self.endpoints, self.buffer_kind, self.ipcq);
        let own = match self.algorithm.chunking() {
            Some(default) if self.params.size("chunk").is_none() => {
                let chunk = default.bytes(tile_bytes).min(self.ipcq.slot_bytes / 4 * 4);
                let params = self.params.with_size("chunk", chunk);
                self.algorithm.tcm_bytes(tile_bytes, &params)
            }
            _ => self.algorithm.tcm_bytes(tile_bytes, &self.params),
        };
        own.saturating_add(slots)
    }

    /// The algorithm.
    pub fn algorithm(&self) -> &dyn CclAlgorithm {
        self.algorithm.as_ref()
    }

    /// The launch grid on each SIP.
    pub fn grid(&self) -> Grid {
        self.algorithm.grid(self.shape.cube_w, self.shape.cube_h)
    }

    /// The kernel arguments of `call` (see the module docs): the input
    /// tile holds `in_blocks` blocks of `n_elem` elements (1 for in-place
    /// calls, the endpoint count when it holds one block per endpoint) and
    /// the output tile, if any, `out_blocks`.
    pub fn kernel_args(
        &self,
        call: &Call<'_>,
        in_blocks: usize,
        out_blocks: usize,
    ) -> Result<KernelArgs, DistError> {
        if call.root as usize >= self.world_size {
            return Err(DistError::NoSuchRank {
                rank: call.root as usize,
                world_size: self.world_size,
            });
        }
        let (tiles, tile_elems) = self.tiles_of(call.input, call.sip)?;
        let n_elem = tile_elems / in_blocks;
        if tile_elems % in_blocks != 0 || n_elem == 0 {
            return Err(DistError::BlockMismatch {
                tensor: call.input.name().to_owned(),
                elements: tile_elems,
                blocks: in_blocks,
            });
        }
        let out_tiles = match call.output {
            Some(output) => {
                let (tiles, elements) = self.tiles_of(output, call.sip)?;
                if elements != n_elem * out_blocks {
                    return Err(DistError::OutputSize {
                        tensor: output.name().to_owned(),
                        elements,
                        expected: n_elem * out_blocks,
                    });
                }
                if output.dtype() != call.input.dtype() {
                    return Err(DistError::OutputDType {
                        tensor: output.name().to_owned(),
                    });
                }
                tiles
            }
            None => Rc::from([]),
        };
        let tile = self.algorithm.kernel_args(
            self.world_size,
            n_elem,
            self.shape.cube_w,
            self.shape.cube_h,
        );
        let root = Root {
            rank: call.root,
            cube: self.shape.root_cube.unwrap_or(0),
        };
        let collective = self.algorithm.collective();
        Ok(KernelArgs {
            t_ptr: call.input.data_ptr()?,
            tiles,
            tile,
            dtype: call.input.dtype(),
            call: CallArgs::new(collective, call.op, root, out_tiles),
            sip_rank: self.group_rank(call.sip)?,
            sip_arrangement: self.shape.sip_arrangement,
            params: self.params.clone(),
            slot_bytes: self.ipcq.slot_bytes,
        })
    }

    /// The group rank of the caller on SIP `sip` (the SIP itself in the
    /// world group).
    fn group_rank(&self, sip: u32) -> Result<u32, DistError> {
        let Some(members) = &self.members else {
            return Ok(sip);
        };
        let rank = members.iter().position(|&s| s == sip);
        rank.map(|r| r as u32).ok_or_else(|| DistError::NotInGroup {
            rank: sip as usize,
            members: members.iter().map(|&s| s as usize).collect(),
        })
    }

    /// Endpoints taking part (PE 0 of every cube of every rank).
    pub fn endpoints(&self) -> usize {
        self.shape.endpoints()
    }

    /// The cube of a rooted call's root endpoint: ccl.yaml's `root_cube`,
    /// 0 if unset.
    pub fn root_cube(&self) -> usize {
        self.shape.root_cube.unwrap_or(0) as usize
    }

    /// The wired IPCQ endpoints: where each runs and its table.
    pub fn wired(&self) -> &Endpoints {
        &self.endpoints
    }

    /// `tensor`'s tile addresses on SIP `sip`, one per cube, and their
    /// common element count.
    fn tiles_of(&self, tensor: &Tensor, sip: u32) -> Result<(Rc<[u64]>, usize), DistError> {
        let name = || tensor.name().to_owned();
        if !tensor.is_deployed() {
            return Err(DistError::NotDeployed(name()));
        }
        let shards = tensor.shards()?;
        let mine: Vec<_> = shards.iter().filter(|s| s.spec.sip == sip).collect();
        let cubes = self.shape.cubes();
        if mine.len() != cubes as usize {
            return Err(DistError::TileMismatch {
                tensor: name(),
                sip,
                tiles: mine.len(),
                algorithm: self.entry.clone(),
                cubes,
            });
        }
        let bytes: Vec<u64> = mine.iter().map(|s| s.bytes).collect();
        if bytes.iter().any(|&b| b != bytes[0]) {
            return Err(DistError::UnequalShards {
                tensor: name(),
                sip,
                bytes,
            });
        }
        let elements = (bytes[0] / tensor.dtype().size()) as usize;
        Ok((mine.iter().map(|s| s.addr).collect(), elements))
    }
}

/// An entry refused for `reason`.
fn refusal(entry: &str, reason: String) -> DistError {
    DistError::Refused {
        entry: entry.to_owned(),
        reason,
    }
}

/// The resolved world size (seed ADR-0047 D2), checked against the SIPs
/// (rank = SIP).
/// A `params.chunk` is received whole in one IPCQ slot: it must fit one.
fn check_chunk_fits_slot(entry: &str, params: &Params, ipcq: IpcqParams) -> Result<(), DistError> {
    match params.size("chunk") {
        Some(chunk) if chunk > ipcq.slot_bytes => Err(refusal(
            entry,
            format!(
                "params.chunk {chunk} B is larger than ipcq.slot_size {} B: a chunk is received \
                 whole in one slot (lower params.chunk or raise ipcq.slot_size)",
                ipcq.slot_bytes
            ),
        )),
        _ => Ok(()),
    }
}

fn world_size(machine: &Machine, config: &Algorithm<'_>) -> Result<usize, DistError> {
    let sips = machine.sip_count();
    let world_size = config.world_size_or(machine.spec().system().sips.count()) as usize;
    if world_size > sips as usize {
        return Err(DistError::WorldTooLarge { world_size, sips });
    }
    Ok(world_size)
}

/// The algorithm's declared [`Requirements`](crate::ccl::Requirements)
/// against the entry's IPCQ settings (an algorithm that serves only some
/// SIP arrangements says so in its `supports`).
fn check_requirements(
    entry: &str,
    algorithm: &dyn CclAlgorithm,
    config: &Algorithm<'_>,
) -> Result<(), DistError> {
    let needs = algorithm.requirements();
    let module = config.module;
    if config.ipcq.slots < needs.min_slots {
        return Err(refusal(
            entry,
            format!(
                "`{module}` needs at least {} IPCQ slots per ring, ipcq.slots is {} \
                 (set ccl.yaml ipcq.slots: {})",
                needs.min_slots, config.ipcq.slots, needs.min_slots
            ),
        ));
    }
    Ok(())
}
