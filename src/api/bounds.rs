//! Bounds on everything a MiniCluster holds, so the API server refuses an unbounded spec
//! before the operator (which keeps every MiniCluster in its watch cache) holds it.
//!
//! Fields that say their own bound keep it; every other string, map and list of the spec
//! gets [`MAX_TEXT`], [`MAX_ENTRIES`] and [`MAX_ITEMS`]. The texts that are programs
//! (`command`, `commands.*`, `flux.brokerConfig`) may be longer, up to [`MAX_PROGRAM`] each
//! and [`MAX_PROGRAMS`] together ([`programs_size`], a CEL rule on the spec and a model
//! check for what `render` reads offline).

use schemars::Schema;
use serde_json::{Value, json};

/// Longest string of the spec that names no bound of its own (a path, an environment
/// value, a label value, a Go duration, ...).
pub const MAX_TEXT: u64 = 4096;
/// Most entries of a map (environment, labels, annotations, node selector, ...).
pub const MAX_ENTRIES: u64 = 256;
/// Most items of a list (tolerations, ports, capabilities, ...).
pub const MAX_ITEMS: u64 = 256;
/// Longest program text: a command, a hook, a script or a broker config.
pub const MAX_PROGRAM: u64 = 65536;
/// Most program text of one MiniCluster, all of its containers' and services' programs and
/// its broker config together.
pub const MAX_PROGRAMS: u64 = 262_144;

/// schemars transform of the spec: bounds every string, map and list that has none.
pub fn bound(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    bound_value(object);
    let rules = object
        .entry("x-kubernetes-validations")
        .or_insert_with(|| json!([]));
    if let Value::Array(rules) = rules {
        rules.push(json!({
            "rule": programs_rule(),
            "message": format!(
                "the commands, hooks, scripts and broker config of a MiniCluster are at most {MAX_PROGRAMS} characters together: put longer programs in a ConfigMap volume"
            ),
        }));
    }
}

fn bound_value(object: &mut serde_json::Map<String, Value>) {
    match object.get("type").and_then(Value::as_str) {
        Some("string") if !object.contains_key("enum") => {
            object.entry("maxLength").or_insert(json!(MAX_TEXT));
        }
        Some("array") => {
            object.entry("maxItems").or_insert(json!(MAX_ITEMS));
        }
        Some("object") if object.contains_key("additionalProperties") => {
            object.entry("maxProperties").or_insert(json!(MAX_ENTRIES));
        }
        _ => {}
    }
    super::schema_walk::each_subschema(object, bound_value);
}

/// The CEL rule on the spec: its programs together are at most [`MAX_PROGRAMS`] bytes
/// (`size` counts characters, never fewer than bytes' worth of a limit this coarse).
pub fn programs_rule() -> String {
    let container = |c: &str| {
        let hooks = [
            "init",
            "pre",
            "brokerPre",
            "workerPre",
            "servicePre",
            "post",
            "prefix",
            "script",
        ]
        .map(|h| format!("(has({c}.commands.{h}) ? size({c}.commands.{h}) : 0)"))
        .join(" + ");
        format!("(has({c}.command) ? size({c}.command) : 0) + (has({c}.commands) ? {hooks} : 0)")
    };
    let c = container("c");
    format!(
        "self.containers.map(c, {c}).sum() + (has(self.services) ? self.services.map(c, {c}).sum() : 0) \
         + (has(self.flux) && has(self.flux.brokerConfig) ? size(self.flux.brokerConfig) : 0) <= {MAX_PROGRAMS}"
    )
}

/// The same sum in characters, for the model's check.
pub fn programs_size(spec: &super::MiniClusterSpec) -> u64 {
    let container = |c: &super::MiniClusterContainer| {
        let k = &c.commands;
        [
            &c.command,
            &k.init,
            &k.pre,
            &k.broker_pre,
            &k.worker_pre,
            &k.service_pre,
            &k.post,
            &k.prefix,
            &k.script,
        ]
        .iter()
        .map(|t| t.chars().count() as u64)
        .sum::<u64>()
    };
    spec.containers
        .iter()
        .chain(&spec.services)
        .map(container)
        .sum::<u64>()
        + spec.flux.broker_config.chars().count() as u64
}
