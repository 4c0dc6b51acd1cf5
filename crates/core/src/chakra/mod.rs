//! Chakra execution traces (MLCommons Chakra, the input ASTRA-sim and
//! SimAI read): the protobuf messages ([`schema`]), the file format
//! ([`io`]), one rank's typed, checked graph ([`graph`]), the ranks checked
//! against each other ([`world`]) and the traces `kernbench chakra-gen`
//! writes ([`generate`]). Running them on the machine is
//! `workloads::et` (`kernbench run --bench chakra --et PREFIX`).
//!
//! A set of traces is the files `PREFIX.0.et … PREFIX.{N-1}.et`, one per
//! rank (rank = SIP), and optionally `PREFIX.comm_groups.json`, ASTRA-sim's
//! process-group file: an object mapping each `pg_name` to its ranks.
//!
//! Knows files and graphs; nothing of the machine, the runtime or time.

pub mod generate;
pub mod graph;
pub mod io;
pub mod schema;
pub mod world;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use graph::GraphError;
pub use graph::{EtNode, Op, RankGraph, Warnings};
pub use schema::CommType;
pub use world::{CheckError, World};

/// The most bytes a comm-groups file may hold (16 MiB).
pub const MAX_GROUPS_BYTES: u64 = 16 << 20;

/// Why a set of traces cannot be read or run; one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `--et` names no file prefix (a directory, `..`).
    #[error("--et {}: not a file prefix", prefix.display())]
    NotAPrefix {
        /// The prefix given.
        prefix: PathBuf,
    },
    /// The prefix's directory cannot be listed.
    #[error("--et {}: cannot list {}: {source}", prefix.display(), dir.display())]
    List {
        /// The prefix given.
        prefix: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No `PREFIX.N.et` at all.
    #[error("{}: missing (no rank files {}.N.et)", rank_file(prefix, 0).display(), prefix.display())]
    NoRankFiles {
        /// The prefix given.
        prefix: PathBuf,
    },
    /// A rank file below the highest one is missing.
    #[error(
        "{}: missing (rank {rank} of {ranks} ranks: {} is the highest)",
        rank_file(prefix, *rank).display(),
        rank_file(prefix, ranks - 1).display()
    )]
    MissingRank {
        /// The prefix given.
        prefix: PathBuf,
        /// The missing rank.
        rank: usize,
        /// The ranks up to the highest file.
        ranks: usize,
    },
    /// The comm-groups file cannot be read (missing, too large, no text).
    #[error("{}: {source}", path.display())]
    GroupsRead {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The comm-groups file is no object of names to rank lists.
    #[error(
        "{}: {source} (expected an object of process-group names to rank lists)",
        path.display()
    )]
    GroupsJson {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A comm group named twice.
    #[error("{}: group `{name}` is named twice (each name once, with its ranks)", path.display())]
    GroupTwice {
        /// The file.
        path: PathBuf,
        /// The group.
        name: String,
    },
    /// A comm group with no ranks or a rank twice.
    #[error("{}: group `{name}` must list distinct ranks, at least one", path.display())]
    GroupRanks {
        /// The file.
        path: PathBuf,
        /// The group.
        name: String,
    },
    /// A rank file that is no Chakra trace.
    #[error("{file}: {source}")]
    Trace {
        /// The file, as named in messages.
        file: String,
        /// Why.
        source: io::TraceError,
    },
    /// A rank's trace that is no runnable graph.
    #[error("{file}: {source}")]
    Graph {
        /// The file, as named in messages.
        file: String,
        /// Why.
        source: GraphError,
    },
    /// The ranks' graphs do not fit together.
    #[error(transparent)]
    World(#[from] CheckError),
}

/// A set of traces, read and checked.
#[derive(Debug, Clone)]
pub struct TraceSet {
    /// Each rank's file, as named in messages.
    pub files: Vec<String>,
    /// Each rank's graph.
    pub graphs: Vec<RankGraph>,
    /// What the cross-rank checks resolved.
    pub world: World,
    /// Everything skipped, all ranks together.
    pub warnings: Warnings,
}

/// `PREFIX.{rank}.et`.
pub fn rank_file(prefix: &Path, rank: usize) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(format!(".{rank}.et"));
    PathBuf::from(name)
}

/// `PREFIX.comm_groups.json`.
pub fn groups_file(prefix: &Path) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(".comm_groups.json");
    PathBuf::from(name)
}

