//! Every watch the runtime starts, with the initial list the settings choose
//! (`--initial-list`), streamed where the API server serves streaming lists and in pages where
//! it refuses them.
//!
//! A server refuses `sendInitialEvents` with 422 Invalid when its `WatchList` feature gate is
//! off: by default on Kubernetes 1.27 to 1.31 and on 1.33, the oldest kube 5 supports (1.32
//! and 1.34 on serve it). kube's watcher would ask again and again and never list; here the
//! watch lists in pages instead, once the server has said so, and says what to set.
//!
//! A module of its own, under neither the run loop nor sharding, because both start watches
//! here: the run loop's of the primary, the children and the related kinds, and the sharder's
//! of the Leases and the objects it places.

use std::{
    fmt::Debug,
    pin::Pin,
    task::{Context, Poll, ready},
};

use futures::{Stream, StreamExt, stream::BoxStream};
use kube::{
    Api, Resource,
    runtime::watcher::{self, InitialListStrategy, watcher},
};
use serde::de::DeserializeOwned;

use crate::settings::InitialList;

/// What a watch yields.
type Item<K> = Result<watcher::Event<K>, watcher::Error>;

/// The watch of `api`'s objects that `config` selects, with the initial list `initial_list`
/// says, whatever `config` said of it: the one place a watch of the runtime starts. Where the
/// API server refuses a streaming list, the watch lists in pages from then on.
pub(crate) fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    initial_list: InitialList,
) -> impl Stream<Item = Item<K>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let config = initial_list.applied(config);
    let paged = (config.initial_list_strategy == InitialListStrategy::StreamingList).then(|| {
        let paged = InitialList::Paged.applied(config.clone());
        (api.clone(), paged)
    });
    Listed {
        inner: watcher(api, config).boxed(),
        paged,
    }
}

/// A watch that starts over in pages when the API server refuses its streaming list.
struct Listed<K> {
    inner: BoxStream<'static, Item<K>>,
    /// The same watch in pages, while it streams.
    paged: Option<(Api<K>, watcher::Config)>,
}

// No field is pinned structurally: the inner stream is boxed.
impl<K> Unpin for Listed<K> {}

impl<K> Stream for Listed<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    type Item = Item<K>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let item = ready!(self.inner.poll_next_unpin(cx));
            if let Some(Err(error)) = &item
                && refuses_streaming(error)
                && let Some((api, config)) = self.paged.take()
            {
                // A streaming watcher says `Init` only once its watch has started, so nothing
                // of this list reached the caller; the paged watch starts a list of its own.
                tracing::warn!(
                    %error,
                    url = api.resource_url(),
                    "the API server does not serve streaming lists (its WatchList feature \
                     gate is off, as by default on Kubernetes 1.33); this watch lists in pages \
                     instead; set INITIAL_LIST=paged (--initial-list paged) to ask for pages \
                     from the start"
                );
                self.inner = watcher(api, config).boxed();
                continue;
            }
            return Poll::Ready(item);
        }
    }
}

/// Whether `error` is an API server's refusal of `sendInitialEvents`.
fn refuses_streaming(error: &watcher::Error) -> bool {
    matches!(
        error,
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
            if matches!(status.code, 400 | 422) && status.message.contains("sendInitialEvents")
    )
}

#[cfg(test)]
mod tests {
    use http::{Request, Response, StatusCode, Uri};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{Client, client::Body};
    use serde_json::json;
    use tokio::task::JoinHandle;

    use super::*;

    /// The message a Kubernetes 1.33 API server, its WatchList feature gate off by default,
    /// answers a watch with `sendInitialEvents` with (apimachinery's `validateWatchOptions`).
    const REFUSED: &str = "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: \
                           sendInitialEvents is forbidden for watch unless the WatchList feature \
                           gate is enabled";

