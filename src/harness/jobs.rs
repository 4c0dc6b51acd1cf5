//! The jobs file of `run --jobs FILE` (ADR-0116), read into checked
//! [`Job`]s, and the summary of their reports.
//!
//! ```yaml
//! jobs:
//!   left:                       # the job's name: an identifier
//!     workload: ccl_allreduce   # any built-in workload ...
//!     flags: {size: 4M}         # ... with its flags (as on the command line)
//!     sips: [0, 1, 2, 3]        # its SIPs in rank order, or:
//!   right:
//!     et: traces/step           # a Chakra trace set (workload chakra, --et)
//!     placement: {kind: strided, count: 4}
//!     start: 10 us              # when it starts (default 0)
//! ```
//!
//! Explicit `sips` lists are taken first, then each `placement` in file
//! order from the SIPs still free (ascending): `packed` takes the first
//! `count`, `strided` every `free / count`-th, `random` `count` drawn by a
//! seeded shuffle (`seed`, default 0), in the order drawn. Two jobs may
//! not share a SIP; every error is one [`ConfigError`] at the key.
//!
//! Knows workloads and the configuration reader; nothing of the CLI.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write};
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::config::{ConfigError, ConfigSource, Document};
use crate::sim::SimDuration;
use crate::workloads::jobs::{Job, JobReport, time_figure};
use crate::workloads::{self, Options};

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a jobs mapping with `jobs:`, the named jobs"
)]
struct JobsFile {
    jobs: Named<JobSpec>,
}

/// A mapping of named entries, in the order written.
#[derive(Debug)]
struct Named<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Named<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NamedVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for NamedVisitor<T> {
            type Value = Named<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of named jobs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Named<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, T>()? {
                    entries.push(entry);
                }
                Ok(Named(entries))
            }
        }
        deserializer.deserialize_map(NamedVisitor(PhantomData))
    }
}

/// One job as written.
#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a job mapping with workload or et, and optionally flags, sips, placement and start"
)]
struct JobSpec {
    workload: Option<String>,
    et: Option<String>,
    #[serde(default)]
    flags: BTreeMap<String, Flag>,
    sips: Option<Vec<u32>>,
    placement: Option<Placement>,
    #[serde(default)]
    start: Option<SimDuration>,
}

/// A flag's value: any scalar, as the command line would give it.
#[derive(Debug)]
struct Flag(String);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FlagVisitor;
        impl Visitor<'_> for FlagVisitor {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a flag's value (a number, a word or a size)")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Flag, E> {
                Ok(Flag(text.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Flag, E> {
                Ok(Flag(n.to_string()))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Flag, E> {
                Ok(Flag(n.to_string()))
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> Result<Flag, E> {
                Ok(Flag(x.to_string()))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Flag, E> {
                Ok(Flag(b.to_string()))
            }
        }
        deserializer.deserialize_any(FlagVisitor)
    }
}

/// How a job's SIPs are chosen from those free.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Placement {
    kind: PlacementKind,
    count: u32,
    #[serde(default)]
    seed: u64,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum PlacementKind {
    Packed,
    Strided,
    Random,
}

/// Reads the jobs file `source` for a machine of `sips` SIPs; each job's
/// options are `base` (the run's `--verify-data`, `--explain`, ccl.yaml)
/// with its flags.
pub fn load(source: &ConfigSource, sips: u32, base: &Options) -> Result<Vec<Job>, ConfigError> {
    let document = Document::read(source)?;
    let file: JobsFile = document.deserialize()?;
    if file.jobs.0.is_empty() {
        return Err(document.error_at("jobs", "no job: list at least one"));
    }
    let mut jobs = Vec::with_capacity(file.jobs.0.len());
    for (name, spec) in &file.jobs.0 {
        jobs.push(job(&document, name, spec, base)?);
    }
    let placed = place(&document, &file.jobs.0, sips)?;
    for (job, sips) in jobs.iter_mut().zip(placed) {
        job.sips = sips;
    }
    Ok(jobs)
}

/// Job `name`'s workload and options (its SIPs are placed after).
fn job(
    document: &Document,
    name: &str,
    spec: &JobSpec,
    base: &Options,
) -> Result<Job, ConfigError> {
    let at = |key: &str| format!("jobs.{name}{key}");
    check_name(name).map_err(|why| document.error_at(&at(""), why))?;
    let (workload, mut options) = match (&spec.workload, &spec.et) {
        (Some(w), None) => (w.as_str(), base.clone()),
        (None, Some(prefix)) => ("chakra", base.clone().with("et", prefix)),
        _ => {
            let why =
                "give one of `workload` (a built-in workload) and `et` (a Chakra trace prefix)";
            return Err(document.error_at(&at(""), why));
        }
    };
    let workload = workloads::find(workload).map_err(|e| document.error_at(&at(".workload"), e))?;
    for (flag, Flag(value)) in &spec.flags {
        options.params.insert(flag.clone(), value.clone());
    }
    workload
        .check_params(&options)
        .map_err(|e| document.error_at(&at(".flags"), e))?;
    Ok(Job {
        name: name.to_owned(),
        workload,
        options,
        sips: Vec::new(),
        start: spec.start.unwrap_or(SimDuration::ZERO),
    })
}

/// A job's name names its trace tracks (`{name}.host.rank0`): an
/// identifier that is not a machine part's name.
fn check_name(name: &str) -> Result<(), String> {
    let identifier = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let part = name == "host"
        || name
            .strip_prefix("sip")
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()));
    match (identifier, part) {
        (true, false) => Ok(()),
        _ => Err(format!(
            "`{name}`: a job's name is an identifier (letters, digits, `_`, not first a digit) \
             and not a machine part's name (`host`, `sipN`)"
        )),
    }
}

