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
) -> Result<World, String> {
    let n = graphs.len();
    let mut world = World {
        names_as_world: comm_groups.is_empty(),
        ..World::default()
    };
    let mut sequences: BTreeMap<String, BTreeMap<usize, Vec<Call>>> = BTreeMap::new();
    let mut p2p: BTreeMap<(usize, usize, u64), [Vec<End>; 2]> = BTreeMap::new();
    for (rank, graph) in graphs.iter().enumerate() {
        let at = |i: usize| format!("{}: node {}", files[rank], graph.nodes[i].id);
        for (i, node) in graph.nodes.iter().enumerate() {
            match &node.op {
                Op::Collective { comm, bytes, group } => {
                    let (key, ranks) = resolve(group.as_deref(), comm_groups, n)
                        .map_err(|e| format!("{}: {e}", at(i)))?;
                    if !ranks.contains(&rank) {
                        return Err(format!(
                            "{}: a collective of process group `{key}` (ranks {ranks:?}), which \
                             does not include rank {rank}",
                            at(i)
                        ));
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
                Op::Send { peer, tag, .. } | Op::Recv { peer, tag, .. } => {
                    let send = matches!(node.op, Op::Send { .. });
                    if *peer >= n || *peer == rank {
                        let verb = if send { "sends to" } else { "receives from" };
                        return Err(format!(
                            "{}: {verb} rank {peer}, but the ranks are 0 to {} and it runs on \
                             rank {rank}",
                            at(i),
                            n - 1
                        ));
                    }
                    let (key, side) = match send {
                        true => ((rank, *peer, *tag), 0),
                        false => ((*peer, rank, *tag), 1),
                    };
                    p2p.entry(key).or_default()[side].push((rank, i as u64));
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

/// The name and ranks of process group `name`.
fn resolve(
    name: Option<&str>,
    comm_groups: &BTreeMap<String, Vec<usize>>,
    n: usize,
) -> Result<(String, Vec<usize>), String> {
    let every = || (0..n).collect::<Vec<_>>();
    let Some(name) = name else {
        return Ok((String::new(), every()));
    };
    if comm_groups.is_empty() {
        return Ok((String::new(), every()));
    }
    let ranks = comm_groups.get(name).ok_or_else(|| {
        let known: Vec<&str> = comm_groups.keys().map(String::as_str).collect();
        format!(
            "pg_name `{name}` is not in the comm groups (known: {})",
            known.join(", ")
        )
    })?;
    if let Some(&bad) = ranks.iter().find(|&&r| r >= n) {
        return Err(format!(
            "comm group `{name}` names rank {bad}, but the ranks are 0 to {}",
            n - 1
        ));
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
) -> Result<(), String> {
    let label = match name {
        "" => "of every rank".to_owned(),
        name => format!("`{name}`"),
    };
    let empty = Vec::new();
    let first = ranks[0];
    let reference = by_rank.get(&first).unwrap_or(&empty);
    let node_id = |c: &Call| graphs[c.rank].nodes[c.node].id;
    for &rank in &ranks[1..] {
        let calls = by_rank.get(&rank).unwrap_or(&empty);
        for (k, (a, b)) in reference.iter().zip(calls).enumerate() {
            if (a.comm, a.bytes) != (b.comm, b.bytes) {
                return Err(format!(
                    "process group {label}: collective {k} is {} of {} B on rank {first} ({} node \
                     {}) but {} of {} B on rank {rank} ({} node {})",
                    comm_name(a.comm),
                    a.bytes,
                    files[first],
                    node_id(a),
                    comm_name(b.comm),
                    b.bytes,
                    files[rank],
                    node_id(b)
                ));
            }
            merged.union((a.rank, a.node), (b.rank, b.node));
        }
        if calls.len() != reference.len() {
            let (long, short) = match calls.len() > reference.len() {
                true => ((rank, calls), first),
                false => ((first, reference), rank),
            };
            let extra = long.1[short_len(calls, reference)];
            return Err(format!(
                "process group {label}: rank {} has {} collectives, rank {short} has {}: {} node \
                 {} ({}) waits for a partner on rank {short} (deadlock)",
                long.0,
                long.1.len(),
                calls.len().min(reference.len()),
                files[long.0],
                node_id(&extra),
                comm_name(extra.comm)
            ));
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
) -> Result<(), String> {
    let bytes = |(rank, node): (usize, u64)| match graphs[rank].nodes[node as usize].op {
        Op::Send { bytes, .. } | Op::Recv { bytes, .. } => bytes,
        _ => 0,
    };
    let id = |(rank, node): (usize, u64)| graphs[rank].nodes[node as usize].id;
    for (&s, &r) in sends.iter().zip(recvs) {
        if bytes(s) != bytes(r) {
            return Err(format!(
                "{} node {} sends {} B to rank {dst} with tag {tag}, but its matching recv ({} \
                 node {}) expects {} B",
                files[src],
                id(s),
                bytes(s),
                files[dst],
                id(r),
                bytes(r)
            ));
        }
        merged.union((s.0, s.1 as usize), (r.0, r.1 as usize));
    }
    if sends.len() > recvs.len() {
        let s = sends[recvs.len()];
        return Err(format!(
            "send without its recv: {} node {} (rank {src}) sends to rank {dst} with tag {tag}, \
             but rank {dst} has no matching recv from rank {src} with tag {tag} (deadlock)",
            files[src],
            id(s)
        ));
    }
    if recvs.len() > sends.len() {
        let r = recvs[sends.len()];
        return Err(format!(
            "recv without its send: {} node {} (rank {dst}) receives from rank {src} with tag \
             {tag}, but rank {src} has no matching send to rank {dst} with tag {tag} (deadlock)",
            files[dst],
            id(r)
        ));
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
    fn check_deadlock(mut self, files: &[String], graphs: &[RankGraph]) -> Result<(), String> {
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
        let tail = match more {
            0 => String::new(),
            more => format!(" and {more} more"),
        };
        Err(format!(
            "deadlock: these nodes wait on each other: {}{tail}",
            named.join(", ")
        ))
    }
}

fn describe(files: &[String], rank: usize, node: &EtNode) -> String {
    format!(
        "rank {rank} ({}) node {} `{}`",
        files[rank], node.id, node.name
    )
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
        let error = check(&files(2), &crossed, &none).unwrap_err();
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
        assert_eq!(
            error,
            "send without its recv: t.0.et node 10 (rank 0) sends to rank 1 with tag 0, but \
             rank 1 has no matching recv from rank 0 with tag 0 (deadlock)"
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
            error,
            "process group `b`: collective 0 is all_reduce of 8 B on rank 2 (t.2.et node 10) but \
             all_reduce of 16 B on rank 3 (t.3.et node 10)"
        );
        let outside = [mine("a"), mine("b"), mine("b"), mine("b")];
        let error = check(&files(4), &outside, &groups).unwrap_err();
        assert!(error.contains("does not include rank 1"), "{error}");
        let missing = [mine("a"), graph(vec![]), mine("b"), mine("b")];
        let error = check(&files(4), &missing, &groups).unwrap_err();
        assert!(
            error.contains("rank 0 has 1 collectives, rank 1 has 0"),
            "{error}"
        );
    }
}
