//! The names on the network, checked as the renderer makes them so that both agree: a domain
//! the broker addresses can end in, the flat topology a lead-only Service needs, and the
//! names of the Services for containers' ports. Each is reported unless its field already
//! has an error.

use super::push_new;
use crate::api::MiniCluster;
use crate::api::validation::FieldError;
use crate::model::{Environment, network};

pub(super) fn check(mc: &MiniCluster, errors: &mut Vec<FieldError>) {
    if !mc.spec.network.cluster_domain.is_empty() {
        // Only the spec's domain is checked: the operator's own is not the spec's fault.
        let operator = Environment {
            cluster_domain: String::new(),
            view_image_volume: false,
        };
        if let Err(e) = network::cluster_domain(mc, &operator) {
            push_new(errors, e);
        }
    }
    if let Err(e) = network::check_minimal_service(mc) {
        push_new(errors, e);
    }
    if let Err(e) = network::port_services(mc) {
        push_new(errors, e);
    }
}
