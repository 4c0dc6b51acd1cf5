//! An MSCCL algorithm file read into our own types and checked
//! ([`Program::load`], [`Program::parse`]): the `<algo>` element and its
//! `<gpu>`s, their `<tb>`s (thread blocks) and their `<step>`s, each with
//! the line it was written on, so that every refusal names the file and
//! the line.
//!
//! The format is MSCCL's interface (the XML msccl-tools writes and the
//! MSCCL runtime reads): `algo` carries `ngpus`, `coll`, `nchunksperloop`
//! and `inplace`; a `gpu` its `id` and the chunk counts of its input,
//! output and scratch buffers (`i_chunks`, `o_chunks`, `s_chunks`); a `tb`
//! its `id`, the rank it sends to (`send`), receives from (`recv`, `-1`
//! for none) and its channel (`chan`); a `step` its index `s`, its `type`,
//! `srcbuf`/`srcoff`, `dstbuf`/`dstoff` (`i`, `o` or `s`, in chunks), `cnt`
//! (chunks) and the step of another thread block of the same gpu it waits
//! for (`depid`/`deps`, `-1` for none). Other attributes (`proto`,
//! `nchannels`, `hasdep`, ...) are read and ignored.
//!
//! Checked here, against the world the algorithm is resolved for: `ngpus`
//! is the world size, `coll` the collective asked for, gpu, tb and step
//! indices are dense, peers are other ranks, every step's chunks lie in
//! their buffer, a step that sends (receives) belongs to a tb with a
//! `send` (`recv`) peer, no two tbs of a gpu share a (peer, channel)
//! connection in the same direction, every dependency names an existing
//! step, and each connection's sends and receives agree on their sizes.
//! A connection with more sends than receives (or the reverse), and a
//! cycle of dependencies, are left to the run: they end in the
//! simulator's deadlock report.
//!
//! Pure values and text: nothing of kernels, devices or time.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use crate::ccl::Collective;
use crate::config::read_capped;

/// The largest file [`Program::load`] reads.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The most attributes one element may have (an MSCCL element has about
/// ten). Checked by a scan before the XML parser, whose duplicate check
/// is quadratic in an element's attributes (200,000 on `<algo>`: over
/// 30 s).
pub const MAX_ATTRIBUTES: usize = 64;

/// Bounds on the numbers an XML may ask for (a hostile file fails at its
/// line instead of allocating without limit).
const MAX_GPUS: usize = 4096;
const MAX_CHUNKS: usize = 1 << 16;

/// An XML file that cannot run: `file:line: message`, or `file: message`
/// for the file as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", at_line(*line))]
pub struct XmlError {
    /// The file as named.
    pub file: String,
    /// The 1-based line (0: the file as a whole).
    pub line: u32,
    /// What is wrong.
    pub message: String,
}

/// `:line`, or nothing for line 0 (the file as a whole).
fn at_line(line: u32) -> String {
    match line {
        0 => String::new(),
        line => format!(":{line}"),
    }
}

/// One of a gpu's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Buffer {
    /// `i`: the rank's input.
    Input,
    /// `o`: the rank's output (the input itself when `inplace="1"`).
    Output,
    /// `s`: scratch.
    Scratch,
}

impl Buffer {
    fn parse(text: &str) -> Option<Buffer> {
        match text {
            "i" => Some(Buffer::Input),
            "o" => Some(Buffer::Output),
            "s" => Some(Buffer::Scratch),
            _ => None,
        }
    }
}

impl fmt::Display for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Buffer::Input => "i",
            Buffer::Output => "o",
            Buffer::Scratch => "s",
        })
    }
}

