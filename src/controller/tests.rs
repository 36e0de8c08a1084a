//! The reconcile path against a mocked API server (a `tower-test` service behind a real
//! `kube::Client`): the decisions that need the client, and the calls each one makes.

use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::PartialObjectMeta;
use kube::client::Body;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::Context;
use super::index::Index;
use super::observe::jobset::ObservedJobSet;
use super::observe::pods::BrokerPod;
use super::reconcile;
use crate::api::{MiniCluster, Phase};
use crate::jobset::JobSet;
use crate::metrics::Metrics;

const UID: &str = "uid-m";

fn minicluster() -> MiniCluster {
    crate::fixtures::m().generation(1).uid(UID).size(2).build()
}

/// One request the fake API server answered.
#[derive(Clone, Debug)]
struct Call {
    method: Method,
    path: String,
    body: Value,
}

impl Call {
    fn is(&self, method: &Method, path_end: &str) -> bool {
        self.method == *method && self.path.ends_with(path_end)
    }
}

type Route = Box<dyn Fn(&Call) -> Option<(StatusCode, Value)> + Send + Sync>;

/// A fake API server: answers each request with the first route that matches; records every
/// call. Anything unrouted is a 404, as for an object that does not exist.
fn fake_api(routes: Vec<Route>) -> (Client, Arc<Mutex<Vec<Call>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let log = calls.clone();
    tokio::spawn(async move {
        while let Some((request, respond)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let call = Call {
                method: parts.method.clone(),
                path: parts.uri.path().to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            log.lock().unwrap().push(call.clone());
            let (status, answer) = routes.iter().find_map(|r| r(&call)).unwrap_or((
                StatusCode::NOT_FOUND,
                status_body(404, "NotFound", "not found"),
            ));
            respond.send_response(
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                    .unwrap(),
            );
        }
    });
    (Client::new(service, "ns"), calls)
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message})
}

/// Answer `method` on paths ending in `path_end` with `status` and `body`.
fn route(method: Method, path_end: &'static str, status: StatusCode, body: Value) -> Route {
    Box::new(move |c: &Call| c.is(&method, path_end).then(|| (status, body.clone())))
}

/// Writes echo their body back, as a server-side apply or a create would return the object
/// (a status write returns the whole MiniCluster).
fn echo_writes() -> Route {
    Box::new(|c: &Call| {
        if c.is(&Method::PATCH, "/status") {
            let mut mc = serde_json::to_value(minicluster()).unwrap();
            mc["status"] = c.body["status"].clone();
            return Some((StatusCode::OK, mc));
        }
        matches!(c.method, Method::POST | Method::PATCH).then(|| {
            let code = if c.method == Method::POST {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let mut body = c.body.clone();
            if body["metadata"]["name"].is_null() {
                body["metadata"]["name"] = json!("m");
            }
            (code, body)
        })
    })
}

/// Object metadata as the API server returns it for a metadata-only read.
fn partial(name: &str, owner_uid: Option<&str>) -> Value {
    let owners = owner_uid.map(|uid| {
        json!([{"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster", "name": "m", "uid": uid, "controller": true}])
    });
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
           "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners.unwrap_or(json!([]))}})
}

/// Stores with these objects in them.
struct Stores {
    miniclusters: Writer<MiniCluster>,
    jobsets: Writer<ObservedJobSet>,
    pods: Writer<BrokerPod>,
    secrets: Writer<PartialObjectMeta<Secret>>,
    config_maps: Writer<PartialObjectMeta<ConfigMap>>,
    services: Writer<PartialObjectMeta<Service>>,
}

fn index() -> (Index, Stores) {
    let (miniclusters, mw) = reflector::store();
    let (jobsets, jw) = reflector::store();
    let (jobs, _) = reflector::store::<Job>();
    let (pods, pw) = reflector::store();
    let (secrets, sw) = reflector::store();
    let (config_maps, cw) = reflector::store();
    let (services, vw) = reflector::store();
    (
        Index {
            miniclusters,
            jobsets,
            jobs,
            pods,
            secrets,
            config_maps,
            services,
            workloads: None,
            lead_ends: Default::default(),
        },
        Stores {
            miniclusters: mw,
            jobsets: jw,
            pods: pw,
            secrets: sw,
            config_maps: cw,
            services: vw,
        },
    )
}

fn context(client: Client, index: Index) -> Arc<Context> {
    let reporter = Reporter {
        controller: "flux-operator".into(),
        instance: None,
    };
    Arc::new(Context::new(
        client,
        reporter,
        Arc::new(Metrics::new()),
        index,
        crate::fixtures::env(),
    ))
}

fn calls_of(calls: &Arc<Mutex<Vec<Call>>>) -> Vec<Call> {
    calls.lock().unwrap().clone()
}

fn status_patch(calls: &[Call]) -> Option<Value> {
    calls
        .iter()
        .find(|c| c.is(&Method::PATCH, "/miniclusters/m/status"))
        .map(|c| c.body["status"].clone())
}

fn condition(status: &Value, type_: &str) -> Option<(String, String)> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
}

