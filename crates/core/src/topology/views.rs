//! Views of the compiled graph for `kernbench topo --view`: the whole
//! system with SIPs collapsed, one SIP with its cubes collapsed, or one
//! cube's routers and attachments; rendered as text, Graphviz DOT or JSON.
//!
//! A view groups nodes (a collapsed SIP or cube is one group) and shows one
//! line per physical link between two groups, with its kind, how many links
//! it stands for and their per-direction parameters. It reads the machine
//! only; it knows nothing of routes or time.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde::Serialize;

use super::link::{LinkFigures, LinkParams};
use super::machine::{EdgeKind, Machine, Node, NodeKind};
use super::machine_grids::IO_CUBE;
use super::naming;

/// What a view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The host, the SIPs (collapsed) and the links between them.
    System,
    /// One SIP: its cubes (collapsed), PCIe endpoint, IO_CPU and ports.
    Sip(u32),
    /// One cube of one SIP: routers, attachments, NoC edges.
    Cube {
        /// The SIP.
        sip: u32,
        /// The cube within it.
        cube: u32,
    },
}

/// A scope that names something the machine does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// No such SIP.
    #[error("--sip {sip}: the machine has {count} SIPs (0..{count})")]
    NoSuchSip {
        /// Asked for.
        sip: u32,
        /// SIPs in the machine.
        count: u32,
    },
    /// No such cube.
    #[error("--cube {cube}: a SIP has {count} cubes (0..{count})")]
    NoSuchCube {
        /// Asked for.
        cube: u32,
        /// Cubes per SIP.
        count: u32,
    },
}

/// Whole-machine counts shown with every view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Nodes in the machine.
    pub nodes: usize,
    /// Directed edges in the machine.
    pub edges: usize,
    /// Nodes per kind.
    pub node_kinds: BTreeMap<NodeKind, usize>,
    /// Directed edges per kind.
    pub edge_kinds: BTreeMap<EdgeKind, usize>,
}

/// One group of the view: a node, or a collapsed SIP or cube.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViewNode {
    /// The node's or group's name.
    pub name: String,
    /// A node kind, or `sip` / `cube` for a collapsed group.
    pub kind: String,
    /// Machine nodes inside.
    pub members: usize,
}

/// The physical links between two groups of one kind and parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViewLink {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// What the links are.
    pub kind: EdgeKind,
    /// How many physical (full-duplex) links this line stands for.
    pub links: usize,
    /// Per-direction parameters of each.
    pub params: LinkFigures,
}

/// One view of the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GraphView {
    /// What is shown.
    pub title: String,
    /// Counts of the whole machine.
    pub machine: Counts,
    /// The cube's NoC picture (cube view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,
    /// Groups, in node order.
    pub nodes: Vec<ViewNode>,
    /// Links between groups, in edge order.
    pub links: Vec<ViewLink>,
}

/// A group: its name, kind and whether it lies inside the scope.
struct Group {
    name: String,
    kind: String,
    inside: bool,
}

impl GraphView {
    /// The view of `machine` at `scope`.
    pub fn new(machine: &Machine, scope: Scope) -> Result<GraphView, ViewError> {
        check(machine, scope)?;
        let groups: Vec<Group> = machine.nodes().iter().map(|n| group(n, scope)).collect();
        let links = links(machine, &groups);
        let nodes = nodes(&groups, &links);
        Ok(GraphView {
            title: title(machine, scope),
            machine: counts(machine),
            layout: matches!(scope, Scope::Cube { .. }).then(|| machine.layout().picture()),
            nodes,
            links,
        })
    }

    /// Graphviz DOT: an undirected graph, one edge per view link.
    pub fn to_dot(&self) -> String {
        let mut out = format!("graph {} {{\n", quote(&self.title));
        out.push_str("  graph [overlap=false, fontname=\"Helvetica\"];\n");
        out.push_str("  node [fontname=\"Helvetica\", fontsize=10];\n");
        out.push_str("  edge [fontname=\"Helvetica\", fontsize=8];\n");
        for node in &self.nodes {
            let shape = match node.kind.as_str() {
                "router" => "box",
                "sip" | "cube" => "box3d",
                _ => "ellipse",
            };
            let label = format!("{}\\n{}", node.name, node.kind);
            let _ = writeln!(
                out,
                "  {} [shape={shape}, label={}];",
                quote(&node.name),
                quote(&label)
            );
        }
        for link in &self.links {
            let _ = writeln!(
                out,
                "  {} -- {} [label={}];",
                quote(&link.a),
                quote(&link.b),
                quote(&link.label())
            );
        }
        out.push_str("}\n");
        out
    }
}

impl ViewLink {
    /// `kind xN bandwidth latency`, as on a DOT edge.
    fn label(&self) -> String {
        let count = if self.links > 1 {
            format!(" x{}", self.links)
        } else {
            String::new()
        };
        format!(
            "{}{count} {} {}",
            self.kind, self.params.bandwidth, self.params.latency
        )
    }
}

fn check(machine: &Machine, scope: Scope) -> Result<(), ViewError> {
    let (sips, cubes) = (machine.sip_count(), machine.cubes_per_sip());
    let sip = match scope {
        Scope::System => return Ok(()),
        Scope::Sip(sip) | Scope::Cube { sip, .. } => sip,
    };
    if sip >= sips {
        return Err(ViewError::NoSuchSip { sip, count: sips });
    }
    match scope {
        Scope::Cube { cube, .. } if cube >= cubes => {
            Err(ViewError::NoSuchCube { cube, count: cubes })
        }
        _ => Ok(()),
    }
}

