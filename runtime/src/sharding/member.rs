//! A replica's membership of its ring: a Lease of its own, renewed before it could expire,
//! each renewal moving the replica's [`Fence`].

use std::{future::Future, time::Duration};

use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::{Value, json};
use tokio::{sync::watch, time::Instant};

use super::{Fence, RING_LABEL};
use crate::settings::renewal_margin;

/// How long a replica waits after a renewal the API server refused before it tries again; its
/// fence closes meanwhile if the API server stays away.
const RETRY: Duration = Duration::from_secs(1);

/// This replica's Lease in its ring: named by the pod, so no other replica ever writes it, and
/// labelled with the ring, so the sharder finds it.
pub struct Member {
    api: Api<Lease>,
    name: String,
    ring: String,
    lease_seconds: u64,
}

impl Member {
    /// The member `name` (the pod's name) of the ring `ring` (the operator's name), holding a
    /// Lease of `lease_seconds` in `namespace`.
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        ring: &str,
        lease_seconds: u64,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            ring: ring.to_owned(),
            lease_seconds,
        }
    }

    /// This replica's fence, closed until its first renewal: hand a channel of it to
    /// [`Member::hold`], and check it before each reconcile.
    pub fn fence(&self) -> Fence {
        Fence::new(self.lease_seconds, renewal_margin(self.lease_seconds))
    }

    /// Renews the Lease once; the version it is at afterwards.
    ///
    /// Without `version` the replica joins: a server-side apply creates the Lease or takes it
    /// whatever it holds. With one, the renewal is conditional on it, so that it fails if the
    /// Lease changed: with 404 once the sharder took it over (it deletes an expired Lease), when
    /// that replica's objects are being moved and it must join again as a new member.
    pub async fn renew(&self, version: Option<&str>) -> Result<String, kube::Error> {
        let renewed = match version {
            None => {
                let params = PatchParams::apply(&self.ring).force();
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": &self.name, "labels": {RING_LABEL: &self.ring}},
                    "spec": self.spec(),
                });
                self.api
                    .patch(&self.name, &params, &Patch::Apply(lease))
                    .await?
            }
            Some(version) => {
                let patch = json!({
                    "metadata": {"resourceVersion": version},
                    "spec": self.spec(),
                });
                let params = PatchParams::default();
                self.api
                    .patch(&self.name, &params, &Patch::Merge(patch))
                    .await?
            }
        };
        Ok(renewed.metadata.resource_version.unwrap_or_default())
    }

    /// The Lease's version if this replica still holds it, read after a conflict.
    async fn version_if_held(&self) -> Option<String> {
        let lease = self.api.get_opt(&self.name).await.ok().flatten()?;
        let holder = lease.spec.as_ref()?.holder_identity.as_deref();
        if holder == Some(self.name.as_str()) {
            lease.metadata.resource_version
        } else {
            None
        }
    }

    /// The Lease's spec as this replica writes it: held by itself, renewed now.
    fn spec(&self) -> Value {
        json!({
            "holderIdentity": &self.name,
            "leaseDurationSeconds": self.lease_seconds,
            "renewTime": MicroTime(Timestamp::now()),
        })
    }

    /// Renews the Lease until `stop` resolves, moving `fence` after each renewal that
    /// succeeded, then deletes the Lease, so that the sharder moves this replica's objects at
    /// once rather than after the Lease would have expired. `stop` should resolve once the
    /// replica's reconciles have finished, so that none overlaps one by the next replica.
    ///
    /// A refused renewal is retried every second, and one left unanswered is given up when the
    /// next is due; the fence closes on its own if none succeeds in time. A renewal that finds
    /// the Lease taken over closes the fence at once, and the replica joins again a whole Lease
    /// later, by when the sharder has moved its objects.
    pub async fn hold(&self, fence: &watch::Sender<Fence>, stop: impl Future<Output = ()>) {
        let interval = Duration::from_secs(
            self.lease_seconds
                .saturating_sub(renewal_margin(self.lease_seconds)),
        );
        tokio::pin!(stop);
        let mut version: Option<String> = None;
        loop {
            let sent = Instant::now();
            let renewal = tokio::time::timeout(interval, self.renew(version.as_deref()));
            let outcome = tokio::select! {
                biased;
                () = &mut stop => break,
                outcome = renewal => outcome,
            };
            let next = match outcome {
                Ok(Ok(renewed)) => {
                    version = Some(renewed);
                    fence.send_modify(|fence| fence.renewed(sent));
                    interval
                }
                // A renewal of ours that timed out may have been stored after all: the Lease
                // is still this replica's, at a version it did not see.
                Ok(Err(kube::Error::Api(status))) if version.is_some() && status.code == 409 => {
                    version = self.version_if_held().await;
                    if version.is_none() {
                        fence.send_modify(Fence::reset);
                    }
                    RETRY
                }
                // The sharder deletes the Lease when it takes it over.
                Ok(Err(kube::Error::Api(status))) if version.is_some() && status.code == 404 => {
                    tracing::warn!(lease = %self.name, "the shard's Lease was taken over; joining again");
                    fence.send_modify(Fence::reset);
                    version = None;
                    Duration::from_secs(self.lease_seconds)
                }
                Ok(Err(error)) => {
                    tracing::warn!(%error, lease = %self.name, "could not renew the shard's Lease");
                    RETRY
                }
                Err(_) => {
                    tracing::warn!(lease = %self.name, "the shard's Lease renewal timed out");
                    RETRY
                }
            };
            tokio::select! {
                // A stop due at the same moment as the next renewal wins.
                biased;
                () = &mut stop => break,
                () = tokio::time::sleep_until(sent + next) => {}
            }
        }
        if let Err(error) = self.api.delete(&self.name, &DeleteParams::default()).await {
            tracing::warn!(%error, lease = %self.name, "could not delete the shard's Lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;
    use crate::testing::{Seen, mock_api};

    const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/op-7d9f-x2";

    fn member(client: Client) -> Member {
        Member::new(client, "ops", "op-7d9f-x2", "my-operator", 10)
    }

    #[tokio::test]
    async fn a_renewal_applies_the_lease_held_by_the_replica_and_labelled_with_its_ring() {
        let (client, server) = mock_api(|seen| (200, versioned(&seen.body, 1)));
        let version = member(client).renew(None).await.expect("renewed");
        assert_eq!(version, "1");
        let seen = server.await.expect("the mock API server ran");
        let [renewal] = seen.as_slice() else {
            panic!("one request: {seen:?}");
        };
        assert_eq!(renewal.method, Method::PATCH);
        assert_eq!(renewal.path(), PATH);
        let query = renewal.uri.query().unwrap_or_default();
        assert!(query.contains("fieldManager=my-operator") && query.contains("force=true"));
        let body = &renewal.body;
        assert_eq!(body["metadata"]["labels"][RING_LABEL], "my-operator");
        assert_eq!(body["spec"]["holderIdentity"], "op-7d9f-x2");
        assert_eq!(body["spec"]["leaseDurationSeconds"], 10);
        let renewed: MicroTime =
            serde_json::from_value(body["spec"]["renewTime"].clone()).expect("a MicroTime");
        assert!(Timestamp::now().duration_since(renewed.0).as_secs() < 5);
    }

    /// `body` as the API server answers it, at `version`.
    fn versioned(body: &Value, version: usize) -> Value {
        let mut body = body.clone();
        body["metadata"]["resourceVersion"] = json!(version.to_string());
        body
    }

    #[tokio::test]
    async fn a_later_renewal_is_conditional_on_the_version_it_renewed() {
        let (client, server) = mock_api(|seen| (200, versioned(&seen.body, 8)));
        let version = member(client).renew(Some("7")).await.expect("renewed");
        assert_eq!(version, "8");
        let seen = server.await.expect("the mock API server ran");
        let [renewal] = seen.as_slice() else {
            panic!("one request: {seen:?}");
        };
        assert_eq!(renewal.method, Method::PATCH);
        assert!(
            !renewal.uri.query().unwrap_or_default().contains("force"),
            "a merge patch"
        );
        assert_eq!(renewal.body["metadata"]["resourceVersion"], "7");
        assert_eq!(renewal.body["spec"]["holderIdentity"], "op-7d9f-x2");
    }

    /// Holds the Lease against a server that answers renewals with `renewal` for `for_secs`
    /// seconds of paused time, then stops; the requests, and the fence as it was before the
    /// stop.
    async fn hold(renewal: u16, for_secs: u64) -> (Vec<Seen>, Fence) {
        let (client, server) = mock_api(move |seen| match seen.method {
            Method::PATCH if renewal == 200 => (200, versioned(&seen.body, 1)),
            Method::PATCH => (renewal, crate::testing::conflict()),
            _ => (200, json!({})),
        });
        let member = member(client);
        let (fence, watched) = watch::channel(member.fence());
        let stopped = async move {
            tokio::time::sleep(Duration::from_secs(for_secs)).await;
        };
        member.hold(&fence, stopped).await;
        // The mock API server's record is complete once its last client is gone.
        drop(member);
        let fence = watched.borrow().clone();
        (server.await.expect("the mock API server ran"), fence)
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_lease_is_renewed_before_it_would_expire_and_deleted_on_stop() {
        let start = Instant::now();
        let (seen, fence) = hold(200, 20).await;
        let methods: Vec<_> = seen.iter().map(|s| s.method.clone()).collect();
        // Renewed at 0, 7 and 14 s (10 s Lease, renewed 3 s early), deleted at 20 s.
        assert_eq!(
            methods,
            [Method::PATCH, Method::PATCH, Method::PATCH, Method::DELETE]
        );
        assert!(seen.iter().all(|s| s.path() == PATH));
        let deadline = fence.deadline().expect("renewed") - start;
        assert_eq!(deadline, Duration::from_secs(14 + 9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_whose_lease_was_taken_over_is_fenced_and_joins_again_a_lease_later() {
        let start = Instant::now();
        let patches = std::sync::atomic::AtomicUsize::new(0);
        // The second renewal finds the Lease taken over (deleted).
        let (client, server) = mock_api(move |seen| match seen.method {
            Method::PATCH => {
                let n = patches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                match n {
                    1 => (404, crate::testing::not_found()),
                    _ => (200, versioned(&seen.body, n)),
                }
            }
            _ => (200, json!({})),
        });
        let member = member(client);
        let (fence, watched) = watch::channel(member.fence());
        let mut closed = watched.clone();
        let stopped = tokio::time::sleep(Duration::from_secs(26));
        let observer = tokio::spawn(async move {
            // Right after the refused renewal at 7 s, the fence is closed.
            tokio::time::sleep(Duration::from_millis(7_500)).await;
            closed.borrow_and_update().holds(Instant::now())
        });
        member.hold(&fence, stopped).await;
        drop(member);
        assert!(!observer.await.expect("the observer ran"), "fenced at once");
        let seen = server.await.expect("the mock API server ran");
        let applies: Vec<bool> = seen
            .iter()
            .filter(|s| s.method == Method::PATCH)
            .map(|s| s.uri.query().unwrap_or_default().contains("force=true"))
            .collect();
        // Joined at 0 s; refused at 7 s; joined again at 17 s; renewed at 24 s; stopped at 26 s.
        assert_eq!(applies, [true, false, true, false]);
        assert_eq!(seen.last().map(|s| s.method.clone()), Some(Method::DELETE));
        let deadline = watched.borrow().deadline().expect("joined again") - start;
        assert_eq!(deadline, Duration::from_secs(24 + 9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_whose_renewals_fail_is_fenced() {
        let (seen, fence) = hold(500, 5).await;
        let renewals = seen.iter().filter(|s| s.method == Method::PATCH).count();
        assert_eq!(renewals, 5, "retried every second");
        assert!(!fence.holds(Instant::now()));
        assert_eq!(fence.deadline(), None);
    }
}
