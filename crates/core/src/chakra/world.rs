//! The ranks' graphs together: process groups resolved, collectives
//! matched across the members of their group, sends matched with receives,
//! and the whole checked for deadlock before anything runs.
//!
//! Matching follows NCCL's rules: on one process group the `k`-th
//! collective of every member is one collective (same type and size); the
//! `k`-th send from rank `a` to rank `b` with tag `t` meets the `k`-th
//! receive on `b` from `a` with `t`. A deadlock is a cycle once each
//! matched set is taken as one node (every member waits for all the
//! others' dependencies) and each rank runs a group's collectives in file
//! order (ADR-0034).
//!
//! Knows graphs and ranks; nothing of the machine.

use std::collections::BTreeMap;

use super::graph::{EtNode, Op, RankGraph, find_cycle};
use super::schema::CommType;

/// The process group of a collective: the ranks it runs on, in group-rank
/// order, and its name (`None`: every rank).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupRef {
    /// `pg_name`, if the node named one.
    pub name: Option<String>,
    /// Its ranks.
    pub ranks: Vec<usize>,
}

/// What the checks found that the run needs.
#[derive(Debug, Clone, Default)]
pub struct World {
    /// Every process group a collective names, by name (`""`: every rank).
    pub groups: BTreeMap<String, Vec<usize>>,
    /// Whether `pg_name`s were taken as every rank (no comm groups given).
    pub names_as_world: bool,
}

/// `comm_type` as text, for messages and figures.
pub fn comm_name(comm: CommType) -> &'static str {
    match comm {
        CommType::AllReduce => "all_reduce",
        CommType::Reduce => "reduce",
        CommType::AllGather => "all_gather",
        CommType::Gather => "gather",
        CommType::Scatter => "scatter",
        CommType::Broadcast => "broadcast",
        CommType::AllToAll => "all_to_all",
        CommType::ReduceScatter | CommType::ReduceScatterBlock => "reduce_scatter",
        CommType::Barrier => "barrier",
    }
}

/// A process group as messages name it: `of every rank` (the name `""`)
/// or `` `name` ``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupLabel(pub String);

impl std::fmt::Display for GroupLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_str() {
            "" => f.write_str("of every rank"),
            name => write!(f, "`{name}`"),
        }
    }
}

/// One rank's node as a mismatch names it: `rank 0 (t.0.et) node 10
/// `name``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAt {
    /// The rank.
    pub rank: usize,
    /// Its file.
    pub file: String,
    /// The node's id.
    pub node: u64,
    /// The node's name.
    pub name: String,
}

impl std::fmt::Display for NodeAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let NodeAt {
            rank,
            file,
            node,
            name,
        } = self;
        write!(f, "rank {rank} ({file}) node {node} `{name}`")
    }
}

/// One rank's collective in a mismatch: what it is and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallAt {
    /// The rank.
    pub rank: usize,
    /// Its file.
    pub file: String,
    /// The node's id.
    pub node: u64,
    /// The collective.
    pub comm: CommType,
    /// Its bytes per rank.
    pub bytes: u64,
}

/// Why a process group of the comm groups cannot serve a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// A `pg_name` the comm groups do not list.
    #[error("pg_name `{name}` is not in the comm groups (known: {})", known.join(", "))]
    Unknown {
        /// The name.
        name: String,
        /// The names the comm groups list.
        known: Vec<String>,
    },
    /// A comm group naming a rank the traces do not have.
    #[error("comm group `{name}` names rank {rank}, but the ranks are 0 to {}", ranks - 1)]
    NoSuchRank {
        /// The group.
        name: String,
        /// The rank it names.
        rank: usize,
        /// The ranks there are.
        ranks: usize,
    },
}