#[tokio::test]
async fn a_new_minicluster_makes_its_secret_and_config_map_together_then_its_jobset_and_no_status_write_or_event()
 {
    let (client, calls) = fake_api(vec![echo_writes()]);
    let (index, _stores) = index();
    let ctx = context(client, index);
    reconcile::reconcile(Arc::new(minicluster()), ctx)
        .await
        .unwrap();
    let calls = calls_of(&calls);
    let writes: Vec<String> = calls
        .iter()
        .filter(|c| c.method != Method::GET)
        .map(|c| {
            format!(
                "{} {}",
                c.method,
                c.path.rsplit_once("/namespaces/ns/").unwrap().1
            )
        })
        .collect();
    let cm = writes
        .iter()
        .find(|w| w.starts_with("POST configmaps"))
        .cloned()
        .expect("a ConfigMap created");
    // The Secret and the ConfigMap go out together (in either order), before the JobSet.
    let mut first_two = writes[..2.min(writes.len())].to_vec();
    first_two.sort();
    assert_eq!(
        first_two,
        vec![cm, "POST secrets".to_string()],
        "{writes:?}"
    );
    assert_eq!(
        writes[2..],
        ["POST jobsets"],
        "then the JobSet; no status write (the API server shows Pending until one says more) \
         and no Event"
    );
    // No lookup: a create fails if the name is taken, and the pods' subdomain is in the
    // Service watch.
    let reads: Vec<&str> = calls
        .iter()
        .filter(|c| c.method == Method::GET)
        .map(|c| c.path.as_str())
        .collect();
    assert!(reads.is_empty(), "{reads:?}");
    // The certificate's secret key goes to the Secret only: never into the status.
    let secret = &calls
        .iter()
        .find(|c| c.is(&Method::POST, "/secrets"))
        .unwrap()
        .body;
    assert!(secret["data"].is_object());
    for c in calls.iter().filter(|c| !c.path.ends_with("/secrets")) {
        assert!(!c.body.to_string().contains("secret-key"), "{c:?}");
    }
}

#[tokio::test]
async fn a_jobset_of_its_name_owned_by_someone_else_is_never_applied() {
    let (client, calls) = fake_api(vec![
        route(
            Method::POST,
            "/jobsets",
            StatusCode::CONFLICT,
            status_body(409, "AlreadyExists", "jobsets \"m\" already exists"),
        ),
        route(
            Method::GET,
            "/jobsets/m",
            StatusCode::OK,
            partial("m", None),
        ),
        echo_writes(),
    ]);
    let (index, _stores) = index();
    reconcile::reconcile(Arc::new(minicluster()), context(client, index))
        .await
        .unwrap();
    let calls = calls_of(&calls);
    assert!(
        !calls.iter().any(|c| c.is(&Method::PATCH, "/jobsets/m")),
        "the other JobSet was not touched: {calls:?}"
    );
    assert!(
        calls.iter().any(|c| c.is(&Method::GET, "/jobsets/m")),
        "its owner looked at after the create found the name taken: {calls:?}"
    );
    let status = status_patch(&calls).expect("a status write");
    let (on, message) = condition(&status, "Blocked").unwrap();
    assert_eq!(on, "True");
    assert!(
        message.contains("JobSet m exists and is not owned"),
        "{message}"
    );
    assert_eq!(status["phase"], "Pending", "held, not failed");
    let event = calls
        .iter()
        .find(|c| c.is(&Method::POST, "/events"))
        .expect("an Event");
    assert_eq!(event.body["type"], "Warning");
    assert_eq!(event.body["reason"], "Blocked");
}

#[tokio::test]
async fn an_admission_refusal_holds_the_cluster_instead_of_retrying_forever() {
    let (client, calls) = fake_api(vec![
        route(
            Method::POST,
            "/jobsets",
            StatusCode::FORBIDDEN,
            status_body(
                403,
                "Forbidden",
                "admission webhook \"vjobset.kb.io\" denied the request: no",
            ),
        ),
        echo_writes(),
    ]);
    let (index, _stores) = index();
    let action = reconcile::reconcile(Arc::new(minicluster()), context(client, index)).await;
    assert!(action.is_ok(), "not an error to retry: {action:?}");
    let status = status_patch(&calls_of(&calls)).expect("a status write");
    let (on, message) = condition(&status, "Blocked").unwrap();
    assert_eq!(on, "True");
    assert!(message.contains("denied the request"), "{message}");
}

