//! What the README shows the SDK saying is what the SDK says: the manifest
//! example of README.md, with its first `ensure` misspelt, gives the very
//! error the README quotes (field, line and column).

use std::path::Path;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap()
}

/// The README's manifest example: the first ```yaml block after the
/// "The manifest policy" heading.
fn manifest_example(readme: &str) -> &str {
    let section = &readme[readme.find("### The manifest policy").expect("the section")..];
    let start = section.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = start + section[start..].find("```").expect("its end");
    &section[start..end]
}

#[test]
fn the_readmes_manifest_error_is_what_the_parser_says() {
    let readme = readme();
    let misspelt = manifest_example(&readme).replacen("ensure: running", "ensure: runing", 1);
    let error = guest_sdk::parse_manifest(&misspelt).expect_err("a misspelt ensure");
    let said = error.to_string();
    // The README folds the quote over two lines.
    let unfolded = readme.replace('\n', " ");
    assert!(
        unfolded.contains(&format!("(`{said}`)")),
        "README.md does not quote the parser's message:\n{said}"
    );
    assert_eq!((error.line(), error.column()), (Some(3), Some(9)), "{said}");
}

/// The first ```sh block of docs/debian.md's "Registry logins" section,
/// and the ```json block that follows it.
fn registry_login_recipe(page: &str) -> (&str, &str) {
    let section = &page[page.find("## Registry logins").expect("the section")..];
    let block = |tag: &str| {
        let start = section.find(tag).expect(tag) + tag.len();
        let end = start + section[start..].find("```").expect("its end");
        &section[start..end]
    };
    (block("```sh\n"), block("```json\n"))
}

/// debian.md's way to write a registry login without Docker, run as written
/// (in a directory of the test's own instead of /etc/policy-host/docker),
/// writes the JSON the page shows, and the host reads the user and password
/// from it.
#[test]
fn debian_md_s_login_recipe_writes_a_login_the_host_reads() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/debian.md"))
            .unwrap();
    let (script, shown) = registry_login_recipe(&page);
    let dir = tempfile::tempdir().unwrap();
    let docker = dir.path().join("docker");
    let script = script.replace("/etc/policy-host/docker", docker.to_str().unwrap());
    let status = std::process::Command::new("sh")
        .args(["-eu", "-c", &script])
        .status()
        .unwrap();
    assert!(status.success(), "the recipe failed:\n{script}");
    let config = docker.join("config.json");
    let written = std::fs::read_to_string(&config).unwrap();
    assert_eq!(written.trim(), shown.trim(), "the page shows another file");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the login must be readable by root alone");
    let auth =
        policy_host::oci::credentials::for_registry(Some(&config), "registry.example.com:5000")
            .unwrap();
    assert!(
        matches!(&auth, oci_client::secrets::RegistryAuth::Basic(user, password)
            if user == "fleet-reader" && password == "s3cret"),
        "read as {auth:?}"
    );
}
