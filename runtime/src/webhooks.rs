//! The webhooks of an operator, over HTTPS on every replica, leader or not: admission
//! ([`admission`]), conversion between the versions a resource is served in ([`conversion`]),
//! and the serving certificate they share ([`certificates`]).
//!
//! [`Routes`] puts each hook at its path under the body cap that fits it, and [`serve`] serves
//! them with a certificate it reloads in place when it is renewed. Every request is answered
//! within the API server's timeout, or refused: bodies are read under a byte budget and a
//! deadline before a request gets a turn at the work behind it, and a client that does not
//! read its answer loses its connection. Each answer is counted by its [`Answer`].

pub use crate::{
    webhook_routes::Routes,
    webhook_server::{Outcome as Answer, serve},
};

/// Admission: the review around an operator's own `validate` and `mutate` hooks
/// ([`Admission`](admission::Admission)), decoded straight into the primary's type and answered within
/// [`HOOK_TIMEOUT`](admission::HOOK_TIMEOUT).
pub mod admission {
    pub use crate::admission::{Admission, HOOK_TIMEOUT, Hook, MAX_REVIEW_BYTES};
}

/// Conversion: a resource served in several versions, converted an object at a time through
/// the [`Hub`](conversion::Hub) (its storage version), losing nothing on a round trip; and the CRD pointed at
/// the webhook ([`set_webhook`](conversion::set_webhook)), or at an operator run outside the
/// cluster ([`set_webhook_url`](conversion::set_webhook_url)).
pub mod conversion {
    pub use crate::conversion::{
        Hub, Webhook, decode, down, encode, not_served, serve as set_webhook,
        serve_at as set_webhook_url, up,
    };

    #[cfg(any(test, feature = "test-util"))]
    /// What the tests of a generated conversion assert: every older version converts to the
    /// hub and back losing nothing, and the CRD serves every version.
    pub mod round_trips {
        pub use crate::conversion::round_trips::{
            older_version_converts, serves_every_version_storing,
        };
    }
}

/// The webhooks' serving certificate: issued by the operator and kept in a Secret, or by
/// cert-manager, and its CA published where the API server reads it ([`CaTarget`](certificates::CaTarget)).
pub mod certificates {
    pub use crate::certificates::{CaTarget, Certificate, Certificates, Error, Issuer, Names};
}
