//! Which SIP each rank of a world runs on (ADR-0116).
//!
//! A run of one workload is the machine's world: rank `r` runs on SIP `r`
//! (seed ADR-0024). A job of `run --jobs` runs on a set of SIPs listed in
//! rank order, beside other jobs on the same fabric: its rank `r` runs on
//! the `r`-th SIP of its list, and its process group is a logical ring of
//! those SIPs, as a `new_group` of the machine's world is. [`JobSips`] is
//! that map; the facade ([`super::Torch`]) and `torch.distributed` read
//! every rank's SIP through it, so host code and workloads are the same in
//! a job and alone.

use std::rc::Rc;

/// The SIPs of a world, by rank: the machine's (`rank = SIP`) or a job's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSips(Option<Rc<[u32]>>);

impl JobSips {
    /// The machine's world: rank `r` on SIP `r`.
    pub fn machine() -> JobSips {
        JobSips(None)
    }

    /// A job's world on `sips`, rank `r` on `sips[r]` (distinct SIPs of
    /// the machine; the jobs file is checked before it gets here).
    pub fn job(sips: &[u32]) -> JobSips {
        JobSips(Some(Rc::from(sips)))
    }

    /// The SIP rank `rank` runs on; `None` past a job's ranks.
    pub fn sip_of(&self, rank: usize) -> Option<u32> {
        match &self.0 {
            None => u32::try_from(rank).ok(),
            Some(sips) => sips.get(rank).copied(),
        }
    }

    /// A job's SIPs in rank order; `None` for the machine's world.
    pub fn listed(&self) -> Option<&[u32]> {
        self.0.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_world_runs_rank_r_on_sip_r_and_a_job_on_its_list() {
        assert_eq!(JobSips::machine().sip_of(5), Some(5));
        assert_eq!(JobSips::machine().listed(), None);
        let job = JobSips::job(&[9, 3, 12]);
        assert_eq!(job.sip_of(0), Some(9));
        assert_eq!(job.sip_of(2), Some(12));
        assert_eq!(job.sip_of(3), None, "past the job's ranks");
        assert_eq!(job.listed(), Some(&[9, 3, 12][..]));
    }
}