/// Every job's SIPs: the lists first, then the placements in order (see
/// the module docs).
fn place(
    document: &Document,
    specs: &[(String, JobSpec)],
    sips: u32,
) -> Result<Vec<Vec<u32>>, ConfigError> {
    let mut owner: BTreeMap<u32, &str> = BTreeMap::new();
    let mut placed = vec![Vec::new(); specs.len()];
    for (j, (name, spec)) in specs.iter().enumerate() {
        let key = format!("jobs.{name}.sips");
        match (&spec.sips, &spec.placement) {
            (Some(list), None) => {
                check_list(list, sips).map_err(|why| document.error_at(&key, why))?;
                for &sip in list {
                    if let Some(other) = owner.insert(sip, name) {
                        let why = format!(
                            "SIP {sip} is also job {other}'s (jobs.{other}): jobs {other} and \
                             {name} overlap, and two jobs may not share a SIP"
                        );
                        return Err(document.error_at(&key, why));
                    }
                }
                placed[j] = list.clone();
            }
            (None, Some(_)) => {}
            _ => {
                let why = "give one of `sips` (a list) and `placement` (packed, strided, random)";
                return Err(document.error_at(&format!("jobs.{name}"), why));
            }
        }
    }
    for (j, (name, spec)) in specs.iter().enumerate() {
        let Some(placement) = &spec.placement else {
            continue;
        };
        let free: Vec<u32> = (0..sips).filter(|s| !owner.contains_key(s)).collect();
        let count = placement.count as usize;
        if count == 0 || count > free.len() {
            let why = format!(
                "{count} SIPs asked for, {} free of the machine's {sips} after the jobs before: \
                 at least 1 and at most that",
                free.len()
            );
            return Err(document.error_at(&format!("jobs.{name}.placement.count"), why));
        }
        placed[j] = choose(placement, &free);
        for &sip in &placed[j] {
            owner.insert(sip, name);
        }
    }
    Ok(placed)
}

/// A job's own list: SIPs of the machine, each once.
fn check_list(list: &[u32], sips: u32) -> Result<(), String> {
    if list.is_empty() {
        return Err("no SIP: list at least one".to_owned());
    }
    if let Some(sip) = list.iter().find(|&&s| s >= sips) {
        return Err(format!("SIP {sip}: the machine has SIPs 0 to {}", sips - 1));
    }
    let mut seen = BTreeSet::new();
    match list.iter().find(|s| !seen.insert(**s)) {
        Some(sip) => Err(format!("SIP {sip} is listed twice")),
        None => Ok(()),
    }
}

