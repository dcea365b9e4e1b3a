//! Leader election on a Lease, so that several replicas can run and only one reconciles.
//!
//! On with `--leader-election` (`LEADER_ELECTION=true`, as a generated `deploy/` sets it); the
//! Lease lives in the pod's namespace and each replica is named by its pod. Off, the operator
//! just runs.
//!
//! [`Election::run`] runs the operator's work in terms: one each time this replica comes to
//! lead. A replica that loses the Lease (another took it while an outage kept this one from
//! renewing) ends its term gracefully and campaigns again in the same process, rather than
//! exiting and paying a restart and a cold start.
//!
//! A replica learns it lost the Lease when kube-lease-manager next reaches the API server.
//! One cut off from it keeps reconciling until then, which may be after another replica took
//! the expired Lease: the election does not fence itself by a local deadline. Sharded
//! replicas do ([`crate::sharding::Fence`]), because there a missed deadline would let two
//! replicas reconcile one object.

use std::{future::Future, time::Duration};

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::{sync::watch, task::JoinHandle};

use crate::{
    metrics::Metrics,
    settings::{Common, renewal_margin},
    shutdown::Shutdown,
};

/// How long a replica that lost the Lease waits before it campaigns again after the API
/// server refused a campaign: about as often as a standby looks at the Lease.
const CAMPAIGN_RETRY: Duration = Duration::from_secs(2);

/// How long a stopping leader may take to hand the Lease back, so the next replica need not
/// wait for it to expire.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a term that ended may take to finish the reconciles it has in flight before they
/// are dropped. Within a pod's default 30 s grace period it leaves room for the Lease's
/// release ([`RELEASE_TIMEOUT`]) after it; the webhooks' drain (`connections::DRAIN`) runs
/// beside both, from the stop.
pub(crate) const STOP_PATIENCE: Duration = Duration::from_secs(15);

/// Why this replica could not take part in the election, or in its ring of shards.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Lease could not be read, created or renewed.
    #[error("leader election on Lease {namespace}/{lease}: {source}")]
    Lease {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        lease: String,
        /// What kube-lease-manager reported.
        #[source]
        source: LeaseManagerError,
    },
    /// This replica cannot be a shard of its ring.
    #[cfg(feature = "sharding")]
    #[error(transparent)]
    Sharding(#[from] crate::sharding::Error),
    /// kube-lease-manager's renewer stopped before this replica led, without saying why.
    #[error(
        "leader election on Lease {namespace}/{lease}: the renewer stopped before this replica led"
    )]
    Stopped {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        lease: String,
    },
}

/// Why a term ended, when something ended it.
enum Ending {
    /// The operator was asked to stop.
    Stopped,
    /// This replica stopped leading.
    Lost,
    /// Its watches made no progress listing for [`crate::metrics::LISTING_STALLED`].
    Stalled,
}

/// This replica's part in the election for one Lease, and the stop request that ends it.
pub struct Election {
    client: Client,
    lease: String,
    namespace: String,
    enabled: bool,
    identity: Option<String>,
    lease_seconds: u64,
    /// What ends the election; SIGTERM or Ctrl+C unless given.
    shutdown: Option<Shutdown>,
}

/// One term of leadership, handed to the work that runs during it.
pub struct Term {
    ended: watch::Receiver<bool>,
}