/// The calls other than Events.
fn writes_and_reads(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| !c.path.contains("/events"))
        .map(|c| format!("{} {}", c.method, c.path))
        .collect()
}

#[tokio::test]
async fn the_reconciles_after_a_create_make_no_call_while_the_watches_catch_up() {
    let (client, calls) = fake_api(vec![echo_writes()]);
    let (index, mut stores) = index();
    let ctx = context(client, index);
    // The cached MiniCluster as the watch first delivered it: no status. Every reconcile
    // here starts from it (the MiniCluster watch lags too).
    let cached = Arc::new(minicluster());
    reconcile::reconcile(cached.clone(), ctx.clone())
        .await
        .unwrap();
    let first = calls_of(&calls);
    assert_eq!(
        first.iter().filter(|c| c.path.ends_with("/status")).count(),
        0,
        "nothing to say yet but Pending, the API server's default"
    );
    let made: Vec<Value> = first
        .iter()
        .filter(|c| c.method == Method::POST && !c.path.contains("/events"))
        .map(|c| c.body.clone())
        .collect();
    calls.lock().unwrap().clear();

    // Woken by the first watch event (say the Secret's) while no store shows anything yet:
    // the Secret, ConfigMap and JobSet it made are there.
    reconcile::reconcile(cached.clone(), ctx.clone())
        .await
        .unwrap();
    assert_eq!(
        writes_and_reads(&calls_of(&calls)),
        Vec::<String>::new(),
        "no second create, no lookup, no second status write"
    );

    // The watches catch up: the same, from the stores.
    for body in made {
        let mut meta: kube::api::ObjectMeta =
            serde_json::from_value(body["metadata"].clone()).unwrap();
        meta.namespace = Some("ns".into());
        match body["kind"].as_str() {
            Some("Secret") => {
                stores
                    .secrets
                    .apply_watcher_event(&watcher::Event::Apply(PartialObjectMeta::<Secret> {
                        metadata: meta,
                        ..Default::default()
                    }))
            }
            Some("ConfigMap") => stores
                .config_maps
                .apply_watcher_event(&watcher::Event::Apply(PartialObjectMeta::<ConfigMap> {
                    metadata: meta,
                    ..Default::default()
                })),
            Some("JobSet") => {
                let mut js: ObservedJobSet = serde_json::from_value(body.clone()).unwrap();
                js.metadata.namespace = Some("ns".into());
                stores
                    .jobsets
                    .apply_watcher_event(&watcher::Event::Apply(js))
            }
            other => panic!("made {other:?}"),
        }
    }
    reconcile::reconcile(cached, ctx.clone()).await.unwrap();
    assert_eq!(writes_and_reads(&calls_of(&calls)), Vec::<String>::new());
}

#[tokio::test]
async fn a_service_named_as_the_subdomain_blocks_a_new_cluster_without_a_lookup() {
    let (client, calls) = fake_api(vec![echo_writes()]);
    let (index, mut stores) = index();
    // Anyone's Service of the MiniCluster's name (its pods' subdomain), unlabelled: only the
    // watch of all Services shows it.
    stores
        .services
        .apply_watcher_event(&watcher::Event::Apply(PartialObjectMeta::<Service> {
            metadata: kube::api::ObjectMeta {
                name: Some("m".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }));
    reconcile::reconcile(Arc::new(minicluster()), context(client, index))
        .await
        .unwrap();
    let calls = calls_of(&calls);
    assert_eq!(
        writes_and_reads(&calls),
        ["PATCH /apis/flux-framework.org/v1alpha2/namespaces/ns/miniclusters/m/status"],
        "nothing made, nothing looked up"
    );
    let status = status_patch(&calls).unwrap();
    let (on, message) = condition(&status, "Blocked").unwrap();
    assert_eq!(on, "True");
    assert!(
        message.contains("Service m (the pods' subdomain"),
        "{message}"
    );
}

/// A ready broker pod of MiniCluster `m` as its watch keeps it: ROLE's, made by a Job of
/// the JobSet whose uid is `jobset_uid` (`None`: a pod with the labels alone, made by hand).
fn broker_pod(name: &str, role: &str, jobset_uid: Option<&str>) -> BrokerPod {
    let mut labels =
        json!({"flux-framework.org/minicluster": "m", "flux-framework.org/role": role});
    let mut owners = json!([]);
    if let Some(uid) = jobset_uid {
        labels[crate::jobset::JOBSET_UID_LABEL] = json!(uid);
        owners = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "m-lead-0",
            "uid": format!("job-of-{uid}"), "controller": true}]);
    }
    let mut pod: BrokerPod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "labels": labels, "ownerReferences": owners},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
    .unwrap();
    pod.metadata.creation_timestamp = None;
    pod
}

