//! What every reconcile goes through, around the hooks an operator writes, and what it ends
//! with.
//!
//! A generated controller hands each object to [`Context::reconcile`](crate::context::Context::reconcile),
//! which runs it through the [`Lifecycle`]: the shard's fence and drain under `--sharding`, the
//! finalizer when the operator cleans up, the operator's own condition in `status.conditions`
//! ([`ConditionSpec`]), the count of consecutive failures and the per-object [`Backoff`] they
//! give, the reconcile metrics, and an Event for a failure and for the first success after
//! failures. A reconcile fails with an [`Error`], which says whether it is worth retrying
//! ([`Retryable`]).

pub use crate::{
    apply::Error as ApplyError,
    conditions::{Error as ConditionError, Spec as ConditionSpec},
    error::{Error, Result},
    failures::Backoff,
    lifecycle::{Hooks, Lifecycle, ReconcileError, no_cleanup, nothing_to_clean_up, recorder},
    metrics::Retryable,
};
