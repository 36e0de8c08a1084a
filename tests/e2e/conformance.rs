//! Conformance with the Go Flux Operator's own examples (issue 9): every v1alpha2
//! MiniCluster under `examples/` of the Go operator's source archive (read from
//! `../shared/vendor` at test time, never copied into this repository) is applied
//! unchanged (only placed in the test's namespace) and must do what its line in
//! [`EXPECTED`] says:
//!
//! - `Works`: the API server accepts it and the operator takes it to Running (or
//!   Succeeded), with the containers, ports, volumes and Services it asks for in the
//!   JobSet's pod templates, the services pod's Job and the namespace, and the commands of
//!   every container wired to run (what runs inside the pods is the real-Flux tier's);
//! - `RefusedAsGo`: the API server refuses it for unknown fields, and the Go operator's
//!   own CRD (from the same archive) has no such field either, so it refuses them too;
//! - `Unsupported("tag+tag: reason")`: accepted, but the checks find exactly the
//!   differences named by the tags (what this operator does not build).
//!
//! All examples are named `flux-sample`, so each gets a namespace (and an operator
//! watching only it) of its own; they run [`PARALLEL`] at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::api::{
    Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, ValidationDirective,
};
use serde_json::Value;

use flux_operator::api::MiniCluster;

use crate::common::{
    GO_CRD, Operator, TestNamespace, jobset_resource, unpack_go_operator, wait_for, yaml_documents,
};
use crate::operator::install_crd;

