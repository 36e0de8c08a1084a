//! The arms (which system runs) and the scenarios (what a round does).

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Arm {
    Operator,
    JobSet,
    Go,
    Job,
    JobSetNoPodWebhooks,
}

impl FromStr for Arm {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "operator" => Arm::Operator,
            "jobset" => Arm::JobSet,
            "go" => Arm::Go,
            "job" => Arm::Job,
            "jobset-nowh" => Arm::JobSetNoPodWebhooks,
            _ => bail!("unknown arm {s:?} (operator, jobset, go, job, jobset-nowh)"),
        })
    }
}

impl Arm {
    pub(crate) fn key(self) -> &'static str {
        match self {
            Arm::Operator => "operator",
            Arm::JobSet => "jobset",
            Arm::Go => "go",
            Arm::Job => "job",
            Arm::JobSetNoPodWebhooks => "jobset-nowh",
        }
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            Arm::Operator => "operator",
            Arm::JobSet => "bare JobSet",
            Arm::Go => "Go operator",
            Arm::Job => "one Indexed Job",
            Arm::JobSetNoPodWebhooks => "JobSet, no pod webhooks",
        }
    }

    pub(crate) fn crd(self) -> Option<Crd> {
        match self {
            Arm::Operator => Some(Crd::Ours),
            Arm::Go => Some(Crd::Go),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Crd {
    Ours,
    Go,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Scenario {
    /// One MiniCluster of this size.
    Single(usize),
    /// One MiniCluster of size A and maxSize B, its A pods Ready, grown to size B.
    Resize(usize, usize),
    /// This many MiniClusters of size 2, then the idle window.
    Many(usize),
    /// One MiniCluster of this size, Ready, then its lead pod Succeeded.
    End(usize),
}

impl Scenario {
    pub(crate) fn tag(self) -> String {
        match self {
            Scenario::Single(n) => format!("n{n}"),
            Scenario::Many(m) => format!("m{m}"),
            Scenario::Resize(a, b) => format!("resize{a}-{b}"),
            Scenario::End(n) => format!("end{n}"),
        }
    }
}
