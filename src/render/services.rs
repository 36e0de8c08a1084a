//! A Service for every service container that declares ports, selecting the lead broker's
//! pod (where the Flux instance's local socket is and where sidecars talk to it).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::owned_meta;
use crate::api::{LEAD_JOB, MiniCluster, NAME_LABEL, ROLE_LABEL};

/// Services of the sidecars with ports, named `<minicluster>-<service>`.
pub fn services(mc: &MiniCluster) -> Vec<Service> {
    mc.spec
        .services
        .iter()
        .filter(|s| !s.ports.is_empty())
        .map(|s| Service {
            metadata: owned_meta(mc, service_name(mc, &s.name)),
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([
                    (NAME_LABEL.to_string(), mc.name().to_string()),
                    (ROLE_LABEL.to_string(), LEAD_JOB.to_string()),
                ])),
                ports: Some(
                    s.ports
                        .iter()
                        .map(|p| ServicePort {
                            name: Some(format!("port-{p}")),
                            port: *p,
                            target_port: Some(IntOrString::Int(*p)),
                            protocol: Some("TCP".to_string()),
                            ..ServicePort::default()
                        })
                        .collect(),
                ),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        })
        .collect()
}

/// Name of a sidecar's Service.
pub fn service_name(mc: &MiniCluster, service: &str) -> String {
    format!("{}-{service}", mc.name())
}
