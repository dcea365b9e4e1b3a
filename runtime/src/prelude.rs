//! What a generated crate, and a reconcile written by hand, names most:
//! `use operator_gen_runtime::prelude::*;`.

pub use crate::{
    cached, children,
    context::{Context, Operator},
    reconcile::{Error, Result, Retryable},
    run::{Runner, Scope, Watched},
    settings::{Common, Flags},
};
