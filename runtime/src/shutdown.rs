//! When the operator is asked to stop: SIGTERM (how the kubelet stops a pod) or Ctrl+C.
//!
//! One [`Shutdown`] outlives every leadership term, so that a replica asked to stop while it
//! waits for the Lease, between two terms, stops too: kube's `Controller::shutdown_on_signal`
//! only listens while its controller runs, and once a signal handler is installed the default
//! action (exit) is gone for good.

use std::{
    future::Future,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::sync::{Notify, watch};

/// Whether, and when, the operator was asked to stop. Clones share the request, and the
/// servers that still drain after it (`Shutdown::draining`).
#[derive(Clone, Debug)]
pub struct Shutdown {
    requested: watch::Receiver<bool>,
    draining: Arc<Servers>,
}

/// How many servers still answer the connections they had when the stop was asked, and the
/// wake-up of whoever waits for them to finish.
#[derive(Debug, Default)]
struct Servers {
    draining: AtomicUsize,
    drained: Notify,
}

/// A server that answers its open connections after the stop was asked, for as long as this is
/// held: [`Shutdown::drained`] waits for it. Held from the server's start, so that no stop can
/// come before it counts.
#[cfg(feature = "webhooks")]
#[derive(Debug)]
pub(crate) struct Draining(Arc<Servers>);

#[cfg(feature = "webhooks")]
impl Drop for Draining {
    fn drop(&mut self) {
        self.0.draining.fetch_sub(1, Ordering::SeqCst);
        self.0.drained.notify_waiters();
    }
}

/// Asks the [`Shutdown`] it was made with to stop, for tests and embedders.
#[derive(Debug)]
pub struct Trigger(watch::Sender<bool>);

impl Trigger {
    /// Asks for the stop.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

impl Shutdown {
    /// A shutdown that SIGTERM or Ctrl+C requests. A second signal ends the process at once,
    /// without waiting for reconciles in flight, as kube's controller does.
    pub fn on_signal() -> Self {
        let (shutdown, trigger) = Self::manual();
        tokio::spawn(async move {
            signal().await;
            tracing::info!("asked to stop; finishing the reconciles in flight");
            trigger.stop();
            signal().await;
            tracing::warn!("asked to stop again; exiting now");
            std::process::exit(130);
        });
        shutdown
    }

    /// The process's own shutdown, which SIGTERM or Ctrl+C requests: the one every part of the
    /// operator that must stop with it (the election, the webhooks' server) listens to, made
    /// the first time it is asked for, in the runtime that asks.
    pub(crate) fn process() -> Self {
        static PROCESS: OnceLock<Shutdown> = OnceLock::new();
        PROCESS.get_or_init(Self::on_signal).clone()
    }

    /// A shutdown that only its [`Trigger`] requests.
    pub fn manual() -> (Self, Trigger) {
        let (sender, requested) = watch::channel(false);
        let shutdown = Self {
            requested,
            draining: Arc::default(),
        };
        (shutdown, Trigger(sender))
    }

    /// Counts a server that will answer its open connections after the stop, until the guard
    /// drops.
    #[cfg(feature = "webhooks")]
    pub(crate) fn draining(&self) -> Draining {
        self.draining.draining.fetch_add(1, Ordering::SeqCst);
        Draining(Arc::clone(&self.draining))
    }

    /// Once a stop was asked, waits until every [`Shutdown::draining`] server has finished, for
    /// at most `patience`; at once when none was asked (a run ended some other way).
    pub(crate) async fn drained(&self, patience: Duration) {
        if !self.is_requested() {
            return;
        }
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let drained = self.draining.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.draining.draining.load(Ordering::SeqCst) == 0 {
                return;
            }
            tokio::select! {
                () = drained => {}
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// Whether a stop was requested.
    pub fn is_requested(&self) -> bool {
        *self.requested.borrow()
    }

    /// Resolves once a stop is requested (at once if it already was). It never resolves if the
    /// [`Trigger`] is dropped without asking.
    pub fn requested(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut requested = self.requested.clone();
        async move {
            if requested.wait_for(|stop| *stop).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The next SIGTERM or Ctrl+C. Where a handler cannot be installed, it waits forever and the
/// signal keeps its default action.
async fn signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn requested_waits_for_the_trigger_and_every_clone_sees_it() {
        let (shutdown, trigger) = Shutdown::manual();
        let clone = shutdown.clone();
        let early = tokio::time::timeout(Duration::from_millis(50), shutdown.requested()).await;
        assert!(early.is_err(), "nothing asked to stop yet");
        assert!(!clone.is_requested());
        trigger.stop();
        tokio::time::timeout(Duration::from_secs(5), clone.requested())
            .await
            .expect("a clone sees the request");
        assert!(shutdown.is_requested());
        // Asked after the fact, it resolves at once.
        tokio::time::timeout(Duration::from_millis(50), shutdown.requested())
            .await
            .expect("a request already made");
    }

    #[cfg(feature = "webhooks")]
    #[tokio::test]
    async fn the_stop_waits_for_a_draining_server_and_no_longer_than_its_patience() {
        let (shutdown, trigger) = Shutdown::manual();
        let server = shutdown.draining();
        let unasked = tokio::time::timeout(
            Duration::from_millis(50),
            shutdown.drained(Duration::from_secs(5)),
        )
        .await;
        assert!(unasked.is_ok(), "no stop asked: nothing to wait for");
        trigger.stop();
        let waiting = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { shutdown.drained(Duration::from_secs(5)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a server still drains");
        drop(server);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("woken once the server finished")
            .expect("ran");
        let _stuck = shutdown.draining();
        let started = tokio::time::Instant::now();
        shutdown.drained(Duration::from_millis(100)).await;
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn a_dropped_trigger_is_not_a_request() {
        let (shutdown, trigger) = Shutdown::manual();
        drop(trigger);
        let waited = tokio::time::timeout(Duration::from_millis(50), shutdown.requested()).await;
        assert!(waited.is_err());
        assert!(!shutdown.is_requested());
    }
}
