//! Services: one per container that does not run Flux and declares ports (named after the
//! container and selecting every broker pod for `spec.containers`, as the Go operator does;
//! `<mc>-<name>` selecting the services pod for `spec.services`), and with
//! `flux.minimalService` a headless Service that gives only the lead broker a DNS name.
//!
//! The minimal Service is named like the subdomain and applied before the JobSet, so the
//! JobSet controller finds it and does not create its own all-pods headless Service.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::owned_meta;
use crate::api::{LEAD_JOB, MiniCluster, NAME_LABEL, ROLE_LABEL};
use crate::flux::BROKER_PORT;
use crate::model::Cluster;
pub use crate::model::network::PortTarget;

fn lead_selector(mc: &MiniCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), mc.name().to_string()),
        (ROLE_LABEL.to_string(), LEAD_JOB.to_string()),
    ])
}

/// The Services of a MiniCluster (none by default).
pub fn services(cluster: &Cluster<'_>) -> Vec<Service> {
    let mc = cluster.mc;
    let mut out: Vec<Service> = sidecar_services(cluster)
        .into_iter()
        .map(|s| Service {
            metadata: owned_meta(mc, s.name),
            spec: Some(ServiceSpec {
                selector: Some(match s.target {
                    PortTarget::BrokerPods => {
                        BTreeMap::from([(NAME_LABEL.to_string(), mc.name().to_string())])
                    }
                    PortTarget::ServicesPod => super::services_pod_selector(mc),
                }),
                ports: Some(s.ports),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        })
        .collect();
    if let Some(lead) = minimal_service(cluster) {
        out.push(Service {
            metadata: owned_meta(mc, lead.name),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".to_string()),
                publish_not_ready_addresses: Some(true),
                selector: Some(lead_selector(mc)),
                ports: Some(vec![lead.port]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        });
    }
    out
}

/// A Service for the ports of a container that does not run Flux.
#[derive(Clone, Debug, PartialEq)]
pub struct SidecarService {
    /// Service name: the container's name for `spec.containers` (as the Go operator names
    /// it), `<minicluster>-<container>` for `spec.services`.
    pub name: String,
    /// The container's name.
    pub container: String,
    /// The pods it selects.
    pub target: PortTarget,
    /// One TCP port per entry of the container's `ports`.
    pub ports: Vec<ServicePort>,
}

fn port(name: String, p: i32) -> ServicePort {
    ServicePort {
        name: Some(name),
        port: p,
        target_port: Some(IntOrString::Int(p)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

/// Services for the containers that do not run Flux and list `ports`
/// ([`port_services`](crate::model::network::port_services): the names are the model's, and
/// checked there).
pub fn sidecar_services(cluster: &Cluster<'_>) -> Vec<SidecarService> {
    (cluster.port_services.iter())
        .map(|s| SidecarService {
            ports: s
                .ports
                .iter()
                .map(|p| port(format!("port-{p}"), *p))
                .collect(),
            name: s.name.clone(),
            container: s.container.clone(),
            target: s.target,
        })
        .collect()
}

/// The lead-only Service of `flux.minimalService`.
#[derive(Clone, Debug, PartialEq)]
pub struct LeadService {
    /// The subdomain (headless Service name) the broker config's addresses use.
    pub name: String,
    /// The broker port.
    pub port: ServicePort,
}

/// With `flux.minimalService`, only the lead broker needs a DNS name: in the flat TBON every
/// follower connects to rank 0 and nothing connects to a follower. So a headless Service named
/// like the subdomain (`publishNotReadyAddresses: true`) that selects only the lead pod is
/// enough. A tree topology (`flux.topology`) makes followers parents, so it is an error
/// ([`check_minimal_service`](crate::model::network::check_minimal_service), refused when
/// the spec is resolved).
pub fn minimal_service(cluster: &Cluster<'_>) -> Option<LeadService> {
    cluster.mc.spec.flux.minimal_service.then(|| LeadService {
        name: cluster.mc.subdomain().to_string(),
        port: port("broker".into(), BROKER_PORT),
    })
}
