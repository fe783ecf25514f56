//! Registry credentials from the standard Docker client configuration, so
//! the `docker login` (or `oras login`, `helm registry login`) an operator
//! already made works here: `$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`.
//!
//! Inline credentials (`auth`, or `username` and `password`) are used;
//! credential helpers (`credsStore`, `credHelpers`) are other programs, and a
//! host running as root does not run them: the warning says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ct_codecs::{Base64, Decoder as _};
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

/// The config file is small; anything bigger is not one.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default)]
    creds_store: Option<String>,
    #[serde(default)]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// Where the Debian package keeps registry logins (and its unit points
/// `DOCKER_CONFIG` at): read by every command when it exists.
pub const PACKAGE_CONFIG: &str = "/etc/policy-host/docker/config.json";

/// Where the Docker configuration is read from: `registry_auth` when set,
/// else `$DOCKER_CONFIG/config.json`, else the package's file when it
/// exists, else `~/.docker/config.json`. So `policy-host run` by hand as
/// root reads the logins the timer's runs read.
pub fn config_path(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = configured {
        return Some(path.to_owned());
    }
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    if Path::new(PACKAGE_CONFIG).is_file() {
        return Some(PathBuf::from(PACKAGE_CONFIG));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| PathBuf::from(home).join(".docker/config.json"))
}

/// The credentials for `registry` (`host[:port]`) from the configuration
/// at [`config_path`]: anonymous when it is absent or names none; when
/// `registry_auth` names a file, that file must exist. A configuration that
/// cannot be read or parsed is an error: silently going anonymous would
/// hide it.
pub fn for_registry(configured: Option<&Path>, registry: &str) -> anyhow::Result<RegistryAuth> {
    let Some(path) = config_path(configured) else {
        return Ok(RegistryAuth::Anonymous);
    };
    if configured.is_some() && !path.exists() {
        anyhow::bail!(
            "registry_auth {}: no such file (registry logins: a Docker config.json with an \"auths\" entry per registry)",
            path.display()
        );
    }
    let text = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        Ok(meta) if meta.len() > MAX_CONFIG_BYTES => {
            anyhow::bail!(
                "{} is {} bytes, not a Docker configuration",
                path.display(),
                meta.len()
            )
        }
        Ok(_) => {
            std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?
        }
    };
    let config: DockerConfig = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a Docker configuration", path.display()))?;
    let entry = config
        .auths
        .iter()
        .find(|(key, _)| registry_of(key) == registry)
        .map(|(_, entry)| entry);
    if let Some(auth) = entry.map(credentials).transpose()?.flatten() {
        return Ok(auth);
    }
    if config.cred_helpers.contains_key(registry) || config.creds_store.is_some() {
        tracing::warn!(
            "{}: credential helpers are not run by the host; put {registry}'s credentials in `auths` to use them",
            path.display()
        );
    }
    Ok(RegistryAuth::Anonymous)
}

/// `https://host:port/v1/` → `host:port`: the forms `docker login` writes.
fn registry_of(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

fn credentials(entry: &AuthEntry) -> anyhow::Result<Option<RegistryAuth>> {
    if let Some(encoded) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
        let decoded = Base64::decode_to_vec(encoded.trim(), None)
            .map_err(|_| anyhow::anyhow!("an `auth` entry is not base64"))?;
        let decoded =
            String::from_utf8(decoded).context("an `auth` entry is not user:password text")?;
        let (user, password) = decoded
            .split_once(':')
            .context("an `auth` entry is not user:password")?;
        return Ok(Some(RegistryAuth::Basic(
            user.to_owned(),
            password.to_owned(),
        )));
    }
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(Some(RegistryAuth::Basic(user.clone(), password.clone())));
    }
    if entry
        .identitytoken
        .as_deref()
        .is_some_and(|t| !t.is_empty())
    {
        // An OAuth refresh token, exchanged by credential helpers: not a
        // bearer token to send as is.
        tracing::warn!(
            "an `identitytoken` login is not supported; log in with a user and password or token"
        );
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_login_keys_name_the_registry() {
        assert_eq!(
            registry_of("https://index.docker.io/v1/"),
            "index.docker.io"
        );
        assert_eq!(registry_of("127.0.0.1:5000"), "127.0.0.1:5000");
        assert_eq!(registry_of("http://r.example:443"), "r.example:443");
    }

    #[test]
    fn inline_credentials_are_read() {
        let entry = AuthEntry {
            auth: Some("b3BzOnMzY3JldDp3aXRoOmNvbG9ucw==".into()),
            ..AuthEntry::default()
        };
        let Some(RegistryAuth::Basic(user, password)) = credentials(&entry).unwrap() else {
            panic!("no basic credentials")
        };
        assert_eq!(
            (user.as_str(), password.as_str()),
            ("ops", "s3cret:with:colons")
        );
        let bad = AuthEntry {
            auth: Some("not base64!".into()),
            ..AuthEntry::default()
        };
        assert!(credentials(&bad).is_err());
        assert!(credentials(&AuthEntry::default()).unwrap().is_none());
    }
}
