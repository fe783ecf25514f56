//! `host sign POLICY --key SECRET`.

use anyhow::Context as _;

use crate::cli::SignArgs;
use crate::signature::sign_policy;

pub fn execute(args: &SignArgs) -> anyhow::Result<i32> {
    let password = || super::password::password(args.password_file.as_deref(), "this secret key");
    let (path, comment) = sign_policy(&args.policy, &args.key, password)
        .with_context(|| format!("signing {}", args.policy.display()))?;
    println!("wrote {}", path.display());
    println!("trusted comment: {comment}");
    Ok(0)
}
