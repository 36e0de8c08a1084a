//! Services: one per container that does not run Flux and declares ports (named after the
//! container and selecting every broker pod for `spec.containers`, as the Go operator does;
//! `<mc>-<name>` selecting the services pod for `spec.services`), and with
//! `flux.minimalService` a headless Service that gives only the lead broker a DNS name.
//!
//! The minimal Service is named like the subdomain and applied before the JobSet, so the
//! JobSet controller finds it and does not create its own all-pods headless Service.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServiceSpec};

use super::{Error, owned_meta};
use crate::api::{LEAD_JOB, MiniCluster, NAME_LABEL, ROLE_LABEL};
use crate::flux;

fn lead_selector(mc: &MiniCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), mc.name().to_string()),
        (ROLE_LABEL.to_string(), LEAD_JOB.to_string()),
    ])
}

/// The Services of a MiniCluster (none by default).
pub fn services(mc: &MiniCluster) -> Result<Vec<Service>, Error> {
    let mut out: Vec<Service> = flux::sidecar_services(mc)?
        .into_iter()
        .map(|s| Service {
            metadata: owned_meta(mc, s.name),
            spec: Some(ServiceSpec {
                selector: Some(match s.target {
                    flux::PortTarget::BrokerPods => {
                        BTreeMap::from([(NAME_LABEL.to_string(), mc.name().to_string())])
                    }
                    flux::PortTarget::ServicesPod => super::services_pod_selector(mc),
                }),
                ports: Some(s.ports),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        })
        .collect();
    if let Some(lead) = flux::minimal_service(mc)? {
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
    Ok(out)
}
