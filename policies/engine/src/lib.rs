//! The apply engine of policies written in other languages.
//!
//! A Python or JavaScript policy is a *declaration* component: it exports
//! `policy-host:declaration/declare` (wit/declaration) and nothing else. This
//! crate is the other half: it imports that interface, turns what it
//! returns into a guest-sdk [`Policy`], and exports the host's `policy`
//! world through guest-sdk, so two-phase apply, idempotency, noop messages,
//! verification, subscriptions and name checks are the Rust SDK's, written
//! and tested once. `host compose` plugs a declaration into this component;
//! the result is a policy like any other.

use guest_sdk::prelude::*;

mod import;

use import::declare::{Declaration, Ensure as DeclaredEnsure, Fact as DeclaredFact};

/// The declaration's error when it is given to the report: the author's
/// words, after `declaration:`, cut to a bound. The SDKs bound their
/// tracebacks to 4000 characters, keeping the end that matters (Python's
/// last line, JavaScript's first): up to four bytes each, so this bound
/// never cuts theirs; it holds a declaration built without them. The host
/// bounds the report again.
const ERROR_LIMIT: usize = 16 * 1024;

/// The policy a declaration stands for.
///
/// Services keep the declaration's order; a left-out service is noted with
/// the author's reason. Nothing is checked here: the SDK checks the whole
/// policy before applying any of it, as it does a Rust policy's.
pub fn policy_of(declaration: Declaration) -> Policy {
    let mut policy = Policy::new();
    for service in declaration.services {
        let mut declared = Service::new(service.name);
        declared = match service.ensure {
            DeclaredEnsure::Running => declared.running(),
            DeclaredEnsure::Stopped => declared.stopped(),
        };
        if let Some(enable) = service.enable {
            declared = declared.enable(enable);
        }
        for reference in service.subscribe {
            declared = declared.subscribe(reference);
        }
        policy.add(declared);
    }
    for left in declaration.left_out {
        policy.leave_out(left.name, left.why);
    }
    policy
}

/// The facts of `ctx` in the declaration's own type, in the host's order.
fn facts_of(ctx: &Context) -> Vec<DeclaredFact> {
    ctx.facts()
        .as_slice()
        .iter()
        .map(|fact| DeclaredFact {
            name: fact.name.clone(),
            value: fact.value.clone(),
        })
        .collect()
}

/// `error`, cut at [`ERROR_LIMIT`] bytes on a character boundary, saying so.
fn bounded(error: String) -> String {
    if error.len() <= ERROR_LIMIT {
        return error;
    }
    let mut end = ERROR_LIMIT;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}... ({} more bytes not shown)",
        &error[..end],
        error.len() - end
    )
}

/// The policy function of the composed component: asks the plugged-in
/// declaration, with this run's settings and facts.
pub fn declared(ctx: &Context) -> Result<Policy, String> {
    import::declare::declare(ctx.settings(), &facts_of(ctx))
        .map(policy_of)
        .map_err(|error| format!("declaration: {}", bounded(error)))
}

guest_sdk::export_policy!(declared);

#[cfg(test)]
mod tests;