const PARALLEL: usize = 6;
const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug)]
enum Expect {
    Works,
    RefusedAsGo,
    /// `"tag+tag: why"`: the tags are the differences the checks must find.
    Unsupported(&'static str),
}
use Expect::*;

// One line per example (path under the archive's `examples/`).
// Tags: `commands` a non-Flux container's `commands.*` are not run (it gets no wrapper);
// `port-service` no Service named after a non-Flux container for its ports; `services`
// spec.services do not run once in a pod `<mc>-services` in the subdomain; `emptydir` an emptyDir
// without `path` (the Go operator mounts it at /dev/shm) or `medium: memory` not mapped to
// `Memory`; `quiet` `logging.quiet` silences `commands.post` (the Go operator does not).
#[rustfmt::skip]
const EXPECTED: &[(&str, Expect)] = &[
    ("distributed/dragonboat/minicluster.yaml", Works),
    ("distributed/fractal/minicluster.yaml", Works),
    ("distributed/gozmq/minicluster-gke.yaml", Works),
    ("distributed/gozmq/minicluster.yaml", Works),
    ("elasticity/basic/minicluster.yaml", Works),
    ("elasticity/downsize/minicluster.yaml", Works),
    ("elasticity/horizontal-autoscaler/v1/minicluster.yaml", Works),
    ("elasticity/horizontal-autoscaler/v2-cpu/minicluster.yaml", Works),
    ("elasticity/horizontal-autoscaler/v2-custom-metric/minicluster.yaml", RefusedAsGo),
    ("experimental/bursting/broker-compute-engine/minicluster.yaml", Works),
    ("experimental/bursting/broker-eks/minicluster-env.yaml", Works),
    ("experimental/bursting/broker-eks/minicluster.yaml", Works),
    ("experimental/bursting/broker-gke/minicluster.yaml", Works),
    ("experimental/bursting/broker-gke/v1/minicluster.yaml", Works),
    ("experimental/bursting/nginx/minicluster.yaml", Works),
    ("experimental/merlin/basic/minicluster.yaml", Works),
    ("experimental/metrics-api/minicluster.yaml", Works), // objects; its post's `source /mnt/flux/flux-view.sh` and pip install into the view fail here (read-only view)
    ("experimental/multiple-pods-per-node/minicluster-4.yaml", Works),
    ("experimental/multiple-pods-per-node/minicluster-7.yaml", Works),
    ("experimental/shared-process-space/minicluster.yaml", RefusedAsGo),
    ("interactive/flux-restful/minicluster.yaml", Works),
    ("interactive/minicluster-persistent.yaml", Works),
    ("launchers/parsl/molecular-design/minicluster.yaml", Works),
    ("machine-learning/fireworks/minicluster.yaml", RefusedAsGo),
    ("machine-learning/mnist/minicluster.yaml", RefusedAsGo),
    ("machine-learning/pytorch/minicluster.yaml", RefusedAsGo),
    ("machine-learning/ray/scikit-learn/minicluster.yaml", RefusedAsGo),
    ("machine-learning/tensorflow/minicluster.yaml", RefusedAsGo),
    ("mpi/mpich/minicluster.yaml", Works),
    ("scaling/basic/minicluster.yaml", Works),
    ("scaling/expand/minicluster.yaml", Works),
    ("services/sidecar/flux-restful/minicluster-auth.yaml", Works), // objects; its post's `source /mnt/flux/flux-view.sh` and pip install into the view fail here (read-only view)
    ("services/sidecar/flux-restful/minicluster.yaml", Works), // objects; its post's `source /mnt/flux/flux-view.sh` and pip install into the view fail here (read-only view)
    ("services/sidecar/minicluster-registry.yaml", Works),
    ("services/single/minicluster-registry.yaml", Works),
    ("simulations/exaworks-ball-bounce/minicluster.yaml", Works),
    ("simulations/laghos-demos/minicluster.yaml", Works),
    ("simulations/sundials/minicluster.yaml", Works),
    ("state/basic-job-completion/minicluster.yaml", Works),
    ("storage/aws/somospie/mountpoint-s3/minicluster.yaml", Works),
    ("storage/aws/somospie/s3fs-fuse/minicluster.yaml", Works),
    ("storage/google/filestore/minicluster.yaml", Works),
    ("storage/google/lammps/minicluster.yaml", Works),
    ("tests/batch/minicluster.yaml", Unsupported("held: a volume without a source is refused (the Go operator falls back to a PVC with an empty claimName)")),
    ("tests/custom-config/minicluster.yaml", Works),
    ("tests/debug/minicluster.yaml", Works),
    ("tests/disable-view/minicluster.yaml", Works),
    ("tests/emptydir/minicluster-without.yaml", Works),
    ("tests/emptydir/minicluster.yaml", Works),
    ("tests/existing-volumes/minicluster.yaml", Works),
    ("tests/flux-resource-list/minicluster.yaml", Works),
    ("tests/flux-sidecar/minicluster.yaml", Works),
    ("tests/hello-world/minicluster.yaml", Works),
    ("tests/lammps/interactive-minicluster.yaml", Works),
    ("tests/lammps/minicluster.yaml", Works),
    ("tests/minimal-service/minicluster.yaml", Works),
    ("tests/nginx-service/minicluster.yaml", Works),
    ("tests/nginx-sidecar-service/minicluster.yaml", Works),
    ("tests/osu-benchmarks/minicluster.yaml", Works),
    ("tests/pokemon/minicluster.yaml", Works),
    ("tests/post/minicluster.yaml", Works),
    ("tests/singularity/minicluster.yaml", Works),
    ("tests/snakemake/minicluster.yaml", Works),
    ("tests/timed/minicluster.yaml", Works),
    ("tests/volumes/minicluster.yaml", Works),
    ("workflows/ramble/minicluster.yaml", Works),
];

/// What happened to one example.
#[derive(Debug)]
enum Observed {
    Works,
    /// The objects are right; the test cluster cannot schedule the pods (why).
    WorksUnschedulable(String),
    RefusedAsGo(Vec<String>),
    /// Refused, but not (only) for fields the Go CRD lacks.
    Refused(String),
    /// Accepted; these differences were found (`tag: detail`).
    Differs(Vec<String>),
}

impl Observed {
    fn matches(&self, expect: Expect) -> bool {
        match (self, expect) {
            (Observed::Works | Observed::WorksUnschedulable(_), Expect::Works) => true,
            (Observed::RefusedAsGo(_), Expect::RefusedAsGo) => true,
            (Observed::Differs(found), Expect::Unsupported(reason)) => {
                let want: BTreeSet<&str> = reason
                    .split_once(':')
                    .map_or("", |(tags, _)| tags)
                    .split('+')
                    .map(str::trim)
                    .collect();
                let got: BTreeSet<&str> = found
                    .iter()
                    .map(|p| p.split_once(':').map_or(p.as_str(), |(t, _)| t))
                    .collect();
                want == got
            }
            _ => false,
        }
    }

