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
