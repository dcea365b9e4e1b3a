//! When the operator is asked to stop: SIGTERM (how the kubelet stops a pod) or Ctrl+C.
//!
//! One [`Shutdown`] outlives every leadership term, so that a replica asked to stop while it
//! waits for the Lease, between two terms, stops too: kube's `Controller::shutdown_on_signal`
//! only listens while its controller runs, and once a signal handler is installed the default
//! action (exit) is gone for good.

use std::future::Future;

use tokio::sync::watch;

/// Whether, and when, the operator was asked to stop. Clones share the request.
#[derive(Clone, Debug)]
pub struct Shutdown {
    requested: watch::Receiver<bool>,
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

    /// A shutdown that only its [`Trigger`] requests.
    pub fn manual() -> (Self, Trigger) {
        let (sender, requested) = watch::channel(false);
        (Self { requested }, Trigger(sender))
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

    #[tokio::test]
    async fn a_dropped_trigger_is_not_a_request() {
        let (shutdown, trigger) = Shutdown::manual();
        drop(trigger);
        let waited = tokio::time::timeout(Duration::from_millis(50), shutdown.requested()).await;
        assert!(waited.is_err());
        assert!(!shutdown.is_requested());
    }
}
