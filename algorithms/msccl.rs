//! `msccl`: runs an MSCCL algorithm file (issue 23, ADR-0035). The
//! ccl.yaml entry names the file: `module: msccl`, `wiring: none`,
//! `params: {xml: FILE}` (or `run --bench ccl_allreduce --msccl-xml
//! FILE`); the reader, the wiring and the PE programs are
//! `kernbench::ccl::msccl`.

use kernbench::ccl::CclAlgorithm;

/// Registers the algorithm (ADR-0009).
pub fn algorithm() -> Box<dyn CclAlgorithm> {
    kernbench::ccl::msccl::algorithm()
}