#[test]
fn a_minicluster_observes_the_pods_of_its_own_jobset_not_those_that_share_its_labels() {
    let mc = minicluster();
    let desired = crate::render::desired(&crate::fixtures::cluster(&mc)).unwrap();
    let (index, mut stores) = index();
    hold_as_made(&mut stores, &mc, &desired);
    let mut old = broker_pod("m-lead-0-0-old", "lead", Some("uid-of-a-deleted-jobset"));
    old.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now(),
    ));
    for pod in [
        broker_pod("m-lead-0-0-new", "lead", Some("uid-js")),
        broker_pod("m-workers-0-0-new", "workers", Some("uid-js")),
        // A MiniCluster of the same name deleted a moment ago: its pods still terminate.
        old,
        // Made by hand with the labels alone.
        broker_pod("m-lead-0-0-lookalike", "lead", None),
    ] {
        stores.pods.apply_watcher_event(&watcher::Event::Apply(pod));
    }
    let mut seen: Vec<String> = index
        .observe(&mc)
        .pods
        .iter()
        .map(|p| p.name_any())
        .collect();
    seen.sort();
    assert_eq!(seen, ["m-lead-0-0-new", "m-workers-0-0-new"]);
}

#[test]
fn without_its_jobset_a_minicluster_observes_the_pods_its_jobs_made_since_it_was_created() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let born = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let at = |secs: i64| Some(Time(born + jiff::SignedDuration::from_secs(secs)));
    let mut mc = minicluster();
    mc.metadata.creation_timestamp = at(0);
    let (index, stores) = index();
    let mut stores = stores;
    for (name, jobset_uid, created) in [
        // Its JobSet was deleted (a TTL, say): its pods are still going.
        ("m-lead-0-0-own", Some("uid-deleted-js"), at(5)),
        // An earlier MiniCluster's of the same name: older than this one.
        ("m-lead-0-0-earlier", Some("uid-earlier-js"), at(-60)),
        // Made by hand, after it.
        ("m-lead-0-0-lookalike", None, at(5)),
    ] {
        let mut pod = broker_pod(name, "lead", jobset_uid);
        pod.metadata.creation_timestamp = created;
        stores.pods.apply_watcher_event(&watcher::Event::Apply(pod));
    }
    let seen: Vec<String> = index
        .observe(&mc)
        .pods
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(seen, ["m-lead-0-0-own"]);
}

#[tokio::test]
async fn when_the_watches_hold_everything_as_desired_a_reconcile_makes_no_call() {
    let mc = minicluster();
    let desired = crate::render::desired(&crate::fixtures::cluster(&mc)).unwrap();
    let (index, mut stores) = index();
    hold_as_made(&mut stores, &mc, &desired);
    for (i, role) in ["lead", "workers"].into_iter().enumerate() {
        let pod = broker_pod(&format!("m-{i}"), role, Some("uid-js"));
        stores.pods.apply_watcher_event(&watcher::Event::Apply(pod));
    }
    let _ = &mut stores.services;

    // The status a previous reconcile wrote for exactly this state.
    let (client, calls) = fake_api(vec![echo_writes()]);
    let ctx = context(client, index.clone());
    let observed = index.observe(&mc);
    let spec = crate::model::resolve(&mc, &ctx.env);
    let planned = super::plan::plan(&super::plan::Inputs {
        mc: &mc,
        spec: &spec,
        old: &mc.status.clone().unwrap_or_default(),
        observed: &observed,
        certificate_refused: None,
        now: jiff::Timestamp::now(),
    })
    .unwrap();
    assert!(planned.steps.is_empty(), "{:?}", planned.steps);
    let mut settled = mc.clone();
    settled.status = Some(planned.status);
    assert_eq!(settled.status.as_ref().unwrap().phase, Some(Phase::Running));

    reconcile::reconcile(Arc::new(settled), ctx).await.unwrap();
    assert_eq!(calls_of(&calls).len(), 0, "{:?}", calls_of(&calls));
}

#[tokio::test]
async fn what_is_kept_per_minicluster_goes_when_the_minicluster_goes() {
    let (client, _calls) = fake_api(vec![echo_writes()]);
    let (index, _stores) = index();
    let ctx = context(client, index);
    reconcile::reconcile(Arc::new(minicluster()), ctx.clone())
        .await
        .unwrap();
    assert!(ctx.tracked() > 0);
    ctx.retain(&[Arc::new(minicluster())]);
    assert!(ctx.tracked() > 0, "kept while it exists");
    ctx.retain(&[]);
    assert_eq!(ctx.tracked(), 0, "nothing left once it is gone");
}