/// Why the ranks' graphs do not fit together; one line naming files and
/// node ids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// A collective's process group cannot be resolved.
    #[error("{file}: node {node}: {source}")]
    Group {
        /// The file of the node.
        file: String,
        /// The node's id.
        node: u64,
        /// What is wrong with its group.
        source: GroupError,
    },
    /// A collective on a rank its process group does not include.
    #[error(
        "{file}: node {node}: a collective of process group `{group}` (ranks {ranks:?}), which \
         does not include rank {rank}"
    )]
    NotMember {
        /// The file of the node.
        file: String,
        /// The node's id.
        node: u64,
        /// The group's name.
        group: String,
        /// Its ranks.
        ranks: Vec<usize>,
        /// The node's rank.
        rank: usize,
    },
    /// A send or receive naming no other rank of the traces.
    #[error(
        "{file}: node {node}: {} rank {peer}, but the ranks are 0 to {} and it runs on rank {rank}",
        verb(.send),
        ranks - 1
    )]
    NoSuchPeer {
        /// The file of the node.
        file: String,
        /// The node's id.
        node: u64,
        /// A send (else a receive).
        send: bool,
        /// The rank it names.
        peer: usize,
        /// The ranks there are.
        ranks: usize,
        /// The node's rank.
        rank: usize,
    },
    /// The `k`-th collectives of a group differ on two of its ranks.
    #[error(
        "process group {group}: collective {k} is {} of {} B on rank {} ({} node {}) but {} of {} \
         B on rank {} ({} node {})",
        comm_name(first.comm), first.bytes, first.rank, first.file, first.node,
        comm_name(other.comm), other.bytes, other.rank, other.file, other.node
    )]
    CollectiveMismatch {
        /// The group.
        group: GroupLabel,
        /// The collective's place in the group's sequence.
        k: usize,
        /// The group's first rank's collective.
        first: Box<CallAt>,
        /// The other rank's.
        other: Box<CallAt>,
    },
    /// Two ranks of a group issue different numbers of collectives: the
    /// first unmatched one waits forever.
    #[error(
        "process group {group}: rank {} has {count} collectives, rank {short} has {matched}: {} \
         node {} ({}) waits for a partner on rank {short} (deadlock)",
        extra.rank, extra.file, extra.node, comm_name(extra.comm)
    )]
    CollectiveCount {
        /// The group.
        group: GroupLabel,
        /// The longer rank's first unmatched collective.
        extra: Box<CallAt>,
        /// The longer rank's collectives.
        count: usize,
        /// The shorter rank.
        short: usize,
        /// The shorter rank's collectives.
        matched: usize,
    },
    /// A send and its matching receive of different sizes.
    #[error(
        "{src_file} node {send} sends {bytes} B to rank {dst} with tag {tag}, but its matching \
         recv ({dst_file} node {recv}) expects {expected} B"
    )]
    P2pBytes {
        /// The sender's file.
        src_file: String,
        /// The send's id.
        send: u64,
        /// Its bytes.
        bytes: u64,
        /// The receiving rank.
        dst: usize,
        /// The tag.
        tag: u64,
        /// The receiver's file.
        dst_file: String,
        /// The receive's id.
        recv: u64,
        /// Its bytes.
        expected: u64,
    },
    /// A send no receive matches.
    #[error(
        "send without its recv: {file} node {node} (rank {src}) sends to rank {dst} with tag \
         {tag}, but rank {dst} has no matching recv from rank {src} with tag {tag} (deadlock)"
    )]
    SendWithoutRecv {
        /// The sender's file.
        file: String,
        /// The send's id.
        node: u64,
        /// The sending rank.
        src: usize,
        /// The receiving rank.
        dst: usize,
        /// The tag.
        tag: u64,
    },
    /// A receive no send matches.
    #[error(
        "recv without its send: {file} node {node} (rank {dst}) receives from rank {src} with \
         tag {tag}, but rank {src} has no matching send to rank {dst} with tag {tag} (deadlock)"
    )]
    RecvWithoutSend {
        /// The receiver's file.
        file: String,
        /// The receive's id.
        node: u64,
        /// The sending rank.
        src: usize,
        /// The receiving rank.
        dst: usize,
        /// The tag.
        tag: u64,
    },
    /// Nodes that wait on each other once matched sets are joined: the
    /// first eight, and how many more.
    #[error("deadlock: these nodes wait on each other: {}{}", list(.nodes), more_text(.more))]
    Deadlock {
        /// The first eight nodes of the cycle.
        nodes: Vec<NodeAt>,
        /// The nodes left out.
        more: usize,
    },
}

