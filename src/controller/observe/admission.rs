//! Kueue's view of a queued MiniCluster: the Workload Kueue made for its JobSet says whether
//! it is admitted, why it waits, and whether it was evicted, and its pod counts say whether
//! that admission is still for the JobSet's size ([`Admission`], [`admission_of`]). Its watch
//! keeps of a Workload only what is read here ([`trim_workload`]).

use jiff::Timestamp;
use kube::api::DynamicObject;
use serde_json::Value;

use super::jobset::ObservedJobSet;

/// Kueue's verdict on the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    /// Whether the Workload is admitted.
    pub admitted: bool,
    /// The reason of the Workload's Admitted (or QuotaReserved) condition.
    pub reason: String,
    /// Its message.
    pub message: String,
    /// When Kueue admitted it (the Workload's Admitted condition).
    pub admitted_at: Option<Timestamp>,
}

fn condition<'a>(data: &'a Value, type_: &str) -> Option<&'a Value> {
    data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn is_true(c: Option<&Value>) -> bool {
    c.is_some_and(|c| c["status"] == "True")
}

fn text(c: Option<&Value>, key: &str) -> String {
    c.and_then(|c| c[key].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The reason [`admission_of`] gives an admission that is for another size than the JobSet's.
pub const RESIZED: &str = "Resized";

/// Admission from a Workload and the JobSet it was made for (pure): the Workload's
/// conditions ([`admission_from`]), except that an admitted Workload whose pod sets do not
/// match the JobSet's replicated jobs (a queued cluster resized) is not the JobSet's
/// admission. Kueue then stops the JobSet and admits a new Workload at the new size; until it
/// does, the brokers the JobSet may start run on quota admitted for the old size.
pub fn admission_of(workload: &Value, jobset: &ObservedJobSet) -> Admission {
    let admission = admission_from(workload);
    let Some(admitted) = pod_sets(workload).filter(|_| admission.admitted) else {
        return admission;
    };
    let wanted = jobset_pods(jobset);
    if admitted == wanted {
        return admission;
    }
    Admission {
        admitted: false,
        reason: RESIZED.to_string(),
        message: format!(
            "Kueue admitted {} broker pods and the JobSet now has {}: \
             Kueue stops the brokers and admits the new size as a new Workload",
            total(&admitted),
            total(&wanted)
        ),
        admitted_at: None,
    }
}

/// A Workload's pod sets: each name and count, sorted by name; `None` if it lists none (a
/// Workload read before its pod sets were kept).
fn pod_sets(workload: &Value) -> Option<Vec<(String, i64)>> {
    let sets = workload["spec"]["podSets"].as_array()?;
    let mut counts: Vec<(String, i64)> = sets
        .iter()
        .map(|s| {
            let name = s["name"].as_str().unwrap_or_default().to_string();
            (name, s["count"].as_i64().unwrap_or(1))
        })
        .collect();
    counts.sort();
    Some(counts)
}

/// The pods each of a JobSet's replicated jobs runs, as Kueue counts a pod set (its Jobs
/// times the lesser of their parallelism and completions), sorted by name.
fn jobset_pods(jobset: &ObservedJobSet) -> Vec<(String, i64)> {
    let mut counts: Vec<(String, i64)> = jobset
        .spec
        .replicated_jobs
        .iter()
        .map(|r| {
            let spec = r.template.spec.as_ref();
            let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
            let per_job = spec
                .and_then(|s| s.completions)
                .map_or(parallelism, |c| c.min(parallelism));
            (
                r.name.clone(),
                i64::from(r.replicas.unwrap_or(1)) * i64::from(per_job),
            )
        })
        .collect();
    counts.sort();
    counts
}

fn total(counts: &[(String, i64)]) -> i64 {
    counts.iter().map(|(_, n)| n).sum()
}

/// Admission from a Workload's conditions (pure).
pub fn admission_from(data: &Value) -> Admission {
    let admitted = condition(data, "Admitted");
    let reserved = condition(data, "QuotaReserved");
    let evicted = condition(data, "Evicted");
    if is_true(admitted) {
        let at = admitted
            .and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(|t| t.parse::<Timestamp>().ok());
        return Admission {
            admitted: true,
            reason: "Admitted".to_string(),
            message: text(admitted, "message"),
            admitted_at: at,
        };
    }
    if is_true(evicted) {
        return Admission {
            admitted: false,
            reason: "Evicted".to_string(),
            message: format!(
                "evicted by Kueue ({}): {}",
                text(evicted, "reason"),
                text(evicted, "message")
            ),
            admitted_at: None,
        };
    }
    let message = match text(reserved, "message") {
        m if !m.is_empty() => m,
        _ => "waiting for Kueue to reserve quota".to_string(),
    };
    Admission {
        admitted: false,
        reason: "Pending".to_string(),
        message,
        admitted_at: None,
    }
}

/// A Kueue Workload as the reconciler reads it ([`admission_of`]): metadata (its owner, the
/// JobSet), the conditions, and each pod set's name and count; the pod sets' templates, a
/// copy of every pod template, dropped.
pub fn trim_workload(wl: &mut DynamicObject) {
    let conditions = wl.data["status"]["conditions"].take();
    let pod_sets: Option<Vec<serde_json::Value>> =
        wl.data["spec"]["podSets"].as_array().map(|sets| {
            sets.iter()
                .map(|s| serde_json::json!({"name": s["name"], "count": s["count"]}))
                .collect()
        });
    wl.data = serde_json::json!({"status": {"conditions": conditions}});
    if let Some(pod_sets) = pod_sets {
        wl.data["spec"] = serde_json::json!({"podSets": pod_sets});
    }
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt;
    use serde_json::json;

    use super::*;

    /// A JobSet of a lead and `followers` followers, as the operator renders one.
    fn jobset(followers: Option<i32>) -> ObservedJobSet {
        let mut jobs = vec![json!({"name": "lead", "replicas": 1,
            "template": {"spec": {"parallelism": 1, "completions": 1}}})];
        if let Some(n) = followers {
            jobs.push(json!({"name": "workers", "replicas": 1,
                "template": {"spec": {"parallelism": n, "completions": n}}}));
        }
        serde_json::from_value(json!({"metadata": {"name": "m"}, "spec": {"replicatedJobs": jobs}}))
            .expect("a JobSet")
    }

    /// A Workload admitted (or only pending) for the pod sets `sets` names ("lead=1
    /// workers=2"; `None`: a Workload whose pod sets were not read).
    fn workload(admitted: bool, sets: Option<&str>) -> serde_json::Value {
        let status = if admitted { "True" } else { "False" };
        let mut wl = json!({"status": {"conditions": [
            {"type": "QuotaReserved", "status": status, "reason": "R", "message": "waiting",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Admitted", "status": status, "reason": "Admitted", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:05Z"}]}});
        if let Some(sets) = sets {
            wl["spec"]["podSets"] = (sets.split_whitespace())
                .filter_map(|set| set.split_once('='))
                .map(|(name, count)| json!({"name": name, "count": count.parse::<i64>().unwrap()}))
                .collect();
        }
        wl
    }

    #[test]
    fn an_admission_is_the_jobsets_only_while_the_pod_counts_match() {
        // (what it proves, Workload admitted, its pod sets, JobSet followers, admitted, reason)
        let cases = [
            (
                "counts match",
                true,
                Some("lead=1 workers=2"),
                Some(2),
                true,
                "Admitted",
            ),
            (
                "another order",
                true,
                Some("workers=2 lead=1"),
                Some(2),
                true,
                "Admitted",
            ),
            ("one broker", true, Some("lead=1"), None, true, "Admitted"),
            (
                "grown: the old size's",
                true,
                Some("lead=1 workers=1"),
                Some(2),
                false,
                RESIZED,
            ),
            (
                "shrunk",
                true,
                Some("lead=1 workers=3"),
                Some(2),
                false,
                RESIZED,
            ),
            (
                "pending stays pending",
                false,
                Some("lead=1 workers=1"),
                Some(2),
                false,
                "Pending",
            ),
            ("no pod sets read", true, None, Some(2), true, "Admitted"),
        ];
        for (what, admitted, sets, followers, want, reason) in cases {
            let a = admission_of(&workload(admitted, sets), &jobset(followers));
            assert_eq!((a.admitted, a.reason.as_str()), (want, reason), "{what}");
        }
        let resized = admission_of(&workload(true, Some("lead=1 workers=1")), &jobset(Some(2)));
        let grown = "Kueue admitted 2 broker pods and the JobSet now has 3";
        assert!(resized.message.starts_with(grown), "{}", resized.message);
        assert_eq!(resized.admitted_at, None);
    }

    #[test]
    fn pending_workload_says_why() {
        let wl = json!({"status": {"conditions": [{
            "type": "QuotaReserved", "status": "False", "reason": "Pending",
            "message": "couldn't assign flavors to pod set workers: insufficient quota for cpu",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let a = admission_from(&wl);
        assert!(!a.admitted);
        assert!(a.message.contains("insufficient quota"), "{a:?}");
    }

    #[test]
    fn admitted_workload_has_its_time() {
        let wl = json!({"status": {"conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}});
        let a = admission_from(&wl);
        assert!(a.admitted);
        assert_eq!(a.admitted_at.map(|t| t.as_second()), Some(1_767_225_605));
    }

    #[test]
    fn evicted_workload_is_not_admitted() {
        let wl = json!({"status": {"conditions": [
            {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "", "lastTransitionTime": "2026-01-01T00:00:05Z"},
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a higher priority Workload", "lastTransitionTime": "2026-01-01T00:00:06Z"}]}});
        let a = admission_from(&wl);
        assert!(!a.admitted);
        assert_eq!(a.reason, "Evicted");
        assert!(a.message.contains("Preempted"));
    }

    #[test]
    fn a_trimmed_workload_keeps_its_owner_admission_and_pod_counts() {
        let mut wl: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "m", "uid": "u"}]},
            "spec": {"podSets": [{"name": "lead", "count": 1, "template": {"spec": {"containers": []}}}]},
            "status": {"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .expect("a Workload");
        let before = admission_from(&wl.data);
        trim_workload(&mut wl);
        assert_eq!(
            wl.data["spec"],
            serde_json::json!({"podSets": [{"name": "lead", "count": 1}]}),
            "the pod sets' names and counts kept, their templates dropped"
        );
        assert_eq!(wl.owner_references().len(), 1);
        let after = admission_from(&wl.data);
        assert!(after.admitted);
        assert_eq!(
            (before.reason, before.admitted_at),
            (after.reason, after.admitted_at)
        );
        // A Workload with no pod sets read keeps none: not an empty list, which would match
        // no JobSet's counts.
        wl.data["spec"] = serde_json::json!({});
        trim_workload(&mut wl);
        assert_eq!(wl.data.get("spec"), None);
    }
}
