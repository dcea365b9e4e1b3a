//! The watches that the controllers of one term share, one controller per kind the operator
//! reconciles (a generic operator's several, a typed operator's one): each related kind is
//! watched once, not once per reconciled kind.
//! The first controller to ask for a watch drives it, and every other controller that asks
//! for the same one gets a copy of each object it yields.
//!
//! kube's own shared streams (`Controller::owns_shared_stream` over a `reflect_shared` store)
//! pass on only the objects the store still holds, so a deleted child would reconcile no
//! owner and stay deleted until the owner's next change. Here every object the watch touches
//! reaches every controller, deleted ones too, as it does with a watch of one's own.

use std::{
    any::{Any, TypeId},
    sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
};

use futures::{Stream, StreamExt, channel::mpsc};
use kube::runtime::watcher;

/// What makes two watches the same: the kind, whether it fills a cache, and its selectors.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Key {
    kind: TypeId,
    cached: bool,
    labels: Option<String>,
    fields: Option<String>,
}

impl Key {
    /// The watch of `C` that `config` selects, filling a cache or not.
    pub(super) fn of<C: 'static>(config: &watcher::Config, cached: bool) -> Self {
        Self {
            kind: TypeId::of::<C>(),
            cached,
            labels: config.label_selector.clone(),
            fields: config.field_selector.clone(),
        }
    }
}

/// The controllers that follow a watch another controller drives, each through a channel
/// that the driving stream copies every object into. Unbounded like the controller's own
/// queue: each controller reads its triggers as they come.
type Followers<C> = Mutex<Vec<mpsc::UnboundedSender<C>>>;

/// The watches of one term, each with the controllers that follow it while it runs.
#[derive(Default)]
pub(super) struct Shared {
    watches: Mutex<Vec<(Key, Box<dyn Any + Send>)>>,
}

impl Shared {
    /// The watch `key` names, for one more controller. The first to ask gets the stream
    /// `start` gives, which then copies every object it yields to the controllers that ask
    /// after it; each of those gets the copies. A watch's errors reach only the controller
    /// that drives it, which logs them; its retries serve every follower.
    ///
    /// Every controller must ask before the watch yields its first object, as they do when
    /// they are built in the same poll of a term, before any of them runs: an object yielded
    /// before a controller asks does not reach it.
    pub(super) fn stream<C, S>(
        &self,
        key: Key,
        start: impl FnOnce() -> S,
    ) -> impl Stream<Item = Result<C, watcher::Error>> + Send + 'static
    where
        C: Clone + Send + 'static,
        S: Stream<Item = Result<C, watcher::Error>> + Send + 'static,
    {
        let mut watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
        let followed = watches
            .iter()
            .find(|(seen, _)| *seen == key)
            .and_then(|(_, followers)| followers.downcast_ref::<Weak<Followers<C>>>())
            .and_then(Weak::upgrade);
        if let Some(followers) = followed {
            let (sender, receiver) = mpsc::unbounded();
            lock(&followers).push(sender);
            return receiver.map(Ok).right_stream();
        }
        // Only the driving stream holds the followers' senders, so their streams end with it;
        // a controller that asks after it has ended starts the watch again.
        let followers = Arc::new(Followers::<C>::default());
        watches.retain(|(seen, _)| *seen != key);
        watches.push((key, Box::new(Arc::downgrade(&followers))));
        drop(watches);
        start()
            .inspect(move |item| {
                if let Ok(obj) = item {
                    // A follower whose controller has stopped is let go.
                    lock(&followers)
                        .retain(|follower| follower.unbounded_send(obj.clone()).is_ok());
                }
            })
            .left_stream()
    }
}

fn lock<C>(followers: &Followers<C>) -> MutexGuard<'_, Vec<mpsc::UnboundedSender<C>>> {
    followers.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::stream;

    use super::*;

    fn config(labels: &str) -> watcher::Config {
        watcher::Config::default().labels(labels)
    }

    /// A watch that yields `objects` and counts how often it is started.
    fn counted(
        started: &Arc<AtomicUsize>,
        objects: &[&'static str],
    ) -> impl FnOnce() -> stream::Iter<std::vec::IntoIter<Result<&'static str, watcher::Error>>>
    {
        let started = Arc::clone(started);
        let objects: Vec<_> = objects.iter().copied().map(Ok).collect();
        move || {
            started.fetch_add(1, Ordering::SeqCst);
            stream::iter(objects)
        }
    }

    fn names(items: Vec<Result<&'static str, watcher::Error>>) -> Vec<&'static str> {
        items.into_iter().filter_map(Result::ok).collect()
    }

    #[tokio::test]
    async fn a_watch_asked_for_by_three_controllers_runs_once_and_each_gets_every_object() {
        let shared = Shared::default();
        let started = Arc::new(AtomicUsize::new(0));
        let key = || Key::of::<&str>(&config("managed"), true);
        let objects = ["created", "changed", "deleted"];
        let driver = shared.stream(key(), counted(&started, &objects));
        let first = shared.stream(key(), counted(&started, &objects));
        let second = shared.stream(key(), counted(&started, &objects));
        let driven = names(driver.collect().await);
        assert_eq!(started.load(Ordering::SeqCst), 1);
        assert_eq!(driven, objects);
        // Once the driving stream ends, the followers' streams end after its last copy.
        assert_eq!(names(first.collect().await), objects);
        assert_eq!(names(second.collect().await), objects);
    }

    #[tokio::test]
    async fn watches_of_another_kind_selector_or_cache_are_their_own() {
        let shared = Shared::default();
        let started = Arc::new(AtomicUsize::new(0));
        let keys = [
            Key::of::<&str>(&config("a"), true),
            Key::of::<&str>(&config("a"), false),
            Key::of::<&str>(&config("b"), true),
            Key::of::<String>(&config("a"), true),
        ];
        for key in keys {
            let own = shared.stream(key, counted(&started, &["x"]));
            assert_eq!(names(own.collect().await), ["x"]);
        }
        assert_eq!(started.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_stopped_follower_is_let_go_and_the_others_still_get_every_object() {
        let shared = Shared::default();
        let started = Arc::new(AtomicUsize::new(0));
        let key = || Key::of::<&str>(&config("managed"), true);
        let driver = shared.stream(key(), counted(&started, &["a", "b"]));
        drop(shared.stream(key(), counted(&started, &[])));
        let follower = shared.stream(key(), counted(&started, &[]));
        assert_eq!(names(driver.collect().await), ["a", "b"]);
        assert_eq!(names(follower.collect().await), ["a", "b"]);
    }

    #[tokio::test]
    async fn a_controller_that_asks_after_the_watch_ended_starts_it_again() {
        let shared = Shared::default();
        let started = Arc::new(AtomicUsize::new(0));
        let key = || Key::of::<&str>(&config("managed"), true);
        let ended = shared.stream(key(), counted(&started, &["a"]));
        assert_eq!(names(ended.collect().await), ["a"]);
        let again = shared.stream(key(), counted(&started, &["b"]));
        assert_eq!(names(again.collect().await), ["b"]);
        assert_eq!(started.load(Ordering::SeqCst), 2);
    }
}