    /// A mock API server answering its requests in turn with `answers` (a status and a raw
    /// body: a watch's is one event a line), leaving any later request unanswered. The handle
    /// gives the URIs asked for, once the client is dropped.
    fn answering(answers: Vec<(u16, String)>) -> (Client, JoinHandle<Vec<Uri>>) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            let mut answers = answers.into_iter();
            let mut seen = Vec::new();
            let mut unanswered = Vec::new();
            while let Some((request, respond)) = handle.next_request().await {
                seen.push(request.uri().clone());
                match answers.next() {
                    Some((status, body)) => {
                        let mut response = Response::new(Body::from(body.into_bytes()));
                        *response.status_mut() = StatusCode::from_u16(status).expect("a status");
                        respond.send_response(response);
                    }
                    None => unanswered.push(respond),
                }
            }
            seen
        });
        (Client::new(service, "default"), server)
    }

    fn config_map(name: &str) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ops", "resourceVersion": "7"},
        })
    }

    /// A streaming list of `names`: one event each, then the bookmark that ends it.
    fn streamed(names: &[&str]) -> String {
        let mut body = String::new();
        for name in names {
            body.push_str(&json!({"type": "ADDED", "object": config_map(name)}).to_string());
            body.push('\n');
        }
        let end = json!({"type": "BOOKMARK", "object": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "resourceVersion": "8",
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        }});
        body.push_str(&end.to_string());
        body.push('\n');
        body
    }

    fn listed(names: &[&str]) -> String {
        let items: Vec<_> = names.iter().map(|name| config_map(name)).collect();
        json!({
            "apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "8"}, "items": items,
        })
        .to_string()
    }

    /// What a watch yields until its initial list is done, as names and markers.
    async fn initial_list(
        watch: impl Stream<Item = Item<ConfigMap>>,
    ) -> Result<Vec<String>, watcher::Error> {
        let mut watch = std::pin::pin!(watch);
        let mut seen = Vec::new();
        while let Some(event) = watch.next().await {
            match event? {
                watcher::Event::Init => seen.push("init".to_owned()),
                watcher::Event::InitApply(obj) => seen.push(obj.metadata.name.unwrap_or_default()),
                watcher::Event::InitDone => return Ok(seen),
                other => panic!("not part of an initial list: {other:?}"),
            }
        }
        Ok(seen)
    }

    fn selected() -> watcher::Config {
        watcher::Config::default().labels("app.kubernetes.io/managed-by=widget-operator")
    }

    #[tokio::test]
    async fn a_streaming_list_is_one_watch_that_sends_what_exists_first() {
        let (client, server) = answering(vec![(200, streamed(&["a", "b"]))]);
        let api = Api::<ConfigMap>::namespaced(client, "ops");
        let watch = watch(api, selected(), InitialList::Streaming);
        let listed = initial_list(watch).await.expect("listed");
        assert_eq!(listed, ["init", "a", "b"]);
        let seen = server.await.expect("the mock API server");
        let query = seen[0].query().unwrap_or_default();
        for part in [
            "watch=true",
            "sendInitialEvents=true",
            "resourceVersionMatch=NotOlderThan",
            "allowWatchBookmarks=true",
            "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dwidget-operator",
        ] {
            assert!(query.contains(part), "{part} in {query}");
        }
    }

    #[tokio::test]
    async fn paged_lists_ask_for_the_most_recent_state_whatever_the_config_said() {
        let (client, server) = answering(vec![(200, listed(&["a"]))]);
        let api = Api::<ConfigMap>::namespaced(client, "ops");
        let config = selected().streaming_lists().any_semantic();
        let listed = initial_list(watch(api, config, InitialList::Paged)).await;
        assert_eq!(listed.expect("listed"), ["init", "a"]);
        let seen = server.await.expect("the mock API server");
        let query = seen[0].query().unwrap_or_default();
        assert!(!query.contains("watch"), "a list: {query}");
        assert!(query.contains("limit=500"), "{query}");
        assert!(!query.contains("resourceVersion"), "most recent: {query}");
        assert!(query.contains("labelSelector="), "{query}");
    }

    #[tokio::test]
    async fn a_server_that_refuses_streaming_lists_is_listed_in_pages_without_an_error() {
        let refusal = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": REFUSED, "reason": "Invalid", "code": 422,
        });
        let answers = vec![(422, refusal.to_string()), (200, listed(&["a", "b"]))];
        let (client, server) = answering(answers);
        let api = Api::<ConfigMap>::namespaced(client, "ops");
        let watch = watch(api, selected(), InitialList::Streaming);
        let listed = initial_list(watch)
            .await
            .expect("no error reaches the caller");
        assert_eq!(listed, ["init", "a", "b"]);
        let seen = server.await.expect("the mock API server");
        let queries: Vec<&str> = seen.iter().filter_map(Uri::query).collect();
        assert_eq!(queries.len(), 2, "{queries:?}");
        assert!(queries[0].contains("sendInitialEvents=true"), "{queries:?}");
        assert!(!queries[1].contains("watch"), "then a list: {queries:?}");
        assert!(
            queries[1].contains("labelSelector="),
            "the same selector: {queries:?}"
        );
    }

    #[tokio::test]
    async fn any_other_failure_of_a_streaming_list_is_the_callers() {
        let forbidden = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps is forbidden", "reason": "Forbidden", "code": 403,
        });
        let (client, _server) = answering(vec![(403, forbidden.to_string())]);
        let api = Api::<ConfigMap>::namespaced(client, "ops");
        let error = initial_list(watch(api, selected(), InitialList::Streaming)).await;
        let error = error.expect_err("forbidden");
        assert!(!refuses_streaming(&error), "{error}");
        assert!(error.to_string().contains("forbidden"), "{error}");
    }
}