impl Term {
    /// Resolves when the term ends: this replica stopped leading, or the operator was asked to
    /// stop. Hand it to `Controller::graceful_shutdown_on`, so reconciles in flight finish.
    pub fn ended(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut ended = self.ended.clone();
        async move {
            if ended.wait_for(|ended| *ended).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Election {
    /// The election for the Lease `lease` in `namespace`, as `settings` configure it; it ends
    /// on SIGTERM or Ctrl+C.
    pub fn new(client: Client, lease: &str, namespace: &str, settings: &Common) -> Self {
        Self {
            client,
            lease: lease.to_owned(),
            namespace: namespace.to_owned(),
            enabled: settings.leader_election,
            identity: settings.pod_name.clone(),
            lease_seconds: settings.lease_seconds,
            shutdown: None,
        }
    }

    /// The same election, ended by `shutdown` instead of a signal.
    #[cfg(any(test, feature = "sharding"))]
    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// The same election, campaigned for even where `--leader-election` is off: a sharded
    /// operator's sharder must run on one replica at a time.
    #[cfg(feature = "sharding")]
    pub(crate) fn campaigning(mut self) -> Self {
        self.enabled = true;
        self
    }

    /// Runs `term` whenever this replica leads, until the operator is asked to stop. Without
    /// leader election that is one term, from now to the stop. `metrics` follow leadership.
    ///
    /// A first campaign that cannot read or create the Lease is an error: at start-up that is
    /// a misconfiguration (RBAC, a namespace) for people to see. A later one is retried,
    /// because a replica that lost the Lease most likely did so in an outage.
    pub async fn run<F, Fut>(&self, metrics: &Metrics, mut term: F) -> Result<(), Error>
    where
        F: FnMut(Term) -> Fut,
        Fut: Future<Output = ()>,
    {
        let shutdown = self.shutdown.clone().unwrap_or_else(Shutdown::process);
        if !self.enabled {
            loop {
                metrics.leading();
                let end = async {
                    tokio::select! {
                        () = shutdown.requested() => Ending::Stopped,
                        () = metrics.stalled() => Ending::Stalled,
                    }
                };
                match serve(&mut term, end).await {
                    Some(Ending::Stalled) if !shutdown.is_requested() => stalled_again(),
                    _ => return Ok(()),
                }
            }
        }
        let mut campaigned = false;
        loop {
            let leadership = tokio::select! {
                leadership = self.campaign() => leadership,
                () = shutdown.requested() => return Ok(()),
            };
            let leadership = match leadership {
                Ok(leadership) => leadership,
                Err(error) if !campaigned => return Err(error),
                Err(error) => {
                    tracing::warn!(%error, "campaign failed; trying again");
                    tokio::select! {
                        () = tokio::time::sleep(CAMPAIGN_RETRY) => continue,
                        () = shutdown.requested() => return Ok(()),
                    }
                }
            };
            campaigned = true;
            metrics.leading();
            let end = {
                let (stop, lost) = (shutdown.requested(), leadership.lost());
                async move {
                    tokio::select! {
                        () = stop => Ending::Stopped,
                        () = lost => Ending::Lost,
                        () = metrics.stalled() => Ending::Stalled,
                    }
                }
            };
            let ending = serve(&mut term, end).await;
            metrics.standing_by();
            // Before any new campaign: the old renewer's release, under the same identity,
            // must not clear a hold the new one has just taken.
            leadership.release().await;
            match ending {
                Some(Ending::Lost) if !shutdown.is_requested() => {
                    tracing::warn!(lease = %self.lease, "lost leadership; campaigning again");
                }
                // Handed back with the Lease, which this replica most likely takes again.
                Some(Ending::Stalled) if !shutdown.is_requested() => stalled_again(),
                // Asked to stop, or the term's work ended by itself.
                _ => return Ok(()),
            }
        }
    }

    fn lease_error(&self, source: LeaseManagerError) -> Error {
        Error::Lease {
            namespace: self.namespace.clone(),
            lease: self.lease.clone(),
            source,
        }
    }

    /// Waits until this replica leads the Lease, under its pod's name.
    async fn campaign(&self) -> Result<Leadership, Error> {
        let mut builder = LeaseManagerBuilder::new(self.client.clone(), &self.lease)
            .with_namespace(&self.namespace)
            .with_duration(self.lease_seconds)
            .with_grace(renewal_margin(self.lease_seconds));
        if let Some(identity) = &self.identity {
            builder = builder.with_identity(identity);
        }
        let manager = builder
            .build()
            .await
            .map_err(|source| self.lease_error(source))?;
        let (mut leading, renewer) = manager.watch().await;
        tracing::info!(lease = %self.lease, "waiting to lead");
        while !*leading.borrow_and_update() {
            if leading.changed().await.is_err() {
                // The renewer ended without this replica leading: its error says why.
                return Err(match renewer.await {
                    Ok(Err(source)) => self.lease_error(source),
                    _ => Error::Stopped {
                        namespace: self.namespace.clone(),
                        lease: self.lease.clone(),
                    },
                });
            }
        }
        tracing::info!(lease = %self.lease, "leading");
        Ok(Leadership { leading, renewer })
    }
}

/// Says that a term ended because its watches made no progress listing, and starts again.
pub(crate) fn stalled_again() {
    tracing::warn!(
        after = ?crate::metrics::LISTING_STALLED,
        "the term's watches made no progress listing; starting it again with new ones"
    );
}

/// Runs one term of `term` until it returns; once `end` resolves, tells the term so and
/// waits for it to finish what it has in flight, for at most [`STOP_PATIENCE`]. What `end`
/// said, if it ended the term.
///
/// The wait is bounded because a reconcile in flight may never finish once its term ended:
/// one that waits for a cache whose watch the API server refuses, or a hook that retries a
/// refused request. Unbounded, such a reconcile would keep a stopping replica until the
/// kubelet kills it, and a term that lost its Lease from ever campaigning again. Dropping the
/// term's work cancels those reconciles between two await points; the next leader reconciles
/// their objects again, as after any restart.
pub(crate) async fn serve<F, Fut, E>(term: &mut F, end: impl Future<Output = E>) -> Option<E>
where
    F: FnMut(Term) -> Fut,
    Fut: Future<Output = ()>,
{
    let (ended, receiver) = watch::channel(false);
    let work = term(Term { ended: receiver });
    tokio::pin!(work);
    let why = tokio::select! {
        () = &mut work => return None,
        why = end => why,
    };
    ended.send_replace(true);
    if tokio::time::timeout(STOP_PATIENCE, work).await.is_err() {
        tracing::warn!(
            "the term's reconciles were still in flight {STOP_PATIENCE:?} after it ended \
             (waiting for a cache to list, or for the API server); dropped them"
        );
    }
    Some(why)
}

/// This replica's hold on the Lease, renewed in the background until it is released.
struct Leadership {
    leading: watch::Receiver<bool>,
    renewer: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
}

impl Leadership {
    /// Resolves when this replica stops leading.
    fn lost(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut leading = self.leading.clone();
        async move {
            // A renewer that ended cannot renew: leadership is as good as lost.
            let _ = leading.wait_for(|leading| !*leading).await;
        }
    }

    /// Hands the Lease back, so that another replica takes it at once rather than after it
    /// expires; gives up after [`RELEASE_TIMEOUT`].
    async fn release(self) {
        // The renewer releases the Lease once nobody watches it any more.
        drop(self.leading);
        match tokio::time::timeout(RELEASE_TIMEOUT, self.renewer).await {
            Ok(Ok(Ok(_))) => tracing::info!("released the Lease"),
            Ok(Ok(Err(error))) => tracing::warn!(%error, "could not release the Lease"),
            Ok(Err(_)) | Err(_) => tracing::warn!("could not release the Lease in time"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{Arc, Mutex},
        time::Duration,
    };

    use http::{Request, Response, StatusCode};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::*;
    use crate::settings::LEASE_SECONDS;
    use crate::{metrics::ReadyWhen, shutdown::Trigger};

    /// A fake Lease endpoint: the one Lease it keeps, and the paths it was asked for.
    #[derive(Default)]
    struct LeaseServer {
        lease: Option<Value>,
        paths: Vec<String>,
        /// Answer patches without applying them, as if another replica's write won each race.
        ignore_patches: bool,
    }

    /// Merges `patch` into `into` as a JSON merge patch does: `null` removes a key.
    fn merge(into: &mut Value, patch: &Value) {
        match (into, patch) {
            (Value::Object(into), Value::Object(patch)) => {
                for (key, value) in patch {
                    if value.is_null() {
                        into.remove(key);
                    } else {
                        merge(into.entry(key.clone()).or_insert(Value::Null), value);
                    }
                }
            }
            (into, patch) => *into = patch.clone(),
        }
    }

    /// A client whose requests `server` answers, as the API server answers for Leases.
    fn client_of(server: Arc<Mutex<LeaseServer>>) -> Client {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let (parts, body) = request.into_parts();
                let body = body.collect_bytes().await.expect("a request body");
                let (status, answer) = {
                    let mut server = server.lock().expect("the fake's lock");
                    server.paths.push(parts.uri.path().to_owned());
                    answer(&mut server, &parts.method, &body)
                };
                let response = Response::builder()
                    .status(status)
                    .body(Body::from(answer.to_string().into_bytes()))
                    .expect("a response");
                respond.send_response(response);
            }
        });
        Client::new(service, "default")
    }

    fn answer(server: &mut LeaseServer, method: &http::Method, body: &[u8]) -> (StatusCode, Value) {
        let not_found = json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "leases not found"
        });
        match (method, &mut server.lease) {
            (&http::Method::GET, None) => (StatusCode::NOT_FOUND, not_found),
            (&http::Method::GET, Some(lease)) => (StatusCode::OK, lease.clone()),
            (&http::Method::POST, _) => {
                let mut lease: Value = serde_json::from_slice(body).expect("a Lease");
                merge(&mut lease, &json!({"metadata": {"resourceVersion": "1"}}));
                server.lease = Some(lease.clone());
                (StatusCode::CREATED, lease)
            }
            (&http::Method::PATCH, Some(lease)) if server.ignore_patches => {
                (StatusCode::OK, lease.clone())
            }
            (&http::Method::PATCH, Some(lease)) => {
                let patch: Value = serde_json::from_slice(body).expect("a patch");
                merge(lease, &patch);
                (StatusCode::OK, lease.clone())
            }
            _ => (StatusCode::NOT_FOUND, not_found),
        }
    }

