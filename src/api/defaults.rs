//! Which of the spec's defaults the CRD states: only those that say something, but for the
//! containers'.
//!
//! schemars writes every `#[serde(default)]` of the spec's types into the schema, and the API
//! server writes each stated default into every stored MiniCluster: `false` for each switch,
//! `{}` or the whole default object for each section. Those mean nothing an absent field does
//! not (the operator reads an absent field as the same default, through the same serde
//! attribute), but they made up about a quarter of the stored object, and the API server decodes,
//! defaults, validates and merges the whole object on every write of it, the status's too
//! (docs/benchmarks.md, "A MiniCluster's writes"). So the CRD states a default only where it
//! is a value of its own (`size: 1`, `tasks: 1`, `flux.connectTimeout: 5s`, the view's image,
//! ...), applied wherever the user writes its section; an absent section stays absent.
//!
//! The items of `containers` and `services` keep all their defaults ([`KEPT`]): those lists
//! have no keys to merge by, so `kubectl apply` sends a list whole, and the API server
//! defaults the items it gets. A MiniCluster made under an older CRD holds every item's
//! `false`s; a file applied to it again must default to the same items, or the immutability
//! policy would see its containers changed. A section or switch left out of a file is left
//! as stored by an apply, so only the lists need it.

use schemars::Schema;
use serde_json::Value;

/// The spec's lists whose items keep every default (see the module's doc).
pub const KEPT: [&str; 2] = ["containers", "services"];

/// schemars transform of the spec: drops every default that is a zero value (`false`, `0`,
/// `""`, `[]`) or an object, in the spec and all it holds but the items of [`KEPT`].
pub fn meaningful_only(schema: &mut Schema) {
    let Some(spec) = schema.as_object_mut() else {
        return;
    };
    if spec.get("default").is_some_and(says_nothing) {
        spec.remove("default");
    }
    if let Some(Value::Object(fields)) = spec.get_mut("properties") {
        fields
            .iter_mut()
            .filter(|(name, _)| !KEPT.contains(&name.as_str()))
            .for_each(|(_, field)| {
                if let Value::Object(field) = field {
                    prune(field);
                }
            });
    }
}

fn prune(object: &mut serde_json::Map<String, Value>) {
    if object.get("default").is_some_and(says_nothing) {
        object.remove("default");
    }
    super::schema_walk::each_subschema(object, prune);
}

/// A default an absent field already means: a zero value, or an object (its members that
/// say something keep their own defaults, applied when the object is written).
fn says_nothing(default: &Value) -> bool {
    match default {
        Value::Null | Value::Object(_) => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_default_stays_only_where_it_says_more_than_an_absent_field() {
        let cases = [
            (json!(false), false),
            (json!(0), false),
            (json!(0.0), false),
            (json!(""), false),
            (json!([]), false),
            (json!({}), false),
            (json!({"connectTimeout": "5s"}), false),
            (json!(true), true),
            (json!(1), true),
            (json!("5s"), true),
            (json!(["a"]), true),
        ];
        for (default, kept) in cases {
            let mut schema = Schema::try_from(json!({
                "type": "object",
                "properties": {"f": {"default": default.clone()}},
            }))
            .unwrap();
            meaningful_only(&mut schema);
            let found = schema.as_value().pointer("/properties/f/default");
            assert_eq!(found.is_some(), kept, "default {default}");
        }
    }

    #[test]
    fn nested_sections_lose_their_empty_defaults_and_the_containers_keep_theirs() {
        let mut schema = Schema::try_from(json!({
            "properties": {
                "flux": {"default": {"logLevel": 6}, "properties": {
                    "logLevel": {"default": 6},
                    "minimalService": {"default": false},
                }, "anyOf": [{"properties": {"x": {"default": false}}}]},
                "containers": {"items": {"properties": {"batch": {"default": false}}}},
                "services": {"items": {"properties": {"commands": {"default": {}}}}},
                "size": {"default": 1},
                "default": {"type": "string", "default": "a field of that name"},
            },
        }))
        .unwrap();
        meaningful_only(&mut schema);
        let v = schema.as_value();
        assert_eq!(v.pointer("/properties/flux/default"), None);
        assert_eq!(
            v.pointer("/properties/flux/properties/logLevel/default"),
            Some(&json!(6))
        );
        assert_eq!(
            v.pointer("/properties/flux/properties/minimalService/default"),
            None
        );
        assert_eq!(
            v.pointer("/properties/containers/items/properties/batch/default"),
            Some(&json!(false)),
            "a container keeps its defaults"
        );
        assert_eq!(
            v.pointer("/properties/services/items/properties/commands/default"),
            Some(&json!({})),
            "a service keeps its defaults"
        );
        assert_eq!(
            v.pointer("/properties/flux/anyOf/0/properties/x/default"),
            None
        );
        assert_eq!(v.pointer("/properties/size/default"), Some(&json!(1)));
        assert!(v.pointer("/properties/default/default").is_some());
    }
}
