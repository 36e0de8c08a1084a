//! The one error type for a bad spec ([`FieldError`], naming the field in the API's
//! spelling), and what the API layer itself knows about a manifest: the fields its schema does
//! not declare ([`unknown_fields`]) and the longest pod name a name makes. The checks the API
//! server cannot make are the model's ([`crate::model::validate`]).

use std::fmt;

use super::{MiniCluster, POD_SUFFIX_LEN, WORKERS_JOB};

/// One problem with a spec, naming the field: the one error type for a bad spec, whoever finds
/// it (these checks, the renderer, Flux's files, the certificate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.containers[1].name`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

impl FieldError {
    /// The error of `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Fields of a MiniCluster manifest (as JSON) that the CRD's schema does not declare, by
/// path (`spec.containers[0].existingVolumes`): what the API server's strict field
/// validation (kubectl's default) refuses. `metadata` is the API server's, not checked here.
pub fn unknown_fields(manifest: &serde_json::Value) -> Vec<String> {
    use kube::CustomResourceExt;
    let crd = serde_json::to_value(MiniCluster::crd()).unwrap_or_default();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut found = Vec::new();
    if let Some(fields) = manifest.as_object() {
        for (k, v) in fields {
            match k.as_str() {
                "apiVersion" | "kind" | "metadata" => {}
                _ => unknown_in(&schema["properties"][k], v, k, &mut found, schema),
            }
        }
    }
    found
}

fn unknown_in(
    schema: &serde_json::Value,
    value: &serde_json::Value,
    path: &str,
    found: &mut Vec<String>,
    parent: &serde_json::Value,
) {
    if schema.is_null() {
        if parent["x-kubernetes-preserve-unknown-fields"] != true {
            found.push(path.to_string());
        }
        return;
    }
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        return;
    }
    match value {
        serde_json::Value::Object(fields) => {
            let map = &schema["additionalProperties"];
            for (k, v) in fields {
                if map.is_object() {
                    unknown_in(map, v, &format!("{path}[{k}]"), found, schema);
                } else {
                    unknown_in(
                        &schema["properties"][k],
                        v,
                        &format!("{path}.{k}"),
                        found,
                        schema,
                    );
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                unknown_in(&schema["items"], v, &format!("{path}[{i}]"), found, schema);
            }
        }
        _ => {}
    }
}

/// A garde path (`network.headless_name`) in the API's spelling (`network.headlessName`):
/// snake_case field names become camelCase; indexes (in brackets) stay, and so do the keys of
/// the maps garde looks into (`volumes.<name>`, spelled as [`key_field`] does).
pub fn api_path(path: &str) -> String {
    /// Maps garde validates entry by entry: the segment after one is a key.
    const MAPS: &[&str] = &["volumes"];
    let mut segments = Vec::new();
    let mut segment = String::new();
    let mut depth = 0usize;
    for ch in path.chars() {
        match ch {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                segments.push(std::mem::take(&mut segment));
                continue;
            }
            _ => {}
        }
        segment.push(ch);
    }
    segments.push(segment);
    let mut out = String::with_capacity(path.len());
    let mut key_next = false;
    for (i, segment) in segments.iter().enumerate() {
        if key_next {
            out = key_field(&out, segment);
            key_next = false;
            continue;
        }
        if i > 0 {
            out.push('.');
        }
        out.push_str(&camel_case(segment));
        key_next = MAPS.contains(&segment.as_str());
    }
    out
}

/// `headless_name` as `headlessName`; what is in brackets stays.
fn camel_case(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    let mut depth = 0usize;
    let mut upper = false;
    for ch in segment.chars() {
        match ch {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '_' if depth == 0 => {
                upper = true;
                continue;
            }
            _ => {}
        }
        if upper {
            out.extend(ch.to_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

/// Length of the longest pod name JobSet will create for a MiniCluster called `name` that can
/// grow to `max_size` brokers: `<name>-workers-0-<max_size-2>` plus the Job controller's suffix.
pub fn longest_pod_name(name: &str, max_size: i32) -> usize {
    let last_index = max_size.saturating_sub(2).max(0);
    name.len() + 1 + WORKERS_JOB.len() + 3 + last_index.to_string().len() + POD_SUFFIX_LEN
}

/// The field of key `key` in map `map`: `map.key`, or `map["key"]` for a key that would not
/// read as one path segment (empty, or with characters other than letters, digits, `-`, `_`).
pub fn key_field(map: &str, key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        format!("{map}.{key}")
    } else {
        format!("{map}[{key:?}]")
    }
}
