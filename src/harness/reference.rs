//! Measured results to calibrate against (`kernbench report --reference
//! FILE`): nccl-tests' own output pasted as-is (a whole log), or a CSV with
//! `size` (bytes) and `time` (µs) columns.
//!
//! nccl-tests prints one line per size: `size count type redop root time
//! algbw busbw #wrong` out of place, then `time algbw busbw #wrong` in
//! place (13 columns; versions before the `root` column print 12); the in
//! place columns read `N/A` where a collective has no in-place form. Lines
//! starting with `#` (the banner, headers, the bandwidth summary), NCCL's
//! own `NCCL INFO` lines and blank lines are skipped; anything else is an
//! error naming the file and line. The log's collective is read from its
//! header (`# Collective test starting: all_gather_perf`, or the
//! `..._perf` command line) and its data type from the `type` column, so
//! that [`Reference::check`] can refuse a comparison of, say, an
//! all-gather in float with all-reduce results in f16.
//!
//! The file is read through [`read_capped`] ([`REFERENCE_CAP`]).

use std::path::{Path, PathBuf};

use super::results::Row;
use crate::config::read_capped;
use crate::workloads::ByteSize;

/// The cap of a reference file.
pub const REFERENCE_CAP: u64 = 16 << 20;

/// A reference file: its sizes and what it says it measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reference {
    /// The measured sizes.
    pub measured: Vec<Measured>,
    /// The collective, as our workload name (`ccl_allgather`), when the
    /// log names it.
    pub collective: Option<String>,
    /// The data type, as our name (`f32`), when the log gives it.
    pub dtype: Option<String>,
}

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
    /// It measured something else than the results it is compared with.
    #[error("--reference {}: {message}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
        message: String,
    },
    /// Nothing measured in it.
    #[error("--reference {}: no measured sizes (expected nccl-tests' output or a CSV with size and time columns)", .0.display())]
    Empty(PathBuf),
}

/// The measurements of `path`: CSV when it ends in `.csv`, else
/// nccl-tests' text output.
pub fn load(path: &Path) -> Result<Reference, ReferenceError> {
    let text = read_capped(path, REFERENCE_CAP, "a reference (nccl-tests log or CSV)").map_err(
        |source| ReferenceError::Read {
            path: path.to_owned(),
            source,
        },
    )?;
    let is_csv = path.extension().is_some_and(|e| e == "csv");
    let parsed = if is_csv {
        parse_csv(&text).map(|measured| Reference {
            measured,
            ..Reference::default()
        })
    } else {
        parse_nccl_log(&text)
    };
    let reference = parsed.map_err(|(line, message)| ReferenceError::Line {
        path: path.to_owned(),
        line,
        message,
    })?;
    if reference.measured.is_empty() {
        return Err(ReferenceError::Empty(path.to_owned()));
    }
    Ok(reference)
}

impl Reference {
    /// Whether these measurements compare with `rows`: `Err` (refuse)
    /// when no row is a collective with a size (a GEMM folder) or the
    /// log's collective is not the rows'; `Ok(Some(warning))` when only
    /// the data type differs (sizes in bytes still compare); `Ok(None)`
    /// when they match as far as the file tells.
    pub fn check(&self, rows: &[&Row]) -> Result<Option<String>, String> {
        let collectives: Vec<&Row> = rows
            .iter()
            .copied()
            .filter(|r| r.number(super::table::names::BYTES).is_some())
            .collect();
        if collectives.is_empty() {
            let workloads = distinct(rows.iter().map(|r| r.workload.clone()));
            return Err(format!(
                "no result row is a collective with a size to compare (the results are {})",
                if workloads.is_empty() {
                    "empty".to_owned()
                } else {
                    workloads.join(", ")
                }
            ));
        }
        let workloads = distinct(collectives.iter().map(|r| r.workload.clone()));
        if let Some(collective) = &self.collective
            && !workloads.contains(collective)
        {
            return Err(format!(
                "the log measured {collective} but the results are {}",
                workloads.join(", ")
            ));
        }
        let dtypes = distinct(
            collectives
                .iter()
                .filter_map(|r| match r.figures.get("dtype") {
                    Some(crate::workloads::Value::Text(t)) => Some(t.clone()),
                    _ => None,
                }),
        );
        if let Some(dtype) = &self.dtype
            && !dtypes.is_empty()
            && !dtypes.contains(dtype)
        {
            return Ok(Some(format!(
                "the log measured {dtype} but the results are {}: compared by size in bytes",
                dtypes.join(", ")
            )));
        }
        Ok(None)
    }
}

/// The distinct values of `items`, in order of first appearance.
fn distinct(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Our workload for an nccl-tests binary (`all_gather_perf`).
fn collective_of(binary: &str) -> Option<&'static str> {
    Some(match binary {
        "all_reduce" => "ccl_allreduce",
        "all_gather" => "ccl_allgather",
        "reduce_scatter" => "ccl_reducescatter",
        "broadcast" => "ccl_broadcast",
        "reduce" => "ccl_reduce",
        "alltoall" => "ccl_alltoall",
        "sendrecv" => "ccl_sendrecv",
        "gather" => "ccl_gather",
        "scatter" => "ccl_scatter",
        _ => return None,
    })
}

