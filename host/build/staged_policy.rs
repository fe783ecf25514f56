//! The Debian package's build: its built-in components must be staged first.

use std::fs;
use std::path::Path;

/// The components the package ships, as staged beside the host binary.
const STAGED: [&str; 2] = ["manifest-policy.wasm", "declaration-engine.wasm"];

/// With the `deb` feature, which cargo-deb turns on (`[package.metadata.deb]
/// features`): the built-in policy and the declaration engine the package
/// ships must already be staged as `<target>/<profile>/NAME.wasm`, regular
/// files, where cargo-deb takes them from. `dist/debian/build-package`
/// builds and stages them first; a bare `cargo deb` stops here with that
/// advice, instead of shipping a package without them.
pub(super) fn require(out_dir: &Path) {
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR lies three levels below the profile directory");
    for name in STAGED {
        require_one(&profile_dir.join(name));
    }
}

fn require_one(staged: &Path) {
    println!("cargo:rerun-if-changed={}", staged.display());
    match fs::symlink_metadata(staged) {
        Ok(meta) if meta.file_type().is_file() => {}
        found => {
            let what = match found {
                Ok(_) => "is not a regular file",
                Err(_) => "is missing",
            };
            eprintln!(
                "error: the Debian package's built-in component {} {what}.\n\
                 Build the package with dist/debian/build-package (it builds the components for \
                 wasm32-wasip2, stages them there, then runs cargo deb with your arguments).",
                staged.display()
            );
            std::process::exit(1);
        }
    }
}
