//! How a lead pod ended, as its Flux container said in its termination message
//! ([`LeadEnd`], read by [`lead_end`]). The watches remember the last one of each MiniCluster
//! after the pod is gone ([`crate::controller::watches::lead_ends`]).

use super::pods::{BrokerPod, is_lead};
use crate::api::NAME_LABEL;
use crate::flux::{JobsReport, SaveReport};

/// How a lead pod's Flux container ended, as it said in its termination message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeadEnd {
    /// The pod.
    pub pod: String,
    /// The jobs its instance held as it ended.
    pub jobs: Option<JobsReport>,
    /// Its save replaced the archive (`spec.archive`).
    pub saved: bool,
}

/// The MiniCluster of a lead pod whose container ended with a job count or a save report,
/// and that end.
pub fn lead_end(pod: &BrokerPod) -> Option<((String, String), LeadEnd)> {
    if !is_lead(pod) {
        return None;
    }
    let meta = &pod.metadata;
    let mc = meta.labels.as_ref()?.get(NAME_LABEL)?;
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let message = statuses.iter().find_map(|c| {
        let message = c.state.as_ref()?.terminated.as_ref()?.message.as_deref()?;
        let jobs = JobsReport::parse(message);
        let save = SaveReport::parse(message);
        (jobs.is_some() || save.is_some()).then_some((jobs, save))
    });
    let (jobs, save) = message?;
    let end = LeadEnd {
        pod: meta.name.clone()?,
        jobs,
        saved: save.is_some_and(|s| s.saved),
    };
    Some(((meta.namespace.clone()?, mc.clone()), end))
}
