//! The resolved model of a MiniCluster: between the API ([`crate::api`], the spec as the user
//! wrote it) and everything that renders or decides ([`crate::flux`], [`crate::render`], the
//! controller). It imports only the API; nothing below it imports it.
//!
//! [`resolve`] is the one function from a spec (and the operator's [`Environment`]) to either
//! a typed [`Cluster`] or the list of [`FieldError`](crate::api::validation::FieldError)s
//! naming API field paths.
//!
//! It is the one home of the checks the API server cannot make ([`validate`]) and of the
//! facts those checks share with the renderer, so the two cannot disagree: which container
//! runs Flux and what the lead runs ([`containers`]), every mount and the clash check
//! ([`mounts`]), the names on the network ([`network`]), shell words ([`words`]), the
//! certificate's text ([`certificate`]) and the settings beyond them ([`settings`]). Flux and
//! render read the spec only through the [`Cluster`].

pub mod archive;
pub mod certificate;
mod check;
mod cluster;
pub mod containers;
mod environment;
pub mod mounts;
pub mod network;
pub mod settings;
mod view;
pub mod words;

pub use check::{unsupported, validate};
pub use cluster::{Archive, Cluster, Sizes, resolve};
pub use environment::Environment;
pub use view::View;

#[cfg(test)]
mod tests;
