//! Fleet distribution: policies and settings documents pulled from an OCI
//! registry, with the same trust rules as local files.
//!
//! A reference resolves to a manifest digest; the manifest is checked
//! ([`layout`]), the one layer fetched within its declared size and checked
//! against its digest, and its `.minisig` found among the manifest's
//! referrers. The caller verifies the signature before anything is compiled
//! or parsed, and then keeps the artifact in the [`store`] by digest: an
//! unchanged tag later costs one manifest request, and when the registry
//! cannot be reached the last verified copy runs, marked stale.

pub mod credentials;
pub mod layout;
pub mod pull;
pub mod reference;
pub mod registry;
pub mod store;

pub use layout::Kind;
pub use pull::{pull, pull_fresh, Pulled};
pub use reference::OciRef;
pub use registry::{Registry, RegistryConfig};
pub use store::Store;
