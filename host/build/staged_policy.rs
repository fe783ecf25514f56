//! The Debian package's build: its built-in policy must be staged first.

use std::fs;
use std::path::Path;

/// With the `deb` feature, which cargo-deb turns on (`[package.metadata.deb]
/// features`): the built-in policy the package ships must already be staged
/// as `<target>/<profile>/manifest-policy.wasm`, a regular file, where
/// cargo-deb takes it from. `dist/debian/build-package` builds and stages it
/// first; a bare `cargo deb` stops here with that advice, instead of
/// shipping a package without its policy.
pub(super) fn require(out_dir: &Path) {
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR lies three levels below the profile directory");
    let staged = profile_dir.join("manifest-policy.wasm");
    println!("cargo:rerun-if-changed={}", staged.display());
    match fs::symlink_metadata(&staged) {
        Ok(meta) if meta.file_type().is_file() => {}
        found => {
            let what = match found {
                Ok(_) => "is not a regular file",
                Err(_) => "is missing",
            };
            eprintln!(
                "error: the Debian package's built-in policy {} {what}.\n\
                 Build the package with dist/debian/build-package (it builds the policy for \
                 wasm32-wasip2, stages it there, then runs cargo deb with your arguments).",
                staged.display()
            );
            std::process::exit(1);
        }
    }
}
