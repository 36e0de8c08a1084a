//! The walk the spec's schemars transforms share ([`super::bounds`], [`super::defaults`]):
//! a schema's direct subschemas, as schemars inlines them into the CRD.

use serde_json::{Map, Value};

/// Run `visit` on each direct subschema of `schema`: its properties, `items`,
/// `additionalProperties`, and the branches of `allOf`, `anyOf` and `oneOf`. A visitor that
/// calls this again on what it is given walks the whole tree.
pub fn each_subschema(schema: &mut Map<String, Value>, visit: fn(&mut Map<String, Value>)) {
    let mut one = |child: &mut Value| {
        if let Value::Object(child) = child {
            visit(child);
        }
    };
    if let Some(Value::Object(fields)) = schema.get_mut("properties") {
        fields.values_mut().for_each(&mut one);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = schema.get_mut(key) {
            one(child);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get_mut(key) {
            branches.iter_mut().for_each(&mut one);
        }
    }
}
