//! `host compose DECLARATION --out POLICY [--engine ENGINE]`: a policy
//! written in another language, made one component with the engine that
//! applies it (see [`crate::compose`]). The result is unsigned: the author
//! signs it with `host sign`, as any policy.

use std::path::Path;

use anyhow::Context as _;

use crate::cli::ComposeArgs;
use crate::compose::{compose, PACKAGED_ENGINE};

pub fn execute(args: &ComposeArgs) -> anyhow::Result<i32> {
    let engine_path = args
        .engine
        .as_deref()
        .unwrap_or_else(|| Path::new(PACKAGED_ENGINE));
    let engine = std::fs::read(engine_path).with_context(|| {
        if args.engine.is_none() {
            format!(
                "reading the engine {PACKAGED_ENGINE} (the package installs it; from a checkout, \
                 build it with `cargo build -p declaration-engine --release --target \
                 wasm32-wasip2` and pass --engine \
                 target/wasm32-wasip2/release/declaration_engine.wasm)"
            )
        } else {
            format!("reading the engine {}", engine_path.display())
        }
    })?;
    let declaration = std::fs::read(&args.declaration)
        .with_context(|| format!("reading the declaration {}", args.declaration.display()))?;
    let composed = compose(&declaration, &engine).with_context(|| {
        format!(
            "composing {} with the engine {}",
            args.declaration.display(),
            engine_path.display()
        )
    })?;
    crate::atomic_file::write(&args.out, &composed.bytes, 0o644)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "wrote {} ({} bytes): {} ({} bytes) applied by the engine {} ({} bytes)",
        args.out.display(),
        composed.bytes.len(),
        args.declaration.display(),
        declaration.len(),
        engine_path.display(),
        engine.len()
    );
    println!("sign it: host sign {} --key YOUR.key", args.out.display());
    Ok(0)
}
