//! The kinds an operator runs besides typed ones, and the sample object every generated crate
//! ships: a kind known only by where it lives in the API, its fields JSON ([`Untyped`] over a
//! [`Definition`]), the primary of a dynamic operator, run like any typed one; and a kind's
//! sample, read from the smallest body its schema allows ([`sample`], [`empty_sample`]).

pub use crate::{
    sample::{empty as empty_sample, object as sample},
    untyped::{Definition, Untyped},
};
