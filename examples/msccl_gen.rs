//! Writes the project's own MSCCL all-reduce algorithms
//! (`kernbench::ccl::msccl::generate`) to stdout:
//! `cargo run --example msccl_gen -- ring|allpairs N > FILE`
//! (`algorithms/msccl/*.xml` were made so).

use std::process::ExitCode;

use kernbench::ccl::msccl::generate;

/// The allocator of every binary (ADR-0026), which `main` tells to keep
/// the memory it frees (ADR-0072).
#[global_allocator]
static ALLOCATOR: kernbench::allocator::Allocator = kernbench::allocator::Allocator;

fn main() -> ExitCode {
    kernbench::allocator::keep_freed_memory();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = args.get(1).and_then(|n| n.parse::<usize>().ok());
    let text = match (args.first().map(String::as_str), n) {
        (Some("ring"), Some(n)) if n >= 2 => generate::ring(n),
        (Some("allpairs"), Some(n)) if n >= 2 => generate::all_pairs(n),
        _ => {
            eprintln!("usage: msccl_gen ring|allpairs N (N >= 2 ranks)");
            return ExitCode::from(2);
        }
    };
    print!("{text}");
    ExitCode::SUCCESS
}
