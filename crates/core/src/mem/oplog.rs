//! `OpLog`: every op on memory, in the order it took effect, and the
//! replay that checks the final memory against it (the seeds' "phase 2",
//! kept as an independent verifier).
//!
//! # Order and snapshots
//!
//! An op reads all its inputs and writes all its outputs at one instant,
//! its *issue* (`start`). [`OpLog::apply`] applies the op to the live store
//! and appends its record in the same call, so log order is, by
//! construction, the order in which memory changed, and replaying the log
//! on a fresh store reproduces the live one byte for byte. `end` is filled
//! in later by [`OpLog::complete`]; it orders nothing.
//!
//! That is DESIGN §6's "a send snapshots its source when the DMA is
//! issued": a copy whose source is overwritten while it is in flight still
//! moves the old bytes, live and in replay, because both read the source
//! at the copy's place in the log. The record needs no copy of the source.
//! Logging at completion instead would replay such a copy with the new
//! source; it would need the source bytes in the record (the original
//! snapshotted math inputs and HBM DMA payloads for that reason, doubling
//! memory).
//!
//! The price: an op's outputs hold their new values from issue rather than
//! from completion. Only a program that reads a destination before the
//! op's completion event (a race the hardware leaves undefined too) can
//! tell; the hardware layer's completion events (DMA done, doorbells) are
//! what make reading the destination legal.
//!
//! Bytes from outside simulated memory ([`Op::HostWrite`]) are carried in
//! the record, as there is nothing to re-read. With data off the record
//! keeps only their length, and such a log replays only on a timing-only
//! store.
//!
//! Records serialise with serde (e.g. to a JSON file): `name`, `node`,
//! `start_ps`, `end_ps` (null while in flight), `params` (the [`Op`],
//! tagged by `kind`), `inputs` and `outputs` (address ranges).

use std::cell::Cell;
use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::op::{AddrRange, Op};
use super::store::{MemoryStore, RegionMemo, StoreDiff, StoreError};
use crate::sim::SimTime;

/// The position of a record in its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(usize);

impl OpId {
    /// The index of the op in its log (of the record in [`OpLog::records`]
    /// when the log keeps records).
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op #{}", self.0)
    }
}

/// One executed op: what ran where and when, and what it touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpRecord {
    name: &'static str,
    node: String,
    #[serde(rename = "start_ps", serialize_with = "ps")]
    start: SimTime,
    #[serde(rename = "end_ps", serialize_with = "optional_ps")]
    end: Option<SimTime>,
    params: Op,
    inputs: Vec<AddrRange>,
    outputs: Vec<AddrRange>,
}

impl OpRecord {
    fn new(node: String, start: SimTime, params: Op) -> Self {
        OpRecord {
            name: params.name(),
            node,
            start,
            end: None,
            inputs: params.inputs(),
            outputs: params.outputs(),
            params,
        }
    }

    /// The op name (`copy`, `add`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The unit that executed the op (e.g. `sip0.cube2.pe1`).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// When the op was issued and took effect.
    pub fn start(&self) -> SimTime {
        self.start
    }

    /// When the op completed; `None` while in flight.
    pub fn end(&self) -> Option<SimTime> {
        self.end
    }

    /// The op and its parameters.
    pub fn op(&self) -> &Op {
        &self.params
    }

    /// Address ranges read.
    pub fn inputs(&self) -> &[AddrRange] {
        &self.inputs
    }

    /// Address ranges written.
    pub fn outputs(&self) -> &[AddrRange] {
        &self.outputs
    }
}

