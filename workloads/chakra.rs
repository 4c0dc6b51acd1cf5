//! `chakra`: runs Chakra execution traces (`--et PREFIX`: the files
//! `PREFIX.0.et … PREFIX.{N-1}.et`, one per rank, rank = SIP) on the
//! machine, every node as soon as its dependencies have ended
//! (`kernbench::workloads::et`, ADR-0034; mapping and limits:
//! `docs/interop.md`).
//!
//! `--et-compute roofline|measured` times compute nodes by the SIP's
//! roofline of `num_ops` and `tensor_size` (default) or by their
//! `duration_micros`; `--et-comm-groups FILE` gives the ranks of each
//! `pg_name` (ASTRA-sim's comm-group JSON; default
//! `PREFIX.comm_groups.json` when it exists, else every `pg_name` is every
//! rank). Figures: `et_ps` (first node to the last rank's last node), the
//! largest rank's `compute_ps`, `comm_ps`, `exposed_comm_ps`, the same per
//! rank (`rank{r}_*`), per collective type `*_count`, `*_bytes`,
//! `*_ps`, and per pipeline stage (inferred from the process groups,
//! `et::stages`) `stage{s}_compute_ps` and `bottleneck_stage`. Every input error is one line naming the file (exit 2), found
//! before anything runs; skipped nodes and ignored attributes are warned
//! about and counted.

use std::path::PathBuf;
use std::rc::Rc;

use kernbench::chakra;
use kernbench::workloads::et::{self, ComputeMode};
use kernbench::workloads::{Definition, Figure, Options, Outcome, Param, WorkloadError};

/// The registry's entry (ADR-0011).
pub const WORKLOAD: Definition = Definition {
    about: "Chakra execution traces PREFIX.{rank}.et run on the SIPs: step time, compute/comm split",
    params: &[
        Param {
            name: "et",
            value_name: "PREFIX",
            help: "Chakra traces PREFIX.0.et ... PREFIX.{N-1}.et, one per rank (rank = SIP)",
        },
        Param {
            name: "et-compute",
            value_name: "MODE",
            help: "Compute nodes: roofline (num_ops, tensor_size on the SIP; default) or measured (duration_micros)",
        },
        Param {
            name: "et-comm-groups",
            value_name: "FILE",
            help: "pg_name -> ranks JSON (ASTRA-sim's comm groups; default PREFIX.comm_groups.json if present)",
        },
    ],
    host: |torch, options| Box::pin(run(torch, options)),
};

async fn run(torch: kernbench::runtime::Torch, options: Options) -> Result<Outcome, WorkloadError> {
    let Some(prefix) = options.get::<PathBuf>("et")? else {
        return Err(WorkloadError::BadOption(
            "chakra needs --et PREFIX (the traces PREFIX.0.et ... PREFIX.{N-1}.et)".to_owned(),
        ));
    };
    let mode = options
        .get::<ComputeMode>("et-compute")?
        .unwrap_or_default();
    let groups = options.get::<PathBuf>("et-comm-groups")?;
    let sips = torch.world_sips();
    let whose = torch.job_name().map_or("the machine", |_| "the job");
    let n = chakra::rank_count(&prefix)?;
    if n > sips {
        return Err(WorkloadError::BadOption(format!(
            "{}: {n} ranks (rank = SIP), but {whose} has {sips} SIPs: set \
             system.sips.count (or the job's sips) to at least {n} (--set system.sips.count={n})",
            prefix.display()
        )));
    }
    let set = chakra::load(&prefix, groups.as_deref())?;
    warn(&set);
    let set = Rc::new(set);
    let result = et::run(torch, set.clone(), mode).await?;
    let mut figures = vec![Figure::text(
        "et_compute",
        match mode {
            ComputeMode::Roofline => "roofline",
            ComputeMode::Measured => "measured",
        },
    )];
    figures.extend(et::figures(&set, &result));
    Ok(Outcome {
        checks: Vec::new(),
        figures,
    })
}

/// One warning per kind of thing skipped, with its count.
fn warn(set: &chakra::TraceSet) {
    for (kind, count) in &set.warnings.unknown_types {
        tracing::warn!(target: "kernbench::workloads::generated::chakra", "chakra: skipped {count} node(s) of unknown type {kind} (run as no-ops)");
    }
    for (name, count) in &set.warnings.unknown_attributes {
        let what = match name.contains(" (") {
            true => "attribute",
            false => "unknown attribute",
        };
        tracing::warn!(target: "kernbench::workloads::generated::chakra", "chakra: ignored {what} `{name}` on {count} node(s)");
    }
    if set.world.names_as_world && has_pg_names(set) {
        tracing::warn!(target: "kernbench::workloads::generated::chakra", "chakra: pg_name given but no comm groups: every pg_name is every rank");
    }
}

fn has_pg_names(set: &chakra::TraceSet) -> bool {
    set.graphs
        .iter()
        .flat_map(|g| &g.nodes)
        .any(|n| matches!(&n.op, chakra::Op::Collective { group: Some(_), .. }))
}