    fn verdict(&self) -> String {
        match self {
            Observed::Works => "works".into(),
            Observed::WorksUnschedulable(why) => {
                format!("works (objects; pods unschedulable here: {why})")
            }
            Observed::RefusedAsGo(f) => format!("refused-as-Go ({})", f.join(", ")),
            Observed::Refused(m) => format!("REFUSED, not by the Go CRD: {m}"),
            Observed::Differs(d) => format!("unsupported: {}", d.join("; ")),
        }
    }
}

/// Unpack the examples and the CRD from the archive into `dir`; return the top directory.
fn unpack(dir: &Path) -> Result<PathBuf> {
    unpack_go_operator(dir, &["*/examples/*", &format!("*/{GO_CRD}")])
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            yaml_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

/// The YAML documents of a file, as the API server's decoder sees them.
fn documents(path: &Path) -> Result<Vec<Value>> {
    yaml_documents(&std::fs::read_to_string(path)?)
}

/// Every v1alpha2 MiniCluster under `examples/`: (path under examples/, object).
fn examples(top: &Path) -> Result<Vec<(String, Value)>> {
    let root = top.join("examples");
    let mut files = Vec::new();
    yaml_files(&root, &mut files)?;
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root)?.display().to_string();
        let Ok(docs) = documents(&f) else {
            continue; // not YAML a Kubernetes client reads (e.g. a Helm template)
        };
        let mcs: Vec<Value> = docs
            .into_iter()
            .filter(|d| {
                d["kind"] == "MiniCluster" && d["apiVersion"] == "flux-framework.org/v1alpha2"
            })
            .collect();
        match mcs.len() {
            0 => {}
            1 => out.push((rel, mcs.into_iter().next().unwrap())),
            n => bail!("{rel}: {n} MiniClusters in one file; give each a line of its own"),
        }
    }
    Ok(out)
}

/// The Go CRD's v1alpha2 schema.
fn go_schema(top: &Path) -> Result<Value> {
    let crd = documents(&top.join(GO_CRD))?
        .into_iter()
        .find(|d| d["kind"] == "CustomResourceDefinition")
        .context("no CRD in the Go operator's CRD file")?;
    crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == "v1alpha2"))
        .map(|v| v["schema"]["openAPIV3Schema"].clone())
        .context("no v1alpha2 schema in the Go CRD")
}

/// Whether the Go CRD's schema knows the field path `spec.containers[0].x` (or keeps
/// unknown fields somewhere on the way).
fn go_knows(schema: &Value, path: &str) -> bool {
    let mut node = schema;
    for seg in path.split('.') {
        if node["x-kubernetes-preserve-unknown-fields"] == true {
            return true;
        }
        let (name, indexed) = match seg.find('[') {
            Some(i) => (&seg[..i], true),
            None => (seg, false),
        };
        let Some(next) = node["properties"].get(name) else {
            return false;
        };
        node = if indexed {
            if next["items"].is_null() {
                &next["additionalProperties"]
            } else {
                &next["items"]
            }
        } else {
            next
        };
    }
    true
}

