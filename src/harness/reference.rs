//! Measured results to calibrate against (`kernbench report --reference
//! FILE`): nccl-tests' own text output pasted as-is, or a CSV with `size`
//! (bytes) and `time` (µs) columns.
//!
//! nccl-tests prints one line per size: `size count type redop root time
//! algbw busbw #wrong` out of place, then `time algbw busbw #wrong` in
//! place (13 columns; versions before the `root` column print 12); lines
//! starting with `#` (the banner, headers, the bandwidth summary) and blank
//! lines are skipped, anything else is an error naming the file and line.

use std::path::{Path, PathBuf};

use crate::workloads::ByteSize;

/// One measured size.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Bytes per rank (nccl-tests' `size`).
    pub bytes: u64,
    /// The out-of-place time (a CSV's `time`), in µs.
    pub time_us: f64,
    /// nccl-tests' in-place time, in µs.
    pub in_place_us: Option<f64>,
}

/// A reference file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// The file could not be read.
    #[error("--reference {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not what the format expects.
    #[error("--reference {}:{line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What was expected and found.
        message: String,
    },
    /// Nothing measured in it.
    #[error("--reference {}: no measured sizes (expected nccl-tests' output or a CSV with size and time columns)", .0.display())]
    Empty(PathBuf),
}

/// The measurements of `path`: CSV when it ends in `.csv`, else
/// nccl-tests' text output.
pub fn load(path: &Path) -> Result<Vec<Measured>, ReferenceError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReferenceError::Read {
        path: path.to_owned(),
        source,
    })?;
    let is_csv = path.extension().is_some_and(|e| e == "csv");
    let parsed = if is_csv {
        parse_csv(&text)
    } else {
        parse_nccl_tests(&text)
    };
    let measured = parsed.map_err(|(line, message)| ReferenceError::Line {
        path: path.to_owned(),
        line,
        message,
    })?;
    if measured.is_empty() {
        return Err(ReferenceError::Empty(path.to_owned()));
    }
    Ok(measured)
}

/// A line's error: its number (from 1) and what is wrong.
type LineError = (usize, String);

/// nccl-tests' table.
pub fn parse_nccl_tests(text: &str) -> Result<Vec<Measured>, LineError> {
    let mut measured = Vec::new();
    for (number, line) in (1..).zip(text.lines()) {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let columns: Vec<&str> = line.split_whitespace().collect();
        let in_place_at = match columns.len() {
            13 => 9,
            12 => 8,
            n => {
                return Err((
                    number,
                    format!(
                        "expected nccl-tests' 13 columns (size count type redop root time \
                         algbw busbw #wrong, out of place then time algbw busbw #wrong in \
                         place; 12 without root), got {n}: `{line}`"
                    ),
                ));
            }
        };
        let time_at = in_place_at - 4;
        let bytes = columns[0]
            .parse::<u64>()
            .map_err(|_| (number, format!("size `{}` is not a byte count", columns[0])))?;
        measured.push(Measured {
            bytes,
            time_us: time(columns[time_at]).map_err(|m| (number, m))?,
            in_place_us: Some(time(columns[in_place_at]).map_err(|m| (number, m))?),
        });
    }
    Ok(measured)
}

/// A time in µs, positive.
fn time(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t > 0.0)
        .ok_or_else(|| format!("time `{text}` is not a positive number of microseconds"))
}

/// A CSV with a header naming `size` (bytes, K/M/G suffixes allowed) and
/// `time` (µs) columns; other columns are ignored.
pub fn parse_csv(text: &str) -> Result<Vec<Measured>, LineError> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let header = reader.headers().map_err(|e| (1, e.to_string()))?.clone();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                (
                    1,
                    format!(
                        "the header has no `{name}` column: `{}`",
                        header.iter().collect::<Vec<_>>().join(",")
                    ),
                )
            })
    };
    let (size_at, time_at) = (column("size")?, column("time")?);
    let mut measured = Vec::new();
    for record in reader.records() {
        let record =
            record.map_err(|e| (e.position().map_or(0, |p| p.line() as usize), e.to_string()))?;
        let number = record.position().map_or(0, |p| p.line() as usize);
        let field = |at: usize| record.get(at).unwrap_or_default();
        let bytes = field(size_at)
            .parse::<ByteSize>()
            .map_err(|e| (number, format!("size: {e}")))?;
        measured.push(Measured {
            bytes: bytes.0,
            time_us: time(field(time_at)).map_err(|m| (number, m))?,
            in_place_us: None,
        });
    }
    Ok(measured)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.50    0.00    0.00      0    10.25    0.00    0.00      0
          16             4     float     sum      -1    11.00    0.00    0.00      0    10.75    0.00    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.001
";

    #[test]
    fn nccl_tests_output_parses_with_and_without_root() {
        let got = parse_nccl_tests(SAMPLE).unwrap();
        assert_eq!(
            got,
            [
                Measured {
                    bytes: 8,
                    time_us: 10.5,
                    in_place_us: Some(10.25)
                },
                Measured {
                    bytes: 16,
                    time_us: 11.0,
                    in_place_us: Some(10.75)
                },
            ]
        );
        let old = "  1024  256  float  sum  20.0  0.05  0.09  0e+00  19.5  0.05  0.09  0e+00\n";
        assert_eq!(parse_nccl_tests(old).unwrap()[0].time_us, 20.0);
    }

    #[test]
    fn a_line_out_of_the_table_is_an_error_naming_it() {
        let text = format!("{SAMPLE}NCCL WARN something\n");
        let (line, message) = parse_nccl_tests(&text).unwrap_err();
        assert_eq!(line, 10);
        assert!(message.contains("NCCL WARN"), "{message}");
        let bad_time = "8 2 float sum -1 fast 0 0 0 10 0 0 0";
        let (line, message) = parse_nccl_tests(bad_time).unwrap_err();
        assert_eq!(line, 1);
        assert!(message.contains("`fast`"), "{message}");
    }

    #[test]
    fn a_csv_gives_size_and_time_and_names_bad_rows() {
        let got = parse_csv("size,time,note\n1K,3.5,a\n2048,4,b\n").unwrap();
        assert_eq!(
            got[0],
            Measured {
                bytes: 1024,
                time_us: 3.5,
                in_place_us: None
            }
        );
        assert_eq!(got[1].bytes, 2048);
        let (line, message) = parse_csv("bytes,time\n8,1\n").unwrap_err();
        assert_eq!(line, 1);
        assert!(message.contains("`size`"), "{message}");
        let (line, message) = parse_csv("size,time\n8,1\n16,-2\n").unwrap_err();
        assert_eq!(line, 3);
        assert!(message.contains("`-2`"), "{message}");
    }
}
