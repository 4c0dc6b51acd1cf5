//! Reading and writing Chakra trace files: a stream of messages, each
//! preceded by its length as a varint (`prost`'s length-delimited
//! encoding), one [`GlobalMetadata`] first, then [`Node`]s.
//!
//! Reads go through the shared capped reader
//! ([`crate::config::read_capped_bytes`], [`MAX_TRACE_BYTES`]) and decode
//! chunk by chunk, so a wrong path (a device, a huge file) fails at once; a
//! file that is no such stream fails with the byte offset of the message
//! that does not decode (an empty `Node` message counts as one: it is what
//! `/dev/zero` holds).

use std::path::Path;

use prost::Message;

use super::schema::{GlobalMetadata, Node};
use crate::config::read_capped_bytes;

/// The most bytes one trace file may hold (1 GiB).
pub const MAX_TRACE_BYTES: u64 = 1 << 30;

/// The most bytes one message (a node, the metadata) may be: Chakra's
/// are tens to hundreds of bytes, so a larger length prefix means the file
/// is something else (random bytes), and the reader stops at once instead
/// of waiting for that many bytes.
pub const MAX_MESSAGE_BYTES: u64 = 16 << 20;

/// Why a file is no Chakra trace, or cannot be read; one line without
/// the path (the caller names the file).
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file cannot be opened or read.
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    /// The file is larger than [`MAX_TRACE_BYTES`].
    #[error("{0}")]
    TooLarge(std::io::Error),
    /// The file has no bytes.
    #[error("empty file: a Chakra trace starts with its GlobalMetadata")]
    Empty,
    /// A message's length prefix is no varint.
    #[error(
        "byte {offset}: the {what} message's length is no varint (truncated, or not a Chakra trace)"
    )]
    NoLength {
        /// Where the prefix starts.
        offset: usize,
        /// `GlobalMetadata` or `Node`.
        what: &'static str,
    },
    /// A message longer than [`MAX_MESSAGE_BYTES`].
    #[error(
        "byte {offset}: the {what} message claims {length} B, more than the \
         {MAX_MESSAGE_BYTES} B (16 MiB) one message may be: not a Chakra trace?"
    )]
    TooLong {
        /// Where the message's prefix starts.
        offset: usize,
        /// `GlobalMetadata` or `Node`.
        what: &'static str,
        /// The length it claims.
        length: u64,
    },
    /// The file ends inside a message.
    #[error(
        "byte {offset}: the {what} message is {length} B long but only {available} B follow \
         (truncated, or not a Chakra trace)"
    )]
    Truncated {
        /// Where the message's prefix starts.
        offset: usize,
        /// `GlobalMetadata` or `Node`.
        what: &'static str,
        /// The length it claims.
        length: u64,
        /// The bytes after the prefix.
        available: u64,
    },
    /// A message's bytes are not that message.
    #[error("byte {offset}: the {what} message does not decode ({reason}): not a Chakra trace?")]
    Undecodable {
        /// Where the message's prefix starts.
        offset: usize,
        /// `GlobalMetadata` or `Node`.
        what: &'static str,
        /// prost's reason.
        reason: prost::DecodeError,
    },
    /// An empty `Node` message (what `/dev/zero` holds).
    #[error("byte {offset}: an empty Node message (no id, name or type): not a Chakra trace?")]
    EmptyNode {
        /// Where the message's prefix starts.
        offset: usize,
    },
}

/// The messages of one trace file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTrace {
    /// The first message.
    pub metadata: GlobalMetadata,
    /// The nodes, in file order.
    pub nodes: Vec<Node>,
}

/// Reads `path` (at most [`MAX_TRACE_BYTES`], through the shared capped
/// reader) and decodes it as it arrives, so a file that is no trace
/// (`/dev/zero`, `/dev/urandom`, text) is refused after its first chunk;
/// the error is one line without the path (the caller names the file).
pub fn read(path: &Path) -> Result<RawTrace, TraceError> {
    let mut decoder = Decoder::default();
    let bytes = read_capped_bytes(path, MAX_TRACE_BYTES, "a Chakra trace", |bytes, _| {
        decoder
            .feed(bytes, false)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    })
    .map_err(read_error)?;
    decoder.finish(&bytes)
}

/// The [`TraceError`] of a failed read: the decoder's own, carried through
/// the reader's `io::Error`, a file too large, or the read itself.
fn read_error(error: std::io::Error) -> TraceError {
    if error.kind() != std::io::ErrorKind::InvalidData {
        return TraceError::Read(error);
    }
    error
        .downcast::<TraceError>()
        .unwrap_or_else(TraceError::TooLarge)
}

/// Decodes a whole trace from `bytes`.
pub fn decode(bytes: &[u8]) -> Result<RawTrace, TraceError> {
    Decoder::default().finish(bytes)
}

/// A trace decoded message by message as its bytes arrive.
#[derive(Default)]
struct Decoder {
    /// Where the next undecoded message's length prefix starts.
    offset: usize,
    metadata: Option<GlobalMetadata>,
    nodes: Vec<Node>,
}

impl Decoder {
    /// Decodes every whole message of `bytes` past the last one decoded;
    /// unless `complete`, a message cut by the end of `bytes` waits for more.
    fn feed(&mut self, bytes: &[u8], complete: bool) -> Result<(), TraceError> {
        while self.offset < bytes.len() {
            let offset = self.offset;
            let what = match self.metadata {
                None => "GlobalMetadata",
                Some(_) => "Node",
            };
            let Some((end, body)) = message_at(bytes, offset, what, complete)? else {
                return Ok(());
            };
            let error = |reason| TraceError::Undecodable {
                offset,
                what,
                reason,
            };
            if self.metadata.is_none() {
                self.metadata = Some(GlobalMetadata::decode(body).map_err(error)?);
            } else if body.is_empty() {
                return Err(TraceError::EmptyNode { offset });
            } else {
                self.nodes.push(Node::decode(body).map_err(error)?);
            }
            self.offset = end;
        }
        Ok(())
    }

