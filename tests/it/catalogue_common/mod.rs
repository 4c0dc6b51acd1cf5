//! The catalogue the tests that run every algorithm share (`ccl_catalogue`,
//! `explain`, `physical_limit`), read from the embedded `configs/ccl.yaml`
//! (issue 42 item 6): every entry whose module serves a collective, so an
//! algorithm is tested as soon as it is registered there, with no list to
//! edit. (The registry alone cannot give it: MSCCL schedules and the test
//! kernels register too, and only a ccl.yaml entry gives an algorithm its
//! wiring and slots.)

use kernbench::ccl::{CclConfig, Collective, registry};

/// The `ccl_*` workload that runs `collective`, if one does.
fn workload(collective: Collective) -> Option<&'static str> {
    Some(match collective {
        Collective::AllReduce => "ccl_allreduce",
        Collective::AllGather => "ccl_allgather",
        Collective::ReduceScatter => "ccl_reducescatter",
        Collective::Broadcast => "ccl_broadcast",
        Collective::Reduce => "ccl_reduce",
        Collective::AllToAll => "ccl_alltoall",
        Collective::SendRecv => "ccl_sendrecv",
        Collective::Gather => "ccl_gather",
        Collective::Scatter => "ccl_scatter",
        Collective::Custom => return None,
    })
}

/// Every ccl.yaml entry with the workload that runs it, by entry name.
pub fn collective_algorithms() -> Vec<(&'static str, String)> {
    let ccl = CclConfig::load(&CclConfig::default_source(), &[]).unwrap();
    ccl.names()
        .filter_map(|name| {
            let module = ccl.algorithm(name).unwrap().module;
            let collective = registry::find(module).unwrap().collective();
            Some((workload(collective)?, name.to_owned()))
        })
        .collect()
}

/// Every all-reduce entry of ccl.yaml.
pub fn allreduce_algorithms() -> Vec<String> {
    collective_algorithms()
        .into_iter()
        .filter(|(bench, _)| *bench == "ccl_allreduce")
        .map(|(_, name)| name)
        .collect()
}
