//! `host new-policy DIR`: scaffold a policy crate.

use crate::cli::NewPolicyArgs;

pub fn execute(args: &NewPolicyArgs) -> anyhow::Result<i32> {
    anyhow::bail!(
        "host new-policy {}: not implemented yet",
        args.dir.display()
    )
}
