//! Who may read `/metrics`: the bearer of a token the API server authenticates
//! (TokenReview) whose user it allows `get` on the non-resource URL `/metrics`
//! (SubjectAccessReview), as controller-runtime's metrics filter and the kubelet decide.
//!
//! Decisions are kept for a short while, keyed by a SHA-256 of the token (the token itself
//! is never kept or logged), so a scrape every few seconds costs the API server two reviews
//! a minute, not two a scrape. The cache holds at most [`CACHE_ENTRIES`] tokens.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

/// The path and verb a scraper must be allowed (RBAC: `nonResourceURLs: ["/metrics"]`,
/// `verbs: ["get"]`).
pub const PATH: &str = "/metrics";
const VERB: &str = "get";

/// How long an allowed token is let in without asking again.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refused token is refused without asking again (short: a binding just made
/// takes effect soon).
pub const REFUSED_TTL: Duration = Duration::from_secs(10);
/// Most tokens whose decision is kept.
pub const CACHE_ENTRIES: usize = 1024;

/// What the API server said about a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Authenticated and allowed `get` on `/metrics`: 200.
    Allowed,
    /// Not a valid token: 401.
    Unauthenticated,
    /// A valid token whose user may not read `/metrics`: 403.
    Forbidden,
}

impl Decision {
    fn ttl(self) -> Duration {
        match self {
            Decision::Allowed => ALLOWED_TTL,
            Decision::Unauthenticated | Decision::Forbidden => REFUSED_TTL,
        }
    }
}

type TokenHash = [u8; 32];

/// Decisions by token hash, each until it expires; at most `capacity` of them.
#[derive(Debug)]
struct DecisionCache {
    capacity: usize,
    entries: HashMap<TokenHash, (Decision, Instant)>,
}

impl DecisionCache {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: HashMap::new(),
        }
    }

    fn get(&self, key: &TokenHash, now: Instant) -> Option<Decision> {
        let (decision, expires) = self.entries.get(key)?;
        (now < *expires).then_some(*decision)
    }

    /// Keep `decision` for its time to live; when full, drop what expired, then the entry
    /// that expires first.
    fn put(&mut self, key: TokenHash, decision: Decision, now: Instant) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, expires)| now < *expires);
            if self.entries.len() >= self.capacity {
                let first = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, e))| *e)
                    .map(|(k, _)| *k);
                if let Some(first) = first {
                    self.entries.remove(&first);
                }
            }
        }
        self.entries.insert(key, (decision, now + decision.ttl()));
    }
}

/// Asks the API server who a token is and whether it may read `/metrics`.
pub struct Authorizer {
    client: Client,
    cache: Mutex<DecisionCache>,
}

impl Authorizer {
    /// Reviews with `client`'s credentials (the operator's ServiceAccount, which may create
    /// TokenReviews and SubjectAccessReviews).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Mutex::new(DecisionCache::new(CACHE_ENTRIES)),
        }
    }

    /// The decision for `token`, from the cache or from the API server. An error (the API
    /// server unreachable, the reviews forbidden to the operator) is not kept.
    pub async fn decide(&self, token: &str) -> Result<Decision, kube::Error> {
        let key: TokenHash = Sha256::digest(token.as_bytes()).into();
        if let Some(decision) = self.lock().get(&key, Instant::now()) {
            return Ok(decision);
        }
        let decision = self.review(token).await?;
        self.lock().put(key, decision, Instant::now());
        Ok(decision)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DecisionCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn review(&self, token: &str) -> Result<Decision, kube::Error> {
        let Some(user) = self.authenticate(token).await? else {
            return Ok(Decision::Unauthenticated);
        };
        let name = user.username.clone().unwrap_or_default();
        let allowed = self.authorize(user).await?;
        tracing::debug!(user = %name, allowed, "metrics reader reviewed");
        Ok(if allowed {
            Decision::Allowed
        } else {
            Decision::Forbidden
        })
    }

    /// TokenReview: the token's user, if the API server authenticates it.
    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let status = reviewed.status.unwrap_or_default();
        if let Some(error) = status.error.as_deref().filter(|e| !e.is_empty()) {
            tracing::debug!(%error, "metrics token not authenticated");
        }
        Ok(status.user.filter(|_| status.authenticated == Some(true)))
    }

    /// SubjectAccessReview: may `user` (with its groups, uid and extra) `get` `/metrics`?
    async fn authorize(&self, user: UserInfo) -> Result<bool, kube::Error> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(PATH.to_string()),
                    verb: Some(VERB.to_string()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        Ok(reviewed.status.is_some_and(|s| s.allowed))
    }
}

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> TokenHash {
        [n; 32]
    }

    #[test]
    fn an_allowed_token_is_kept_a_minute_a_refused_one_ten_seconds() {
        let mut cache = DecisionCache::new(8);
        let t0 = Instant::now();
        cache.put(key(1), Decision::Allowed, t0);
        cache.put(key(2), Decision::Forbidden, t0);
        cache.put(key(3), Decision::Unauthenticated, t0);
        let soon = t0 + REFUSED_TTL - Duration::from_millis(1);
        assert_eq!(cache.get(&key(1), soon), Some(Decision::Allowed));
        assert_eq!(cache.get(&key(2), soon), Some(Decision::Forbidden));
        assert_eq!(cache.get(&key(3), soon), Some(Decision::Unauthenticated));
        let later = t0 + REFUSED_TTL;
        assert_eq!(cache.get(&key(1), later), Some(Decision::Allowed));
        assert_eq!(cache.get(&key(2), later), None, "asked again after 10 s");
        assert_eq!(cache.get(&key(3), later), None);
        assert_eq!(
            cache.get(&key(1), t0 + ALLOWED_TTL),
            None,
            "asked again after 60 s"
        );
        assert_eq!(cache.get(&key(4), t0), None, "never seen");
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity() {
        let mut cache = DecisionCache::new(4);
        let t0 = Instant::now();
        for n in 0..4 {
            cache.put(
                key(n),
                Decision::Allowed,
                t0 + Duration::from_secs(n.into()),
            );
        }
        // Full: the entry that expires first goes.
        cache.put(key(10), Decision::Allowed, t0 + Duration::from_secs(5));
        assert_eq!(cache.entries.len(), 4);
        let now = t0 + Duration::from_secs(5);
        assert_eq!(cache.get(&key(0), now), None);
        assert_eq!(cache.get(&key(1), now), Some(Decision::Allowed));
        assert_eq!(cache.get(&key(10), now), Some(Decision::Allowed));
        // A flood of distinct tokens keeps it at its bound.
        for n in 20..=255 {
            cache.put(key(n), Decision::Unauthenticated, now);
        }
        assert_eq!(cache.entries.len(), 4);
    }

    #[test]
    fn only_a_non_empty_bearer_token_is_taken() {
        assert_eq!(bearer("Bearer abc.def"), Some("abc.def"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Basic dXNlcjpwdw=="), None);
    }
}
