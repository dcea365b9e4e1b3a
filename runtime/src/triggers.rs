//! What makes a primary reconcile besides its own changes, as `operator.yaml` declares it: a
//! watched object that names its primary (by a label, an annotation or a field), and an outside
//! system, polled or sending. A generated controller hands these to kube's
//! `Controller::watches_stream` and `Controller::reconcile_on`.

use std::{fmt::Display, future::Future, time::Duration};

use futures::{Stream, StreamExt};
use kube::{Resource, ResourceExt, runtime::reflector::ObjectRef};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::run::WatchScope;

/// How many objects an outside system's sender may queue before it waits for the controller.
pub const SENT_AT_ONCE: usize = 256;

/// How a watched object names its primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedBy {
    /// The value of this label.
    Label(&'static str),
    /// The value of this annotation.
    Annotation(&'static str),
    /// The string at this JSON pointer into the object (`/spec/target/name`).
    Field(&'static str),
}

/// The primary that `obj` names as `named_by` says, in `obj`'s namespace when primaries are
/// namespaced; none when `obj` names none.
pub fn named_primary<P, C>(obj: &C, named_by: NamedBy) -> Option<ObjectRef<P>>
where
    P: Resource<DynamicType = (), Scope: WatchScope>,
    C: Resource + Serialize,
{
    let name = match named_by {
        NamedBy::Label(key) => obj.labels().get(key)?.clone(),
        NamedBy::Annotation(key) => obj.annotations().get(key)?.clone(),
        NamedBy::Field(pointer) => {
            let value = serde_json::to_value(obj).ok()?;
            value.pointer(pointer)?.as_str()?.to_owned()
        }
    };
    let primary = ObjectRef::new(&name);
    if <P::Scope as WatchScope>::NAMESPACED {
        Some(primary.within(&obj.namespace()?))
    } else {
        Some(primary)
    }
}

/// The objects `poll` returns, every `every` from now on, for `Controller::reconcile_on`. A
/// failed poll is logged with the relation's name and returns none.
///
/// Each poll is given a clone of `state`, so a poll's future owns what it reads (the
/// operator's hooks and context, say) and the stream borrows nothing.
pub fn polled<P, S, Poll, Polled, E>(
    every: Duration,
    relation: &'static str,
    state: S,
    mut poll: Poll,
) -> impl Stream<Item = ObjectRef<P>> + Send + 'static
where
    P: Resource<DynamicType = ()> + 'static,
    S: Clone + Send + 'static,
    Poll: FnMut(S) -> Polled + Send + 'static,
    Polled: Future<Output = Result<Vec<ObjectRef<P>>, E>> + Send + 'static,
    E: Display,
{
    let ticks = tokio::time::interval(every);
    let poll = move || poll(state.clone());
    futures::stream::unfold((ticks, poll), move |(mut ticks, mut poll)| async move {
        ticks.tick().await;
        let changed = poll().await.unwrap_or_else(|error| {
            tracing::warn!(%error, relation, "polling failed");
            Vec::new()
        });
        Some((futures::stream::iter(changed), (ticks, poll)))
    })
    .flatten()
}

/// The objects an outside system sends, for `Controller::reconcile_on`: `start` is given the
/// sending half, and the stream ends when every sender is dropped.
pub fn sent<P>(
    start: impl FnOnce(mpsc::Sender<ObjectRef<P>>),
) -> impl Stream<Item = ObjectRef<P>> + Send + 'static
where
    P: Resource<DynamicType = ()> + 'static,
{
    let (sender, receiver) = mpsc::channel(SENT_AT_ONCE);
    start(sender);
    futures::stream::unfold(receiver, |mut receiver| async move {
        let object = receiver.recv().await?;
        Some((object, receiver))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering::SeqCst},
    };

    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
    use kube::api::PartialObjectMeta;

    use super::*;

    fn secret_in(namespace: &str) -> PartialObjectMeta<Secret> {
        let mut obj = PartialObjectMeta::<Secret>::default();
        obj.metadata.namespace = Some(namespace.to_owned());
        obj
    }

    #[test]
    fn a_label_or_annotation_names_a_primary_in_the_objects_own_namespace() {
        let mut obj = secret_in("team-a");
        let by_label = NamedBy::Label("example.com/owner");
        assert_eq!(named_primary::<ConfigMap, _>(&obj, by_label), None);
        obj.metadata.labels = Some([("example.com/owner".to_owned(), "target".to_owned())].into());
        let expected = ObjectRef::<ConfigMap>::new("target").within("team-a");
        assert_eq!(named_primary(&obj, by_label), Some(expected));
        let by_annotation = NamedBy::Annotation("example.com/owner");
        assert_eq!(named_primary::<ConfigMap, _>(&obj, by_annotation), None);
        obj.metadata.annotations = obj.metadata.labels.clone();
        let named = named_primary::<ConfigMap, _>(&obj, by_annotation);
        assert_eq!(named.map(|r| r.name), Some("target".to_owned()));
    }

    #[test]
    fn a_field_names_a_primary_and_a_cluster_scoped_one_has_no_namespace() {
        let mut obj = ConfigMap::default();
        obj.metadata.namespace = Some("team-a".to_owned());
        let by_field = NamedBy::Field("/data/owner");
        assert_eq!(named_primary::<Namespace, _>(&obj, by_field), None);
        obj.data = Some([("owner".to_owned(), "target".to_owned())].into());
        let named = named_primary::<Namespace, _>(&obj, by_field);
        assert_eq!(named, Some(ObjectRef::new("target")));
        let namespaced = named_primary::<ConfigMap, _>(&obj, by_field);
        assert_eq!(namespaced, Some(ObjectRef::new("target").within("team-a")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_poll_runs_every_interval_and_a_failed_one_triggers_nothing() {
        let rounds = Arc::new(AtomicUsize::new(0));
        let every = Duration::from_secs(30);
        let stream = polled::<ConfigMap, _, _, _, String>(every, "registry", rounds, |rounds| {
            let this = rounds.fetch_add(1, SeqCst) + 1;
            async move {
                match this {
                    2 => Err("the registry is down".to_owned()),
                    _ => Ok(vec![ObjectRef::new(&format!("round-{this}")).within("ns")]),
                }
            }
        });
        let started = tokio::time::Instant::now();
        let names: Vec<String> = stream.take(2).map(|r| r.name).collect().await;
        assert_eq!(names, ["round-1", "round-3"]);
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(60),
            "at 0 s, 30 s (failed) and 60 s"
        );
    }

    #[tokio::test]
    async fn what_an_outside_system_sends_is_reconciled_until_it_stops_sending() {
        let stream = sent::<ConfigMap>(|sender| {
            tokio::spawn(async move {
                for name in ["a", "b"] {
                    let _ = sender.send(ObjectRef::new(name).within("ns")).await;
                }
            });
        });
        let names: Vec<String> = stream.map(|r| r.name).collect().await;
        assert_eq!(names, ["a", "b"]);
    }
}