/// What a step does (MSCCL's step types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// `s`: send `src` to the tb's `send` peer.
    Send,
    /// `r`: receive from the `recv` peer into `dst`.
    Recv,
    /// `rcs`: receive into `dst` and send it on.
    RecvCopySend,
    /// `rrs`: receive, combine with `src`, send the result (not stored).
    RecvReduceSend,
    /// `rrc`: receive, combine with `src`, store the result in `dst`.
    RecvReduceCopy,
    /// `rrcs`: `rrc`, then send `dst`.
    RecvReduceCopySend,
    /// `cpy`: copy `src` to `dst`.
    Copy,
    /// `re`: `dst = dst ∘ src`.
    Reduce,
    /// `nop`: nothing (a place to hang a dependency).
    Nop,
}

impl StepKind {
    fn parse(text: &str) -> Option<StepKind> {
        Some(match text {
            "s" => StepKind::Send,
            "r" => StepKind::Recv,
            "rcs" => StepKind::RecvCopySend,
            "rrs" => StepKind::RecvReduceSend,
            "rrc" => StepKind::RecvReduceCopy,
            "rrcs" => StepKind::RecvReduceCopySend,
            "cpy" => StepKind::Copy,
            "re" => StepKind::Reduce,
            "nop" => StepKind::Nop,
            _ => return None,
        })
    }

    /// Whether it sends to the tb's `send` peer.
    pub fn sends(self) -> bool {
        matches!(
            self,
            StepKind::Send
                | StepKind::RecvCopySend
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopySend
        )
    }

    /// Whether it receives from the tb's `recv` peer.
    pub fn receives(self) -> bool {
        matches!(
            self,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
        )
    }

    /// Whether it reads `src`.
    pub fn reads_src(self) -> bool {
        matches!(
            self,
            StepKind::Send
                | StepKind::RecvReduceSend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
                | StepKind::Copy
                | StepKind::Reduce
        )
    }

    /// Whether it writes `dst`.
    pub fn writes_dst(self) -> bool {
        matches!(
            self,
            StepKind::Recv
                | StepKind::RecvCopySend
                | StepKind::RecvReduceCopy
                | StepKind::RecvReduceCopySend
                | StepKind::Copy
                | StepKind::Reduce
        )
    }
}

/// `cnt` chunks of a buffer from chunk `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The buffer.
    pub buffer: Buffer,
    /// The first chunk.
    pub off: usize,
}

/// One `<step>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Its line.
    pub line: u32,
    /// What it does.
    pub kind: StepKind,
    /// Where it reads (steps that read `src`).
    pub src: Span,
    /// Where it writes (steps that write `dst`).
    pub dst: Span,
    /// Chunks it moves.
    pub cnt: usize,
    /// The (tb, step) of the same gpu it waits for.
    pub dep: Option<(usize, usize)>,
}

/// One `<tb>`: a sequence of steps with at most one send and one receive
/// peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadBlock {
    /// Its line.
    pub line: u32,
    /// The rank it sends to.
    pub send: Option<usize>,
    /// The rank it receives from.
    pub recv: Option<usize>,
    /// Its channel.
    pub chan: u32,
    /// Its steps, in order.
    pub steps: Vec<Step>,
}

/// One `<gpu>`: a rank's program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Its line.
    pub line: u32,
    /// Chunks of its scratch buffer.
    pub scratch_chunks: usize,
    /// Its thread blocks, by id.
    pub tbs: Vec<ThreadBlock>,
}

/// A checked MSCCL algorithm (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// The file as named.
    pub file: String,
    /// `algo name`.
    pub name: String,
    /// The collective it implements.
    pub collective: Collective,
    /// Chunks the rank's data is cut into.
    pub nchunks: usize,
    /// Whether the output is the input (`inplace="1"`).
    pub inplace: bool,
    /// The ranks' programs, by gpu id.
    pub gpus: Vec<Gpu>,
}

/// The MSCCL `coll` names this simulator runs, with their collective.
const COLLECTIVES: &[(&str, Collective)] = &[("allreduce", Collective::AllReduce)];

impl Program {
    /// The most chunks one step moves (`cnt`), at least 1.
    pub fn max_cnt(&self) -> usize {
        let steps = self
            .gpus
            .iter()
            .flat_map(|g| &g.tbs)
            .flat_map(|tb| &tb.steps);
        steps.map(|s| s.cnt).max().unwrap_or(1).max(1)
    }