#[tokio::test]
async fn a_written_status_is_kept_only_until_the_cache_shows_it() {
    let (client, calls) = fake_api(vec![echo_writes()]);
    let (index, _stores) = index();
    let ctx = context(client, index);
    // Suspended: its first reconcile has a status to write.
    let mut mc = minicluster();
    mc.spec.suspend = true;
    reconcile::reconcile(Arc::new(mc.clone()), ctx.clone())
        .await
        .unwrap();
    assert!(ctx.awaits_cache(&mc), "the cache has not shown the write");
    let lagging = ctx.latest(&mc);
    assert!(lagging.status.is_some(), "the written status stands in");
    assert!(ctx.awaits_cache(&mc));

    let stored = status_patch(&calls_of(&calls)).expect("a status write");
    let mut cached = mc.clone();
    cached.status = Some(serde_json::from_value(stored).unwrap());
    assert_eq!(ctx.latest(&cached).status, cached.status);
    assert!(!ctx.awaits_cache(&mc), "forgotten once the cache has it");
}

#[test]
fn a_failing_watch_retries_within_seconds_however_long_it_fails() {
    use kube::runtime::utils::Backoff;
    let mut backoff = super::watches::stream::watch_backoff();
    let delays: Vec<_> = (0..50)
        .map(|_| backoff.next().expect("never gives up"))
        .collect();
    assert!(
        delays
            .iter()
            .all(|d| *d <= super::watches::stream::WATCH_BACKOFF_MAX),
        "{delays:?}"
    );
    assert!(delays[0] <= std::time::Duration::from_secs(1), "{delays:?}");
    backoff.reset();
    assert!(backoff.next().unwrap() <= std::time::Duration::from_secs(1));
}

#[test]
fn a_service_from_the_watch_keeps_only_what_the_reconciler_reads() {
    let mut svc: PartialObjectMeta<Service> = serde_json::from_value(json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {
            "name": "web", "namespace": "ns", "uid": "u", "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"flux-framework.org/minicluster": "m", "app": "web"},
            "annotations": {"flux-framework.org/applied": "h1",
                "kubectl.kubernetes.io/last-applied-configuration": "{\"a\": \"large\"}"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"}],
            "finalizers": ["f"]
        }
    }))
    .unwrap();
    super::observe::trim::trim_service(&mut svc);
    assert_eq!(
        serde_json::to_value(&svc.metadata).unwrap(),
        json!({"name": "web", "namespace": "ns", "uid": "u", "generation": 1,
            "labels": {"flux-framework.org/minicluster": "m"},
            "annotations": {"flux-framework.org/applied": "h1"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"}]})
    );
    // Someone else's Service: its name and owners only.
    let mut other: PartialObjectMeta<Service> = serde_json::from_value(json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {"name": "db", "namespace": "ns", "labels": {"app": "db"},
            "annotations": {"note": "x"}}
    }))
    .unwrap();
    super::observe::trim::trim_service(&mut other);
    assert_eq!(other.metadata.labels, None);
    assert_eq!(other.metadata.annotations, None);
}

/// The API server's answer to a create in a namespace being deleted.
fn terminating_answer() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403, "reason": "Forbidden",
        "message": "secrets \"m-curve\" is forbidden: unable to create new content in namespace ns because it is being terminated",
        "details": {"name": "m-curve", "kind": "secrets",
            "causes": [{"reason": "NamespaceTerminating", "message": "namespace ns is being terminated", "field": "metadata.namespace"}]}})
}

#[test]
fn the_namespace_terminating_answer_is_told_from_other_refusals() {
    let api = |body: Value| -> kube::Error {
        kube::Error::Api(Box::new(serde_json::from_value(body).unwrap()))
    };
    let cases = [
        ("the NamespaceLifecycle answer", terminating_answer(), true),
        (
            "its message alone",
            status_body(
                403,
                "Forbidden",
                "configmaps \"x\" is forbidden: unable to create new content in namespace ns because it is being terminated",
            ),
            true,
        ),
        (
            "its cause alone",
            json!({"code": 403, "reason": "Forbidden", "message": "forbidden",
                "details": {"causes": [{"reason": "NamespaceTerminating"}]}}),
            true,
        ),
        (
            "an admission webhook's refusal",
            status_body(
                403,
                "Forbidden",
                "admission webhook \"vjobset.kb.io\" denied the request: no",
            ),
            false,
        ),
        (
            "a missing permission",
            status_body(
                403,
                "Forbidden",
                "secrets is forbidden: User \"x\" cannot create resource \"secrets\"",
            ),
            false,
        ),
        (
            "a name taken",
            status_body(409, "AlreadyExists", "being terminated"),
            false,
        ),
    ];
    for (what, body, want) in cases {
        assert_eq!(
            super::apply::namespace_terminating(&api(body)),
            want,
            "{what}"
        );
    }
}

