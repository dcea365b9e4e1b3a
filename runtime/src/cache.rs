//! The operator's caches (kube's reflector stores) beyond what kube gives: a writing half that
//! outlives one leadership term ([`Feed`]), a child's or a cached watched kind's cache with it
//! ([`Cache`]), how many objects each cache holds, as a metric, and what a cached object need
//! not keep.

use std::{
    collections::BTreeMap,
    future::Future,
    hash::Hash,
    ops::Deref,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicU64, Ordering},
    },
};

use futures::{Stream, StreamExt};
use kube::{
    Resource,
    runtime::{
        reflector::{self, ObjectRef, Store, store::Writer},
        watcher,
    },
};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{MetricType, gauge::ConstGauge},
};
use serde::Serialize;
use tokio::sync::watch;

use crate::{
    run::WatchScope,
    triggers::{NamedBy, named_primary},
};

/// The annotation in which `kubectl apply` keeps a copy of the object it last applied.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Clears what no reconcile reads before an object is cached: `managedFields`, often the
/// largest part of an object written by server-side apply, and kubectl's copy of the last
/// object it applied. For a watch's `.modify(...)`.
pub fn forget_unread_fields<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// The writing half of a cache, shared so that each leadership term's watch feeds the same
/// cache in turn; kube's `reflect` takes its writer for good. Between terms the cache keeps
/// the last term's objects, and the next term's watch lists into it as a relist after a
/// watch error would. [`Feed::listed`] says when the current list is complete.
pub struct Feed<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    writer: Arc<Mutex<Writer<K>>>,
    /// Whether the watch has listed everything since it last began a list.
    listed: Arc<watch::Sender<bool>>,
}

impl<K> Clone for Feed<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            writer: Arc::clone(&self.writer),
            listed: Arc::clone(&self.listed),
        }
    }
}

impl<K> From<Writer<K>> for Feed<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn from(writer: Writer<K>) -> Self {
        Self {
            writer: Arc::new(Mutex::new(writer)),
            listed: Arc::new(watch::channel(false).0),
        }
    }
}

impl<K> Feed<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// Applies one watch event to the cache, as the watch does; for tests that fill a cache
    /// by hand.
    pub fn apply_watcher_event(&self, event: &watcher::Event<K>) {
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .apply_watcher_event(event);
        match event {
            watcher::Event::Init => {
                self.listed.send_replace(false);
            }
            watcher::Event::InitDone => {
                self.listed.send_replace(true);
            }
            _ => {}
        }
    }

    /// Resolves once the cache holds a complete list: its watch has listed everything since
    /// it last began a list (a new term's, or a relist's). Unlike kube's
    /// `Store::wait_until_ready`, which is ready once per cache and wakes only its latest
    /// waiter, it wakes every waiter and holds them again while a new term lists, so no
    /// reconcile reads the last term's objects for this one's.
    pub fn listed(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut listed = self.listed.subscribe();
        async move {
            // The sender lives as long as the feed; a dropped feed feeds nothing more.
            let _ = listed.wait_for(|listed| *listed).await;
        }
    }
}

/// The cache of one kind an operator owns or caches from a watch, kept across leadership
/// terms: the store that reconciles read, which it dereferences to, and the `Feed` through
/// which each term's watch of that kind (`run::Watches::owned` or `cached`) fills it. Clones
/// share the cache.
pub struct Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    feed: Feed<K>,
}

impl<K> Default for Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    fn default() -> Self {
        let (store, writer) = reflector::store();
        Self {
            store,
            feed: writer.into(),
        }
    }
}

impl<K> Clone for Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            feed: self.feed.clone(),
        }
    }
}

impl<K> Deref for Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    type Target = Store<K>;

    fn deref(&self) -> &Store<K> {
        &self.store
    }
}

impl<K> Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// The writing half, for a watch to fill the cache through.
    pub(crate) fn feed(&self) -> &Feed<K> {
        &self.feed
    }

    /// Resolves once the cache holds a complete list (see `Feed::listed`).
    pub fn listed(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        self.feed.listed()
    }

    /// Applies one watch event to the cache, as its watch does; for tests that fill a cache
    /// by hand.
    pub fn apply_watcher_event(&self, event: &watcher::Event<K>) {
        self.feed.apply_watcher_event(event);
    }

    /// The cached objects that name `primary` as `named_by` says, as the watch's mapper reads
    /// them: what a reconcile reads of a cached watch (`cache: true`), from memory rather
    /// than the API server. It looks at every cached object; the watch's selector keeps those
    /// to the ones that name some primary.
    pub fn naming<P>(&self, primary: &P, named_by: NamedBy) -> Vec<Arc<K>>
    where
        P: Resource<DynamicType = (), Scope: WatchScope>,
        K: Serialize,
    {
        let wanted = ObjectRef::from_obj(primary);
        let names_it = |obj: &Arc<K>| {
            named_primary::<P, K>(obj.as_ref(), named_by).is_some_and(|named| {
                named.name == wanted.name && named.namespace == wanted.namespace
            })
        };
        self.store.state().into_iter().filter(names_it).collect()
    }
}

