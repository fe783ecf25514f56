//! The import of the declaration interface (wit/declaration), generated.
//!
//! Outside `wasm32` its function is never called: the engine's native tests
//! build declarations themselves and test [`crate::policy_of`].

wit_bindgen::generate!({
    path: "../../wit/declaration",
    inline: "
        package policy-host:engine;
        world engine-imports {
            import policy-host:declaration/declare@0.1.0;
        }
    ",
    world: "policy-host:engine/engine-imports",
    with: { "policy-host:declaration/declare@0.1.0": generate },
});

pub(crate) use policy_host::declaration::declare;
