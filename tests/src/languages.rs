//! Policies written in Python and JavaScript, built as an author builds
//! them: the declaration component by the language's own toolchain
//! (componentize-py, componentize-qjs), then `host compose` with the
//! engine (policies/engine), then `host sign`. Built once per test process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::build::{
    host_command, made_once, policy_wasm, sign_file, target_dir, workspace_root, MadeOnce,
};
use crate::outcome::text;

/// A language a policy can be written in besides Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    Python,
    JavaScript,
}

impl Language {
    /// The name used for its build directory and files.
    pub fn tag(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::JavaScript => "js",
        }
    }
}

/// A directory of this process's own for language policies and what
/// tests write beside them: `target/e2e-languages/<pid>/<name>`, made.
pub fn work_dir(name: &str) -> PathBuf {
    let dir = target_dir()
        .join("e2e-languages")
        .join(std::process::id().to_string())
        .join(name);
    std::fs::create_dir_all(&dir).expect("create the language work directory");
    dir
}

/// Where this process builds the policies of `language`.
fn build_dir(language: Language) -> PathBuf {
    work_dir(language.tag())
}

/// Runs `command`, which must succeed; its output in the panic otherwise.
pub fn run_ok(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The declaration component of the example in `language`
/// (policies/example-python, policies/example-js), built with the SDK of
/// this repository, as each example's header says.
pub fn example_declaration(language: Language) -> PathBuf {
    let root = workspace_root();
    let out = build_dir(language).join("declaration.wasm");
    match language {
        Language::Python => run_ok(
            Command::new("componentize-py")
                .current_dir(&root)
                .args([
                    "-d",
                    "wit/declaration",
                    "-w",
                    "declaration",
                    "componentize",
                    "app",
                ])
                .args(["-p", "policies/example-python", "-p", "sdk/python", "-o"])
                .arg(&out),
        ),
        Language::JavaScript => run_ok(
            Command::new("componentize-qjs")
                .current_dir(&root)
                .args([
                    "--wit",
                    "wit/declaration",
                    "-j",
                    "policies/example-js/policy.js",
                ])
                .args([
                    "--module-root",
                    ".",
                    "-n",
                    "declaration",
                    "--sync",
                    "--stub-wasi",
                ])
                .arg("-o")
                .arg(&out),
        ),
    };
    out
}

/// `host compose DECLARATION -o OUT --engine <the engine>`, which must
/// succeed; what it printed.
pub fn compose(declaration: &Path, out: &Path) -> String {
    run_ok(
        host_command()
            .arg("compose")
            .arg(declaration)
            .arg("-o")
            .arg(out)
            .arg("--engine")
            .arg(policy_wasm("declaration-engine")),
    )
}

/// The example in `language`, composed with the engine and signed with the
/// test key: a policy as an author ships it.
pub fn example_policy(language: Language) -> PathBuf {
    static BUILT: MadeOnce<Language> = OnceLock::new();
    made_once(&BUILT, language, |_| {
        let declaration = example_declaration(language);
        let policy = build_dir(language).join(format!("example-{}.wasm", language.tag()));
        compose(&declaration, &policy);
        sign_file(&policy);
        policy
    })
}
