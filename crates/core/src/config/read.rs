//! Reading a file a user hands in, with a bound on what it costs.
//!
//! [`read_capped`] is the one way the program reads a user's text file
//! (a configuration, a results.json, a reference log, a trace): it reads
//! at most `cap` bytes, in chunks, and refuses a file that is larger, that
//! holds a NUL byte (not text: `/dev/zero`, a binary) or that is not UTF-8,
//! naming the cap. So `/dev/zero` or `/dev/urandom` is refused after the
//! first chunk, and a huge file after `cap` bytes at most, whatever the
//! file claims its size to be (devices and pipes report none).
//!
//! The errors are `std::io::Error`s (kind `InvalidData`), so every
//! reader's existing "cannot read FILE: ..." error carries them unchanged.
//! Knows nothing of what the text means.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The cap of a configuration file (topology.yaml, ccl.yaml).
pub const CONFIG_CAP: u64 = 4 << 20;

/// The size of one read: a non-text file is refused after this much.
const CHUNK: usize = 64 << 10;

/// The text of `path`, at most `cap` bytes; `what` names the kind of file
/// in the error (e.g. "a configuration file").
pub fn read_capped(path: &Path, cap: u64, what: &str) -> io::Result<String> {
    let bytes = read_capped_bytes(path, cap, what, |bytes, new| {
        match bytes[new..].iter().position(|&b| b == 0) {
            Some(at) => Err(invalid(format!(
                "not a text file (a NUL byte at offset {}); expected {what}",
                new + at
            ))),
            None => Ok(()),
        }
    })?;
    String::from_utf8(bytes).map_err(|error| {
        let offset = error.utf8_error().valid_up_to();
        invalid(format!(
            "not UTF-8 text (at byte {offset}); expected {what}"
        ))
    })
}

/// The bytes of `path`, at most `cap` bytes, read in chunks: the binary
/// files' reader (a Chakra trace). After every chunk `check(bytes, new)`
/// sees the bytes read so far (`bytes[new..]` the chunk just read) and may
/// refuse them, so a file that is plainly not what `what` names
/// (`/dev/zero`) is refused after its first chunk, not after `cap` bytes.
pub fn read_capped_bytes(
    path: &Path,
    cap: u64,
    what: &str,
    mut check: impl FnMut(&[u8], usize) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    let file = File::open(path)?;
    let declared = file.metadata().map(|m| m.len()).unwrap_or(0);
    if declared > cap {
        return Err(too_large(cap, what, &format!("is {declared} B, more")));
    }
    let mut bytes = Vec::with_capacity(declared.min(cap) as usize + 1);
    let mut reader = file.take(cap + 1);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        let new = bytes.len();
        bytes.extend_from_slice(&chunk[..n]);
        check(&bytes, new)?;
        if bytes.len() as u64 > cap {
            return Err(too_large(cap, what, "is larger"));
        }
    }
    Ok(bytes)
}

/// A short excerpt of `text` for an error line: its first line, at most
/// `max` characters, with `...` when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let cut: String = first.chars().take(max).collect();
    if cut.len() < text.trim_end().len() {
        format!("{cut}...")
    } else {
        cut
    }
}

fn too_large(cap: u64, what: &str, size: &str) -> io::Error {
    invalid(format!(
        "{size} than the {} cap of {what}",
        crate::config::units::Size::from_bytes(cap)
    ))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch file holding `bytes`, removed when dropped.
    struct TempFile(std::path::PathBuf);

    impl std::ops::Deref for TempFile {
        type Target = Path;

        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn temp(name: &str, bytes: &[u8]) -> TempFile {
        let file = format!("kernbench-read-{}-{name}", std::process::id());
        let path = std::env::temp_dir().join(file);
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }

    #[test]
    fn a_small_text_file_reads_whole() {
        let path = temp("ok.txt", b"a: 1\n");
        assert_eq!(read_capped(&path, 16, "a test file").unwrap(), "a: 1\n");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_naming_the_cap() {
        let path = temp("big.txt", &[b'x'; 100]);
        let error = read_capped(&path, 64, "a test file").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let message = error.to_string();
        assert_eq!(message, "is 100 B, more than the 64 B cap of a test file");
        assert!(read_capped(&path, 100, "a test file").is_ok());
    }

    #[test]
    fn nul_bytes_and_invalid_utf8_are_not_text() {
        let path = temp("nul.bin", b"ab\0cd");
        let message = read_capped(&path, 1 << 20, "x").unwrap_err().to_string();
        assert!(message.contains("NUL byte at offset 2"), "{message}");
        let path = temp("latin1.txt", b"caf\xe9");
        let message = read_capped(&path, 1 << 20, "x").unwrap_err().to_string();
        assert!(message.contains("not UTF-8 text (at byte 3)"), "{message}");
    }

    #[test]
    #[cfg(unix)]
    fn dev_zero_is_refused_after_one_chunk() {
        let message = read_capped(Path::new("/dev/zero"), 1 << 30, "x")
            .unwrap_err()
            .to_string();
        assert!(message.contains("NUL byte at offset 0"), "{message}");
    }

    #[test]
    fn an_excerpt_is_one_short_line() {
        assert_eq!(excerpt("root:x:0:0\nbin:x:1:1\n", 40), "root:x:0:0...");
        assert_eq!(excerpt("abcdef", 3), "abc...");
        assert_eq!(excerpt("abc\n", 10), "abc");
    }
}
