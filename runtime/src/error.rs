//! What a reconcile fails with: one error type for every generated operator, split into
//! transient failures, which are retried with the operator's backoff, and permanent ones, which
//! wait until the object changes. A generated crate's `error` module re-exports it.

use kube::runtime::finalizer;

use crate::{apply, conditions, metrics::Retryable};

/// Everything a reconcile can fail with.
///
/// A transient error (the API server, the network) is retried with backoff. A permanent one
/// (an invalid spec) is not retried until the object changes.
///
/// ```
/// use operator_gen_runtime::reconcile::Error;
///
/// // A hook that finds a spec it cannot act on says so once, rather than being retried.
/// let invalid = Error::Permanent("spec.retention must be a duration".to_owned());
/// assert!(!invalid.is_transient());
/// // One that calls an outside system that timed out is retried with the object's backoff.
/// assert!(Error::Transient("the backup store timed out".to_owned()).is_transient());
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("kubernetes api: {0}")]
    Kube(#[from] kube::Error),

    /// Adding, running or removing the finalizer failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),

    /// An owned child could not be applied.
    #[error(transparent)]
    Apply(#[from] apply::Error),

    /// The operator's condition could not be written.
    #[error(transparent)]
    Condition(#[from] conditions::Error),

    /// An object could not be turned into JSON.
    #[error("serialization: {0}")]
    Serialization(#[from] serde_json::Error),

    /// Something outside the cluster failed; worth retrying.
    #[error("{0}")]
    Transient(String),

    /// The object cannot be reconciled as it is; retrying will not help until it changes.
    #[error("{0}")]
    Permanent(String),
}

impl Error {
    /// Whether retrying after a delay may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Permanent(_) | Self::Serialization(_) => false,
            Self::Finalizer(inner) => match inner.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => {
                    e.is_transient()
                }
                _ => true,
            },
            Self::Apply(e) => Retryable::is_transient(e),
            Self::Condition(e) => Retryable::is_transient(e),
            Self::Kube(_) | Self::Transient(_) => true,
        }
    }
}

impl From<finalizer::Error<Error>> for Error {
    fn from(error: finalizer::Error<Error>) -> Self {
        Self::Finalizer(Box::new(error))
    }
}

impl Retryable for Error {
    fn is_transient(&self) -> bool {
        Error::is_transient(self)
    }
}

/// Result of reconcile steps.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn permanent() -> Error {
        Error::Permanent("invalid spec".to_owned())
    }

    fn transient() -> Error {
        Error::Transient("the registry is down".to_owned())
    }

    #[test]
    fn only_a_permanent_error_or_a_body_that_cannot_be_json_waits_for_a_change() {
        assert!(transient().is_transient());
        assert!(!permanent().is_transient());
        let json = serde_json::from_str::<serde_json::Value>("{").expect_err("not JSON");
        assert!(!Error::from(json).is_transient());
        let unnamed = Error::from(apply::Error::Unnamed);
        assert_eq!(unnamed.is_transient(), apply::Error::Unnamed.is_transient());
    }

    #[test]
    fn a_hook_failing_inside_the_finalizer_keeps_its_own_verdict() {
        let cleanup = Error::from(finalizer::Error::CleanupFailed(permanent()));
        assert!(!cleanup.is_transient());
        let apply = Error::from(finalizer::Error::ApplyFailed(transient()));
        assert!(apply.is_transient());
        let unnamed = Error::from(finalizer::Error::<Error>::UnnamedObject);
        assert!(
            unnamed.is_transient(),
            "the finalizer's own failure is retried"
        );
    }
}
