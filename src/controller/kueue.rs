//! Kueue's view of a queued MiniCluster: the Workload Kueue made for its JobSet says whether
//! it is admitted, why it waits, and whether it was evicted.

use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use super::status::Admission;

/// The Workload API versions the operator reads, newest first: `v1beta2` (Kueue's stored
/// version since v0.16, served since v0.15), then `v1beta1` (deprecated in v0.16). What the
/// operator reads (the conditions `QuotaReserved`, `Admitted`, `Evicted` and the owner
/// reference to the JobSet) is the same in both.
pub const WORKLOAD_VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// Kueue's Workload at `version` (one of [`WORKLOAD_VERSIONS`]).
pub fn workload_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", version, "Workload"),
        "workloads",
    )
}

/// The newest Workload API version this cluster serves and this operator may list where it
/// watches (`namespace`, or all namespaces); `None` when Kueue is not installed.
pub async fn served_version(client: &Client, namespace: Option<&str>) -> Option<&'static str> {
    for version in WORKLOAD_VERSIONS {
        let resource = workload_resource(version);
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        if api
            .list_metadata(&ListParams::default().limit(1))
            .await
            .is_ok()
        {
            return Some(version);
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::admission_from;

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
}
