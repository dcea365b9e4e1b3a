//! What an operator tells the people and the systems that watch it: log lines ([`init`]),
//! a span per reconcile ([`traced`], exported over OTLP with the `otlp` feature), reconcile,
//! watch, cache and webhook metrics with readiness ([`Metrics`], [`ReadyWhen`]), the process's
//! own CPU, memory and file descriptors ([`Reading`]), the Kubernetes client that counts its
//! requests by verb ([`counted`]), and `/metrics`, `/healthz` and `/readyz` over HTTP
//! ([`router`], [`serve`]).

#[cfg(feature = "otlp")]
pub use crate::traces::{Exporter, from_env};
pub use crate::{
    client::{counted, counted_from},
    endpoints::{router, serve},
    logging::{Logging, init},
    metrics::{Metrics, ReadyWhen},
    process::Reading,
    traces::traced,
};
