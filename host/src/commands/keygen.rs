//! `host keygen --out DIR`.

use crate::cli::KeygenArgs;
use crate::signature::{generate_key_pair, KeyProtection};

pub fn execute(args: &KeygenArgs) -> anyhow::Result<i32> {
    let protection = if args.unencrypted {
        KeyProtection::Unencrypted
    } else {
        match super::password::password(args.password_file.as_deref(), "an encrypted secret key")? {
            Some(password) => KeyProtection::Password(password),
            None => KeyProtection::Password(prompt_new_password()?),
        }
    };
    let keys = generate_key_pair(&args.out, protection)?;
    println!("key id {}", keys.key_id);
    println!(
        "public key: {} (copy it to each machine's trusted keys)",
        keys.public_key.display()
    );
    println!(
        "secret key: {} (keep it private)",
        keys.secret_key.display()
    );
    Ok(0)
}

/// Asks twice on the terminal, so a typo does not lock the key forever.
fn prompt_new_password() -> anyhow::Result<String> {
    let first = rpassword::prompt_password("Password for the new secret key: ")?;
    let second = rpassword::prompt_password("Password (again): ")?;
    if first != second {
        anyhow::bail!("the passwords do not match");
    }
    if first.is_empty() {
        anyhow::bail!("an empty password protects nothing; use --unencrypted to say so explicitly");
    }
    Ok(first)
}