/// A misuse of the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpLogError {
    /// The op could not be applied; it was not recorded.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An op issued before the last recorded one.
    #[error("{name} on {node} issued at {start}, before the last recorded op ({last})")]
    OutOfOrder {
        /// The op's name.
        name: &'static str,
        /// The unit issuing it.
        node: String,
        /// Its issue time.
        start: SimTime,
        /// The issue time of the last recorded op.
        last: SimTime,
    },
    /// An id this log did not hand out.
    #[error("{id} is not in this log")]
    UnknownOp {
        /// The id.
        id: OpId,
    },
    /// A second completion.
    #[error("{id} already completed at {end}")]
    AlreadyComplete {
        /// The id.
        id: OpId,
        /// The first completion time.
        end: SimTime,
    },
    /// A completion before the issue.
    #[error("{id} cannot complete at {end}: it was issued at {start}")]
    EndBeforeStart {
        /// The id.
        id: OpId,
        /// Issue time.
        start: SimTime,
        /// Completion time given.
        end: SimTime,
    },
}

/// A logged op that failed on replay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replay of {id} ({name} on {node}) failed: {source}")]
pub struct ReplayError {
    /// The op.
    pub id: OpId,
    /// Its name.
    pub name: &'static str,
    /// The unit that executed it.
    pub node: String,
    /// Why it failed.
    pub source: StoreError,
}

/// The live memory does not match the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The log does not replay.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The log only counted its ops ([`OpLog::counting`]).
    #[error("the op log kept no records of its {ops} ops (a counting log cannot be replayed)")]
    NotRecorded {
        /// Ops applied.
        ops: usize,
    },
    /// Replay gives other memory (left: replayed, right: live).
    #[error("replayed memory differs from live memory: {0}")]
    Mismatch(StoreDiff),
}

/// Ops in the order they took effect.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OpLog {
    records: Vec<OpRecord>,
    /// Set when ops are applied and counted but not kept
    /// ([`OpLog::counting`]).
    #[serde(skip)]
    counted: Option<Counted>,
    /// Set by [`OpLog::replaying`]: the store the ops are replayed on as
    /// they are applied, and the first op that failed there.
    #[serde(skip)]
    shadow: Option<Box<Shadow>>,
}

/// A replay run alongside the live store ([`OpLog::replaying`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shadow {
    store: MemoryStore,
    failed: Option<ReplayError>,
}

/// What a log that keeps no records remembers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counted {
    ops: usize,
    last_start: SimTime,
}

impl OpLog {
    /// An empty log.
    pub fn new() -> Self {
        OpLog::default()
    }

    /// An empty log that applies ops and checks their order but keeps no
    /// records (timing-only runs: its memory does not grow with the ops;
    /// it cannot be replayed).
    pub fn counting() -> Self {
        OpLog {
            records: Vec::new(),
            counted: Some(Counted::default()),
            shadow: None,
        }
    }

    /// An empty log that keeps no records but replays every op on `fresh`
    /// (an empty store with the live store's address map and mode) as it
    /// is applied, so [`OpLog::verify`] checks the same thing as replaying
    /// a recorded log (the ops, in the order they took effect, on an empty
    /// store, give the live memory) while its memory is that of the data,
    /// not of the op count (a data run of a million small messages: a
    /// record per op would be gigabytes). Start it before the first op.
    pub fn replaying(fresh: MemoryStore) -> Self {
        OpLog {
            shadow: Some(Box::new(Shadow {
                store: fresh,
                failed: None,
            })),
            ..OpLog::counting()
        }
    }

    /// Applies `op`, issued by `node` at `start`, to `store` and records it.
    /// A failed op changes nothing and is not recorded. With data off, a
    /// host write's bytes are not kept.
    pub fn apply(
        &mut self,
        store: &mut MemoryStore,
        node: impl Into<String>,
        start: SimTime,
        op: Op,
    ) -> Result<OpId, OpLogError> {
        self.apply_with(store, node, start, op, None)
    }

    /// [`apply`](Self::apply) by a caller that remembers where its last
    /// op's operands were ([`RegionMemo`]; ADR-0064): the same checks, the
    /// same errors, the same record.
    pub fn apply_remembered(
        &mut self,
        store: &mut MemoryStore,
        node: impl Into<String>,
        start: SimTime,
        (op, memo): (Op, &Cell<RegionMemo>),
    ) -> Result<OpId, OpLogError> {
        self.apply_with(store, node, start, op, Some(memo))
    }

