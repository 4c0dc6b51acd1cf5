//! What a run is asked: the parameters a workload declares ([`Param`]), the
//! values given for them ([`Options`]), and the value types several
//! workloads share ([`ByteSize`], [`GemmDims`]).
//!
//! Values stay text until the workload reads them with
//! [`Options::get`], so the CLI, `sweep` and the web form pass any
//! declared parameter without knowing its type, and a bad value is reported
//! by the workload that parses it, naming the flag.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::WorkloadError;
use crate::ccl::CclConfig;

/// A parameter a workload takes: `--NAME VALUE` on `kernbench run`, a
/// comma-separated list `--NAME V1,V2` on `kernbench sweep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// The flag without its dashes (lowercase, `-` between words), and the
    /// key in [`Options::params`].
    pub name: &'static str,
    /// What the value looks like, for `--help` (`MxKxN`, `BYTES`).
    pub value_name: &'static str,
    /// One line for `--help`.
    pub help: &'static str,
}

/// What the command line asks of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Keep bytes, check results and replay the op log.
    pub verify_data: bool,
    /// Values of the workload's parameters, by [`Param::name`].
    pub params: BTreeMap<String, String>,
    /// The ccl.yaml `torch.distributed` reads (the embedded one if `None`).
    pub ccl: Option<CclConfig>,
    /// Record and explain the run (`--explain`, ADR-0028).
    pub explain: bool,
    /// The most bytes `--explain`'s causal log may take (`--explain-memory`;
    /// `None`: a quarter of the host's available memory).
    pub explain_memory: Option<u64>,
    /// Which of the critical path's lines `--explain` keeps
    /// (`--explain-path`, ADR-0117).
    pub explain_path: crate::explain::PathKept,
}

impl Options {
    /// The bound of `--explain`'s causal log, in bytes: `explain_memory`,
    /// or a quarter of the host memory available now (1 GiB when unknown).
    pub fn explain_budget(&self) -> u64 {
        self.explain_memory.unwrap_or_else(|| {
            super::collective::host_available().map_or(1 << 30, |available| available / 4)
        })
    }

    /// These options with parameter `name` set to `value`.
    pub fn with(mut self, name: &str, value: impl fmt::Display) -> Options {
        self.params.insert(name.to_owned(), value.to_string());
        self
    }

    /// The value of parameter `name` parsed as `T`, `None` when not given;
    /// a value that does not parse is [`WorkloadError::BadOption`] naming
    /// the flag.
    pub fn get<T>(&self, name: &str) -> Result<Option<T>, WorkloadError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.params
            .get(name)
            .map(|text| {
                text.parse()
                    .map_err(|error| WorkloadError::BadOption(format!("--{name} {text}: {error}")))
            })
            .transpose()
    }
}

/// A byte count as nccl-tests writes it: digits with an optional `K`, `M`
/// or `G` suffix (powers of 1024; `B` and lower case accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let trimmed = text.trim().trim_end_matches(['B', 'b']);
        let split = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (digits, suffix) = trimmed.split_at(split);
        let shift = match suffix.to_ascii_uppercase().as_str() {
            "" => 0,
            "K" => 10,
            "M" => 20,
            "G" => 30,
            _ => return Err(format!("`{text}` is not a size (digits with K, M or G)")),
        };
        let value: u64 = digits
            .parse()
            .map_err(|_| format!("`{text}` is not a size (digits with K, M or G)"))?;
        value
            .checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(|| format!("`{text}` does not fit in 64 bits"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The dimensions of a GEMM: `A` is `M×K`, `B` is `K×N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmDims {
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Columns of `A`, rows of `B`.
    pub k: usize,
    /// Columns of `B` and `C`.
    pub n: usize,
}

impl fmt::Display for GemmDims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.k, self.n)
    }
}

impl FromStr for GemmDims {
    type Err = String;

    /// `MxKxN`, each a positive integer.
    fn from_str(text: &str) -> Result<Self, String> {
        let parts: Vec<_> = text.split('x').map(str::parse::<usize>).collect();
        match parts.as_slice() {
            [Ok(m), Ok(k), Ok(n)] if *m > 0 && *k > 0 && *n > 0 => Ok(GemmDims {
                m: *m,
                k: *k,
                n: *n,
            }),
            _ => Err(format!(
                "`{text}` is not MxKxN with three positive integers"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_nccl_tests_suffixes() {
        let cases = [
            ("8", 8),
            ("1K", 1024),
            ("4k", 4096),
            ("1M", 1 << 20),
            ("128MB", 128 << 20),
            ("2G", 2 << 30),
        ];
        for (text, bytes) in cases {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(bytes)), "{text}");
        }
        for bad in ["", "K", "1T", "1.5M", "-1", "99999999999999999999G"] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad}");
        }
    }

    #[test]
    fn get_parses_and_names_the_flag_on_error() {
        let options = Options::default().with("size", "1K").with("shape", "2x");
        assert_eq!(
            options.get::<ByteSize>("size").unwrap(),
            Some(ByteSize(1024))
        );
        assert_eq!(options.get::<ByteSize>("absent").unwrap(), None);
        let error = options.get::<GemmDims>("shape").unwrap_err().to_string();
        assert_eq!(
            error,
            "--shape 2x: `2x` is not MxKxN with three positive integers"
        );
    }
}
