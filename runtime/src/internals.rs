//! Not a promise, and hidden from the docs: what xtask's e2e checks and benches reach inside
//! the runtime for. The sharding checks drive the ring's parts as separate replicas would, the
//! benches time a review without a server, and `webhook-server-peak` measures the webhook
//! server under its real connection limits. Nothing generated names these.

#[cfg(feature = "webhooks")]
pub use crate::{
    admission::review as admission_review,
    conversion::{convert, review as conversion_review},
};
pub use crate::{
    backoff::{Retried, RetryExt},
    connections::{Guarded, Limits, WEBHOOKS},
    shutdown::{Shutdown, Trigger},
};

/// The ring's parts, as the sharding checks drive them.
#[cfg(feature = "sharding")]
pub mod sharding {
    pub use crate::sharding::{
        Assignment, Fence, Labels, Member, ObjectKey, Placement, Ring, run_sharder,
    };
}