/// Feeding a [`Feed`] from a watch.
pub trait FeedExt<K>: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// Applies each event to `feed`'s cache before passing it on, as kube's `reflect` does.
    fn reflect_into(
        self,
        feed: Feed<K>,
    ) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> {
        self.inspect(move |event| {
            if let Ok(event) = event {
                feed.apply_watcher_event(event);
            }
        })
    }
}

impl<K, S> FeedExt<K> for S
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
}

/// How many objects a cache holds, read when asked.
type Size = Box<dyn Fn() -> usize + Send + Sync>;

/// The sizes of the operator's caches by kind, served as `operator_cache_objects{kind}` and
/// read from the caches at each scrape, so they cost nothing between scrapes.
#[derive(Default)]
pub struct CacheSizes {
    /// Each kind's cache, with the number of the [`Counted`] that keeps it.
    sizes: Mutex<BTreeMap<String, (u64, Size)>>,
    next: AtomicU64,
}

/// Keeps a cache counted in [`CacheSizes`]; dropping it stops counting the cache and lets go
/// of it.
#[must_use = "the cache is counted only while this lives"]
pub struct Counted {
    sizes: Weak<CacheSizes>,
    kind: String,
    number: u64,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let Some(sizes) = self.sizes.upgrade() else {
            return;
        };
        let mut sizes = sizes.sizes.lock().unwrap_or_else(|p| p.into_inner());
        // A later cache of the same kind counts on.
        if sizes
            .get(&self.kind)
            .is_some_and(|(n, _)| *n == self.number)
        {
            sizes.remove(&self.kind);
        }
    }
}

impl std::fmt::Debug for CacheSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_list().entries(sizes.keys()).finish()
    }
}

/// The label of a cache's size.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

impl CacheSizes {
    /// Counts `store` as the cache of `kind`, in place of any cache of that kind before, while
    /// the returned [`Counted`] lives.
    pub fn count<K>(self: &Arc<Self>, kind: &str, store: Store<K>) -> Counted
    where
        K: Resource + Clone + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.sizes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind.to_owned(), (number, Box::new(move || store.len())));
        Counted {
            sizes: Arc::downgrade(self),
            kind: kind.to_owned(),
            number,
        }
    }
}

/// Serves [`CacheSizes`] at a scrape; shares them with the [`crate::metrics::Metrics`] that
/// counts caches.
#[derive(Debug)]
pub(crate) struct CacheSizesCollector(pub(crate) Arc<CacheSizes>);

