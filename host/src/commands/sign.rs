//! `host sign POLICY --key SECRET`.

use anyhow::Context as _;

use crate::cli::SignArgs;
use crate::signature::sign_policy;

pub fn execute(args: &SignArgs) -> anyhow::Result<i32> {
    // Asked for only when the key's KDF field says it is encrypted: an
    // unencrypted key (`minisign -G -W`, `host keygen --unencrypted`) signs
    // without a terminal or a password file.
    let password =
        || super::password::password(args.password_file.as_deref(), "it is encrypted, so it");
    let (path, comment) = sign_policy(&args.policy, &args.key, password)
        .with_context(|| format!("signing {}", args.policy.display()))?;
    println!("wrote {}", path.display());
    println!("trusted comment: {comment}");
    Ok(0)
}