/// The fields a strict refusal names: `unknown field "spec.x"` (create/update) or
/// `.spec.x: field not declared in schema` (server-side apply).
fn unknown_fields(message: &str) -> Vec<String> {
    let decoding = message
        .split("unknown field \"")
        .skip(1)
        .filter_map(|s| s.split('"').next());
    let mut parts: Vec<&str> = message.split(": field not declared in schema").collect();
    parts.pop();
    let apply = parts
        .into_iter()
        .filter_map(|s| s.rsplit([' ', '\n']).next())
        .map(|s| s.trim_start_matches(['[', '.']));
    decoding.chain(apply).map(str::to_string).collect()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// The differences between what the example asks for and what the objects hold: the
/// JobSet (broker pods), the services Job (`<mc>-services`, when there is one), the
/// Services and the ConfigMap's text.
fn differences(
    mc: &Value,
    jobset: &Value,
    services_job: Option<&Value>,
    services: &[Service],
    config: &str,
) -> Vec<String> {
    let mut found = Vec::new();
    let spec = &mc["spec"];
    let name = text(&mc["metadata"]["name"]);
    let broker_templates: Vec<&Value> = jobset["spec"]["replicatedJobs"]
        .as_array()
        .map(|r| {
            r.iter()
                .map(|j| &j["template"]["spec"]["template"])
                .collect()
        })
        .unwrap_or_default();
    let services_template = services_job.map(|j| &j["spec"]["template"]);
    let containers_of = |templates: &[&Value]| -> Vec<Value> {
        templates
            .iter()
            .flat_map(|t| t["spec"]["containers"].as_array().into_iter().flatten())
            .cloned()
            .collect()
    };
    let broker_containers = containers_of(&broker_templates);
    let service_containers = containers_of(&services_template.into_iter().collect::<Vec<_>>());
    let all_volumes: Vec<&Value> = broker_templates
        .iter()
        .chain(services_template.iter())
        .flat_map(|t| t["spec"]["volumes"].as_array().into_iter().flatten())
        .collect();
    let service_ports = |svc: &str| -> BTreeSet<i64> {
        services
            .iter()
            .filter(|s| s.metadata.name.as_deref() == Some(svc))
            .flat_map(|s| s.spec.iter().flat_map(|s| s.ports.iter().flatten()))
            .map(|p| i64::from(p.port))
            .collect()
    };
    let empty = Vec::new();
    let containers = spec["containers"].as_array().unwrap_or(&empty);
    let service_specs = spec["services"].as_array().unwrap_or(&empty);
    let single = containers.len() == 1;

    for (i, c) in containers.iter().chain(service_specs).enumerate() {
        let is_service = i >= containers.len();
        let runs_flux = !is_service && (single || c["runFlux"] == true);
        let image = text(&c["image"]);
        let find = |all: &[Value]| -> Option<Value> {
            all.iter()
                .find(|r| {
                    text(&r["image"]) == image && (c["name"].is_null() || r["name"] == c["name"])
                })
                .cloned()
        };
        let rendered = match (is_service, find(&broker_containers)) {
            // spec.services run in the services pod, not beside every broker.
            (true, Some(_)) => {
                found.push(format!(
                    "services: service {image} runs beside every broker (in the broker pods)"
                ));
                continue;
            }
            (true, None) => find(&service_containers),
            (false, r) => r,
        };
        let Some(rendered) = rendered else {
            found.push(format!("containers: no container with image {image}"));
            continue;
        };
        let ports: BTreeSet<i64> = rendered["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["containerPort"].as_i64())
            .collect();
        for p in c["ports"].as_array().into_iter().flatten() {
            let p = p.as_i64().unwrap_or_default();
            if !ports.contains(&p) {
                found.push(format!("ports: port {p} of {image} not on its container"));
            }
            // The Go operator makes a Service named after a non-Flux container for its
            // ports (spec.services are reached by the services pod's DNS name instead).
            if !runs_flux && !is_service && !service_ports(text(&c["name"])).contains(&p) {
                found.push(format!(
                    "port-service: no Service {} for port {p} of {image}",
                    text(&c["name"])
                ));
            }
        }
        for (vname, v) in c["volumes"].as_object().into_iter().flatten() {
            let want = match text(&v["path"]) {
                "" if v["emptyDir"] == true => "/dev/shm",
                p => p,
            };
            let mounted = rendered["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| m["name"] == vname.as_str() && text(&m["mountPath"]) == want);
            let tag = if v["emptyDir"] == true {
                "emptydir"
            } else {
                "volumes"
            };
            if !mounted {
                found.push(format!(
                    "{tag}: volume {vname} not mounted at {want} in {image}"
                ));
            }
            let medium = text(&v["emptyDirMedium"]);
            if v["emptyDir"] == true && medium.eq_ignore_ascii_case("memory") {
                let ok = all_volumes
                    .iter()
                    .any(|pv| pv["name"] == vname.as_str() && pv["emptyDir"]["medium"] == "Memory");
                if !ok {
                    found.push(format!("emptydir: {vname} medium {medium} is not Memory"));
                }
            }
        }
        if !runs_flux && !is_service {
            // Its commands.* run: their text is in the ConfigMap, and the container runs
            // its wrapper from there (`container.<name>.sh`).
            let rendered_text = format!("{} {}", rendered["command"], rendered["args"]);
            let wrapper = format!("container.{}.sh", text(&c["name"]));
            for (k, cmd) in c["commands"].as_object().into_iter().flatten() {
                let cmd = text(cmd).trim();
                let first = cmd.lines().next().unwrap_or("").trim();
                let run = first.is_empty()
                    || rendered_text.contains(first)
                    || (config.contains(first) && rendered_text.contains(&wrapper));
                if !run {
                    found.push(format!("commands: commands.{k} of {image} is not run"));
                }
            }
        }
    }
    // The services run once, in a pod `<mc>-services` in the MiniCluster's subdomain.
    if !service_specs.is_empty() {
        let pod = services_template.map(|t| &t["spec"]);
        let subdomain = match text(&spec["network"]["headlessName"]) {
            "" => name,
            h => h,
        };
        let in_subdomain = pod.is_some_and(|p| {
            text(&p["hostname"]) == format!("{name}-services") && text(&p["subdomain"]) == subdomain
        });
        if !in_subdomain {
            found.push(format!(
                "services: no pod {name}-services in subdomain {subdomain}"
            ));
        }
    }
    // The Go operator's logging.quiet leaves the output of commands.post alone: the line of
    // an entrypoint in the ConfigMap that runs the post hook must not discard it.
    let silenced_post = config
        .lines()
        .any(|l| l.contains("post.sh\"") && l.contains("/dev/null"));
    if silenced_post {
        found.push("quiet: logging.quiet silences commands.post".into());
    }
    found
}

async fn run_example(path: &str, mut mc: Value, go: &Value) -> Result<Observed> {
    let ns = TestNamespace::create("conformance").await?;
    mc["metadata"]["namespace"] = Value::String(ns.name.clone());
    let name = text(&mc["metadata"]["name"]).to_string();
    let resource = ApiResource::erase::<MiniCluster>(&());
    let api: Api<DynamicObject> = ns.dynamic(&resource);
    let obj: DynamicObject = serde_json::from_value(mc.clone())?;
    // As `kubectl apply --server-side` does: strict field validation.
    let pp = PatchParams::apply("conformance").validation(ValidationDirective::Strict);
    if let Err(e) = api.patch(&name, &pp, &Patch::Apply(&obj)).await {
        let message = match e {
            kube::Error::Api(s) => s.message,
            other => return Err(other).context(format!("{path}: creating")),
        };
        let fields = unknown_fields(&message);
        ns.cleanup().await;
        return Ok(
            if !fields.is_empty() && fields.iter().all(|f| !go_knows(go, f)) {
                Observed::RefusedAsGo(fields)
            } else {
                Observed::Refused(message)
            },
        );
    }
    let _operator = Operator::start(&ns.name)?;
    let pods = ns.api::<Pod>();
    let phase = wait_for(&format!("{path}: a final phase"), TIMEOUT, || async {
        let o = api.get(&name).await?;
        let phase = text(&o.data["status"]["phase"]).to_string();
        let message = o.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["status"] == "True" && c["type"] != "Ready")
            .map(|c| format!("{}: {}", text(&c["type"]), text(&c["message"])))
            .collect::<Vec<_>>()
            .join("; ");
        if ["Running", "Succeeded", "Failed"].contains(&phase.as_str()) {
            return Ok(Some((phase, message)));
        }
        // Held by the operator (InvalidSpec, Blocked): final until someone changes something.
        let held = o.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["status"] == "True" && (c["type"] == "InvalidSpec" || c["type"] == "Blocked")
            });
        if held {
            return Ok(Some(("Held".to_string(), message)));
        }
        // Pods the test cluster cannot place (a PersistentVolumeClaim that does not
        // exist here, more cpu than a node has) keep the cluster Pending; its objects
        // are still checked, and the verdict says why it did not run.
        let unschedulable: BTreeSet<String> = pods
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .flat_map(|p| p.status.iter().flat_map(|s| s.conditions.iter().flatten()))
            .filter(|c| c.type_ == "PodScheduled" && c.status == "False")
            .filter(|c| c.reason.as_deref() == Some("Unschedulable"))
            .filter_map(|c| c.message.clone())
            .collect();
        Ok((!unschedulable.is_empty()).then(|| {
            (
                "Unschedulable".to_string(),
                unschedulable.into_iter().collect::<Vec<_>>().join("; "),
            )
        }))
    })
    .await;
    let (phase, message) = match phase {
        Ok(pm) => pm,
        Err(e) => {
            ns.cleanup().await;
            return Ok(Observed::Differs(vec![format!("pending: {e:#}")]));
        }
    };
    let unschedulable = (phase == "Unschedulable").then_some(message.clone());
    let observed = match phase.as_str() {
        "Failed" => Observed::Differs(vec![format!("failed: {message}")]),
        "Held" => Observed::Differs(vec![format!("held: {message}")]),
        _ => {
            let jobset = ns.dynamic(&jobset_resource()).get(&name).await?;
            let jobset = serde_json::to_value(jobset)?;
            let services = ns
                .api::<Service>()
                .list(&ListParams::default())
                .await?
                .items;
            let config: String = ns
                .api::<ConfigMap>()
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .flat_map(|c| c.data.unwrap_or_default().into_values())
                .collect();
            let services_job = ns
                .api::<Job>()
                .get_opt(&format!("{name}-services"))
                .await?
                .map(serde_json::to_value)
                .transpose()?;
            let found = differences(&mc, &jobset, services_job.as_ref(), &services, &config);
            match (found.is_empty(), unschedulable) {
                (true, None) => Observed::Works,
                (true, Some(why)) => Observed::WorksUnschedulable(why),
                (false, _) => Observed::Differs(found),
            }
        }
    };
    ns.cleanup().await;
    Ok(observed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_operator_examples() -> Result<()> {
    let client = crate::common::client().await?;
    install_crd(&client).await?;
    let dir = tempfile::tempdir()?;
    let top = unpack(dir.path())?;
    let go = go_schema(&top)?;
    let examples = examples(&top)?;
    let expected: BTreeMap<&str, Expect> = EXPECTED.iter().copied().collect();

    let results: Vec<(String, Result<Observed>)> = futures::stream::iter(examples)
        .map(|(path, mc)| {
            let go = &go;
            async move {
                let r = run_example(&path, mc, go).await;
                (path, r)
            }
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    let mut results = results;
    results.sort_by(|a, b| a.0.cmp(&b.0));

    let (mut works, mut refused, mut unsupported) = (0, 0, 0);
    let mut wrong = Vec::new();
    println!(
        "Go operator examples (v1alpha2 MiniClusters), {}:",
        results.len()
    );
    for (path, r) in &results {
        let verdict = match r {
            Ok(o) => o.verdict(),
            Err(e) => format!("ERROR: {e:#}"),
        };
        println!("  {path}: {verdict}");
        match (r, expected.get(path.as_str())) {
            (Ok(o), Some(&e)) if o.matches(e) => match e {
                Works => works += 1,
                RefusedAsGo => refused += 1,
                Unsupported(_) => unsupported += 1,
            },
            (_, e) => wrong.push(format!("{path}: expected {e:?}, got {verdict}")),
        }
    }
    for (path, _) in EXPECTED {
        if !results.iter().any(|(p, _)| p == path) {
            wrong.push(format!("{path}: in EXPECTED but not in the archive"));
        }
    }
    println!(
        "works: {works}, refused-as-Go: {refused}, unsupported: {unsupported} (of {})",
        results.len()
    );
    if !wrong.is_empty() {
        bail!(
            "{} examples differ from EXPECTED:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }
    Ok(())
}

/// The bad input issue 9 found on the way is refused with the API's field names: by the
/// API server where the CRD can say it, else by the operator before it creates anything.
#[tokio::test]
async fn bad_input_is_refused_naming_api_fields() -> Result<()> {
    let client = crate::common::client().await?;
    install_crd(&client).await?;
    let ns = TestNamespace::create("conformance-bad-input").await?;
    let api: Api<DynamicObject> = ns.dynamic(&ApiResource::erase::<MiniCluster>(&()));
    let pp = PatchParams::apply("conformance").validation(ValidationDirective::Strict);
    let mc = |name: &str, spec: Value| -> Result<DynamicObject> {
        Ok(serde_json::from_value(serde_json::json!({
            "apiVersion": "flux-framework.org/v1alpha2",
            "kind": "MiniCluster",
            "metadata": {"name": name, "namespace": ns.name},
            "spec": spec,
        }))?)
    };

    // The operator's selector labels in pod.labels: the API server refuses them.
    let labels = mc(
        "labels",
        serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9"}],
            "pod": {"labels": {"flux-framework.org/role": "mine"}}}),
    )?;
    let refused = api.patch("labels", &pp, &Patch::Apply(&labels)).await;
    let message = format!("{:?}", refused.expect_err("selector labels are refused"));
    assert!(message.contains("pod.labels must not set"), "{message}");

    // Two emptyDirs without path both mount at /dev/shm: the API server refuses it (CEL),
    // naming the volumes, instead of accepting a MiniCluster whose pods it would refuse.
    let shm = mc(
        "shm",
        serde_json::json!({"size": 2, "containers": [{"image": "ubuntu:noble",
            "volumes": {"scratch": {"emptyDir": true}, "shm": {"emptyDir": true},
                        "data": {"emptyDir": true, "path": "/data"}}}]}),
    )?;
    let refused = api.patch("shm", &pp, &Patch::Apply(&shm)).await;
    let message = format!(
        "{:?}",
        refused.expect_err("two mounts at one path are refused")
    );
    assert!(
        message.contains("spec.containers[0].volumes")
            && message.contains("two volumes mount at /dev/shm"),
        "{message}"
    );

    let _operator = Operator::start(&ns.name)?;
    // `app` with a service `web` makes a Service `app-web`; a MiniCluster `app-web` must not
    // take it as its pods' subdomain.
    let app = serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9"}],
        "services": [{"name": "web", "image": "nginx", "ports": [80]}]});
    api.patch("app", &pp, &Patch::Apply(&mc("app", app)?))
        .await?;
    wait_for("Service app-web", TIMEOUT, || async {
        Ok(ns.api::<Service>().get_opt("app-web").await?.map(|_| ()))
    })
    .await?;
    for (name, spec, field, held_by) in [
        (
            "app-web",
            serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9"}]}),
            "Service app-web (the pods' subdomain",
            "Blocked",
        ),
        (
            "view",
            serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9"}],
                // The unnamed Flux container is named after the MiniCluster (as in the Go
                // operator): the flux view init container cannot take that name too.
                "flux": {"container": {"name": "view"}}}),
            "spec.flux.container.name",
            "InvalidSpec",
        ),
        (
            // Not a certificate: found by validation, before the Secret is made.
            "cert",
            serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9"}],
                "flux": {"curveCert": "not a certificate"}}),
            "spec.flux.curveCert",
            "InvalidSpec",
        ),
        (
            // A certificate whose public key is another pair's: found by the CURVE handshake
            // when its Secret would be made, and reported the same way.
            "pair",
            serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9"}],
                "flux": {"curveCert": mismatched_certificate()?}}),
            "spec.flux.curveCert: the public key does not belong to the secret key",
            "InvalidSpec",
        ),
        (
            "net",
            serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9"}],
                "network": {"headlessName": "Not_A_Label"}}),
            "spec.network.headlessName",
            "InvalidSpec",
        ),
        (
            // Commands whose ConfigMap would pass 1 MiB: refused before the Secret. Within
            // the API server's bounds (262144 characters of programs), past 1 MiB in bytes:
            // four-byte characters.
            "big",
            serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9",
                "command": "true",
                "commands": {"init": "🚀".repeat(65_536), "pre": "🚀".repeat(65_536),
                    "post": "🚀".repeat(65_536), "workerPre": "🚀".repeat(65_532)}}]}),
            "spec.containers: the commands, scripts and broker config make the ConfigMap",
            "InvalidSpec",
        ),
        (
            // Every field within its bound, the spec as a whole too large: 160 values of
            // 4096 characters are in both pod templates, a JobSet past 1 MiB.
            "whole",
            serde_json::json!({"size": 2, "containers": [{"image": "rockylinux:9",
                "environment": (0..160).map(|i| (format!("V{i}"), "x".repeat(4096).into()))
                    .collect::<serde_json::Map<_, _>>()}]}),
            "spec: the spec makes the JobSet",
            "InvalidSpec",
        ),
    ] {
        api.patch(name, &pp, &Patch::Apply(&mc(name, spec)?))
            .await?;
        let message = wait_for(&format!("{held_by} on {name}"), TIMEOUT, || async {
            let o = api.get(name).await?;
            Ok(o.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == held_by && c["status"] == "True")
                .map(|c| text(&c["message"]).to_string()))
        })
        .await?;
        assert!(message.contains(field), "{name}: {message}");
        assert!(
            ns.dynamic(&jobset_resource())
                .get_opt(name)
                .await?
                .is_none(),
            "{name}: no JobSet for an invalid spec"
        );
        // (Foreign objects are found after the certificate Secret is made.)
        assert!(
            name == "app-web"
                || ns
                    .api::<k8s_openapi::api::core::v1::Secret>()
                    .get_opt(&format!("{name}-curve"))
                    .await?
                    .is_none(),
            "{name}: no certificate Secret for an invalid spec"
        );
    }
    ns.cleanup().await;
    Ok(())
}