    /// The trace, once `bytes` is the whole file.
    fn finish(mut self, bytes: &[u8]) -> Result<RawTrace, TraceError> {
        if bytes.is_empty() {
            return Err(TraceError::Empty);
        }
        self.feed(bytes, true)?;
        Ok(RawTrace {
            metadata: self.metadata.unwrap_or_default(),
            nodes: self.nodes,
        })
    }
}

/// The message whose length prefix starts at `offset`: where the next one
/// starts, and its bytes; `None` when `bytes` ends inside it and more may
/// come (not `complete`).
fn message_at<'a>(
    bytes: &'a [u8],
    offset: usize,
    what: &'static str,
    complete: bool,
) -> Result<Option<(usize, &'a [u8])>, TraceError> {
    let mut cursor = &bytes[offset..];
    // A varint is at most 10 bytes, each but the last with its high bit set.
    let cut_varint = cursor.len() < 10 && cursor.iter().all(|b| b & 0x80 != 0);
    if cut_varint && !complete {
        return Ok(None);
    }
    let length = prost::encoding::decode_varint(&mut cursor)
        .map_err(|_| TraceError::NoLength { offset, what })?;
    if length > MAX_MESSAGE_BYTES {
        return Err(TraceError::TooLong {
            offset,
            what,
            length,
        });
    }
    let start = bytes.len() - cursor.len();
    let available = cursor.len() as u64;
    if length > available {
        if !complete {
            return Ok(None);
        }
        return Err(TraceError::Truncated {
            offset,
            what,
            length,
            available,
        });
    }
    let end = start + length as usize;
    Ok(Some((end, &bytes[start..end])))
}

/// The bytes of `trace` as a file holds them.
pub fn encode(trace: &RawTrace) -> Vec<u8> {
    let mut bytes = Vec::new();
    trace
        .metadata
        .encode_length_delimited(&mut bytes)
        .expect("a Vec grows as needed");
    for node in &trace.nodes {
        node.encode_length_delimited(&mut bytes)
            .expect("a Vec grows as needed");
    }
    bytes
}

/// Writes `trace` to `path`.
pub fn write(path: &Path, trace: &RawTrace) -> std::io::Result<()> {
    std::fs::write(path, encode(trace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chakra::schema::{Attribute, NodeType};

    fn trace() -> RawTrace {
        let node = Node {
            id: 7,
            name: "gemm".to_owned(),
            kind: NodeType::Comp as i32,
            data_deps: vec![3],
            attr: vec![Attribute::int64("num_ops", 1 << 40)],
            ..Node::default()
        };
        RawTrace {
            metadata: GlobalMetadata {
                version: "1.0.0".to_owned(),
                attr: Vec::new(),
            },
            nodes: vec![node],
        }
    }

    #[test]
    fn a_trace_round_trips_and_its_first_byte_is_the_metadata_length() {
        let bytes = encode(&trace());
        // GlobalMetadata { version: "1.0.0" }: tag 0x0a, length 5, 5 bytes.
        assert_eq!(&bytes[..8], &[7, 0x0a, 5, b'1', b'.', b'0', b'.', b'0']);
        assert_eq!(decode(&bytes).unwrap(), trace());
    }

    #[test]
    fn empty_nodes_and_huge_lengths_are_no_trace() {
        let zeros = decode(&[0u8; 64]).unwrap_err();
        assert!(
            matches!(zeros, TraceError::EmptyNode { offset: 1 }),
            "{zeros:?}"
        );
        let zeros = zeros.to_string();
        assert!(
            zeros.starts_with("byte 1: an empty Node message"),
            "{zeros}"
        );
        // The metadata, then a length prefix of 2^24 + 1 bytes.
        let mut bytes = encode(&trace());
        let end = bytes.len();
        prost::encoding::encode_varint(MAX_MESSAGE_BYTES + 1, &mut bytes);
        let huge = decode(&bytes).unwrap_err().to_string();
        let want = format!("byte {end}: the Node message claims 16777217 B");
        assert!(huge.starts_with(&want), "{huge}");
    }

    #[test]
    fn a_trace_fed_in_pieces_decodes_as_a_whole() {
        let bytes = encode(&trace());
        for cut in 0..bytes.len() {
            let mut decoder = Decoder::default();
            decoder.feed(&bytes[..cut], false).unwrap();
            assert_eq!(decoder.finish(&bytes).unwrap(), trace(), "cut at {cut}");
        }
    }

    #[test]
    fn truncation_and_text_name_the_byte_offset() {
        let bytes = encode(&trace());
        let cut = decode(&bytes[..bytes.len() - 2]).unwrap_err().to_string();
        assert!(cut.starts_with("byte 8: the Node message is"), "{cut}");
        assert!(cut.contains("truncated"), "{cut}");
        let text = decode(b"hello, this is not a trace\n")
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with("byte 0: the GlobalMetadata message"),
            "{text}"
        );
        let empty = decode(&[]).unwrap_err();
        assert!(matches!(empty, TraceError::Empty), "{empty:?}");
        assert!(empty.to_string().starts_with("empty file"));
    }
}
