//! Names on the network: the cluster's DNS domain, the lead-only Service's topology, and the
//! names of the Services for containers' ports.

use super::Environment;
use super::containers::{Companion, companions};
use crate::api::validation::FieldError;
use crate::api::{MiniCluster, is_dns_label};

/// The cluster's DNS domain for broker addresses: `spec.network.clusterDomain` when set,
/// otherwise what the operator resolved ([`Environment::cluster_domain`]). A trailing dot is
/// dropped. Never assumed.
pub fn cluster_domain(mc: &MiniCluster, env: &Environment) -> Result<String, FieldError> {
    let (field, value) = if mc.spec.network.cluster_domain.is_empty() {
        (
            "the operator's cluster domain (--cluster-domain)",
            env.cluster_domain.as_str(),
        )
    } else {
        (
            "spec.network.clusterDomain",
            mc.spec.network.cluster_domain.as_str(),
        )
    };
    let domain = value.strip_suffix('.').unwrap_or(value);
    let valid = !domain.is_empty()
        && domain.len() <= 253
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !valid {
        return Err(FieldError::new(
            field,
            format!("{value:?} is not a DNS domain (e.g. cluster.local)"),
        ));
    }
    Ok(domain.to_ascii_lowercase())
}

/// With `flux.minimalService`, only the lead broker needs a DNS name: in the flat TBON every
/// follower connects to rank 0 and nothing connects to a follower. A tree topology
/// (`flux.topology`) makes followers parents, which then need DNS names too: an error.
pub fn check_minimal_service(mc: &MiniCluster) -> Result<(), FieldError> {
    let flux = &mc.spec.flux;
    let topology = flux.topology.trim();
    if flux.minimal_service
        && !(topology.is_empty() || topology == "custom" || topology == "kary:0")
    {
        return Err(FieldError::new(
            "spec.flux.minimalService",
            format!(
                "needs the flat topology: with flux.topology {topology:?} followers connect to other followers, which then need DNS names"
            ),
        ));
    }
    Ok(())
}

/// Where a Service for a container's ports sends traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortTarget {
    /// Every broker pod (a container of `spec.containers` runs in each).
    BrokerPods,
    /// The services pod (`spec.services`).
    ServicesPod,
}

/// The Service for the ports of a container that does not run Flux.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortService {
    /// Service name: the container's name for `spec.containers` (as the Go operator names
    /// it), `<minicluster>-<container>` for `spec.services`.
    pub name: String,
    /// The container's name.
    pub container: String,
    /// The pods it selects.
    pub target: PortTarget,
    /// The container's `ports`.
    pub ports: Vec<i32>,
}

/// Services for the containers that do not run Flux and list `ports`. Their names must be
/// DNS labels, differ from each other and from the pods' subdomain (the headless Service).
pub fn port_services(mc: &MiniCluster) -> Result<Vec<PortService>, FieldError> {
    let mut out: Vec<PortService> = Vec::new();
    for companion in companions(mc) {
        let Some(c) = companion.spec(mc).filter(|c| !c.ports.is_empty()) else {
            continue;
        };
        let (name, target) = match companion {
            Companion::Container(_) => (c.name.clone(), PortTarget::BrokerPods),
            Companion::Service(_) => (format!("{}-{}", mc.name(), c.name), PortTarget::ServicesPod),
        };
        let clash = if !is_dns_label(&name) {
            Some("which is not a DNS label of at most 63 characters".to_string())
        } else if name == mc.subdomain() {
            Some("the name of the pods' subdomain (the headless Service)".to_string())
        } else {
            out.iter()
                .find(|s| s.name == name)
                .map(|s| format!("the name of the Service for container {}", s.container))
        };
        if let Some(why) = clash {
            return Err(FieldError::new(
                format!("{}.name", companion.field()),
                format!("the Service for its ports would be named {name:?}, {why}"),
            ));
        }
        out.push(PortService {
            name,
            container: c.name.clone(),
            target,
            ports: c.ports.clone(),
        });
    }
    Ok(out)
}