/// The number of rank files of `prefix`: `PREFIX.0.et` to the highest
/// `PREFIX.{r}.et` in its directory, every one of them present.
pub fn rank_count(prefix: &Path) -> Result<usize, LoadError> {
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let stem =
        prefix
            .file_name()
            .and_then(|s| s.to_str())
            .ok_or_else(|| LoadError::NotAPrefix {
                prefix: prefix.to_owned(),
            })?;
    let entries = std::fs::read_dir(&dir).map_err(|source| LoadError::List {
        prefix: prefix.to_owned(),
        dir: dir.clone(),
        source,
    })?;
    let mut highest = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rank) = name
            .to_str()
            .and_then(|n| n.strip_prefix(stem)?.strip_prefix('.')?.strip_suffix(".et"))
            .and_then(|r| r.parse::<usize>().ok())
        else {
            continue;
        };
        highest = highest.max(Some(rank));
    }
    let Some(highest) = highest else {
        return Err(LoadError::NoRankFiles {
            prefix: prefix.to_owned(),
        });
    };
    if let Some(missing) = (0..=highest).find(|&r| !rank_file(prefix, r).exists()) {
        return Err(LoadError::MissingRank {
            prefix: prefix.to_owned(),
            rank: missing,
            ranks: highest + 1,
        });
    }
    Ok(highest + 1)
}

/// A comm-groups object's entries in file order, a repeated name kept (a
/// map would keep the last without a word).
struct GroupList(Vec<(String, Vec<usize>)>);

impl<'de> serde::Deserialize<'de> for GroupList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = GroupList;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of group names to rank lists")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<GroupList, A::Error> {
                let mut list = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    list.push(entry);
                }
                Ok(GroupList(list))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// Reads the comm-groups file at `path`: `{"name": [ranks...], ...}`.
pub fn read_groups(path: &Path) -> Result<BTreeMap<String, Vec<usize>>, LoadError> {
    let text = crate::config::read_capped(path, MAX_GROUPS_BYTES, "a comm-groups file (JSON)")
        .map_err(|source| LoadError::GroupsRead {
            path: path.to_owned(),
            source,
        })?;
    let GroupList(list) = serde_json::from_str(&text).map_err(|source| LoadError::GroupsJson {
        path: path.to_owned(),
        source,
    })?;
    let mut groups = BTreeMap::new();
    for (name, ranks) in list {
        if groups.contains_key(&name) {
            return Err(LoadError::GroupTwice {
                path: path.to_owned(),
                name,
            });
        }
        groups.insert(name, ranks);
    }
    for (name, ranks) in &groups {
        let mut sorted = ranks.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if ranks.is_empty() || sorted.len() != ranks.len() {
            return Err(LoadError::GroupRanks {
                path: path.to_owned(),
                name: name.clone(),
            });
        }
    }
    Ok(groups)
}

/// Reads and checks every rank file of `prefix` and the comm groups
/// (`groups`, or `PREFIX.comm_groups.json` if it exists). Errors are one
/// line naming the file.
pub fn load(prefix: &Path, groups: Option<&Path>) -> Result<TraceSet, LoadError> {
    let n = rank_count(prefix)?;
    let comm_groups = match groups {
        Some(path) => read_groups(path)?,
        None if groups_file(prefix).exists() => read_groups(&groups_file(prefix))?,
        None => BTreeMap::new(),
    };
    let mut files = Vec::with_capacity(n);
    let mut raws = Vec::with_capacity(n);
    for rank in 0..n {
        let path = rank_file(prefix, rank);
        let name = path.display().to_string();
        let raw = io::read(&path).map_err(|source| LoadError::Trace {
            file: name.clone(),
            source,
        })?;
        raws.push(raw);
        files.push(name);
    }
    assemble(files, &raws, &comm_groups)
}

/// The checked set of traces `raws` (rank `r`'s at index `r`, named
/// `files[r]` in messages) with `comm_groups`.
pub fn assemble(
    files: Vec<String>,
    raws: &[io::RawTrace],
    comm_groups: &BTreeMap<String, Vec<usize>>,
) -> Result<TraceSet, LoadError> {
    let mut graphs = Vec::with_capacity(raws.len());
    let mut warnings = Warnings::default();
    for (name, raw) in files.iter().zip(raws) {
        let graph = graph::build(raw).map_err(|source| LoadError::Graph {
            file: name.clone(),
            source,
        })?;
        warnings.merge(&graph.warnings);
        graphs.push(graph);
    }
    let world = world::check(&files, &graphs, comm_groups)?;
    Ok(TraceSet {
        files,
        graphs,
        world,
        warnings,
    })
}

/// Writes `traces` (rank `r`'s at index `r`) as `PREFIX.{r}.et`, and
/// `groups` (if any) as `PREFIX.comm_groups.json`; the files written.
pub fn write(
    prefix: &Path,
    traces: &[io::RawTrace],
    groups: &BTreeMap<String, Vec<usize>>,
) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (rank, trace) in traces.iter().enumerate() {
        let path = rank_file(prefix, rank);
        io::write(&path, trace)?;
        written.push(path);
    }
    if !groups.is_empty() {
        let path = groups_file(prefix);
        let text = serde_json::to_string_pretty(groups).expect("names and ranks serialise");
        std::fs::write(&path, text + "\n")?;
        written.push(path);
    }
    Ok(written)
}
