use super::*;

#[test]
fn committed_crd_is_generated_from_the_types() {
    let generated = crd_yaml().expect("CRD serializes");
    assert_committed("crds/flux-framework.org_miniclusters.yaml", &generated);
}

/// The file at `path` in the checkout is `generated`, byte for byte.
fn assert_committed(path: &str, generated: &str) {
    let root = env!("CARGO_MANIFEST_DIR");
    let committed = std::fs::read_to_string(format!("{root}/{path}")).expect(path);
    assert!(
        committed == generated,
        "{path} is stale: run `make crds` and commit the result"
    );
}

#[test]
fn the_charts_pod_security_policy_is_the_manifests() {
    let root = env!("CARGO_MANIFEST_DIR");
    let read = |path: &str| std::fs::read_to_string(format!("{root}/{path}")).expect(path);
    let chart = read("charts/flux-operator/templates/pod-security.yaml");
    let wrapped = format!(
        "{{{{- if .Values.podSecurity.enabled }}}}\n{}{{{{- end }}}}\n",
        read("manifests/pod-security.yaml")
    );
    assert!(
        chart == wrapped,
        "the chart's pod-security.yaml is stale: run `make crds` and commit the result"
    );
}

#[test]
fn committed_immutability_policy_is_generated_from_the_types() {
    let generated = immutable::policy_yaml().expect("the policy serializes");
    for path in [
        "crds/minicluster-immutable.yaml",
        "charts/flux-operator/templates/minicluster-immutable.yaml",
    ] {
        assert_committed(path, &generated);
    }
}

#[test]
fn every_spec_field_but_size_and_suspend_is_held_by_the_immutability_policy() {
    let fields = immutable::spec_fields();
    for mutable in immutable::MUTABLE {
        assert!(fields.iter().any(|f| f == mutable), "no spec.{mutable}");
    }
    let policy = immutable::policy().spec.expect("a spec");
    let held: Vec<&str> = policy
        .validations
        .iter()
        .flatten()
        .map(|v| v.expression.as_str())
        .collect();
    for field in &fields {
        let rule = format!("object.spec.?{field} == oldObject.spec.?{field}");
        let is_held = held.contains(&rule.as_str());
        let mutable = immutable::MUTABLE.contains(&field.as_str());
        assert!(
            is_held != mutable,
            "spec.{field}: held {is_held}, mutable {mutable}"
        );
    }
    assert!(fields.len() > 20, "the spec's fields were read: {fields:?}");
    assert_eq!(held.len(), fields.len() - immutable::MUTABLE.len());
}

#[test]
fn the_crd_compares_no_field_with_its_old_value_but_the_size() {
    let crd = crd_yaml().expect("CRD serializes");
    let transition_rules: Vec<&str> = crd
        .lines()
        .filter(|l| l.contains("oldSelf"))
        .map(str::trim)
        .collect();
    assert_eq!(
        transition_rules,
        ["rule: has(self.maxSize) || self.size == oldSelf.size"],
        "a status write runs every CRD rule: keep transition rules in api::immutable"
    );
}