fn verb(send: &bool) -> &'static str {
    match send {
        true => "sends to",
        false => "receives from",
    }
}

fn list(nodes: &[NodeAt]) -> String {
    let text: Vec<String> = nodes.iter().map(NodeAt::to_string).collect();
    text.join(", ")
}

fn more_text(more: &usize) -> String {
    match *more {
        0 => String::new(),
        more => format!(" and {more} more"),
    }
}

/// A send or receive: its rank and node index.
type End = (usize, u64);

/// One rank's collective, as matched.
#[derive(Debug, Clone, Copy)]
struct Call {
    rank: usize,
    node: usize,
    comm: CommType,
    bytes: u64,
}

/// Checks `graphs` (rank `r`'s at index `r`, read from `files[r]`) against
/// each other with `comm_groups` (`pg_name` → ranks; empty: every
/// `pg_name` is every rank). The error is one line.
pub fn check(
    files: &[String],
    graphs: &[RankGraph],
    comm_groups: &BTreeMap<String, Vec<usize>>,
) -> Result<World, CheckError> {
    let n = graphs.len();
    let mut world = World {
        names_as_world: comm_groups.is_empty(),
        ..World::default()
    };
    let mut sequences: BTreeMap<String, BTreeMap<usize, Vec<Call>>> = BTreeMap::new();
    let mut p2p: P2p = BTreeMap::new();
    for (rank, graph) in graphs.iter().enumerate() {
        let file = || files[rank].clone();
        for (i, node) in graph.nodes.iter().enumerate() {
            match &node.op {
                Op::Collective { comm, bytes, group } => {
                    let (key, ranks) =
                        resolve(group.as_deref(), comm_groups, n).map_err(|source| {
                            CheckError::Group {
                                file: file(),
                                node: node.id,
                                source,
                            }
                        })?;
                    if !ranks.contains(&rank) {
                        return Err(CheckError::NotMember {
                            file: file(),
                            node: node.id,
                            group: key,
                            ranks,
                            rank,
                        });
                    }
                    world.groups.insert(key.clone(), ranks);
                    let call = Call {
                        rank,
                        node: i,
                        comm: *comm,
                        bytes: *bytes,
                    };
                    sequences
                        .entry(key)
                        .or_default()
                        .entry(rank)
                        .or_default()
                        .push(call);
                }
                Op::Send { .. } | Op::Recv { .. } => {
                    file_p2p(&mut p2p, &files[rank], node, rank, i, n)?
                }
                _ => {}
            }
        }
    }
    let mut merged = Merged::new(graphs);
    for (name, by_rank) in &sequences {
        match_collectives(
            files,
            graphs,
            name,
            &world.groups[name],
            by_rank,
            &mut merged,
        )?;
    }
    for (&(src, dst, tag), [sends, recvs]) in &p2p {
        match_p2p(files, graphs, (src, dst, tag), (sends, recvs), &mut merged)?;
    }
    merged.check_deadlock(files, graphs)?;
    Ok(world)
}

/// The sends (side 0) and receives (side 1) by (source, destination, tag).
type P2p = BTreeMap<(usize, usize, u64), [Vec<End>; 2]>;

/// Files the send or receive `node` (index `i` of rank `rank`'s graph, read
/// from `file`, of `n` ranks) under its (source, destination, tag).
fn file_p2p(
    p2p: &mut P2p,
    file: &str,
    node: &EtNode,
    rank: usize,
    i: usize,
    n: usize,
) -> Result<(), CheckError> {
    let (Op::Send { peer, tag, .. } | Op::Recv { peer, tag, .. }) = &node.op else {
        unreachable!("file_p2p is given sends and receives only")
    };
    let send = matches!(node.op, Op::Send { .. });
    if *peer >= n || *peer == rank {
        return Err(CheckError::NoSuchPeer {
            file: file.to_owned(),
            node: node.id,
            send,
            peer: *peer,
            ranks: n,
            rank,
        });
    }
    let (key, side) = match send {
        true => ((rank, *peer, *tag), 0),
        false => ((*peer, rank, *tag), 1),
    };
    p2p.entry(key).or_default()[side].push((rank, i as u64));
    Ok(())
}