    #[inline(always)]
    fn apply_with(
        &mut self,
        store: &mut MemoryStore,
        node: impl Into<String>,
        start: SimTime,
        op: Op,
        memo: Option<&Cell<RegionMemo>>,
    ) -> Result<OpId, OpLogError> {
        let last = match self.counted {
            Some(counted) => Some(counted.last_start),
            None => self.records.last().map(|r| r.start),
        };
        if let Some(last) = last.filter(|&l| l > start) {
            return Err(OpLogError::OutOfOrder {
                name: op.name(),
                node: node.into(),
                start,
                last,
            });
        }
        // A host write's bytes do nothing to a store without data: it
        // applies the same whether they are kept or not.
        match memo {
            Some(memo) => op.apply_remembered(store, memo)?,
            None => op.apply(store)?,
        }
        let Some(counted) = &mut self.counted else {
            let op = op.for_mode(store.mode());
            self.records.push(OpRecord::new(node.into(), start, op));
            return Ok(OpId(self.records.len() - 1));
        };
        counted.ops += 1;
        counted.last_start = start;
        let id = OpId(counted.ops - 1);
        if let Some(shadow) = self.shadow.as_deref_mut().filter(|s| s.failed.is_none()) {
            shadow.failed = op.apply(&mut shadow.store).err().map(|source| ReplayError {
                id,
                name: op.name(),
                node: node.into(),
                source,
            });
        }
        Ok(id)
    }

    /// Marks op `id` complete at `end`.
    pub fn complete(&mut self, id: OpId, end: SimTime) -> Result<(), OpLogError> {
        if let Some(counted) = self.counted {
            return match id.0 < counted.ops {
                true => Ok(()),
                false => Err(OpLogError::UnknownOp { id }),
            };
        }
        let record = self
            .records
            .get_mut(id.0)
            .ok_or(OpLogError::UnknownOp { id })?;
        if let Some(first) = record.end {
            return Err(OpLogError::AlreadyComplete { id, end: first });
        }
        if end < record.start {
            let start = record.start;
            return Err(OpLogError::EndBeforeStart { id, start, end });
        }
        record.end = Some(end);
        Ok(())
    }

    /// The records in effect order.
    pub fn records(&self) -> &[OpRecord] {
        &self.records
    }

    /// The record of op `id`.
    pub fn get(&self, id: OpId) -> Option<&OpRecord> {
        self.records.get(id.0)
    }

    /// Number of ops applied (recorded, or only counted).
    pub fn len(&self) -> usize {
        self.counted.map_or(self.records.len(), |c| c.ops)
    }

    /// Whether no op was applied.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Re-executes every op, in order, on `fresh` (normally an empty store
    /// with the live store's address map and mode).
    pub fn replay(&self, fresh: &mut MemoryStore) -> Result<(), ReplayError> {
        for (index, record) in self.records.iter().enumerate() {
            record.params.apply(fresh).map_err(|source| ReplayError {
                id: OpId(index),
                name: record.name,
                node: record.node.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// Replays the log on an empty copy of `live` (a [`replaying`](Self::replaying)
    /// log: takes the store it replayed on as it went) and checks that every
    /// mapped region (and, with data on, every byte) matches.
    pub fn verify(&self, live: &MemoryStore) -> Result<(), VerifyError> {
        if let Some(shadow) = &self.shadow {
            if let Some(failed) = &shadow.failed {
                return Err(VerifyError::Replay(failed.clone()));
            }
            return match shadow.store.diff(live) {
                None => Ok(()),
                Some(diff) => Err(VerifyError::Mismatch(diff)),
            };
        }
        if let Some(counted) = self.counted {
            return Err(VerifyError::NotRecorded { ops: counted.ops });
        }
        let mut replayed = live.fresh();
        self.replay(&mut replayed)?;
        match replayed.diff(live) {
            None => Ok(()),
            Some(diff) => Err(VerifyError::Mismatch(diff)),
        }
    }
}

/// A record as read from a file, before checking that its derived fields
/// agree with its params.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordFile {
    name: String,
    node: String,
    start_ps: u64,
    end_ps: Option<u64>,
    params: Op,
    inputs: Vec<AddrRange>,
    outputs: Vec<AddrRange>,
}

impl<'de> Deserialize<'de> for OpRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        RecordFile::deserialize(deserializer)?
            .try_into()
            .map_err(D::Error::custom)
    }
}

impl TryFrom<RecordFile> for OpRecord {
    type Error = String;

