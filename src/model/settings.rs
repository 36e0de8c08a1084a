//! The spec's settings beyond the containers and the sizes, as flux and render take them:
//! the instance's (`spec.flux`), the pods' (`spec.pod`, `spec.network`, `spec.placement`)
//! and the Jobs' (`suspend`, `startupOrder`, `deadlineSeconds`, ...).
//! Resolved once by [`super::resolve`]: words split, levels clamped, defaults filled in, and
//! what passes through unchanged borrowed from the spec.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodResourceClaim;

use super::words::split_words;
use crate::api::validation::FieldError;
use crate::api::{self, MiniCluster, Placement, QueuePolicy, StartupOrder};

/// Pod retries per Job when `spec.backoffLimit` is unset (Kubernetes' own default).
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// The Flux instance's settings (`spec.flux` other than the view and the certificate).
#[derive(Clone, Debug)]
pub struct FluxOptions<'a> {
    /// The command that submits the lead's job: `submitCommand`'s words, `flux submit` when
    /// unset.
    pub submit: Vec<String>,
    /// `optionFlags`, split into words: given to the submit or the batch.
    pub option_flags: Vec<String>,
    /// The brokers' stderr log level: `logLevel` clamped to Flux's 0-7, and 0 with
    /// `logging.quiet`.
    pub log_level: i32,
    /// `wrap`, trimmed (`None`: the broker runs unwrapped).
    pub wrap: Option<&'a str>,
    /// `topology`, trimmed (`None`: Flux's default with a config file, also for `custom`).
    pub topology: Option<&'a str>,
    /// `connectTimeout`, trimmed (`None`: Flux's default).
    pub connect_timeout: Option<&'a str>,
    /// `scheduler.simple`: flux-core's sched-simple instead of Fluxion.
    pub simple_scheduler: bool,
    /// Fluxion's queue policy (`scheduler.queuePolicy`; `None` with sched-simple).
    pub queue_policy: Option<QueuePolicy>,
    /// `brokerConfig`: the user's broker config, TOML (checked), used verbatim (`None`: the
    /// operator generates it).
    pub broker_config: Option<&'a str>,
    /// Whether the user's broker config has a `[kvs]` table of its own.
    pub user_kvs: bool,
    /// `environment`: the brokers' variables (names and values checked).
    pub environment: &'a BTreeMap<String, String>,
    /// `disableSocket`: the broker picks its socket under `$TMPDIR`, unless an archive needs
    /// it at the known path ([`FluxOptions::socket`]).
    pub disable_socket: bool,
    /// Whether the broker's socket is at the known path: unless `disableSocket`, and always
    /// with `spec.archive` (the save and the drain talk to the instance through it).
    pub socket: bool,
    /// Whether companion containers wait for the socket (unless `noWaitSocket`).
    pub wait_socket: bool,
    /// `minimalService`: a Service for the lead broker alone.
    pub minimal_service: bool,
    /// `completeWorkers`: a follower's container completes when its broker stops.
    pub complete_workers: bool,
}

impl<'a> FluxOptions<'a> {
    /// The options of `mc`; a word that does not split names its field (validation refuses
    /// such a spec first).
    pub fn of(mc: &'a MiniCluster) -> Result<Self, FieldError> {
        let (flux, logging) = (&mc.spec.flux, &mc.spec.logging);
        let words = |field: &str, text: &str| {
            split_words(text).map_err(|message| FieldError::new(field, message))
        };
        let submit = match flux.submit_command.trim() {
            "" => vec!["flux".to_string(), "submit".to_string()],
            text => words("spec.flux.submitCommand", text)?,
        };
        let trimmed = |text: &'a str| Some(text.trim()).filter(|t| !t.is_empty());
        let broker_config = Some(flux.broker_config.as_str()).filter(|t| !t.trim().is_empty());
        Ok(FluxOptions {
            submit,
            option_flags: words("spec.flux.optionFlags", &flux.option_flags)?,
            log_level: if logging.quiet {
                0
            } else {
                flux.log_level.clamp(0, 7)
            },
            wrap: trimmed(&flux.wrap),
            topology: trimmed(&flux.topology).filter(|t| *t != "custom"),
            connect_timeout: trimmed(&flux.connect_timeout),
            simple_scheduler: flux.scheduler.simple,
            queue_policy: flux
                .scheduler
                .queue_policy
                .filter(|_| !flux.scheduler.simple),
            broker_config,
            user_kvs: broker_config
                .and_then(|t| t.parse::<toml::Table>().ok())
                .is_some_and(|t| t.contains_key("kvs")),
            environment: &flux.environment,
            disable_socket: flux.disable_socket,
            socket: !flux.disable_socket || mc.has_archive(),
            wait_socket: !flux.no_wait_socket,
            minimal_service: flux.minimal_service,
            complete_workers: flux.complete_workers,
        })
    }
}

/// The pods' settings: `spec.pod` and what else the spec says of every pod.
#[derive(Clone, Copy, Debug)]
pub struct PodSettings<'a> {
    /// `spec.pod`, passed through: labels, annotations, account, node selection, tolerations,
    /// scheduler, runtime class, DNS policy, host namespaces, resources, security context.
    pub pod: &'a api::PodSpec,
    /// `shareProcessNamespace`.
    pub share_process_namespace: bool,
    /// A preference for one broker per node (unless `network.disableAffinity`).
    pub spread: bool,
    /// Kueue's topology request (annotation key, level) from `spec.placement`.
    pub placement: Option<(&'static str, &'a str)>,
    /// `resourceClaims`, passed through.
    pub resource_claims: &'a [PodResourceClaim],
}

impl<'a> PodSettings<'a> {
    /// The pod settings of `mc`.
    pub fn of(mc: &'a MiniCluster) -> Self {
        let spec = &mc.spec;
        PodSettings {
            pod: &spec.pod,
            share_process_namespace: spec.share_process_namespace,
            spread: !spec.network.disable_affinity,
            placement: spec.placement.as_ref().and_then(Placement::annotation),
            resource_claims: &spec.resource_claims,
        }
    }
}

/// The Jobs' settings: the JobSet's and the services Job's.
#[derive(Clone, Copy, Debug)]
pub struct JobSettings<'a> {
    /// `suspend`.
    pub suspend: bool,
    /// `startupOrder: LeadFirst`: the followers' Job waits for the lead's to be ready.
    pub lead_first: bool,
    /// `jobLabels`, on the JobSet.
    pub labels: &'a BTreeMap<String, String>,
    /// `deadlineSeconds`: each Job's `activeDeadlineSeconds`.
    pub deadline_seconds: i64,
    /// `backoffLimit`, or [`DEFAULT_BACKOFF_LIMIT`].
    pub backoff_limit: i32,
}

impl<'a> JobSettings<'a> {
    /// The Job settings of `mc`.
    pub fn of(mc: &'a MiniCluster) -> Self {
        let spec = &mc.spec;
        JobSettings {
            suspend: spec.suspend,
            lead_first: spec.startup_order == StartupOrder::LeadFirst,
            labels: &spec.job_labels,
            deadline_seconds: spec.deadline_seconds,
            backoff_limit: spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT),
        }
    }
}