impl Collector for CacheSizesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sizes = self.0.sizes.lock().unwrap_or_else(|p| p.into_inner());
        let mut family = encoder.encode_descriptor(
            "cache_objects",
            "Objects in this replica's caches, by kind",
            None,
            MetricType::Gauge,
        )?;
        for (kind, (_, size)) in sizes.iter() {
            let label = KindLabel { kind: kind.clone() };
            let size = i64::try_from(size()).unwrap_or(i64::MAX);
            ConstGauge::new(size).encode(family.encode_family(&label)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
    use kube::{ResourceExt, api::ObjectMeta, runtime::reflector};

    use super::*;

    #[test]
    fn a_cache_names_the_objects_that_name_the_primary_in_its_namespace_and_no_others() {
        let cache = Cache::<Secret>::default();
        let key = "example.com/owner";
        let secret = |name: &str, namespace: &str, owner: Option<&str>| {
            let mut obj = Secret::default();
            obj.metadata.name = Some(name.to_owned());
            obj.metadata.namespace = Some(namespace.to_owned());
            obj.metadata.labels = owner.map(|owner| [(key.to_owned(), owner.to_owned())].into());
            obj
        };
        for obj in [
            secret("tls", "team-a", Some("web")),
            secret("other-owner", "team-a", Some("api")),
            secret("other-namespace", "team-b", Some("web")),
            secret("unlabelled", "team-a", None),
        ] {
            cache.apply_watcher_event(&watcher::Event::Apply(obj));
        }
        let names = |found: Vec<Arc<Secret>>| {
            let mut names: Vec<_> = found.iter().map(|obj| obj.name_any()).collect();
            names.sort();
            names
        };
        let mut primary = config_map("web");
        primary.metadata.namespace = Some("team-a".to_owned());
        assert_eq!(names(cache.naming(&primary, NamedBy::Label(key))), ["tls"]);
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some("web".to_owned());
        assert_eq!(
            names(cache.naming(&namespace, NamedBy::Label(key))),
            ["other-namespace", "tls"],
            "a cluster-scoped primary is named from any namespace"
        );
        assert!(
            cache
                .naming(&namespace, NamedBy::Annotation(key))
                .is_empty()
        );
    }

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("default".to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_cached_object_keeps_neither_managed_fields_nor_kubectls_copy_but_keeps_the_rest() {
        let mut object = config_map("a");
        object.metadata.managed_fields = Some(vec![Default::default()]);
        let annotations = [(LAST_APPLIED, "{}"), ("team", "a")];
        let annotations = annotations.map(|(k, v)| (k.to_owned(), v.to_owned()));
        object.metadata.annotations = Some(annotations.into());
        forget_unread_fields(&mut object);
        assert_eq!(object.metadata.managed_fields, None);
        let kept = object.metadata.annotations.unwrap_or_default();
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["team"]);
        assert_eq!(object.metadata.name.as_deref(), Some("a"));
    }

    #[tokio::test]
    async fn a_feed_outlives_one_watch_and_the_next_lists_into_the_same_cache() {
        let (store, writer) = reflector::store::<ConfigMap>();
        let feed = Feed::from(writer);
        let first = futures::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(config_map("a"))),
            Ok(watcher::Event::InitApply(config_map("b"))),
            Ok(watcher::Event::InitDone),
        ]);
        first
            .reflect_into(feed.clone())
            .for_each(|_| async {})
            .await;
        assert_eq!(store.len(), 2);
        // The next term's watch lists again; only what it lists stays.
        let second = futures::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(config_map("b"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(config_map("c"))),
        ]);
        second
            .reflect_into(feed.clone())
            .for_each(|_| async {})
            .await;
        let mut names: Vec<_> = store
            .state()
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect();
        names.sort();
        assert_eq!(names, ["b", "c"]);
    }

    #[tokio::test]
    async fn listed_holds_every_waiter_until_the_current_list_is_complete() {
        let (_store, writer) = reflector::store::<ConfigMap>();
        let feed = Feed::from(writer);
        let waiters: Vec<_> = (0..3).map(|_| tokio::spawn(feed.listed())).collect();
        tokio::task::yield_now().await;
        assert!(waiters.iter().all(|w| !w.is_finished()));
        feed.apply_watcher_event(&watcher::Event::Init);
        feed.apply_watcher_event(&watcher::Event::InitDone);
        for waiter in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
                .await
                .expect("every waiter wakes")
                .expect("joined");
        }
        // A new term's list: waiters wait for it again.
        feed.apply_watcher_event(&watcher::Event::Init);
        let again = tokio::spawn(feed.listed());
        tokio::task::yield_now().await;
        assert!(!again.is_finished(), "the last term's list does not count");
        feed.apply_watcher_event(&watcher::Event::InitApply(config_map("a")));
        feed.apply_watcher_event(&watcher::Event::InitDone);
        tokio::time::timeout(std::time::Duration::from_secs(5), again)
            .await
            .expect("woken by this term's list")
            .expect("joined");
    }

    #[tokio::test]
    async fn a_cache_reads_what_its_feed_was_given_and_clones_share_it() {
        let cache = Cache::<ConfigMap>::default();
        let shared = cache.clone();
        let listed = tokio::spawn(shared.listed());
        shared.apply_watcher_event(&watcher::Event::Init);
        shared.apply_watcher_event(&watcher::Event::InitApply(config_map("a")));
        cache.feed().apply_watcher_event(&watcher::Event::InitDone);
        tokio::time::timeout(std::time::Duration::from_secs(5), listed)
            .await
            .expect("a clone's waiter wakes")
            .expect("joined");
        let names: Vec<_> = cache
            .state()
            .iter()
            .map(|cm| cm.metadata.name.clone())
            .collect();
        assert_eq!(names, [Some("a".to_owned())]);
    }

    #[tokio::test]
    async fn cache_sizes_are_read_at_each_scrape_by_kind() {
        let sizes = Arc::new(CacheSizes::default());
        let (store, writer) = reflector::store::<ConfigMap>();
        let feed = Feed::from(writer);
        let counted = sizes.count("ConfigMap", store);
        let mut registry = prometheus_client::registry::Registry::with_prefix("operator");
        registry.register_collector(Box::new(CacheSizesCollector(Arc::clone(&sizes))));
        let render = |registry: &prometheus_client::registry::Registry| {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, registry).expect("text");
            text
        };
        assert!(
            render(&registry).contains("operator_cache_objects{kind=\"ConfigMap\"} 0\n"),
            "{}",
            render(&registry)
        );
        feed.apply_watcher_event(&watcher::Event::Apply(config_map("a")));
        feed.apply_watcher_event(&watcher::Event::Apply(config_map("b")));
        assert!(
            render(&registry).contains("operator_cache_objects{kind=\"ConfigMap\"} 2\n"),
            "{}",
            render(&registry)
        );
        // A new term's cache of the same kind replaces the old one, and the old term's
        // guard, dropped after, leaves it counted.
        let (fresh, _writer) = reflector::store::<ConfigMap>();
        let fresh_counted = sizes.count("ConfigMap", fresh);
        drop(counted);
        let text = render(&registry);
        assert!(
            text.contains("operator_cache_objects{kind=\"ConfigMap\"} 0\n"),
            "{text}"
        );
        assert_eq!(text.matches("kind=\"ConfigMap\"").count(), 1, "{text}");
        drop(fresh_counted);
        let text = render(&registry);
        assert!(
            !text.contains("kind=\"ConfigMap\""),
            "no longer counted: {text}"
        );
    }
}
