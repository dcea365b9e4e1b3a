//! The e2e's kit: kubectl as the cluster's admin, an operator's pods as a workload, an
//! operator as a local process, the replicas either gives, their logs, their images, and a kube
//! client. Nothing here knows a check; the suite in `suite/` is built from these.

mod client;
pub mod images;
mod local;
pub mod logs;
mod replica;
mod workload;

pub use client::client;
pub use local::{Local, stop_gracefully};
pub use operator_gen_cluster::Kubectl;
pub use replica::{Replica, series};
pub use workload::{Pod, Workload, named};