#[tokio::test]
async fn in_a_namespace_being_terminated_nothing_more_is_written_and_nothing_retried() {
    let (client, calls) = fake_api(vec![
        route(
            Method::POST,
            "/secrets",
            StatusCode::FORBIDDEN,
            terminating_answer(),
        ),
        route(
            Method::POST,
            "/configmaps",
            StatusCode::FORBIDDEN,
            terminating_answer(),
        ),
        echo_writes(),
    ]);
    let (index, mut stores) = index();
    let mc = minicluster();
    let mut neighbour = minicluster();
    neighbour.metadata.name = Some("n".into());
    neighbour.metadata.uid = Some("uid-n".into());
    let mut elsewhere = neighbour.clone();
    elsewhere.metadata.namespace = Some("other".into());
    elsewhere.metadata.uid = Some("uid-e".into());
    for m in [&mc, &neighbour, &elsewhere] {
        stores
            .miniclusters
            .apply_watcher_event(&watcher::Event::Apply(m.clone()));
    }
    let ctx = context(client, index);

    let action = reconcile::reconcile(Arc::new(mc.clone()), ctx.clone()).await;
    assert!(action.is_ok(), "not an error to retry: {action:?}");
    let mut refused = writes_and_reads(&calls_of(&calls));
    refused.sort();
    assert_eq!(
        refused,
        [
            "POST /api/v1/namespaces/ns/configmaps",
            "POST /api/v1/namespaces/ns/secrets"
        ],
        "the refused creates (sent together), and then no Event, no status, nothing else"
    );
    assert!(
        !calls_of(&calls).iter().any(|c| c.path.contains("/events")),
        "no Event"
    );
    calls.lock().unwrap().clear();

    // Woken again (its objects being deleted), and its neighbour in the same namespace:
    // nothing at all.
    reconcile::reconcile(Arc::new(mc), ctx.clone())
        .await
        .unwrap();
    reconcile::reconcile(Arc::new(neighbour), ctx.clone())
        .await
        .unwrap();
    assert_eq!(calls_of(&calls).len(), 0, "{:?}", calls_of(&calls));

    // A MiniCluster in another namespace is not held.
    reconcile::reconcile(Arc::new(elsewhere), ctx)
        .await
        .unwrap();
    assert!(
        calls_of(&calls)
            .iter()
            .any(|c| c.is(&Method::POST, "/namespaces/other/secrets")),
        "{:?}",
        calls_of(&calls)
    );
}

#[tokio::test]
async fn a_minicluster_being_deleted_gets_no_write() {
    let (client, calls) = fake_api(vec![echo_writes()]);
    let (index, _stores) = index();
    let mut mc = minicluster();
    mc.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now(),
    ));
    reconcile::reconcile(Arc::new(mc), context(client, index))
        .await
        .unwrap();
    assert_eq!(calls_of(&calls).len(), 0, "{:?}", calls_of(&calls));
}

/// A running cluster with a services pod and its Service `m-web`, whose JobSet, Secret and
/// ConfigMap the watches hold, and neither the Service nor the services Job (deleted).
fn running_without_service_and_job() -> (MiniCluster, Index) {
    let mut mc = minicluster();
    mc.spec.services =
        serde_json::from_value(json!([{"name": "web", "image": "nginx", "ports": [80]}])).unwrap();
    mc.status = Some(crate::api::MiniClusterStatus {
        phase: Some(Phase::Running),
        job_set: "m".into(),
        curve_secret: "m-curve".into(),
        ..Default::default()
    });
    let env = crate::fixtures::env();
    let desired = crate::render::desired(&crate::model::resolve(&mc, &env).unwrap()).unwrap();
    let (index, mut stores) = index();
    hold_as_made(&mut stores, &mc, &desired);
    (mc, index)
}

