//! One module per subcommand: each parses its options and calls library code.

pub mod keygen;
mod password;
pub mod run;
pub mod sign;
pub mod verify;