/// The name and ranks of process group `name`.
fn resolve(
    name: Option<&str>,
    comm_groups: &BTreeMap<String, Vec<usize>>,
    n: usize,
) -> Result<(String, Vec<usize>), GroupError> {
    let every = || (0..n).collect::<Vec<_>>();
    let Some(name) = name else {
        return Ok((String::new(), every()));
    };
    if comm_groups.is_empty() {
        return Ok((String::new(), every()));
    }
    let ranks = comm_groups.get(name).ok_or_else(|| GroupError::Unknown {
        name: name.to_owned(),
        known: comm_groups.keys().cloned().collect(),
    })?;
    if let Some(&rank) = ranks.iter().find(|&&r| r >= n) {
        return Err(GroupError::NoSuchRank {
            name: name.to_owned(),
            rank,
            ranks: n,
        });
    }
    Ok((name.to_owned(), ranks.clone()))
}

/// The collectives of group `name` on each of its ranks, one by one.
fn match_collectives(
    files: &[String],
    graphs: &[RankGraph],
    name: &str,
    ranks: &[usize],
    by_rank: &BTreeMap<usize, Vec<Call>>,
    merged: &mut Merged,
) -> Result<(), CheckError> {
    let label = || GroupLabel(name.to_owned());
    let empty = Vec::new();
    let first = ranks[0];
    let reference = by_rank.get(&first).unwrap_or(&empty);
    let at = |c: &Call| {
        Box::new(CallAt {
            rank: c.rank,
            file: files[c.rank].clone(),
            node: graphs[c.rank].nodes[c.node].id,
            comm: c.comm,
            bytes: c.bytes,
        })
    };
    for &rank in &ranks[1..] {
        let calls = by_rank.get(&rank).unwrap_or(&empty);
        for (k, (a, b)) in reference.iter().zip(calls).enumerate() {
            if (a.comm, a.bytes) != (b.comm, b.bytes) {
                return Err(CheckError::CollectiveMismatch {
                    group: label(),
                    k,
                    first: at(a),
                    other: at(b),
                });
            }
            merged.union((a.rank, a.node), (b.rank, b.node));
        }
        if calls.len() != reference.len() {
            let (long, short) = match calls.len() > reference.len() {
                true => ((rank, calls), first),
                false => ((first, reference), rank),
            };
            let matched = short_len(calls, reference);
            return Err(CheckError::CollectiveCount {
                group: label(),
                extra: at(&long.1[matched]),
                count: long.1.len(),
                short,
                matched,
            });
        }
    }
    for calls in by_rank.values() {
        for pair in calls.windows(2) {
            merged.order((pair[0].rank, pair[0].node), (pair[1].rank, pair[1].node));
        }
    }
    Ok(())
}

fn short_len(a: &[Call], b: &[Call]) -> usize {
    a.len().min(b.len())
}

/// The sends from `src` to `dst` with `tag` against the receives.
fn match_p2p(
    files: &[String],
    graphs: &[RankGraph],
    (src, dst, tag): (usize, usize, u64),
    (sends, recvs): (&[End], &[End]),
    merged: &mut Merged,
) -> Result<(), CheckError> {
    let bytes = |(rank, node): (usize, u64)| match graphs[rank].nodes[node as usize].op {
        Op::Send { bytes, .. } | Op::Recv { bytes, .. } => bytes,
        _ => 0,
    };
    let id = |(rank, node): (usize, u64)| graphs[rank].nodes[node as usize].id;
    for (&s, &r) in sends.iter().zip(recvs) {
        if bytes(s) != bytes(r) {
            return Err(CheckError::P2pBytes {
                src_file: files[src].clone(),
                send: id(s),
                bytes: bytes(s),
                dst,
                tag,
                dst_file: files[dst].clone(),
                recv: id(r),
                expected: bytes(r),
            });
        }
        merged.union((s.0, s.1 as usize), (r.0, r.1 as usize));
    }
    if sends.len() > recvs.len() {
        let s = sends[recvs.len()];
        return Err(CheckError::SendWithoutRecv {
            file: files[src].clone(),
            node: id(s),
            src,
            dst,
            tag,
        });
    }
    if recvs.len() > sends.len() {
        let r = recvs[sends.len()];
        return Err(CheckError::RecvWithoutSend {
            file: files[dst].clone(),
            node: id(r),
            src,
            dst,
            tag,
        });
    }
    Ok(())
}