    /// Reads `path` (at most [`MAX_FILE_BYTES`], through the shared capped
    /// reader: `/dev/zero` is refused after its first chunk) and parses it for a world
    /// of `world_size` ranks running `collective`.
    pub fn load(
        path: &Path,
        world_size: usize,
        collective: Collective,
    ) -> Result<Program, XmlError> {
        let file = path.display().to_string();
        let whole = |message: String| XmlError {
            file: file.clone(),
            line: 0,
            message,
        };
        let text = read_capped(path, MAX_FILE_BYTES, "an MSCCL XML algorithm file").map_err(
            |e| match e.kind() {
                std::io::ErrorKind::InvalidData => whole(e.to_string()),
                _ => whole(format!("cannot be read: {e}")),
            },
        )?;
        Program::parse(&file, &text, world_size, collective)
    }

    /// Parses and checks `text` (named `file` in errors).
    pub fn parse(
        file: &str,
        text: &str,
        world_size: usize,
        collective: Collective,
    ) -> Result<Program, XmlError> {
        check_attribute_counts(file, text)?;
        let options = roxmltree::ParsingOptions {
            allow_dtd: false,
            nodes_limit: 1 << 22,
            ..roxmltree::ParsingOptions::default()
        };
        let doc = roxmltree::Document::parse_with_options(text, options).map_err(|e| XmlError {
            file: file.to_owned(),
            line: e.pos().row,
            message: format!("not well-formed XML: {e}"),
        })?;
        let reader = Reader { file, doc: &doc };
        let program = reader.algo(doc.root_element(), world_size, collective)?;
        Check::new(&program, file).all()?;
        Ok(program)
    }

    /// Rank `rank`'s program.
    pub fn gpu(&self, rank: usize) -> &Gpu {
        &self.gpus[rank]
    }

    /// Chunks of `buffer` on `gpu` (the data buffers hold `nchunks`).
    pub fn chunks(&self, gpu: &Gpu, buffer: Buffer) -> usize {
        match buffer {
            Buffer::Input | Buffer::Output => self.nchunks,
            Buffer::Scratch => gpu.scratch_chunks,
        }
    }
}

/// Refuses an element with more than [`MAX_ATTRIBUTES`] attributes,
/// naming it and its line: one pass over `text`, counting the `=` of each
/// start tag outside quoted values (comments, CDATA, processing
/// instructions and end tags skipped; whatever is not well-formed is left
/// to the parser).
fn check_attribute_counts(file: &str, text: &str) -> Result<(), XmlError> {
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'<') {
        let start = at + offset;
        let rest = &text[start..];
        let skip_to = |end: &str| rest.find(end).map_or(text.len(), |i| start + i + end.len());
        at = match rest.as_bytes().get(1) {
            Some(b'!') if rest.starts_with("<!--") => skip_to("-->"),
            Some(b'!') if rest.starts_with("<![CDATA[") => skip_to("]]>"),
            Some(b'?') => skip_to("?>"),
            Some(b'!' | b'/') => skip_to(">"),
            _ => {
                let (end, count) = start_tag_attributes(&bytes[start..]);
                if count > MAX_ATTRIBUTES {
                    let name: String = rest[1..]
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != '>' && *c != '/')
                        .take(40)
                        .collect();
                    return Err(XmlError {
                        file: file.to_owned(),
                        line: 1 + text[..start].matches('\n').count() as u32,
                        message: format!(
                            "<{name}> has {count} attributes; an element may have at most \
                             {MAX_ATTRIBUTES}"
                        ),
                    });
                }
                start + end
            }
        };
    }
    Ok(())
}

