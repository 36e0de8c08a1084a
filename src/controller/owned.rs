//! Objects the operator creates for a MiniCluster belong to it alone: ownership checks, and
//! the certificate Secret, created once and never taken from anything else.

use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::runtime::events::EventType;
use kube::{Api, Resource};

use super::events::publish;
use super::reconcile::{Context, Error, FIELD_MANAGER};
use crate::api::MiniCluster;
use crate::render;

/// Whether `obj` is controller-owned by the MiniCluster.
pub(super) fn controlled_by(obj: &impl Resource, mc: &MiniCluster) -> bool {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == mc.metadata.uid.as_ref())
}

/// `Some("Kind name")` when an object of that name exists and the MiniCluster does not own it.
pub(super) async fn not_owned<K>(
    api: &Api<K>,
    name: &str,
    mc: &MiniCluster,
) -> Result<Option<String>, Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .get_metadata_opt(name)
        .await?
        .filter(|o| !controlled_by(o, mc))
        .map(|_| format!("{} {name}", K::kind(&()))))
}

/// What [`ensure_curve_secret`] found.
pub(super) enum SecretState {
    /// The MiniCluster's certificate Secret exists (or was just created).
    Ready,
    /// A Secret of that name belongs to something else.
    Foreign(String),
    /// A Secret of that name is being deleted (e.g. by a MiniCluster of the same name that was
    /// just deleted): wait for it to go.
    Terminating,
}

/// Create the certificate Secret unless it exists. Never updated: the keypair lives as long
/// as the cluster.
pub(super) async fn ensure_curve_secret(
    mc: &MiniCluster,
    ctx: &Context,
    ns: &str,
) -> Result<SecretState, Error> {
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), ns);
    let name = render::curve_secret_name(mc);
    if let Some(existing) = secrets.get_metadata_opt(&name).await? {
        return Ok(if controlled_by(&existing, mc) {
            SecretState::Ready
        } else if existing.metadata.deletion_timestamp.is_some() {
            SecretState::Terminating
        } else {
            SecretState::Foreign(format!(
                "Secret {name} exists and is not owned by this MiniCluster; delete it or rename the MiniCluster"
            ))
        });
    }
    // Generating checks the keypair with a CURVE handshake through libzmq: blocking work.
    let for_cert = mc.clone();
    let certificate =
        tokio::task::spawn_blocking(move || crate::flux::curve_certificate(&for_cert))
            .await
            .map_err(|e| Error::Internal(format!("certificate task: {e}")))??;
    let text = certificate.to_text();
    let secret = render::curve_secret(mc, &text);
    match secrets
        .create(
            &PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &secret,
        )
        .await
    {
        Ok(_) => {
            publish(
                ctx,
                mc,
                EventType::Normal,
                "Created",
                "CreateSecret",
                format!("Created CURVE certificate Secret {name}"),
            )
            .await;
            Ok(SecretState::Ready)
        }
        // Created concurrently (e.g. by a previous leader): look again next time.
        Err(kube::Error::Api(s)) if s.code == 409 => Err(Error::Kube(kube::Error::Api(s))),
        Err(e) => Err(e.into()),
    }
}
