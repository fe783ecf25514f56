//! `#[e2e_test(requires = "root, systemd")]`: an end-to-end test that says
//! what the machine must have, as cargo's `#[cargo_test(requires = ...)]`
//! does. When the machine has it all, the test is a plain `#[test]`. When
//! it lacks something, the test is `#[ignore]`d with the reason (what is
//! missing and how to get it), so a plain `cargo test` reports it as
//! ignored, never as passed; under `CI=true` it is not ignored, and fails
//! naming what is missing. Either way the test first checks again at run
//! time, so `--include-ignored` on a machine that lacks something fails
//! with the same words instead of somewhere in the middle.
//!
//! Written on `proc_macro` alone: the attribute's one argument is a string,
//! and the item is kept as it is, with one statement put before its body.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

#[path = "requirement.rs"]
mod requirement;

#[proc_macro_attribute]
pub fn e2e_test(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr, item) {
        Ok(tokens) => tokens,
        Err(message) => format!("compile_error!({message:?});")
            .parse()
            .expect("a compile_error! call"),
    }
}

fn expand(attr: TokenStream, item: TokenStream) -> Result<TokenStream, String> {
    let requires = requirements(attr)?;
    let mut missing = Vec::new();
    for name in &requires {
        if let Some(how) = requirement::missing(name)? {
            missing.push(format!("{name} ({how})"));
        }
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
    let mut out: TokenStream = "#[test]".parse().expect("an attribute");
    if !missing.is_empty() && !ci {
        let reason = format!("requires {}", missing.join(", "));
        out.extend(
            format!("#[ignore = {reason:?}]")
                .parse::<TokenStream>()
                .expect("an attribute"),
        );
    }
    out.extend(with_check(item, &requires)?);
    Ok(out)
}

/// `requires = "a, b"` as `["a", "b"]`.
fn requirements(attr: TokenStream) -> Result<Vec<String>, String> {
    let tokens: Vec<TokenTree> = attr.into_iter().collect();
    let usage = "usage: #[e2e_test(requires = \"root, systemd\")]";
    let [TokenTree::Ident(key), TokenTree::Punct(eq), TokenTree::Literal(list)] = &tokens[..]
    else {
        return Err(usage.to_owned());
    };
    if key.to_string() != "requires" || eq.as_char() != '=' {
        return Err(usage.to_owned());
    }
    let list = list.to_string();
    let list = list
        .strip_prefix('"')
        .and_then(|l| l.strip_suffix('"'))
        .ok_or(usage)?;
    let names: Vec<String> = list
        .split(',')
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Err(usage.to_owned());
    }
    Ok(names)
}

/// The test function, with `policy_host_e2e::requires::check(&[...]);` as
/// the first statement of its body.
fn with_check(item: TokenStream, requires: &[String]) -> Result<TokenStream, String> {
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let Some(TokenTree::Group(body)) = tokens.last() else {
        return Err("#[e2e_test] goes on a test function".to_owned());
    };
    if body.delimiter() != Delimiter::Brace {
        return Err("#[e2e_test] goes on a test function".to_owned());
    }
    let check: TokenStream = format!("::policy_host_e2e::requires::check(&{requires:?});")
        .parse()
        .expect("a statement");
    let mut inner = check;
    inner.extend(body.stream());
    let mut group = Group::new(Delimiter::Brace, inner);
    group.set_span(body.span());
    let last = tokens.len() - 1;
    tokens[last] = TokenTree::Group(group);
    Ok(tokens.into_iter().collect())
}