/// Where the start tag at the head of `tag` ends (after its `>`, or the
/// end) and how many `=` it has outside quoted values.
fn start_tag_attributes(tag: &[u8]) -> (usize, usize) {
    let (mut count, mut quote) = (0, None);
    for (i, &b) in tag.iter().enumerate() {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'=') => count += 1,
            (None, b'>') => return (i + 1, count),
            _ => {}
        }
    }
    (tag.len(), count)
}

/// The parse of one document: attributes read with their lines.
struct Reader<'a, 'input> {
    file: &'a str,
    doc: &'a roxmltree::Document<'input>,
}

type Node<'a, 'input> = roxmltree::Node<'a, 'input>;

impl Reader<'_, '_> {
    fn line(&self, node: Node<'_, '_>) -> u32 {
        self.doc.text_pos_at(node.range().start).row
    }

    fn error(&self, node: Node<'_, '_>, message: String) -> XmlError {
        XmlError {
            file: self.file.to_owned(),
            line: self.line(node),
            message,
        }
    }

    /// The child elements of `node` named `tag`; any other element is an
    /// error.
    fn children<'a, 'input>(
        &self,
        node: Node<'a, 'input>,
        tag: &str,
    ) -> Result<Vec<Node<'a, 'input>>, XmlError> {
        let mut out = Vec::new();
        for child in node.children().filter(|c| c.is_element()) {
            let name = child.tag_name().name();
            if name != tag {
                let parent = node.tag_name().name();
                return Err(self.error(
                    child,
                    format!("<{name}> inside <{parent}>: expected <{tag}>"),
                ));
            }
            out.push(child);
        }
        Ok(out)
    }

    fn text<'n>(&self, node: Node<'n, '_>, name: &str) -> Result<&'n str, XmlError> {
        let tag = node.tag_name().name();
        node.attribute(name)
            .ok_or_else(|| self.error(node, format!("<{tag}> has no `{name}` attribute")))
    }

