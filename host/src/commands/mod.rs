//! One module per subcommand: each parses its options and calls library code.

pub mod compile;
pub mod compose;
pub mod docs;
pub mod facts;
pub mod inspect;
pub mod keygen;
mod last_run;
pub mod new_policy;
mod password;
pub mod pause;
pub mod push;
pub mod run;
pub mod sign;
pub mod status;
pub mod verify;
pub mod watch;

use crate::oci::Registry;
use crate::settings::{ConfigFile, RegistryFlags, RegistrySettings};

/// A registry client with the registry settings of the command line and
/// host.toml, for a command that has no wall clock (`push`, `verify`,
/// `inspect`; `run` bounds its requests by its own).
fn registry_client(flags: &RegistryFlags, file: &ConfigFile) -> anyhow::Result<Registry> {
    Registry::new(RegistrySettings::resolve(flags, file)?.client_config(None))
}
