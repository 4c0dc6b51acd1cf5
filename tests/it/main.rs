//! The integration tests: one test crate, one module per area (a single
//! binary to compile and link, as rust-analyzer does; `cargo test` built
//! one binary per file before, 50 of them). Run one area with a name
//! filter: `cargo test --test it ccl_catalogue::`.
//!
//! The tests share one process. The few that must be alone in theirs (a
//! scoped `tracing` subscriber over the library's callsites, whose
//! interest is cached process-wide) re-run themselves in a child process
//! of this binary through [`own_process::elsewhere`].

// Helpers shared by several areas.
mod catalogue_common;
mod cli_common;
mod own_process;
mod tl_common;

mod architecture;
mod calibrate;
mod ccl_algorithm_file;
mod ccl_allreduce;
mod ccl_catalogue;
mod ccl_collectives;
mod ccl_defaults;
mod ccl_hierarchical;
mod ccl_mock;
mod ccl_msccl;
mod chakra;
mod cli_fuzz;
mod cli_hardening;
mod cli_report;
mod cli_run;
mod cli_sweep;
mod cli_topo;
mod cli_whatif;
mod config_errors;
mod distributed_async;
mod distributed_errors;
mod distributed_p2p;
mod doc_citations;
mod docs_commands;
mod explain;
mod explain_cli;
mod faults;
mod faults_down;
mod heat_maps;
mod hw_control;
mod hw_memory;
mod hw_trace;
mod hw_transit;
mod ipcq_exchange;
mod ipcq_trace;
mod jobs_41;
mod launch_grid;
mod mem_alloc;
mod mem_oplog;
mod mem_store;
mod multi_job;
mod physical_limit;
mod probe;
mod readme_tour;
mod replay;
mod runtime_placement;
mod runtime_tensor;
mod sim_core;
mod tidy;
mod tl_gemm;
mod tl_math;
mod tl_memory;
mod tl_trace;
mod tokio_embedding;
mod topology_cli;
mod topology_machine;
mod topology_routing;
mod trace_json;
mod web_browser;
mod web_limits;
mod workloads_models;
mod workloads_run;