/// A well-formed CURVE certificate whose public key belongs to another keypair.
fn mismatched_certificate() -> Result<String> {
    use flux_operator::model::certificate::Certificate;
    let one = Certificate::generate("pair")?;
    let other = Certificate::generate("pair")?;
    Ok(Certificate::from_keys("pair", other.public_key(), one.secret_key())?.to_text())
}

/// Every default the Go operator's CRD declares (e.g. the flux view image) means the same
/// here, so a manifest that leaves a field out means the same: this CRD states the same
/// default, or states none (a zero value, which the CRD leaves unstated: `api::defaults`) and
/// the operator's types read the field left out as that value.
/// Needs no cluster: both schemas are read from files.
#[test]
fn go_crd_defaults_mean_the_same_here() -> Result<()> {
    use kube::CustomResourceExt;
    let dir = tempfile::tempdir()?;
    let top = unpack(dir.path())?;
    let go = go_schema(&top)?;
    let crd = serde_json::to_value(MiniCluster::crd())?;
    let ours = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut found = Vec::new();
    go_defaults(&go, ours, "", &mut found);
    assert!(
        found.len() >= 10,
        "only {} Go defaults found: is the schema read?",
        found.len()
    );
    let mut wrong = Vec::new();
    let mut unstated = 0;
    for (path, go, stated) in &found {
        let here = match stated {
            Value::Null => {
                unstated += 1;
                read_when_left_out(path)?
            }
            stated => stated.clone(),
        };
        if &here != go {
            wrong.push(format!("{path}: Go {go}, here {here} (stated: {stated})"));
        }
    }
    assert!(
        unstated > 0,
        "every Go default is stated here: the left-out reading is not tested"
    );
    assert!(wrong.is_empty(), "defaults differ:\n{}", wrong.join("\n"));
    Ok(())
}

