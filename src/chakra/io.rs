//! Reading and writing Chakra trace files: a stream of messages, each
//! preceded by its length as a varint (`prost`'s length-delimited
//! encoding), one [`GlobalMetadata`] first, then [`Node`]s.
//!
//! Reads are capped ([`MAX_TRACE_BYTES`]) so a wrong path (a device, a
//! huge file) fails at once; a file that is no such stream fails with the
//! byte offset of the message that does not decode.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use prost::Message;

use super::schema::{GlobalMetadata, Node};

/// The most bytes one trace file may hold (1 GiB).
pub const MAX_TRACE_BYTES: u64 = 1 << 30;

/// The messages of one trace file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTrace {
    /// The first message.
    pub metadata: GlobalMetadata,
    /// The nodes, in file order.
    pub nodes: Vec<Node>,
}

/// Reads `path` (at most [`MAX_TRACE_BYTES`]) and decodes it; the error is
/// one line without the path (the caller names the file).
pub fn read(path: &Path) -> Result<RawTrace, String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_TRACE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_TRACE_BYTES {
        return Err(format!(
            "larger than the {MAX_TRACE_BYTES} B (1 GiB) cap on a trace file"
        ));
    }
    decode(&bytes)
}

/// Decodes a whole trace from `bytes`.
pub fn decode(bytes: &[u8]) -> Result<RawTrace, String> {
    if bytes.is_empty() {
        return Err("empty file: a Chakra trace starts with its GlobalMetadata".to_owned());
    }
    let mut offset = 0;
    let mut metadata = None;
    let mut nodes = Vec::new();
    while offset < bytes.len() {
        let what = match metadata {
            None => "GlobalMetadata",
            Some(_) => "Node",
        };
        let body = message_at(bytes, offset, what)?;
        let error = |e: prost::DecodeError| {
            format!("byte {offset}: the {what} message does not decode ({e}): not a Chakra trace?")
        };
        if metadata.is_none() {
            metadata = Some(GlobalMetadata::decode(body.1).map_err(error)?);
        } else {
            nodes.push(Node::decode(body.1).map_err(error)?);
        }
        offset = body.0;
    }
    Ok(RawTrace {
        metadata: metadata.unwrap_or_default(),
        nodes,
    })
}

/// The message whose length prefix starts at `offset`: where the next one
/// starts, and its bytes.
fn message_at<'a>(bytes: &'a [u8], offset: usize, what: &str) -> Result<(usize, &'a [u8]), String> {
    let mut cursor = &bytes[offset..];
    let length = prost::encoding::decode_varint(&mut cursor).map_err(|_| {
        format!("byte {offset}: the {what} message's length is no varint (truncated, or not a Chakra trace)")
    })?;
    let start = bytes.len() - cursor.len();
    let available = cursor.len() as u64;
    if length > available {
        return Err(format!(
            "byte {offset}: the {what} message is {length} B long but only {available} B follow \
             (truncated, or not a Chakra trace)"
        ));
    }
    let end = start + length as usize;
    Ok((end, &bytes[start..end]))
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
    fn truncation_and_text_name_the_byte_offset() {
        let bytes = encode(&trace());
        let cut = decode(&bytes[..bytes.len() - 2]).unwrap_err();
        assert!(cut.starts_with("byte 8: the Node message is"), "{cut}");
        assert!(cut.contains("truncated"), "{cut}");
        let text = decode(b"hello, this is not a trace\n").unwrap_err();
        assert!(
            text.starts_with("byte 0: the GlobalMetadata message"),
            "{text}"
        );
        assert!(decode(&[]).unwrap_err().starts_with("empty file"));
    }
}