/// Every node of every rank, matched sets joined (union-find), with the
/// extra ordering edges of the group sequences.
struct Merged {
    offsets: Vec<usize>,
    parent: Vec<usize>,
    extra: Vec<(usize, usize)>,
}

impl Merged {
    fn new(graphs: &[RankGraph]) -> Merged {
        let mut offsets = vec![0];
        for g in graphs {
            offsets.push(offsets.last().unwrap() + g.nodes.len());
        }
        let total = *offsets.last().unwrap();
        Merged {
            offsets,
            parent: (0..total).collect(),
            extra: Vec::new(),
        }
    }

    fn flat(&self, (rank, node): (usize, usize)) -> usize {
        self.offsets[rank] + node
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn union(&mut self, a: (usize, usize), b: (usize, usize)) {
        let (a, b) = (self.flat(a), self.flat(b));
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }

    /// `later` waits for `earlier`.
    fn order(&mut self, earlier: (usize, usize), later: (usize, usize)) {
        let edge = (self.flat(earlier), self.flat(later));
        self.extra.push(edge);
    }

    /// A cycle of the merged graph, named by its nodes.
    fn check_deadlock(mut self, files: &[String], graphs: &[RankGraph]) -> Result<(), CheckError> {
        let total = self.parent.len();
        let reps: Vec<usize> = (0..total).map(|i| self.find(i)).collect();
        let mut deps: Vec<Vec<usize>> = vec![Vec::new(); total];
        let mut add = |from: usize, to: usize| {
            let (from, to) = (reps[from], reps[to]);
            deps[to].push(from);
        };
        for (rank, g) in graphs.iter().enumerate() {
            for (i, node) in g.nodes.iter().enumerate() {
                for &d in &node.deps {
                    add(self.offsets[rank] + d, self.offsets[rank] + i);
                }
            }
        }
        for &(a, b) in &self.extra {
            add(a, b);
        }
        for d in &mut deps {
            d.sort_unstable();
            d.dedup();
        }
        let Some(cycle) = find_cycle(total, |i| &deps[i]) else {
            return Ok(());
        };
        let locate = |flat: usize| {
            let rank = self.offsets.partition_point(|&o| o <= flat) - 1;
            (rank, flat - self.offsets[rank])
        };
        let mut named = Vec::new();
        for rep in cycle {
            for flat in (0..total).filter(|&i| reps[i] == rep) {
                let (rank, node) = locate(flat);
                named.push(describe(files, rank, &graphs[rank].nodes[node]));
            }
        }
        let more = named.len().saturating_sub(8);
        named.truncate(8);
        Err(CheckError::Deadlock { nodes: named, more })
    }
}

fn describe(files: &[String], rank: usize, node: &EtNode) -> NodeAt {
    NodeAt {
        rank,
        file: files[rank].clone(),
        node: node.id,
        name: super::graph::shown(&node.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chakra::graph::Warnings;

    fn graph(ops: Vec<(Op, Vec<usize>)>) -> RankGraph {
        let nodes = ops
            .into_iter()
            .enumerate()
            .map(|(i, (op, deps))| EtNode {
                id: 10 + i as u64,
                name: format!("n{i}"),
                op,
                duration_micros: 0,
                deps,
            })
            .collect();
        RankGraph {
            nodes,
            warnings: Warnings::default(),
        }
    }

    fn files(n: usize) -> Vec<String> {
        (0..n).map(|r| format!("t.{r}.et")).collect()
    }

    fn send(peer: usize) -> Op {
        Op::Send {
            peer,
            tag: 0,
            bytes: 64,
        }
    }

    fn recv(peer: usize) -> Op {
        Op::Recv {
            peer,
            tag: 0,
            bytes: 64,
        }
    }

    fn all_reduce(bytes: u64, group: Option<&str>) -> Op {
        Op::Collective {
            comm: CommType::AllReduce,
            bytes,
            group: group.map(str::to_owned),
        }
    }

    #[test]
    fn matched_exchanges_pass_and_crossed_receives_deadlock() {
        let none = BTreeMap::new();
        let ok = [
            graph(vec![(send(1), vec![]), (recv(1), vec![0])]),
            graph(vec![(recv(0), vec![]), (send(0), vec![0])]),
        ];
        assert!(check(&files(2), &ok, &none).is_ok());
        let crossed = [
            graph(vec![(recv(1), vec![]), (send(1), vec![0])]),
            graph(vec![(recv(0), vec![]), (send(0), vec![0])]),
        ];
        let error = check(&files(2), &crossed, &none).unwrap_err().to_string();
        assert!(
            error.starts_with("deadlock: these nodes wait on each other: rank 0 (t.0.et) node 10"),
            "{error}"
        );
        assert!(error.contains("rank 1 (t.1.et) node 11"), "{error}");
    }

    #[test]
    fn an_unmatched_send_names_its_node_and_both_ranks() {
        let lonely = [graph(vec![(send(1), vec![])]), graph(vec![])];
        let error = check(&files(2), &lonely, &BTreeMap::new()).unwrap_err();
        assert!(matches!(
            error,
            CheckError::SendWithoutRecv {
                node: 10,
                src: 0,
                dst: 1,
                ..
            }
        ));
        assert_eq!(
            error.to_string(),
            "send without its recv: t.0.et node 10 (rank 0) sends to rank 1 with tag 0, but \
             rank 1 has no matching recv from rank 0 with tag 0 (deadlock)"
        );
    }

    #[test]
    fn groups_and_peers_outside_the_traces_are_named() {
        let groups = BTreeMap::from([("a".to_owned(), vec![0, 5])]);
        let one = |g: &str| graph(vec![(all_reduce(8, Some(g)), vec![])]);
        let error = check(&files(2), &[one("b"), one("b")], &groups).unwrap_err();
        assert_eq!(
            error.to_string(),
            "t.0.et: node 10: pg_name `b` is not in the comm groups (known: a)"
        );
        let error = check(&files(2), &[one("a"), one("a")], &groups).unwrap_err();
        assert!(matches!(
            error,
            CheckError::Group {
                source: GroupError::NoSuchRank {
                    rank: 5,
                    ranks: 2,
                    ..
                },
                ..
            }
        ));
        let error = check(
            &files(2),
            &[graph(vec![(send(0), vec![])]), graph(vec![])],
            &groups,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "t.0.et: node 10: sends to rank 0, but the ranks are 0 to 1 and it runs on rank 0"
        );
    }

    #[test]
    fn collectives_match_per_group_in_order() {
        let groups = BTreeMap::from([("a".to_owned(), vec![0, 1]), ("b".to_owned(), vec![2, 3])]);
        let mine = |g: &str| graph(vec![(all_reduce(8, Some(g)), vec![])]);
        let ok = [mine("a"), mine("a"), mine("b"), mine("b")];
        let world = check(&files(4), &ok, &groups).unwrap();
        assert_eq!(world.groups["b"], [2, 3]);
        let wrong = [
            mine("a"),
            mine("a"),
            mine("b"),
            graph(vec![(all_reduce(16, Some("b")), vec![])]),
        ];
        let error = check(&files(4), &wrong, &groups).unwrap_err();
        assert_eq!(
            error.to_string(),
            "process group `b`: collective 0 is all_reduce of 8 B on rank 2 (t.2.et node 10) but \
             all_reduce of 16 B on rank 3 (t.3.et node 10)"
        );
        let outside = [mine("a"), mine("b"), mine("b"), mine("b")];
        let error = check(&files(4), &outside, &groups).unwrap_err().to_string();
        assert!(error.contains("does not include rank 1"), "{error}");
        let missing = [mine("a"), graph(vec![]), mine("b"), mine("b")];
        let error = check(&files(4), &missing, &groups).unwrap_err().to_string();
        assert!(
            error.contains("rank 0 has 1 collectives, rank 1 has 0"),
            "{error}"
        );
    }
}
