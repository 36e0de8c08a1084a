use super::*;

#[test]
fn committed_crd_is_generated_from_the_types() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crds/flux-framework.org_miniclusters.yaml"
    );
    let committed = std::fs::read_to_string(path).expect("crds/ file exists");
    let generated = crd_yaml().expect("CRD serializes");
    assert!(
        committed == generated,
        "crds/ is stale: run `make crds` and commit the result"
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