    fn settings(leader_election: bool) -> Common {
        Common {
            leader_election,
            pod_name: Some("operator-7d9f".to_owned()),
            ..Common::default()
        }
    }

    fn election(server: &Arc<Mutex<LeaseServer>>, leader_election: bool) -> (Election, Trigger) {
        let (shutdown, trigger) = Shutdown::manual();
        let election = Election::new(
            client_of(Arc::clone(server)),
            "op",
            "ops",
            &settings(leader_election),
        )
        .with_shutdown(shutdown);
        (election, trigger)
    }

    fn holder(server: &Arc<Mutex<LeaseServer>>) -> Value {
        let server = server.lock().expect("lock");
        server.lease.as_ref().expect("a Lease")["spec"]["holderIdentity"].clone()
    }

    /// What the terms of a run did, in order.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Started(usize),
        Ended(usize),
    }

    /// Runs `election` in a task whose terms report to the returned channel.
    fn run_terms(
        election: Election,
        metrics: Arc<Metrics>,
    ) -> (
        tokio::sync::mpsc::UnboundedReceiver<Seen>,
        JoinHandle<Result<(), Error>>,
    ) {
        let (seen, receiver) = tokio::sync::mpsc::unbounded_channel();
        let run = tokio::spawn(async move {
            let mut terms = 0;
            election
                .run(&metrics, |term| {
                    terms += 1;
                    let (number, seen) = (terms, seen.clone());
                    async move {
                        let _ = seen.send(Seen::Started(number));
                        term.ended().await;
                        let _ = seen.send(Seen::Ended(number));
                    }
                })
                .await
        });
        (receiver, run)
    }

    async fn next(seen: &mut tokio::sync::mpsc::UnboundedReceiver<Seen>) -> Seen {
        tokio::time::timeout(Duration::from_secs(120), seen.recv())
            .await
            .expect("the run goes on")
            .expect("the run is alive")
    }

    #[tokio::test]
    async fn with_election_off_one_term_runs_at_once_until_the_stop() {
        let server = Arc::new(Mutex::new(LeaseServer::default()));
        let (election, stop) = election(&server, false);
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let (mut seen, run) = run_terms(election, Arc::clone(&metrics));
        assert_eq!(next(&mut seen).await, Seen::Started(1));
        assert!(metrics.render().contains("operator_leader 1\n"));
        stop.stop();
        assert_eq!(next(&mut seen).await, Seen::Ended(1));
        run.await.expect("joined").expect("no election to fail");
        assert!(server.lock().expect("lock").paths.is_empty());
    }

    #[tokio::test]
    async fn a_replica_takes_a_free_lease_under_its_pod_name_in_its_namespace() {
        let server = Arc::new(Mutex::new(LeaseServer::default()));
        let (election, _stop) = election(&server, true);
        tokio::time::timeout(Duration::from_secs(10), election.campaign())
            .await
            .expect("a free Lease is taken at once")
            .expect("the election ran");
        let server = server.lock().expect("lock");
        let spec = &server.lease.as_ref().expect("a Lease was created")["spec"];
        assert_eq!(spec["holderIdentity"], "operator-7d9f");
        assert_eq!(spec["leaseDurationSeconds"], LEASE_SECONDS);
        assert!(
            server
                .paths
                .iter()
                .all(|path| path.starts_with("/apis/coordination.k8s.io/v1/namespaces/ops/leases")),
            "{:?}",
            server.paths
        );
    }

    fn held_by_another(renewed: k8s_openapi::jiff::Timestamp, seconds: u64) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "op", "namespace": "ops", "resourceVersion": "1"},
            "spec": {
                "holderIdentity": "operator-other",
                "leaseDurationSeconds": seconds,
                "acquireTime": renewed.to_string(),
                "renewTime": renewed.to_string()
            }
        })
    }

    #[tokio::test]
    async fn a_lease_another_replica_renews_keeps_this_one_waiting_until_the_stop() {
        let now = k8s_openapi::jiff::Timestamp::now();
        let server = Arc::new(Mutex::new(LeaseServer {
            lease: Some(held_by_another(now, 3600)),
            ..LeaseServer::default()
        }));
        let (election, stop) = election(&server, true);
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let (mut seen, run) = run_terms(election, Arc::clone(&metrics));
        let waiting = tokio::time::timeout(Duration::from_millis(500), seen.recv()).await;
        assert!(
            waiting.is_err(),
            "it must not lead while another replica holds the Lease"
        );
        assert!(metrics.is_ready(), "a standby is ready to take over");
        stop.stop();
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .expect("a stop ends the wait for the Lease")
            .expect("joined")
            .expect("no failure");
        assert!(seen.try_recv().is_err(), "no term ran");
        assert_eq!(holder(&server), "operator-other", "the holder is untouched");
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_that_loses_the_lease_ends_its_term_and_campaigns_again() {
        let server = Arc::new(Mutex::new(LeaseServer::default()));
        let (election, stop) = election(&server, true);
        let metrics = Arc::new(Metrics::new(ReadyWhen::WatchesListed(1)));
        let (mut seen, run) = run_terms(election, Arc::clone(&metrics));
        assert_eq!(next(&mut seen).await, Seen::Started(1));
        // Another replica took the Lease while this one could not renew it, and this one's
        // renewals now lose each race.
        {
            let mut server = server.lock().expect("lock");
            let expired = k8s_openapi::jiff::Timestamp::now() - Duration::from_secs(60);
            server.lease = Some(held_by_another(expired, LEASE_SECONDS));
            server.ignore_patches = true;
        }
        assert_eq!(next(&mut seen).await, Seen::Ended(1), "the term ends");
        assert!(metrics.render().contains("operator_leader 0\n"));
        assert!(!run.is_finished(), "the process campaigns again, not exits");
        server.lock().expect("lock").ignore_patches = false;
        // The other replica's hold expired: this one takes the Lease back.
        assert_eq!(next(&mut seen).await, Seen::Started(2));
        assert!(metrics.render().contains("operator_leader 1\n"));
        assert_eq!(holder(&server), "operator-7d9f");
        stop.stop();
        assert_eq!(next(&mut seen).await, Seen::Ended(2));
        run.await.expect("joined").expect("no failure");
        assert_eq!(
            holder(&server),
            Value::Null,
            "a stopping leader hands the Lease back"
        );
    }
}
