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
