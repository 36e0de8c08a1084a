//! Kubernetes Events for what a user wants to see in `kubectl describe minicluster`.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType};

use super::reconcile::Context;
use crate::api::{MiniCluster, MiniClusterStatus, Phase, condition, validation};

/// Events for the transitions a user wants to see in `kubectl describe`.
pub(super) async fn announce(
    mc: &MiniCluster,
    ctx: &Context,
    old: &MiniClusterStatus,
    new: &MiniClusterStatus,
    unsupported: &[validation::FieldError],
) {
    if old.phase != new.phase
        && let Some(phase) = new.phase
    {
        let (kind, reason, note) = match phase {
            Phase::Running => (
                EventType::Normal,
                "Running",
                format!("All {} brokers are ready", mc.spec.size),
            ),
            Phase::Succeeded => (
                EventType::Normal,
                "Succeeded",
                "The lead broker finished".to_string(),
            ),
            Phase::Failed => (
                EventType::Warning,
                "Failed",
                "The cluster failed".to_string(),
            ),
            Phase::Suspended => (
                EventType::Normal,
                "Suspended",
                "The cluster is suspended".to_string(),
            ),
            Phase::Starting => (
                EventType::Normal,
                "Starting",
                "Broker pods are starting".to_string(),
            ),
            Phase::Pending => (
                EventType::Normal,
                "Pending",
                "Waiting for broker pods".to_string(),
            ),
        };
        tracing::info!(phase = phase.as_str(), "{note}");
        publish(ctx, mc, kind, reason, "Reconcile", note).await;
    }
    let was_unsupported = old
        .conditions
        .iter()
        .any(|c| c.type_ == condition::UNSUPPORTED && c.status == "True");
    if !unsupported.is_empty() && !was_unsupported {
        let note = unsupported
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        publish(ctx, mc, EventType::Warning, "Unsupported", "Validate", note).await;
    }
}

pub(super) async fn publish(
    ctx: &Context,
    mc: &MiniCluster,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let reference: ObjectReference = mc.object_ref(&());
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::warn!(%error, "could not publish event");
    }
}
