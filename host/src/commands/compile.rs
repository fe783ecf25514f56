//! `host compile [POLICY...]` (with none: host.toml's `[[policy]]` list):
//! each policy's signature checked as `run` checks it, then the policy compiled into the compile cache that runs
//! load it from, so that no run (a timer's, the watch's) pays a cold
//! compile. A Rust policy compiles in a fraction of a second; a large
//! guest (a Python policy is ~40 times its size) takes seconds and far
//! more memory than a run, which is better spent once, when the operator
//! installs it.
//!
//! Only verified bytes are ever compiled into the cache (what the cache
//! holds is run as the host's own code): there is no `--allow-unsigned`.

use std::time::Instant;

use anyhow::{anyhow, bail, Context};

use crate::admission::{examine_reference, policy_locations, Location};
use crate::cli::CompileArgs;
use crate::runtime::cache::{CacheOutcome, CompileCache};
use crate::runtime::PolicyRuntime;
use crate::settings::{resolve_trust, ConfigFile, RunSettings};
use crate::signature::{SignatureError, Trust};
use crate::text::{millis, one_line};

pub fn execute(args: &CompileArgs) -> anyhow::Result<i32> {
    let file = ConfigFile::load(args.trust.config.path())?;
    let trust = resolve_trust(&args.trust.trusted_key, &args.trust.flags, &file)?;
    let cache_dir = args.cache_flags.resolve(&file)?.cache_dir;
    let cache = CompileCache::open(&cache_dir).ok_or_else(|| {
        anyhow!(
            "the compile cache {} cannot be used (the warning above says why): nothing was compiled",
            cache_dir.display()
        )
    })?;
    // The engine every run builds: the same configuration, so the same
    // cache entries.
    let runtime = PolicyRuntime::new(RunSettings::defaults().limits)?;
    let mut failed = 0;
    for location in policy_locations(&locations(args, &file)?)? {
        match compile(&runtime, &cache, &trust, args, &file, &location) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                failed += 1;
                tracing::error!("{}: {e:#}", one_line(&location.to_string()));
            }
        }
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

/// The policies named, or, with none, host.toml's `[[policy]]` list (what
/// the timer and the watch run): what the package compiles after an
/// upgrade, when every entry compiled by the earlier host is stale.
fn locations(args: &CompileArgs, file: &ConfigFile) -> anyhow::Result<Vec<Location>> {
    let given: Vec<&str> = if args.policies.is_empty() {
        file.policies.iter().map(|p| p.source.as_str()).collect()
    } else {
        args.policies.iter().map(String::as_str).collect()
    };
    if given.is_empty() {
        bail!(
            "nothing to compile: name a policy, or list it as a [[policy]] in {}",
            file.path()
                .map_or_else(|| "host.toml".to_owned(), |p| p.display().to_string())
        );
    }
    given.into_iter().map(Location::parse).collect()
}

/// One policy: read (or pulled), verified, compiled into `cache`; what was
/// done, in one line.
fn compile(
    runtime: &PolicyRuntime,
    cache: &CompileCache,
    trust: &Trust,
    args: &CompileArgs,
    file: &ConfigFile,
    location: &Location,
) -> anyhow::Result<String> {
    let (shown, bytes, verdict) = match location.clone() {
        Location::File(path) => {
            let bytes = std::fs::read(&path).map_err(|source| SignatureError::Io {
                path: path.clone(),
                source,
            })?;
            let verdict = trust.verify("file", &path, &bytes);
            (path.display().to_string(), bytes, verdict)
        }
        Location::Oci(reference) => {
            let registry = super::registry_client(&args.registry, file)?;
            let (pulled, verdict) = examine_reference(&registry, trust, &reference)?;
            let shown = reference.pinned(&pulled.digest).to_string();
            (shown, pulled.bytes, verdict)
        }
    };
    let verified = verdict.context("its signature is not valid: nothing was compiled")?;
    let started = Instant::now();
    let loaded = runtime
        .load(&bytes, Some(cache))
        .context("it is not a policy this host runs: nothing was compiled")?;
    let what = format!(
        "{} ({}, signed by key {})",
        one_line(&shown),
        verified.name,
        verified.key_id
    );
    Ok(match loaded.cache {
        CacheOutcome::Hit => format!("already compiled: {what}"),
        CacheOutcome::Miss => format!(
            "compiled: {what}, {} bytes, in {:.0} ms",
            bytes.len(),
            millis(started.elapsed())
        ),
        // `open` succeeded, so the cache is in use; and `load` keeps nothing.
        CacheOutcome::Disabled | CacheOutcome::Kept => format!("compiled, not cached: {what}"),
    })
}