/// `placement.count` SIPs of `free` (ascending, at least `count`).
fn choose(placement: &Placement, free: &[u32]) -> Vec<u32> {
    let count = placement.count as usize;
    match placement.kind {
        PlacementKind::Packed => free[..count].to_vec(),
        PlacementKind::Strided => {
            let stride = free.len() / count;
            (0..count).map(|i| free[i * stride]).collect()
        }
        PlacementKind::Random => {
            let mut pool = free.to_vec();
            let mut state = placement.seed;
            for i in 0..count {
                let pick = i + (splitmix64(&mut state) % (pool.len() - i) as u64) as usize;
                pool.swap(i, pick);
            }
            pool.truncate(count);
            pool
        }
    }
}

/// The next value of a splitmix64 sequence (a seeded, portable shuffle).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `sips` as runs: `0-7`, `0,2,4`.
pub fn sip_runs(sips: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &sip in sips {
        match runs.last_mut() {
            Some((_, end)) if sip == *end + 1 => *end = sip,
            _ => runs.push((sip, sip)),
        }
    }
    let run = |&(a, b): &(u32, u32)| match b - a {
        0 => a.to_string(),
        _ => format!("{a}-{b}"),
    };
    runs.iter().map(run).collect::<Vec<_>>().join(",")
}

/// The summary table of `reports`: per job its SIPs, time, time alone,
/// slowdown and shared links; then each job's report.
pub fn render(reports: &[JobReport]) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{:<12} {:<16} {:<20} {:>16} {:>16} {:>9}  shared links",
        "job", "workload", "sips", "time", "alone", "slowdown"
    );
    for job in reports {
        let figure = |name: &str| job.report.figures.iter().find(|f| f.name == name);
        let time = time_figure(&job.report);
        let shown =
            |ps: Option<u64>| ps.map_or("-".to_owned(), |ps| SimDuration::from_ps(ps).to_string());
        let alone = figure("alone_ps").and_then(|f| match f.value {
            workloads::Value::Int(ps) => Some(ps),
            _ => None,
        });
        let slowdown = figure("slowdown").map_or("-".to_owned(), |f| f.value.to_string());
        let shared = match job.shared.len() {
            0 => "none".to_owned(),
            n => format!("{n}: {}", shared_names(job)),
        };
        let _ = writeln!(
            text,
            "{:<12} {:<16} {:<20} {:>16} {:>16} {:>9}  {shared}",
            job.name,
            job.report.name,
            sip_runs(&job.sips),
            shown(time.map(|t| t.1)),
            shown(alone),
            slowdown,
        );
    }
    for job in reports {
        let _ = write!(text, "\njob {}: {}", job.name, job.report);
    }
    text
}

/// A job's first two shared links and how many more (all of them in
/// `--json`).
fn shared_names(job: &JobReport) -> String {
    let names: Vec<&str> = job.shared.iter().take(2).map(|(l, _)| l.as_str()).collect();
    match job.shared.len() {
        n if n > 2 => format!("{} and {} more", names.join(", "), n - 2),
        _ => names.join(", "),
    }
}