/// Our data type for nccl-tests' `type` column.
fn dtype_of(nccl: &str) -> Option<&'static str> {
    Some(match nccl {
        "float" | "float32" => "f32",
        "half" | "float16" => "f16",
        "bfloat16" => "bf16",
        "double" | "float64" => "f64",
        "int8" | "char" => "i8",
        "uint8" => "u8",
        "int32" | "int" => "i32",
        "uint32" => "u32",
        "int64" => "i64",
        "uint64" => "u64",
        _ => return None,
    })
}

/// The collective an nccl-tests log line names: a word ending in `_perf`
/// (the binary in `# Collective test starting: all_gather_perf` or the
/// command line), path and `_mpi` suffix stripped.
fn named_collective(line: &str) -> Option<&'static str> {
    line.split(|c: char| c.is_whitespace() || c == '/' || c == ':')
        .filter_map(|word| {
            word.strip_suffix("_perf")
                .or_else(|| word.strip_suffix("_perf_mpi"))
        })
        .find_map(collective_of)
}

/// A whole nccl-tests log: the table ([`parse_nccl_tests`]), its
/// collective from the header and its data type from the rows.
pub fn parse_nccl_log(text: &str) -> Result<Reference, LineError> {
    let collective = text
        .lines()
        .take_while(|line| !is_row(line))
        .find_map(named_collective)
        .map(str::to_owned);
    let mut dtype: Option<(usize, String)> = None;
    for (number, line) in (1..).zip(text.lines()) {
        let Some(name) = is_row(line)
            .then(|| line.split_whitespace().nth(2))
            .flatten()
        else {
            continue;
        };
        let ours = dtype_of(name).map_or_else(|| name.to_owned(), str::to_owned);
        match &dtype {
            Some((_, seen)) if *seen != ours => {
                return Err((
                    number,
                    format!(
                        "type `{name}` differs from the earlier rows' {seen}: one data type per log"
                    ),
                ));
            }
            Some(_) => {}
            None => dtype = Some((number, ours)),
        }
    }
    Ok(Reference {
        measured: parse_nccl_tests(text)?,
        collective,
        dtype: dtype.map(|(_, d)| d),
    })
}

/// Whether `line` is a row of the table: it starts with a byte count.
fn is_row(line: &str) -> bool {
    line.split_whitespace()
        .next()
        .is_some_and(|word| word.bytes().all(|b| b.is_ascii_digit()))
}

/// A line nccl-tests or NCCL prints around the table.
fn is_chatter(line: &str) -> bool {
    line.is_empty() || line.starts_with('#') || line.contains("NCCL INFO")
}

/// A line's error: its number (from 1) and what is wrong.
type LineError = (usize, String);

/// nccl-tests' table.
pub fn parse_nccl_tests(text: &str) -> Result<Vec<Measured>, LineError> {
    let mut measured = Vec::new();
    for (number, line) in (1..).zip(text.lines()) {
        let line = line.trim();
        if is_chatter(line) {
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
            in_place_us: match columns[in_place_at] {
                "N/A" => None,
                text => Some(time(text).map_err(|m| (number, m))?),
            },
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

    /// A whole alltoall log as nccl-tests and NCCL print it: the command,
    /// NCCL INFO lines between the header and the table, `N/A` in place.
    const LOG: &str = "\
# Collective test starting: alltoall_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20
#  Rank  0 Group  0 Pid  41237 on     node01 device  0 [0x18] NVIDIA H100 80GB HBM3
node01:41237:41237 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node01:41237:41237 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024            32  bfloat16    none      -1    21.50    0.05    0.04      0      N/A     N/A     N/A    N/A
node01:41237:41240 [0] NCCL INFO Channel 00/32 :    0   1
        2048            64  bfloat16    none      -1    22.00    0.09    0.08      0      N/A     N/A     N/A    N/A
# Avg bus bandwidth    : 0.06
";

    #[test]
    fn a_real_log_gives_its_rows_collective_and_dtype() {
        let got = parse_nccl_log(LOG).unwrap();
        assert_eq!(got.collective.as_deref(), Some("ccl_alltoall"));
        assert_eq!(got.dtype.as_deref(), Some("bf16"));
        let times: Vec<_> = got.measured.iter().map(|m| (m.bytes, m.time_us)).collect();
        assert_eq!(times, [(1024, 21.5), (2048, 22.0)]);
        assert!(got.measured.iter().all(|m| m.in_place_us.is_none()));
        let old = parse_nccl_log(SAMPLE).unwrap();
        assert_eq!((old.collective, old.dtype.as_deref()), (None, Some("f32")));
        let from_command =
            "# ./build/all_gather_perf -b 8 -e 64\n8 2 float none -1 1 0 0 0 1 0 0 0\n";
        let got = parse_nccl_log(from_command).unwrap().collective;
        assert_eq!(got.as_deref(), Some("ccl_allgather"));
    }

    #[test]
    fn two_types_in_one_log_are_an_error() {
        let text = "8 2 float sum -1 1 0 0 0 1 0 0 0\n16 4 half sum -1 1 0 0 0 1 0 0 0\n";
        let (line, message) = parse_nccl_log(text).unwrap_err();
        assert_eq!(line, 2);
        assert!(message.contains("`half`"), "{message}");
    }
}
