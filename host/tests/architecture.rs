//! ARCHITECTURE.md's dependency block matches the host's `crate::` imports,
//! and those imports form a DAG.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The `deps` block of ARCHITECTURE.md: `module -> a, b`.
fn documented() -> Graph {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md");
    let block = text
        .split("```deps\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```deps block in ARCHITECTURE.md");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (module, deps) = line.split_once("->").expect("module -> deps");
            let deps = deps
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect();
            (module.trim().to_owned(), deps)
        })
        .collect()
}

/// Each top-level module of host/src and the other modules its non-test code names.
fn actual() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let relative = path.strip_prefix(&src).unwrap();
            let top = relative
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned();
            if top == "lib" || top == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            let deps = graph.entry(top.clone()).or_default();
            let code: String = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for part in code.split("crate::").skip(1) {
                // `crate::a::b` names `a`; `crate::{a, b::c}` names `a` and `b`.
                let names: Vec<&str> = match part.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .map(str::trim)
                        .collect(),
                    None => vec![part],
                };
                for item in names {
                    let name: String = item
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != top && name != "self" {
                        deps.insert(name);
                    }
                }
            }
        }
    }
    graph
}

#[test]
fn the_documented_dependencies_are_the_real_ones() {
    let (documented, actual) = (documented(), actual());
    for (module, deps) in &actual {
        assert_eq!(
            documented.get(module),
            Some(deps),
            "module `{module}`: ARCHITECTURE.md says {:?}, the code imports {deps:?}",
            documented.get(module)
        );
    }
    let extra: Vec<_> = documented
        .keys()
        .filter(|m| !actual.contains_key(*m))
        .collect();
    assert!(
        extra.is_empty(),
        "ARCHITECTURE.md lists modules that do not exist: {extra:?}"
    );
}

#[test]
fn the_modules_form_a_dag() {
    let graph = actual();
    // Kahn's algorithm: repeatedly remove modules whose dependencies are all removed.
    let mut left: BTreeMap<_, _> = graph.clone();
    while !left.is_empty() {
        let ready: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(m, _)| m.clone())
            .collect();
        assert!(
            !ready.is_empty(),
            "the imports of these modules form a cycle: {left:?}"
        );
        for module in ready {
            left.remove(&module);
        }
    }
}