    /// An integer attribute, `-1` (none) allowed when `none_ok`.
    fn int(
        &self,
        node: Node<'_, '_>,
        name: &str,
        none_ok: bool,
    ) -> Result<Option<usize>, XmlError> {
        let text = self.text(node, name)?;
        let tag = node.tag_name().name();
        if none_ok && text.trim() == "-1" {
            return Ok(None);
        }
        let what = if none_ok {
            "a whole number or -1"
        } else {
            "a whole number"
        };
        text.trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|_| self.error(node, format!("<{tag} {name}=\"{text}\">: expected {what}")))
    }

    fn count(&self, node: Node<'_, '_>, name: &str, max: usize) -> Result<usize, XmlError> {
        let n = self.int(node, name, false)?.unwrap_or(0);
        if n > max {
            let tag = node.tag_name().name();
            return Err(self.error(node, format!("<{tag} {name}=\"{n}\">: at most {max}")));
        }
        Ok(n)
    }

    /// An optional count (a missing attribute is 0).
    fn count_or_zero(&self, node: Node<'_, '_>, name: &str) -> Result<usize, XmlError> {
        match node.attribute(name) {
            Some(_) => self.count(node, name, MAX_CHUNKS),
            None => Ok(0),
        }
    }

    /// The `coll` attribute names a collective msccl runs, `collective`.
    fn check_coll(&self, node: Node<'_, '_>, collective: Collective) -> Result<(), XmlError> {
        let coll = self.text(node, "coll")?;
        let known: Vec<_> = COLLECTIVES.iter().map(|(name, _)| *name).collect();
        let Some(&(_, declared)) = COLLECTIVES.iter().find(|(name, _)| *name == coll) else {
            return Err(self.error(
                node,
                format!(
                    "coll=\"{coll}\" is not a collective msccl runs (runs: {})",
                    known.join(", ")
                ),
            ));
        };
        if declared != collective {
            return Err(self.error(
                node,
                format!(
                    "coll=\"{coll}\" implements {declared}, but this entry serves {collective}"
                ),
            ));
        }
        Ok(())
    }

    fn algo(
        &self,
        node: Node<'_, '_>,
        world_size: usize,
        collective: Collective,
    ) -> Result<Program, XmlError> {
        if node.tag_name().name() != "algo" {
            let name = node.tag_name().name();
            return Err(self.error(node, format!("the root element is <{name}>, not <algo>")));
        }
        let ngpus = self.count(node, "ngpus", MAX_GPUS)?;
        if ngpus != world_size {
            return Err(self.error(
                node,
                format!(
                    "ngpus=\"{ngpus}\" but the world has {world_size} ranks (rank = SIP: set \
                     system.sips.count or the ccl.yaml world_size to {ngpus}, or use an \
                     algorithm for {world_size} ranks)"
                ),
            ));
        }
        self.check_coll(node, collective)?;
        let nchunks = self.count(node, "nchunksperloop", MAX_CHUNKS)?;
        if nchunks == 0 {
            return Err(self.error(node, "nchunksperloop=\"0\": at least one chunk".to_owned()));
        }
        let inplace = match self.text(node, "inplace")?.trim() {
            "1" => true,
            "0" => false,
            other => {
                return Err(self.error(node, format!("inplace=\"{other}\": expected 0 or 1")));
            }
        };
        let mut gpus: Vec<Option<Gpu>> = vec![None; ngpus];
        for gpu in self.children(node, "gpu")? {
            let id = self.count(gpu, "id", MAX_GPUS)?;
            if id >= ngpus {
                return Err(self.error(
                    gpu,
                    format!("gpu id {id}: ngpus is {ngpus} (ids 0 to {})", ngpus - 1),
                ));
            }
            if gpus[id].is_some() {
                return Err(self.error(gpu, format!("gpu id {id} appears twice")));
            }
            for buffer in ["i_chunks", "o_chunks"] {
                let n = self.count_or_zero(gpu, buffer)?;
                if n > nchunks {
                    return Err(self.error(
                        gpu,
                        format!("{buffer}=\"{n}\" exceeds nchunksperloop=\"{nchunks}\" (an allreduce's buffers hold one loop)"),
                    ));
                }
            }
            let scratch_chunks = self.count_or_zero(gpu, "s_chunks")?;
            gpus[id] = Some(Gpu {
                line: self.line(gpu),
                scratch_chunks,
                tbs: self.tbs(gpu, id, ngpus)?,
            });
        }
        let gpus = gpus
            .into_iter()
            .enumerate()
            .map(|(id, gpu)| {
                gpu.ok_or_else(|| {
                    self.error(node, format!("no <gpu id=\"{id}\"> (ngpus is {ngpus})"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Program {
            file: self.file.to_owned(),
            name: node.attribute("name").unwrap_or("").to_owned(),
            collective,
            nchunks,
            inplace,
            gpus,
        })
    }

    fn tbs(
        &self,
        gpu: Node<'_, '_>,
        rank: usize,
        ngpus: usize,
    ) -> Result<Vec<ThreadBlock>, XmlError> {
        let nodes = self.children(gpu, "tb")?;
        let mut tbs: Vec<Option<ThreadBlock>> = vec![None; nodes.len()];
        for tb in nodes {
            let n = tbs.len();
            let id = self.count(tb, "id", MAX_CHUNKS)?;
            if id >= n {
                return Err(self.error(
                    tb,
                    format!("tb id {id}: gpu {rank} has {n} tbs (ids 0 to {})", n - 1),
                ));
            }
            if tbs[id].is_some() {
                return Err(self.error(tb, format!("tb id {id} appears twice in gpu {rank}")));
            }
            let peer = |name| -> Result<Option<usize>, XmlError> {
                let peer = self.int(tb, name, true)?;
                match peer {
                    Some(p) if p >= ngpus => {
                        Err(self.error(tb, format!("{name}=\"{p}\": ngpus is {ngpus}")))
                    }
                    Some(p) if p == rank => {
                        Err(self.error(tb, format!("{name}=\"{p}\" is gpu {rank} itself")))
                    }
                    _ => Ok(peer),
                }
            };
            let (send, recv) = (peer("send")?, peer("recv")?);
            let chan = self.count(tb, "chan", MAX_CHUNKS)? as u32;
            let steps = self
                .children(tb, "step")?
                .into_iter()
                .enumerate()
                .map(|(index, step)| self.step(step, index))
                .collect::<Result<Vec<_>, _>>()?;
            tbs[id] = Some(ThreadBlock {
                line: self.line(tb),
                send,
                recv,
                chan,
                steps,
            });
        }
        Ok(tbs
            .into_iter()
            .map(|tb| tb.expect("every id 0..n was seen once"))
            .collect())
    }

    fn step(&self, node: Node<'_, '_>, index: usize) -> Result<Step, XmlError> {
        let s = self.count(node, "s", usize::MAX)?;
        if s != index {
            return Err(self.error(
                node,
                format!(
                    "step s=\"{s}\" is the tb's step {index}: steps are numbered 0, 1, ... in order"
                ),
            ));
        }
        let kind_text = self.text(node, "type")?;
        let kind = StepKind::parse(kind_text).ok_or_else(|| {
            self.error(
                node,
                format!("type=\"{kind_text}\": expected s, r, rcs, rrs, rrc, rrcs, cpy, re or nop"),
            )
        })?;
        let span = |buf: &str, off: &str, used: bool| -> Result<Span, XmlError> {
            if !used {
                return Ok(Span {
                    buffer: Buffer::Input,
                    off: 0,
                });
            }
            let text = self.text(node, buf)?;
            let buffer = Buffer::parse(text.trim())
                .ok_or_else(|| self.error(node, format!("{buf}=\"{text}\": expected i, o or s")))?;
            let off = self.int(node, off, false)?.unwrap_or(0);
            Ok(Span { buffer, off })
        };
        let src = span("srcbuf", "srcoff", kind.reads_src())?;
        let dst = span("dstbuf", "dstoff", kind.writes_dst())?;
        let cnt = match node.attribute("cnt") {
            Some(_) => self.count(node, "cnt", MAX_CHUNKS)?,
            None => 1,
        };
        if cnt == 0 && kind != StepKind::Nop {
            return Err(self.error(
                node,
                "cnt=\"0\": a step moves at least one chunk".to_owned(),
            ));
        }
        let depid = match node.attribute("depid") {
            Some(_) => self.int(node, "depid", true)?,
            None => None,
        };
        let deps = match node.attribute("deps") {
            Some(_) => self.int(node, "deps", true)?,
            None => None,
        };
        let dep = match (depid, deps) {
            (Some(tb), Some(step)) => Some((tb, step)),
            (None, None) => None,
            _ => {
                return Err(self.error(
                    node,
                    "depid and deps must both be -1 or both name a step".to_owned(),
                ));
            }
        };
        Ok(Step {
            line: self.line(node),
            kind,
            src,
            dst,
            cnt,
            dep,
        })
    }
}

/// The checks across elements (see the module docs).
struct Check<'a> {
    program: &'a Program,
    file: &'a str,
}

impl<'a> Check<'a> {
    fn new(program: &'a Program, file: &'a str) -> Self {
        Check { program, file }
    }

    fn error(&self, line: u32, message: String) -> XmlError {
        XmlError {
            file: self.file.to_owned(),
            line,
            message,
        }
    }

    fn all(&self) -> Result<(), XmlError> {
        for (rank, gpu) in self.program.gpus.iter().enumerate() {
            self.connections_unique(rank, gpu)?;
            for (id, tb) in gpu.tbs.iter().enumerate() {
                for step in &tb.steps {
                    self.step(rank, gpu, id, tb, step)?;
                }
            }
        }
        self.sizes_match()
    }

    /// No two tbs of a gpu send to (receive from) one peer on one channel.
    fn connections_unique(&self, rank: usize, gpu: &Gpu) -> Result<(), XmlError> {
        for (side, peer_of) in [
            (
                "send",
                (|tb: &ThreadBlock| tb.send) as fn(&ThreadBlock) -> Option<usize>,
            ),
            ("recv", |tb: &ThreadBlock| tb.recv),
        ] {
            let mut seen: BTreeMap<(usize, u32), usize> = BTreeMap::new();
            for (id, tb) in gpu.tbs.iter().enumerate() {
                let Some(peer) = peer_of(tb) else { continue };
                if let Some(first) = seen.insert((peer, tb.chan), id) {
                    return Err(self.error(
                        tb.line,
                        format!(
                            "gpu {rank}: tbs {first} and {id} both {side} {peer} on channel {}: a \
                             (peer, channel) connection belongs to one tb",
                            tb.chan
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn step(
        &self,
        rank: usize,
        gpu: &Gpu,
        id: usize,
        tb: &ThreadBlock,
        step: &Step,
    ) -> Result<(), XmlError> {
        let program = self.program;
        if step.kind.sends() && tb.send.is_none() {
            return Err(self.error(
                step.line,
                format!("gpu {rank} tb {id}: a sending step in a tb with send=\"-1\""),
            ));
        }
        if step.kind.receives() && tb.recv.is_none() {
            return Err(self.error(
                step.line,
                format!("gpu {rank} tb {id}: a receiving step in a tb with recv=\"-1\""),
            ));
        }
        for (what, span, used) in [
            ("src", step.src, step.kind.reads_src()),
            ("dst", step.dst, step.kind.writes_dst()),
        ] {
            let chunks = program.chunks(gpu, span.buffer);
            if used && span.off + step.cnt > chunks {
                return Err(self.error(
                    step.line,
                    format!(
                        "gpu {rank} tb {id}: {what} chunks {}..{} of buffer {} are out of range \
                         (it holds {chunks} chunks)",
                        span.off,
                        span.off + step.cnt,
                        span.buffer
                    ),
                ));
            }
        }
        if let Some((dep_tb, dep_step)) = step.dep {
            let steps = gpu.tbs.get(dep_tb).map(|t| t.steps.len());
            match steps {
                None => {
                    return Err(self.error(
                        step.line,
                        format!(
                            "gpu {rank}: depid=\"{dep_tb}\" names no tb (the gpu has {})",
                            gpu.tbs.len()
                        ),
                    ));
                }
                Some(n) if dep_step >= n => {
                    return Err(self.error(
                        step.line,
                        format!("gpu {rank}: deps=\"{dep_step}\": tb {dep_tb} has {n} steps"),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The k-th send of every connection moves as many chunks as the k-th
    /// receive at the other end.
    fn sizes_match(&self) -> Result<(), XmlError> {
        let gpus = &self.program.gpus;
        for (rank, gpu) in gpus.iter().enumerate() {
            for tb in &gpu.tbs {
                let Some(peer) = tb.send else { continue };
                let receiver = gpus[peer]
                    .tbs
                    .iter()
                    .find(|t| t.recv == Some(rank) && t.chan == tb.chan);
                let Some(receiver) = receiver else {
                    return Err(self.error(
                        tb.line,
                        format!(
                            "gpu {rank} sends to gpu {peer} on channel {}, but no tb of gpu {peer} \
                             has recv=\"{rank}\" chan=\"{}\"",
                            tb.chan, tb.chan
                        ),
                    ));
                };
                let sends = tb.steps.iter().filter(|s| s.kind.sends());
                let recvs = receiver.steps.iter().filter(|s| s.kind.receives());
                for (k, (send, recv)) in sends.zip(recvs).enumerate() {
                    if send.cnt != recv.cnt {
                        return Err(self.error(
                            send.line,
                            format!(
                                "send {k} from gpu {rank} to gpu {peer} (channel {}) moves {} chunks, \
                                 but the receive it meets (line {}) takes {}",
                                tb.chan, send.cnt, recv.line, recv.cnt
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
