//! The one set of MiniCluster fixtures for unit tests: manifests, a small builder, the
//! operator's environment, and the spec resolved (or refused).

use crate::api::MiniCluster;
use crate::api::validation::FieldError;
use crate::model::{Cluster, Environment, resolve};

/// A MiniCluster from a whole manifest (YAML); panics naming the manifest when it does not
/// parse.
pub(crate) fn manifest(yaml: &str) -> MiniCluster {
    serde_norway::from_str(yaml).unwrap_or_else(|e| panic!("bad test MiniCluster: {e}\n{yaml}"))
}

/// A MiniCluster `name` in namespace `ns` whose `spec` is the YAML `spec`.
pub(crate) fn with_spec(name: &str, ns: &str, spec: &str) -> MiniCluster {
    let indented: String = spec.lines().map(|l| format!("  {l}\n")).collect();
    manifest(&format!(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{indented}"
    ))
}

/// A MiniCluster `name` in `default` of `size` brokers, one container (image `app`) running
/// `command`.
pub(crate) fn with_command(name: &str, size: i32, command: &str) -> MiniCluster {
    let mut mc = with_spec(
        name,
        "default",
        &format!("size: {size}\ncontainers:\n- image: app"),
    );
    mc.spec.containers[0].command = command.to_string();
    mc
}

/// A MiniCluster as the API server returns it, built up from `m` in namespace `ns`: one
/// container (`image`, default `rockylinux:9`) running `command` (default `hostname`).
#[derive(Clone, Debug)]
pub(crate) struct Builder {
    mc: MiniCluster,
}

/// [`Builder`] of MiniCluster `m` in namespace `ns`.
pub(crate) fn m() -> Builder {
    Builder {
        mc: with_spec(
            "m",
            "ns",
            "containers: [{image: rockylinux:9, command: hostname}]",
        ),
    }
}

impl Builder {
    /// Another name.
    pub(crate) fn name(mut self, name: &str) -> Self {
        self.mc.metadata.name = Some(name.into());
        self
    }
    /// Another namespace.
    pub(crate) fn namespace(mut self, ns: &str) -> Self {
        self.mc.metadata.namespace = Some(ns.into());
        self
    }
    /// `spec.size`.
    pub(crate) fn size(mut self, size: i32) -> Self {
        self.mc.spec.size = size;
        self
    }
    /// `metadata.generation`.
    pub(crate) fn generation(mut self, generation: i64) -> Self {
        self.mc.metadata.generation = Some(generation);
        self
    }
    /// `metadata.uid`.
    pub(crate) fn uid(mut self, uid: &str) -> Self {
        self.mc.metadata.uid = Some(uid.into());
        self
    }
    /// The container's image and command (empty: none).
    pub(crate) fn container(mut self, image: &str, command: &str) -> Self {
        self.mc.spec.containers[0].image = image.into();
        self.mc.spec.containers[0].command = command.into();
        self
    }
    /// The MiniCluster.
    pub(crate) fn build(self) -> MiniCluster {
        self.mc
    }
}

/// The environment unit tests render in: the cluster domain `cluster.local`.
pub(crate) fn env() -> Environment {
    Environment {
        cluster_domain: "cluster.local".to_string(),
        view_image_volume: false,
    }
}

/// `mc` resolved in [`env`]; panics, naming the errors, when its spec is refused.
pub(crate) fn cluster(mc: &MiniCluster) -> Cluster<'_> {
    resolve(mc, &env()).unwrap_or_else(|errors| panic!("the spec is refused: {errors:?}"))
}

/// Why `mc` is refused in [`env`] (empty when it resolves).
pub(crate) fn refusal(mc: &MiniCluster) -> Vec<FieldError> {
    resolve(mc, &env()).err().unwrap_or_default()
}

/// The field of the first error refusing `mc` (`None` when it resolves).
pub(crate) fn refused_field(mc: &MiniCluster) -> Option<String> {
    refusal(mc).into_iter().next().map(|e| e.field)
}

/// `spec.archive.path` set to `path`, on a hostPath volume (`state`) of the first container
/// mounted at the path's directory, as the archive checks require.
pub(crate) fn archive_on_host(mc: &mut MiniCluster, path: &str) {
    mc.spec.archive.path = path.into();
    let dir = path.rsplit_once('/').map_or("/", |(d, _)| d);
    mc.spec.containers[0].volumes.insert(
        "state".into(),
        crate::api::ContainerVolume {
            path: dir.into(),
            host_path: "/var/lib/flux-state".into(),
            ..Default::default()
        },
    );
}

/// A proptest configuration that CI repeats: `cases` cases from the fixed `seed`, unless
/// `PROPTEST_CASES` or `PROPTEST_RNG_SEED` are set, which proptest then reads itself (to
/// explore other specs or run more of them). No failure files are written.
pub(crate) fn fixed_proptest_config(cases: u32, seed: u64) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let defaults = Config::default();
    Config {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            defaults.cases
        } else {
            cases
        },
        rng_seed: if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
            defaults.rng_seed
        } else {
            RngSeed::Fixed(seed)
        },
        failure_persistence: None,
        ..defaults
    }
}