/// Each default of the Go schema `go`: its path (`.spec.containers[].pullAlways`), the
/// value, and this schema's default for the same field (null where it states none).
fn go_defaults(go: &Value, ours: &Value, path: &str, found: &mut Vec<(String, Value, Value)>) {
    if !go["default"].is_null() {
        found.push((
            path.to_string(),
            go["default"].clone(),
            ours["default"].clone(),
        ));
    }
    for (k, sub) in go["properties"].as_object().into_iter().flatten() {
        if !ours["properties"][k].is_null() {
            go_defaults(sub, &ours["properties"][k], &format!("{path}.{k}"), found);
        }
    }
    for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
        if go[key].is_object() && ours[key].is_object() {
            go_defaults(&go[key], &ours[key], &format!("{path}{suffix}"), found);
        }
    }
}

/// What the operator's types read for the field at `path` (`.spec.containers[].pullAlways`)
/// when a MiniCluster has every object on the way to it but not the field itself.
fn read_when_left_out(path: &str) -> Result<Value> {
    let mut mc = serde_json::json!({
        "apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
        "metadata": {"name": "m"},
        "spec": {"containers": [{"image": "app"}]},
    });
    let segments: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let (field, parents) = segments.split_last().context("an empty path")?;
    let mut pointer = String::new();
    let mut node = &mut mc;
    for seg in parents {
        let (name, inner) = match (seg.strip_suffix("[]"), seg.strip_suffix("{}")) {
            (Some(name), _) => (name, Some(("0", serde_json::json!([{"image": "app"}])))),
            (_, Some(name)) => (name, Some(("v", serde_json::json!({"v": {}})))),
            _ => (*seg, None),
        };
        let fresh = inner
            .as_ref()
            .map_or(serde_json::json!({}), |(_, v)| v.clone());
        node = node
            .as_object_mut()
            .context("not an object")?
            .entry(name)
            .or_insert(fresh);
        pointer += &format!("/{name}");
        if let Some((key, _)) = inner {
            node = node
                .pointer_mut(&format!("/{key}"))
                .context("no inner item")?;
            pointer += &format!("/{key}");
        }
    }
    let read: MiniCluster = serde_json::from_value(mc.clone())
        .with_context(|| format!("{path}: the operator's types refuse {mc}"))?;
    let back = serde_json::to_value(read)?;
    Ok(back
        .pointer(&format!("{pointer}/{field}"))
        .cloned()
        .unwrap_or(Value::Null))
}