/// The reports as JSON: `{"jobs": [{name, sips, shared_links, report}]}`.
pub fn json(reports: &[JobReport]) -> serde_json::Value {
    let jobs: Vec<serde_json::Value> = reports
        .iter()
        .map(|job| {
            let shared: Vec<serde_json::Value> = job
                .shared
                .iter()
                .map(|(link, with)| serde_json::json!({"link": link, "with": with}))
                .collect();
            serde_json::json!({
                "name": job.name,
                "sips": job.sips,
                "shared_links": shared,
                "report": job.report,
            })
        })
        .collect();
    serde_json::json!({ "jobs": jobs })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str, sips: u32) -> Result<Vec<Job>, String> {
        let source = ConfigSource::Text {
            name: "jobs.yaml".into(),
            text: text.to_owned().into(),
        };
        load(&source, sips, &Options::default()).map_err(|e| e.to_string())
    }

    fn sips_of(text: &str, sips: u32) -> Vec<Vec<u32>> {
        let jobs = load_text(text, sips).unwrap();
        jobs.into_iter().map(|j| j.sips).collect()
    }

    #[test]
    fn lists_are_taken_first_then_placements_from_what_is_free() {
        let text = "jobs:\n  a:\n    workload: ccl_allreduce\n    placement: {kind: packed, count: 3}\n  \
                    b:\n    workload: ccl_allreduce\n    sips: [1, 0]\n";
        assert_eq!(sips_of(text, 8), [vec![2, 3, 4], vec![1, 0]]);
    }

    #[test]
    fn strided_spreads_over_the_free_sips_and_two_strided_jobs_interleave() {
        let job = |name: &str| {
            format!(
                "  {name}:\n    workload: ccl_allreduce\n    placement: {{kind: strided, count: 4}}\n"
            )
        };
        let text = format!("jobs:\n{}{}", job("a"), job("b"));
        assert_eq!(sips_of(&text, 8), [vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
    }

    #[test]
    fn random_is_a_seeded_draw_of_distinct_free_sips() {
        let text = |seed: u64| {
            format!(
                "jobs:\n  a:\n    workload: ccl_allreduce\n    \
                 placement: {{kind: random, count: 5, seed: {seed}}}\n"
            )
        };
        let one = sips_of(&text(7), 16);
        assert_eq!(one, sips_of(&text(7), 16), "the same seed, the same SIPs");
        let set: BTreeSet<u32> = one[0].iter().copied().collect();
        assert_eq!(set.len(), 5);
        assert!(set.iter().all(|&s| s < 16));
        assert_ne!(one, sips_of(&text(8), 16), "another seed, another draw");
    }

    #[test]
    fn overlapping_jobs_are_refused_naming_both() {
        let text = "jobs:\n  a:\n    workload: ccl_allreduce\n    sips: [0, 1]\n  \
                    b:\n    workload: ccl_allreduce\n    sips: [1, 2]\n";
        let error = load_text(text, 4).unwrap_err();
        assert!(
            error.contains("jobs.b.sips: SIP 1 is also job a's"),
            "{error}"
        );
        assert!(error.contains("jobs a and b overlap"), "{error}");
    }

    #[test]
    fn bad_jobs_are_one_error_at_the_key() {
        let check = |job: &str, want: &str| {
            let error = load_text(&format!("jobs:\n  a:\n{job}"), 4).unwrap_err();
            assert!(error.contains(want), "{job}: {error}");
        };
        let w = "    workload: ccl_allreduce\n";
        check(
            &format!("{w}    sips: [4]\n"),
            "jobs.a.sips: SIP 4: the machine has SIPs 0 to 3",
        );
        check(&format!("{w}    sips: [1, 1]\n"), "SIP 1 is listed twice");
        check(&format!("{w}    sips: []\n"), "no SIP");
        check(w, "jobs.a: give one of `sips`");
        check("    sips: [0]\n", "jobs.a: give one of `workload`");
        check(
            "    workload: nope\n    sips: [0]\n",
            "jobs.a.workload: no workload named `nope`",
        );
        check(
            &format!("{w}    flags: {{shape: 1}}\n    sips: [0]\n"),
            "jobs.a.flags: --shape does not apply",
        );
        check(
            &format!("{w}    placement: {{kind: packed, count: 5}}\n"),
            "jobs.a.placement.count: 5 SIPs",
        );
        check(&format!("{w}    sips: [0]\n    colour: red\n"), "colour");
        check(&format!("{w}    sips: [0]\n    start: 5\n"), "start");
    }

    #[test]
    fn a_job_s_name_is_an_identifier_and_not_a_part_s() {
        assert!(check_name("left_1").is_ok());
        for bad in ["host", "sip3", "1st", "a.b", ""] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_name("sipx").is_ok());
    }

    #[test]
    fn sip_lists_print_as_runs() {
        assert_eq!(sip_runs(&[0, 1, 2, 3]), "0-3");
        assert_eq!(sip_runs(&[0, 2, 4]), "0,2,4");
        assert_eq!(sip_runs(&[5, 6, 1]), "5-6,1");
    }
}
