//! The cluster's DNS domain, for the broker addresses in the Flux config.
//!
//! Inside a pod, `/etc/resolv.conf` lists `<namespace>.svc.<domain>`, `svc.<domain>` and
//! `<domain>` as search domains; the domain is what follows `svc.`. Outside a pod there is
//! nothing to discover and the operator must be told (`--cluster-domain`).

use std::path::Path;

/// The domain from a resolv.conf, or None when it has no `svc.` search entry.
pub fn discover_cluster_domain(resolv_conf: &Path) -> Option<String> {
    parse_resolv_conf(&std::fs::read_to_string(resolv_conf).ok()?)
}

/// The domain from resolv.conf text.
pub fn parse_resolv_conf(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("search"))
        .flat_map(str::split_whitespace)
        .find_map(|entry| {
            let entry = entry.trim_end_matches('.');
            let (_, domain) = entry.split_once("svc.")?;
            // `svc.<domain>` itself or `<ns>.svc.<domain>`.
            (entry.starts_with("svc.") || entry.contains(".svc.")).then(|| domain.to_string())
        })
        .filter(|d| !d.is_empty())
}

#[cfg(test)]
mod tests {
    use super::parse_resolv_conf;

    #[test]
    fn finds_custom_domain_in_pod_search_list() {
        let text = "search science.svc.hpc.example svc.hpc.example hpc.example\nnameserver 10.0.0.10\noptions ndots:5\n";
        assert_eq!(parse_resolv_conf(text).as_deref(), Some("hpc.example"));
    }

    #[test]
    fn finds_default_domain() {
        let text = "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\n";
        assert_eq!(parse_resolv_conf(text).as_deref(), Some("cluster.local"));
    }

    #[test]
    fn nothing_outside_a_pod() {
        assert_eq!(
            parse_resolv_conf("nameserver 1.1.1.1\nsearch corp.example\n"),
            None
        );
    }
}
