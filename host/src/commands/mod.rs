//! One module per subcommand: each parses its options and calls library code.

pub mod docs;
pub mod inspect;
pub mod keygen;
pub mod new_policy;
mod password;
pub mod push;
pub mod run;
pub mod sign;
pub mod status;
pub mod verify;
