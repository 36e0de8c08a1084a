//! The MiniCluster's Kubernetes Services (its network; "services" alone, in this crate, is
//! the services pod of `spec.services`, see [`super::services_pod`]): one per companion
//! container that declares ports (named after the container and selecting every broker pod
//! for `spec.containers`, as the Go operator does; `<mc>-<name>` selecting the services pod
//! for `spec.services`), and with `flux.minimalService` a headless Service that gives only
//! the lead broker a DNS name ([`lead_service`]).
//!
//! The lead's Service is named like the subdomain and applied before the JobSet, so the
//! JobSet controller finds it and does not create its own all-pods headless Service.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::owned_meta;
use crate::api::{LEAD_JOB, MiniCluster, NAME_LABEL, ROLE_LABEL};
use crate::flux::BROKER_PORT;
use crate::model::Cluster;
use crate::model::network::{PortService, PortTarget};

fn lead_selector(mc: &MiniCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), mc.name().to_string()),
        (ROLE_LABEL.to_string(), LEAD_JOB.to_string()),
    ])
}

/// The Kubernetes Services of a MiniCluster (none by default): those for the ports of
/// companion containers, then the lead's ([`lead_service`]).
pub fn network_services(cluster: &Cluster<'_>) -> Vec<Service> {
    let mc = cluster.mc;
    let mut out: Vec<Service> = (cluster.port_services.iter())
        .map(|s| port_service(mc, s))
        .collect();
    if let Some(lead) = lead_service(cluster) {
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

/// The Service for the ports of a companion container, as the model names it
/// ([`port_services`](crate::model::network::port_services), which checks the names): one
/// TCP port `port-<p>` per entry of the container's `ports`.
fn port_service(mc: &MiniCluster, s: &PortService) -> Service {
    Service {
        metadata: owned_meta(mc, s.name.clone()),
        spec: Some(ServiceSpec {
            selector: Some(match s.target {
                PortTarget::BrokerPods => {
                    BTreeMap::from([(NAME_LABEL.to_string(), mc.name().to_string())])
                }
                PortTarget::ServicesPod => super::services_pod_selector(mc),
            }),
            ports: Some(
                (s.ports.iter())
                    .map(|p| port(format!("port-{p}"), *p))
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
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
pub fn lead_service(cluster: &Cluster<'_>) -> Option<LeadService> {
    cluster.options.minimal_service.then(|| LeadService {
        name: cluster.subdomain.to_string(),
        port: port("broker".into(), BROKER_PORT),
    })
}
