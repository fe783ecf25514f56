//! The new crate's files: the templates with their placeholders filled in,
//! and the SDK this host embeds, for its `vendor/`.

use super::{File, Sdk};

/// The vendored crates, as `host/build.rs` embedded them: `SDK_VERSION`
/// and `SDK_FILES`.
pub(super) mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_sdk.rs"));
}

/// The new crate's directory for the embedded SDK: `vendor/guest-sdk` and
/// `vendor/contract-words`.
pub(super) const VENDOR: &str = "vendor";

/// guest-sdk's `Cargo.lock`, as `cargo package` wrote it from the
/// workspace's: the new crate's lock starts from it.
pub(super) fn sdk_lock() -> &'static [u8] {
    embedded::SDK_FILES
        .iter()
        .find(|(path, _, _)| *path == "guest-sdk/Cargo.lock")
        .map(|(_, contents, _)| *contents)
        .expect("the vendored guest-sdk has a Cargo.lock")
}

const CARGO_TOML: &str = include_str!("../../../templates/new-policy/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("../../../templates/new-policy/lib.rs.tmpl");
const README_MD: &str = include_str!("../../../templates/new-policy/README.md.tmpl");
const GITIGNORE: &str = include_str!("../../../templates/new-policy/gitignore.tmpl");
const BUILD_SH: &str = include_str!("../../../templates/new-policy/build.sh.tmpl");

/// The crate's files with the placeholders filled in, then (for the
/// embedded SDK) the SDK's files under `vendor/`. `host` is the name they
/// give the host's commands ([`program_name`]).
pub(super) fn render(name: &str, sdk: &Sdk, host: &str) -> anyhow::Result<Vec<File>> {
    let sdk_path = sdk.dependency_path()?;
    let lib_name = name.replace('-', "_");
    let (sdk_note, sdk_readme, sdk_patch) = match sdk {
        Sdk::Vendored { version } => (
            format!(
                "# guest-sdk {version}, copied into {VENDOR}/ by `{host} new-policy` with the WIT\n\
                 # contract it is built from: the crate needs nothing else to build."
            ),
            format!(
                "`{VENDOR}/` holds guest-sdk {version} and the WIT contract it is built from,\n\
                 as the `{host}` that created this crate ships them: the crate builds\n\
                 anywhere, and `Cargo.lock` starts with the dependency versions that SDK\n\
                 was tested with. Keep `{VENDOR}/` with the policy's sources. To move to the\n\
                 SDK of a newer host, run its `{host} new-policy` into a scratch directory\n\
                 and replace this `{VENDOR}/` with that one."
            ),
            format!(
                "\n# The tables guest-sdk shares with the host, from {VENDOR}/ as well.\n\
                 [patch.crates-io]\n\
                 contract-words = {{ path = \"{VENDOR}/contract-words\" }}\n"
            ),
        ),
        Sdk::Path(_) => (
            format!("# guest-sdk from a checkout (`{host} new-policy --sdk-path`)."),
            format!(
                "guest-sdk is used from `{sdk_path}` (given to `{host} new-policy --sdk-path`)."
            ),
            String::new(),
        ),
    };
    let fill_as = |template: &str, host: &str| {
        template
            .replace("{{host}}", host)
            .replace("{{name}}", name)
            .replace("{{crate}}", &lib_name)
            .replace("{{sdk_path}}", &toml_string(&sdk_path))
            .replace("{{sdk_display}}", &sdk_path)
            .replace("{{sdk_note}}", &sdk_note)
            .replace("{{sdk_readme}}", &sdk_readme)
            .replace("{{sdk_patch}}", &sdk_patch)
            .into_bytes()
    };
    let fill = |template: &str| fill_as(template, host);
    let file = |path: &str, contents: Vec<u8>, executable| File {
        path: path.to_string(),
        contents,
        executable,
    };
    let mut files = vec![
        file("Cargo.toml", fill(CARGO_TOML), false),
        file("Cargo.lock", sdk_lock().to_vec(), false),
        file("src/lib.rs", fill(LIB_RS), false),
        file("README.md", fill(README_MD), false),
        file(".gitignore", fill(GITIGNORE), false),
        file("build.sh", fill_as(BUILD_SH, &shell_quote(host)), true),
    ];
    if let Sdk::Vendored { .. } = sdk {
        for (path, contents, executable) in embedded::SDK_FILES {
            files.push(file(
                &format!("{VENDOR}/{path}"),
                contents.to_vec(),
                *executable,
            ));
        }
    }
    Ok(files)
}

/// The name the crate's files give the host's commands: the name this
/// binary was called by (`policy-host` as the Debian package installs it,
/// where `host` is bind9's DNS tool), so that its README and `build.sh`
/// run this binary. A name no file could hold on one line is not used.
pub(super) fn program_name() -> String {
    let name = crate::program::name();
    if name.chars().any(char::is_control) {
        crate::program::DEFAULT.to_owned()
    } else {
        name.to_owned()
    }
}

/// `text` as a TOML basic string, quotes included.
pub(super) fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` quoted for a POSIX shell when it needs quoting.
pub(super) fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
