//! One module per subcommand: each parses its options and calls library code.

pub mod run;