/// The watches hold `mc`'s JobSet, certificate Secret and ConfigMap as the operator made
/// them (owned by `mc`, labelled).
fn hold_as_made(stores: &mut Stores, mc: &MiniCluster, desired: &crate::render::Desired) {
    let owner = mc.controller_owner_ref(&()).unwrap();
    let mut js = desired.jobset.clone();
    js.metadata.owner_references = Some(vec![owner.clone()]);
    js.metadata.uid = Some("uid-js".into());
    stores
        .jobsets
        .apply_watcher_event(&watcher::Event::Apply(ObservedJobSet::from(&js)));
    let meta = |name: String| kube::api::ObjectMeta {
        name: Some(name),
        namespace: Some("ns".into()),
        labels: Some(crate::render::common_labels(mc)),
        owner_references: Some(vec![owner.clone()]),
        ..Default::default()
    };
    stores
        .secrets
        .apply_watcher_event(&watcher::Event::Apply(PartialObjectMeta::<Secret> {
            metadata: meta("m-curve".into()),
            ..Default::default()
        }));
    stores
        .config_maps
        .apply_watcher_event(&watcher::Event::Apply(PartialObjectMeta::<ConfigMap> {
            metadata: meta(desired.config_map.name_any()),
            ..Default::default()
        }));
}

