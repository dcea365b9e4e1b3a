//! What else makes a primary reconcile, beside changes to the primary and its owned children:
//! an object of another kind that names it ([`NamedBy`], [`named_primary`]; a cached watch's
//! objects that name a primary are [`Cache::naming`](crate::context::Cache::naming)), and an
//! outside system, polled on an interval ([`polled`]) or sending the primaries it touched
//! ([`sent`]).
//!
//! Owned children are declared with [`children!`](crate::children) and written through
//! [`Context::apply_owned`](crate::context::Context::apply_owned); the watches of every kind
//! come from [`Watches`](crate::run::Watches).

pub use crate::triggers::{NamedBy, SENT_AT_ONCE, named_primary, polled, sent};
