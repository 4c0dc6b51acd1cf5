//! The all-reduce catalogue of ADR-0015, shared by the tests that run
//! every algorithm of it (`ccl_catalogue`, `explain`). The registry cannot
//! give it: MSCCL schedules and the test algorithms register too.

/// Every all-reduce algorithm with an α-β `model`.
pub const ALLREDUCE_ALGORITHMS: [&str; 8] = [
    "ring_allreduce",
    "intercube_allreduce",
    "lrab_hierarchical_allreduce",
    "tree_allreduce",
    "rd_allreduce",
    "rhd_allreduce",
    "ring_rsag_allreduce",
    "mesh_allreduce",
];
