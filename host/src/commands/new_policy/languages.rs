//! `host new-policy --lang python|js`: a policy written as a declaration
//! (wit/declaration), with the SDK of its language and the interface it is
//! built for copied in, as this host ships them, so the project builds on
//! any machine with the language's toolchain.

use super::render::shell_quote;
use super::File;
use crate::cli::Language;

/// The interface a declaration is built for, copied to the project's `wit/`.
const DECLARATION_WIT: (&str, &str) = (
    "wit/declaration.wit",
    include_str!("../../../../wit/declaration/declaration.wit"),
);

/// The Python SDK (sdk/python/policy_host), file by file; a test checks
/// that this list is the directory's.
pub(super) const PYTHON_SDK: [(&str, &str); 5] = [
    (
        "policy_host/__init__.py",
        include_str!("../../../../sdk/python/policy_host/__init__.py"),
    ),
    (
        "policy_host/context.py",
        include_str!("../../../../sdk/python/policy_host/context.py"),
    ),
    (
        "policy_host/declaration.py",
        include_str!("../../../../sdk/python/policy_host/declaration.py"),
    ),
    (
        "policy_host/export.py",
        include_str!("../../../../sdk/python/policy_host/export.py"),
    ),
    (
        "policy_host/facts.py",
        include_str!("../../../../sdk/python/policy_host/facts.py"),
    ),
];

/// The JavaScript SDK (sdk/js), one module.
pub(super) const JS_SDK: [(&str, &str); 1] = [(
    "policy-host.js",
    include_str!("../../../../sdk/js/policy-host.js"),
)];

/// (path, template, executable) of each language's own files.
type Templates = [(&'static str, &'static str, bool); 6];

const PYTHON: Templates = [
    (
        "app.py",
        include_str!("../../../templates/new-policy-python/app.py.tmpl"),
        false,
    ),
    (
        "test_app.py",
        include_str!("../../../templates/new-policy-python/test_app.py.tmpl"),
        false,
    ),
    (
        "README.md",
        include_str!("../../../templates/new-policy-python/README.md.tmpl"),
        false,
    ),
    (
        "build.sh",
        include_str!("../../../templates/new-policy-python/build.sh.tmpl"),
        true,
    ),
    (
        ".gitignore",
        include_str!("../../../templates/new-policy-python/gitignore.tmpl"),
        false,
    ),
    (
        "pyproject.toml",
        include_str!("../../../templates/new-policy-python/pyproject.toml.tmpl"),
        false,
    ),
];

const JS: Templates = [
    (
        "policy.js",
        include_str!("../../../templates/new-policy-js/policy.js.tmpl"),
        false,
    ),
    (
        "policy.test.js",
        include_str!("../../../templates/new-policy-js/policy.test.js.tmpl"),
        false,
    ),
    (
        "README.md",
        include_str!("../../../templates/new-policy-js/README.md.tmpl"),
        false,
    ),
    (
        "build.sh",
        include_str!("../../../templates/new-policy-js/build.sh.tmpl"),
        true,
    ),
    (
        ".gitignore",
        include_str!("../../../templates/new-policy-js/gitignore.tmpl"),
        false,
    ),
    (
        "package.json",
        include_str!("../../../templates/new-policy-js/package.json.tmpl"),
        false,
    ),
];

/// The project's files for `language` (not Rust): its templates filled in,
/// then the SDK and the WIT interface. `host` is the name the files give
/// the host's commands.
pub(super) fn render(language: Language, name: &str, host: &str) -> Vec<File> {
    let (templates, sdk): (&Templates, &[(&str, &str)]) = match language {
        Language::Python => (&PYTHON, &PYTHON_SDK),
        Language::Js => (&JS, &JS_SDK),
        Language::Rust => unreachable!("a Rust policy is a crate: render::render"),
    };
    let stem = name.replace('-', "_");
    let fill = |template: &str, executable: bool| {
        // A script runs the host by its quoted name; documents show it plain.
        let host = if executable {
            shell_quote(host)
        } else {
            host.to_owned()
        };
        template
            .replace("{{host}}", &host)
            .replace("{{name}}", name)
            .replace("{{crate}}", &stem)
            .into_bytes()
    };
    let mut files: Vec<File> = templates
        .iter()
        .map(|(path, template, executable)| File {
            path: (*path).to_owned(),
            contents: fill(template, *executable),
            executable: *executable,
        })
        .collect();
    for (path, contents) in sdk.iter().chain([&DECLARATION_WIT]) {
        files.push(File {
            path: (*path).to_owned(),
            contents: contents.as_bytes().to_vec(),
            executable: false,
        });
    }
    files
}