    fn try_from(file: RecordFile) -> Result<Self, String> {
        let mut record = OpRecord::new(file.node, SimTime::from_ps(file.start_ps), file.params);
        record.end = file.end_ps.map(SimTime::from_ps);
        let what = if file.name != record.name {
            "name"
        } else if file.inputs != record.inputs {
            "inputs"
        } else if file.outputs != record.outputs {
            "outputs"
        } else if record.end.is_some_and(|end| end < record.start) {
            "end_ps (before start_ps)"
        } else {
            return Ok(record);
        };
        Err(format!(
            "{} record: {what} does not match its params",
            record.name
        ))
    }
}

fn ps<S: Serializer>(time: &SimTime, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(time.as_ps())
}

fn optional_ps<S: Serializer>(time: &Option<SimTime>, serializer: S) -> Result<S::Ok, S::Error> {
    time.map(SimTime::as_ps).serialize(serializer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{AddressMap, MemSpace, TopologySpec};

    fn setup() -> (MemoryStore, u64) {
        let spec = TopologySpec::load(&TopologySpec::default_source(), &[]).unwrap();
        let map = AddressMap::new(&spec).unwrap();
        let base = map.encode(MemSpace::Sram { sip: 0, cube: 0 }, 0).unwrap();
        (MemoryStore::new(map), base)
    }

    /// Maps 8 bytes at `base`, writes 1s to the first half, copies it to
    /// the second (issued at 2 ns), overwrites the first with 2s before the
    /// copy completes at 10 ns; returns the copy's id.
    fn copy_under_a_later_write(log: &mut OpLog, store: &mut MemoryStore, base: u64) -> OpId {
        let t = SimTime::from_ns;
        log.apply(store, "host", t(0), Op::Map { addr: base, len: 8 })
            .unwrap();
        let write = |v: u8| Op::HostWrite {
            addr: base,
            data: vec![v; 4].into(),
        };
        log.apply(store, "host", t(1), write(1)).unwrap();
        let copy = Op::Copy {
            src: base,
            dst: base + 4,
            len: 4,
        };
        let dma = log.apply(store, "sip0.cube0.mcpu.dma", t(2), copy).unwrap();
        log.apply(store, "host", t(3), write(2)).unwrap();
        log.complete(dma, t(10)).unwrap();
        dma
    }

    #[test]
    fn a_copy_snapshots_its_source_at_issue() {
        let (mut store, base) = setup();
        let mut log = OpLog::new();
        let dma = copy_under_a_later_write(&mut log, &mut store, base);
        assert_eq!(&*store.read(base, 8).unwrap(), [2, 2, 2, 2, 1, 1, 1, 1]);
        log.verify(&store).unwrap();
        assert_eq!(log.get(dma).unwrap().end(), Some(SimTime::from_ns(10)));
    }

    #[test]
    fn misuse_of_the_log_is_an_error() {
        let (mut store, base) = setup();
        let mut log = OpLog::new();
        let map = Op::Map { addr: base, len: 8 };
        let id = log
            .apply(&mut store, "host", SimTime::from_ns(5), map)
            .unwrap();
        let early = log.apply(
            &mut store,
            "host",
            SimTime::from_ns(4),
            Op::Unmap { addr: base },
        );
        assert!(matches!(early, Err(OpLogError::OutOfOrder { .. })));
        let unmapped = Op::Fill {
            addr: base + 8,
            len: 1,
            value: 0,
        };
        let err = log
            .apply(&mut store, "host", SimTime::from_ns(6), unmapped)
            .unwrap_err();
        assert!(
            matches!(err, OpLogError::Store(StoreError::Unmapped { .. })),
            "{err}"
        );
        assert_eq!(log.len(), 1, "failed ops are not recorded");
        assert_eq!(
            log.complete(id, SimTime::from_ns(1))
                .unwrap_err()
                .to_string(),
            "op #0 cannot complete at t=1 ns: it was issued at t=5 ns"
        );
        log.complete(id, SimTime::from_ns(6)).unwrap();
        assert!(matches!(
            log.complete(id, SimTime::from_ns(7)),
            Err(OpLogError::AlreadyComplete { .. })
        ));
        assert!(matches!(
            log.complete(OpId(9), SimTime::from_ns(7)),
            Err(OpLogError::UnknownOp { .. })
        ));
    }

    #[test]
    fn a_counting_log_applies_and_orders_ops_but_keeps_no_records() {
        let (mut store, base) = setup();
        let mut log = OpLog::counting();
        let t = SimTime::from_ns;
        let map = Op::Map { addr: base, len: 8 };
        let id = log.apply(&mut store, "host", t(5), map).unwrap();
        let write = Op::HostWrite {
            addr: base,
            data: vec![3; 4].into(),
        };
        log.apply(&mut store, "host", t(6), write).unwrap();
        assert_eq!(&*store.read(base, 5).unwrap(), [3, 3, 3, 3, 0]);
        assert_eq!((log.len(), log.records().len()), (2, 0));
        assert_eq!(log.complete(id, t(7)), Ok(()));
        let early = log.apply(&mut store, "host", t(4), Op::Unmap { addr: base });
        assert!(matches!(early, Err(OpLogError::OutOfOrder { .. })));
        assert_eq!(
            log.verify(&store).unwrap_err().to_string(),
            "the op log kept no records of its 2 ops (a counting log cannot be replayed)"
        );
        assert_eq!(serde_json::to_string(&log).unwrap(), "[]");
    }

    #[test]
    fn a_replaying_log_checks_what_a_recorded_one_does_without_records() {
        let (mut store, base) = setup();
        let mut log = OpLog::replaying(store.fresh());
        let t = SimTime::from_ns;
        copy_under_a_later_write(&mut log, &mut store, base);
        assert_eq!((log.len(), log.records().len()), (4, 0));
        log.verify(&store).unwrap();
        // A byte changed outside the log: the replay differs from the live store.
        let mut tampered = store.clone();
        tampered.write(base + 7, &[9]).unwrap();
        let error = log.verify(&tampered).unwrap_err();
        assert!(matches!(error, VerifyError::Mismatch(_)), "{error}");
        // A region mapped outside the log: the logged write to it fails in
        // the replay, named by its op.
        let outside = base + 4096;
        store.map(outside, 8).unwrap();
        let fill = Op::Fill {
            addr: outside,
            len: 8,
            value: 1,
        };
        log.apply(&mut store, "pe", t(11), fill).unwrap();
        let error = log.verify(&store).unwrap_err().to_string();
        assert!(
            error.starts_with("replay of op #4 (fill on pe) failed"),
            "{error}"
        );
    }

    #[test]
    fn records_serialise_with_their_derived_fields() {
        let (mut store, base) = setup();
        let mut log = OpLog::new();
        let map = Op::Map { addr: base, len: 4 };
        log.apply(&mut store, "host", SimTime::from_ps(7), map)
            .unwrap();
        let json = serde_json::to_string(&log).unwrap();
        assert_eq!(
            json,
            format!(
                r#"[{{"name":"map","node":"host","start_ps":7,"end_ps":null,"params":{{"kind":"map","addr":{base},"len":4}},"inputs":[],"outputs":[{{"addr":{base},"len":4}}]}}]"#
            )
        );
        let back: OpLog = serde_json::from_str(&json).unwrap();
        assert_eq!(back, log);
        let forged = json.replace(r#""name":"map""#, r#""name":"copy""#);
        let err = serde_json::from_str::<OpLog>(&forged).unwrap_err();
        assert!(err.to_string().contains("name does not match"), "{err}");
    }
}
