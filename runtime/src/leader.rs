//! Leader election on a Lease, so that several replicas can run and only one reconciles.
//!
//! On with `--leader-election` (`LEADER_ELECTION=true`, as a generated `deploy/` sets it); the
//! Lease lives in the pod's namespace and each replica is named by its pod. Off, the operator
//! just runs.

use std::future::Future;

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::{sync::watch, task::JoinHandle};

use crate::settings::Common;

/// Seconds a leader holds the Lease without renewing it before another replica may take it.
pub const LEASE_SECONDS: u64 = 15;

/// Why this replica could not take part in the election.
#[derive(Debug, thiserror::Error)]
#[error("leader election on Lease {namespace}/{lease}: {source}")]
pub struct Error {
    namespace: String,
    lease: String,
    #[source]
    source: LeaseManagerError,
}

/// This replica's leadership; the Lease is released when it is dropped.
pub struct Leadership {
    leading: watch::Receiver<bool>,
    _renewer: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
}

impl Leadership {
    /// Resolves when this replica stops leading, to stop its controllers gracefully.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut leading = self.leading.clone();
        async move {
            while *leading.borrow_and_update() {
                if leading.changed().await.is_err() {
                    break;
                }
            }
            tracing::warn!("lost leadership; stopping");
        }
    }
}

/// Waits until this replica leads the Lease `lease` in `namespace`, under its pod's name.
/// `None`, at once, when leader election is off.
pub async fn lead(
    client: Client,
    lease: &str,
    namespace: &str,
    settings: &Common,
) -> Result<Option<Leadership>, Error> {
    if !settings.leader_election {
        return Ok(None);
    }
    let mut builder = LeaseManagerBuilder::new(client, lease)
        .with_namespace(namespace)
        .with_duration(LEASE_SECONDS)
        .with_grace(LEASE_SECONDS / 3);
    if let Some(pod) = &settings.pod_name {
        builder = builder.with_identity(pod);
    }
    let manager = builder.build().await.map_err(|source| Error {
        namespace: namespace.to_owned(),
        lease: lease.to_owned(),
        source,
    })?;
    let (mut leading, renewer) = manager.watch().await;
    tracing::info!(lease, "waiting to lead");
    while !*leading.borrow_and_update() {
        if leading.changed().await.is_err() {
            break;
        }
    }
    tracing::info!(lease, "leading");
    Ok(Some(Leadership {
        leading,
        _renewer: renewer,
    }))
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

    /// A fake Lease endpoint: the one Lease it keeps, and the paths it was asked for.
    #[derive(Default)]
    struct LeaseServer {
        lease: Option<Value>,
        paths: Vec<String>,
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

    #[tokio::test]
    async fn with_election_off_it_runs_at_once_without_asking_the_api_server() {
        let server = Arc::new(Mutex::new(LeaseServer::default()));
        let leadership = lead(
            client_of(Arc::clone(&server)),
            "op",
            "ops",
            &settings(false),
        )
        .await
        .expect("no election");
        assert!(leadership.is_none());
        assert!(server.lock().expect("lock").paths.is_empty());
    }

    #[tokio::test]
    async fn a_replica_takes_a_free_lease_under_its_pod_name_in_its_namespace() {
        let server = Arc::new(Mutex::new(LeaseServer::default()));
        let leadership = tokio::time::timeout(
            Duration::from_secs(10),
            lead(client_of(Arc::clone(&server)), "op", "ops", &settings(true)),
        )
        .await
        .expect("a free Lease is taken at once")
        .expect("the election ran");
        assert!(leadership.is_some());
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

    #[tokio::test]
    async fn a_lease_another_replica_renews_keeps_this_one_waiting() {
        let now = k8s_openapi::jiff::Timestamp::now();
        let held = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "op", "namespace": "ops", "resourceVersion": "1"},
            "spec": {
                "holderIdentity": "operator-other",
                "leaseDurationSeconds": 3600,
                "acquireTime": now.to_string(),
                "renewTime": now.to_string()
            }
        });
        let server = Arc::new(Mutex::new(LeaseServer {
            lease: Some(held),
            paths: Vec::new(),
        }));
        let waiting = tokio::time::timeout(
            Duration::from_millis(500),
            lead(client_of(Arc::clone(&server)), "op", "ops", &settings(true)),
        )
        .await;
        assert!(
            waiting.is_err(),
            "it must not lead while another replica holds the Lease"
        );
        let server = server.lock().expect("lock");
        let spec = &server.lease.as_ref().expect("the Lease")["spec"];
        assert_eq!(
            spec["holderIdentity"], "operator-other",
            "the holder is untouched"
        );
    }
}
