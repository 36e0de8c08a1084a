//! Helpers shared by the rooms' unit tests: hostile arguments, test MiniClusters and their
//! statuses (a target for tests is [`crate::target::target_for_tests`]).

use std::ffi::OsString;

use flux_operator::api::MiniCluster;
use serde_json::json;

/// Arguments a shell would mangle: spaces, both quotes, `$`, a glob, a newline, unicode,
/// an empty word, a leading dash and a `--`.
pub(crate) fn hostile() -> Vec<OsString> {
    [
        "two words",
        "it's",
        "say \"hi\"",
        "$HOME",
        "*",
        "line one\nline two",
        "ƒlux ünïcode ✓",
        "",
        "-n",
        "--",
        "`id`; $(id)",
    ]
    .map(OsString::from)
    .to_vec()
}

pub(crate) fn minicluster(spec: serde_json::Value, status: serde_json::Value) -> MiniCluster {
    let mut obj = json!({
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": "demo", "namespace": "team"},
        "spec": {"size": 2, "containers": [{"image": "ubuntu:noble"}]},
    });
    for (k, v) in spec.as_object().cloned().unwrap_or_default() {
        obj["spec"][k] = v;
    }
    if !status.is_null() {
        obj["status"] = status;
    }
    serde_json::from_value(obj).expect("a test MiniCluster")
}

pub(crate) fn running() -> serde_json::Value {
    json!({"phase": "Running", "readyBrokers": 2,
           "conditions": [cond("Ready", "True", "AllBrokersReady", "")]})
}

pub(crate) fn cond(type_: &str, status: &str, reason: &str, message: &str) -> serde_json::Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

pub(crate) fn words(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}