/// The reasons and messages of the Events posted.
fn events_posted(calls: &[Call]) -> Vec<(String, String)> {
    calls
        .iter()
        .filter(|c| c.is(&Method::POST, "/events"))
        .map(|c| {
            (
                c.body["reason"].as_str().unwrap_or_default().to_string(),
                c.body["note"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn objects_deleted_by_hand_are_made_again_with_a_warning_only_when_the_create_made_them() {
    // Both gone: the Service (looked up first, absent) and the Job (created) each say so.
    let (mc, index) = running_without_service_and_job();
    let (client, calls) = fake_api(vec![echo_writes()]);
    reconcile::reconcile(Arc::new(mc), context(client, index))
        .await
        .unwrap();
    let calls = calls_of(&calls);
    assert!(
        calls
            .iter()
            .any(|c| c.is(&Method::PATCH, "/services/m-web"))
    );
    assert!(calls.iter().any(|c| c.is(&Method::POST, "/jobs")));
    let recreated: Vec<String> = events_posted(&calls)
        .into_iter()
        .filter(|(reason, _)| reason == "Recreated")
        .map(|(_, note)| note)
        .collect();
    // Each kind its own Event.
    assert_eq!(recreated.len(), 2, "{recreated:?}");
    assert!(recreated[0].starts_with("Service m-web"), "{recreated:?}");
    assert!(recreated[1].starts_with("Job m-services"), "{recreated:?}");

    // Only the watches lag: both are there, this MiniCluster's. Nothing says "made again".
    let (mc, index) = running_without_service_and_job();
    let (client, calls) = fake_api(vec![
        route(
            Method::GET,
            "/services/m-web",
            StatusCode::OK,
            partial("m-web", Some(UID)),
        ),
        route(
            Method::POST,
            "/jobs",
            StatusCode::CONFLICT,
            status_body(409, "AlreadyExists", "jobs \"m-services\" already exists"),
        ),
        route(
            Method::GET,
            "/jobs/m-services",
            StatusCode::OK,
            partial("m-services", Some(UID)),
        ),
        echo_writes(),
    ]);
    reconcile::reconcile(Arc::new(mc), context(client, index))
        .await
        .unwrap();
    let events = events_posted(&calls_of(&calls));
    assert!(
        !events.iter().any(|(reason, _)| reason == "Recreated"),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_certificate_from_the_spec_is_checked_before_anything_is_made_and_then_used() {
    use crate::model::certificate::Certificate;
    let good = Certificate::generate("m").unwrap();
    let other = Certificate::generate("m").unwrap();

    // Keys that do not belong together (a CURVE handshake shows it): nothing is made, the
    // status says InvalidSpec naming the field, not Blocked.
    let mut mc = minicluster();
    mc.spec.flux.curve_cert = good
        .to_text()
        .replace(good.public_key(), other.public_key())
        .into();
    let (client, calls) = fake_api(vec![echo_writes()]);
    let (stores_index, _stores) = index();
    reconcile::reconcile(Arc::new(mc), context(client, stores_index))
        .await
        .unwrap();
    let calls = calls_of(&calls);
    assert_eq!(
        writes_and_reads(&calls),
        ["PATCH /apis/flux-framework.org/v1alpha2/namespaces/ns/miniclusters/m/status"],
        "only the status"
    );
    let status = status_patch(&calls).unwrap();
    let (on, message) = condition(&status, "InvalidSpec").unwrap();
    assert_eq!(on, "True");
    assert!(message.starts_with("spec.flux.curveCert: "), "{message}");
    assert!(condition(&status, "Blocked").is_none(), "{status}");

    // A good one is the Secret's, as given.
    let mut mc = minicluster();
    mc.spec.flux.curve_cert = good.to_text().into();
    let (client, calls) = fake_api(vec![echo_writes()]);
    let (stores_index, _stores) = index();
    reconcile::reconcile(Arc::new(mc), context(client, stores_index))
        .await
        .unwrap();
    let calls = calls_of(&calls);
    let body = &calls
        .iter()
        .find(|c| c.is(&Method::POST, "/secrets"))
        .expect("the Secret made")
        .body;
    let secret: Secret = serde_json::from_value(body.clone()).unwrap();
    let text = &secret.data.unwrap()[crate::flux::CURVE_SECRET_KEY].0;
    let made = Certificate::parse(std::str::from_utf8(text).unwrap()).unwrap();
    assert_eq!(made, good);
}

/// Issue 37: at every start of the operator (and whenever a watch lists again) the
/// MiniClusters' watch yields each listed MiniCluster before its store holds it; teardown
/// took that for a deletion and deleted every running cluster's JobSet. Only a deletion the
/// API server reports takes the JobSet, pinned to its UID.
#[tokio::test]
async fn teardown_deletes_a_jobset_on_a_reported_deletion_never_while_the_watch_lists() {
    use futures::{SinkExt, StreamExt};

    let (client, calls) = fake_api(vec![route(
        Method::DELETE,
        "/jobsets/m",
        StatusCode::OK,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
    )]);
    let (index, mut stores) = index();
    let jobset: JobSet = serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "m", "namespace": "ns", "uid": "uid-js", "resourceVersion": "7",
            "ownerReferences": [{"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
                "name": "m", "uid": UID, "controller": true}]},
        "spec": {"replicatedJobs": []}
    }))
    .unwrap();
    stores
        .jobsets
        .apply_watcher_event(&watcher::Event::Apply(ObservedJobSet::from(&jobset)));
    let (mc_writer, mc_store) = {
        let writer = Writer::<MiniCluster>::default();
        let reader = writer.as_reader();
        (writer, reader)
    };
    let teardown = super::teardown::Teardown::new(&client, &mc_store, &index.jobsets, &index.jobs);
    let (mut feed, events) = futures::channel::mpsc::unbounded();
    let touched = teardown.watch(super::watches::stream::reflect_events(
        events.map(Ok),
        mc_writer,
        "miniclusters",
        |_| {},
    ));
    futures::pin_mut!(touched);
    let mc = minicluster();
    let list = [
        watcher::Event::Init,
        watcher::Event::InitApply(mc.clone()),
        watcher::Event::InitDone,
    ];
    // (what it proves, the events, the objects they pass on)
    let living = [
        ("the operator starts: its first list", list.to_vec(), 1),
        (
            "a status change",
            vec![watcher::Event::Apply(mc.clone())],
            1,
        ),
        ("a watch that expired lists again", list.to_vec(), 1),
    ];
    for (what, events, passed) in living {
        for event in events {
            feed.send(event).await.unwrap();
        }
        for _ in 0..passed {
            let item = touched.next().await.expect("the watch goes on");
            assert_eq!(item.unwrap().uid(), mc.uid(), "{what}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            calls_of(&calls).is_empty(),
            "{what}: nothing deleted: {:?}",
            calls_of(&calls)
        );
    }
    feed.send(watcher::Event::Delete(mc.clone())).await.unwrap();
    touched
        .next()
        .await
        .expect("the deletion passes on")
        .unwrap();
    let deleted = wait_for_calls(&calls, 1).await;
    assert!(deleted[0].is(&Method::DELETE, "/jobsets/m"), "{deleted:?}");
    assert_eq!(
        deleted[0].body["preconditions"]["uid"], "uid-js",
        "pinned to the JobSet as the watch saw it"
    );
}

/// The calls once there are `n` (2 s at most).
async fn wait_for_calls(calls: &Arc<Mutex<Vec<Call>>>, n: usize) -> Vec<Call> {
    for _ in 0..200 {
        let now = calls_of(calls);
        if now.len() >= n {
            return now;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    calls_of(calls)
}

#[tokio::test]
async fn the_operators_client_names_itself_in_every_request() {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let client = super::named(kube::Config::new(url.parse().unwrap())).unwrap();
    // The request's head as it arrives; then the connection closes unanswered.
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let (mut head, mut buf) = (Vec::new(), [0u8; 1024]);
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut buf).await.unwrap() {
                0 => break,
                n => head.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&head).to_lowercase()
    });
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.apiserver_version(),
    );
    assert!(
        answer.await.is_ok(),
        "the request ended when its connection closed"
    );
    let head = server.await.unwrap();
    let expected = format!("user-agent: {}\r\n", super::USER_AGENT);
    assert!(head.contains(&expected), "{head}");
}