fn title(machine: &Machine, scope: Scope) -> String {
    let layout = machine.layout();
    match scope {
        Scope::System => format!(
            "system: {} SIPs ({}), host",
            machine.sip_count(),
            machine.spec().system().sips.name()
        ),
        Scope::Sip(sip) => format!(
            "{}: {} cubes ({} mesh), IO cube {IO_CUBE}",
            naming::sip(sip),
            machine.cubes_per_sip(),
            machine.spec().sip().cube_mesh
        ),
        Scope::Cube { sip, cube } => format!(
            "{}: {}x{} NoC routers, HBM zone rows {}..{}",
            naming::cube(sip, cube),
            layout.width(),
            layout.height(),
            layout.hbm_zone().start,
            layout.hbm_zone().end
        ),
    }
}

/// The group `node` falls in at `scope`.
fn group(node: &Node, scope: Scope) -> Group {
    let own = || (node.name.clone(), node.kind.name().to_owned());
    let sip_level = matches!(
        node.kind,
        NodeKind::PcieEp | NodeKind::IoCpu | NodeKind::SipPort
    );
    let (Some(sip), Some(cube)) = (node.sip, node.cube) else {
        return Group {
            name: naming::HOST.to_owned(),
            kind: NodeKind::Host.name().to_owned(),
            inside: scope == Scope::System,
        };
    };
    let collapsed_sip = || (naming::sip(sip), "sip".to_owned());
    let collapsed_cube = || (naming::cube(sip, cube), "cube".to_owned());
    let ((name, kind), inside) = match scope {
        Scope::System => (collapsed_sip(), true),
        Scope::Sip(s) if s != sip => (collapsed_sip(), false),
        Scope::Sip(_) if sip_level => (own(), true),
        Scope::Sip(_) => (collapsed_cube(), true),
        Scope::Cube { sip: s, .. } if s != sip => (collapsed_sip(), false),
        Scope::Cube { cube: c, .. } if c == cube => (own(), true),
        Scope::Cube { .. } if sip_level => (own(), false),
        Scope::Cube { .. } => (collapsed_cube(), false),
    };
    Group { name, kind, inside }
}

/// The links between different groups with at least one end inside.
fn links(machine: &Machine, groups: &[Group]) -> Vec<ViewLink> {
    type Key = (String, String, EdgeKind, LinkParams);
    let mut order: Vec<Key> = Vec::new();
    let mut edges: BTreeMap<usize, usize> = BTreeMap::new();
    for edge in machine.edges() {
        let (a, b) = (&groups[edge.from.index()], &groups[edge.to.index()]);
        if a.name == b.name || !(a.inside || b.inside) {
            continue;
        }
        let (a, b) = if edge.from < edge.to { (a, b) } else { (b, a) };
        let key = (
            a.name.clone(),
            b.name.clone(),
            edge.kind,
            *machine.link_params(edge),
        );
        let at = order.iter().position(|k| *k == key).unwrap_or_else(|| {
            order.push(key);
            order.len() - 1
        });
        *edges.entry(at).or_default() += 1;
    }
    order
        .into_iter()
        .enumerate()
        .map(|(i, (a, b, kind, params))| ViewLink {
            a,
            b,
            kind,
            links: edges.get(&i).copied().unwrap_or(0) / 2,
            params: params.figures(),
        })
        .collect()
}

/// The groups inside the scope, and those outside that a link reaches.
fn nodes(groups: &[Group], links: &[ViewLink]) -> Vec<ViewNode> {
    let linked = |name: &str| links.iter().any(|l| l.a == name || l.b == name);
    let mut members: BTreeMap<&str, usize> = BTreeMap::new();
    let mut nodes: Vec<ViewNode> = Vec::new();
    for group in groups {
        let count = members.entry(&group.name).or_default();
        *count += 1;
        if *count == 1 && (group.inside || linked(&group.name)) {
            nodes.push(ViewNode {
                name: group.name.clone(),
                kind: group.kind.clone(),
                members: 0,
            });
        }
    }
    for node in &mut nodes {
        node.members = members.get(node.name.as_str()).copied().unwrap_or(0);
    }
    nodes
}

fn counts(machine: &Machine) -> Counts {
    let mut node_kinds = BTreeMap::new();
    for node in machine.nodes() {
        *node_kinds.entry(node.kind).or_default() += 1;
    }
    let mut edge_kinds = BTreeMap::new();
    for edge in machine.edges() {
        *edge_kinds.entry(edge.kind).or_default() += 1;
    }
    Counts {
        nodes: machine.nodes().len(),
        edges: machine.edges().len(),
        node_kinds,
        edge_kinds,
    }
}

/// `text` as a DOT string literal (names hold no backslashes; a label's
/// `\n` is DOT's line break).
fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\\\""))
}

impl fmt::Display for GraphView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.title)?;
        let m = &self.machine;
        writeln!(
            f,
            "machine: {} nodes, {} directed edges ({} links)",
            m.nodes,
            m.edges,
            m.edges / 2
        )?;
        if let Some(layout) = &self.layout {
            writeln!(f, "\n{layout}")?;
        }
        writeln!(f, "\nnodes ({}):", self.nodes.len())?;
        for node in &self.nodes {
            writeln!(
                f,
                "  {:<28} {:<10} {:>5}",
                node.name, node.kind, node.members
            )?;
        }
        writeln!(f, "\nlinks ({}), per direction:", self.links.len())?;
        for link in &self.links {
            let p = &link.params;
            writeln!(
                f,
                "  {:<28} -- {:<28} {:<9} x{:<3} {:>11} {:>5} {:>8} {:>7} B",
                link.a,
                link.b,
                link.kind.name(),
                link.links,
                p.bandwidth,
                p.efficiency,
                p.latency,
                p.max_payload_bytes
            )?;
        }
        Ok(())
    }
}
