//! Compiled policies cached on disk, keyed by the SHA-256 of the verified
//! bytes and the engine's configuration.
//!
//! Loading precompiled machine code is unsafe by nature: whoever can write a
//! cache entry can run code as the host. So only bytes that passed signature
//! verification are ever looked up or stored; the directory (checked with
//! its parents, before anything is created or changed: a symbolic link is
//! refused, never followed or chmodded) and each entry must be owned by root
//! (or the user running the host) and writable by no one else; every entry
//! carries the SHA-256 of its contents and is written through
//! [`crate::atomic_file`]; and anything that fails a check is ignored with a
//! warning (an unsafe directory: no cache at all) and rebuilt, never trusted.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::fs_safety::{self, Kind};
use crate::text::hex;
use wasmtime::component::Component;
use wasmtime::Engine;

/// What happened at lookup, for the report and the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheOutcome {
    /// Loaded a compiled artifact.
    Hit,
    /// Compiled, and stored for next time.
    Miss,
    /// Compiled; caching is off (`--no-cache`) or the directory is unusable.
    Disabled,
    /// `host watch`'s own copy, compiled or loaded for an earlier run of the
    /// same bytes: nothing was read from the cache.
    Kept,
}

/// A cache directory that passed the safety checks.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

/// Warnings are printed once each on stderr; the run goes on with a compile.
fn warn(message: String) {
    tracing::warn!("compile cache: {message}");
}

impl CompileCache {
    /// Opens `dir` (created with mode 0700 if missing, an existing one is
    /// never changed); `None`, with a warning, when it or a parent is not
    /// safe to use.
    pub fn open(dir: &Path) -> Option<Self> {
        match fs_safety::private_dir(dir) {
            Ok(()) => Some(Self {
                dir: dir.to_owned(),
            }),
            Err(problem) => {
                warn(format!(
                    "not using {}: {problem}; compiling without a cache",
                    dir.display()
                ));
                None
            }
        }
    }

    /// The entry for `bytes` compiled by `engine`.
    fn entry_path(&self, engine: &Engine, bytes: &[u8]) -> PathBuf {
        let code = hex(&Sha256::digest(bytes));
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        let engine_key = hex(&hasher.0.finalize()[..8]);
        self.dir.join(format!("{code}-{engine_key}.cwasm"))
    }

    /// The compiled component for `bytes`, from the cache or compiled now
    /// (and then stored, once `compile` accepted it: a component it
    /// refuses is never stored). `bytes` must already be verified.
    pub fn get_or_compile<E>(
        &self,
        engine: &Engine,
        bytes: &[u8],
        compile: impl FnOnce() -> Result<Component, E>,
    ) -> Result<(Component, CacheOutcome), E> {
        let path = self.entry_path(engine, bytes);
        if let Some(component) = self.load(engine, &path) {
            return Ok((component, CacheOutcome::Hit));
        }
        let component = compile()?;
        if let Err(e) = self.store(&path, &component) {
            warn(format!("cannot store {}: {e:#}", path.display()));
        }
        Ok((component, CacheOutcome::Miss))
    }

    fn load(&self, engine: &Engine, path: &Path) -> Option<Component> {
        if fs::symlink_metadata(path).is_err() {
            return None;
        }
        if let Err(problem) = fs_safety::check_object(path, Kind::File) {
            warn(format!("ignoring an entry: {problem}; rebuilding it"));
            let _ = fs::remove_file(path);
            return None;
        }
        let data = match fs::read(path) {
            Ok(data) => data,
            Err(e) => {
                warn(format!(
                    "cannot read {}: {e}; rebuilding it",
                    path.display()
                ));
                return None;
            }
        };
        let Some((digest, artifact)) = data.split_at_checked(32) else {
            warn(format!(
                "ignoring {}: truncated; rebuilding it",
                path.display()
            ));
            return None;
        };
        if Sha256::digest(artifact).as_slice() != digest {
            warn(format!(
                "ignoring {}: its checksum does not match (corrupted); rebuilding it",
                path.display()
            ));
            return None;
        }
        // SAFETY: the artifact was written by this host (same engine
        // configuration, checked by wasmtime), into a directory only root (or
        // the running user) can write, from bytes that passed signature
        // verification; its checksum matches what was written.
        match unsafe { Component::deserialize(engine, artifact) } {
            Ok(component) => Some(component),
            Err(e) => {
                warn(format!("ignoring {}: {e}; rebuilding it", path.display()));
                None
            }
        }
    }

    fn store(&self, path: &Path, component: &Component) -> anyhow::Result<()> {
        let artifact = component.serialize()?;
        let mut entry = Sha256::digest(&artifact).to_vec();
        entry.extend_from_slice(&artifact);
        crate::atomic_file::write(path, &entry, 0o600)
    }
}

struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        unreachable!("only the SHA-256 digest is used")
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const WAT: &str = "(component)";

    fn engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        Engine::new(&config).unwrap()
    }

    /// A cache directory not yet created, inside a scratch directory that
    /// is removed when the guard drops.
    fn temp(name: &str) -> (tempfile::TempDir, PathBuf) {
        let scratch = tempfile::Builder::new()
            .prefix(&format!("policy-host-cache-{name}-"))
            .tempdir()
            .unwrap();
        let dir = scratch.path().join("cache");
        (scratch, dir)
    }

    fn bytes() -> Vec<u8> {
        wat::parse_str(WAT).unwrap()
    }

    fn compile_count(cache: &CompileCache, engine: &Engine, compiles: &mut u32) -> CacheOutcome {
        let bytes = bytes();
        let (_, outcome) = cache
            .get_or_compile(engine, &bytes, || {
                *compiles += 1;
                Ok::<_, anyhow::Error>(Component::from_binary(engine, &bytes)?)
            })
            .unwrap();
        outcome
    }

    #[test]
    fn second_lookup_hits_without_compiling() {
        let (_scratch, dir) = temp("hit");
        let cache = CompileCache::open(&dir).unwrap();
        let engine = engine();
        let mut compiles = 0;
        assert_eq!(
            compile_count(&cache, &engine, &mut compiles),
            CacheOutcome::Miss
        );
        assert_eq!(
            compile_count(&cache, &engine, &mut compiles),
            CacheOutcome::Hit
        );
        assert_eq!(compiles, 1);
        let mode = fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "the cache directory is private");
    }

    #[test]
    fn corrupted_entry_is_ignored_and_rebuilt() {
        let (_scratch, dir) = temp("corrupt");
        let cache = CompileCache::open(&dir).unwrap();
        let engine = engine();
        let mut compiles = 0;
        compile_count(&cache, &engine, &mut compiles);
        let entry = cache.entry_path(&engine, &bytes());
        let mut data = fs::read(&entry).unwrap();
        let last = data.len() - 1;
        data[last] ^= 0xff;
        fs::write(&entry, data).unwrap();
        assert_eq!(
            compile_count(&cache, &engine, &mut compiles),
            CacheOutcome::Miss
        );
        assert_eq!(compiles, 2, "rebuilt");
        assert_eq!(
            compile_count(&cache, &engine, &mut compiles),
            CacheOutcome::Hit,
            "and stored again"
        );
    }

    #[test]
    fn entry_writable_by_others_is_ignored() {
        let (_scratch, dir) = temp("perms");
        let cache = CompileCache::open(&dir).unwrap();
        let engine = engine();
        let mut compiles = 0;
        compile_count(&cache, &engine, &mut compiles);
        let entry = cache.entry_path(&engine, &bytes());
        fs::set_permissions(&entry, fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(
            compile_count(&cache, &engine, &mut compiles),
            CacheOutcome::Miss
        );
        assert_eq!(compiles, 2);
    }

    #[test]
    fn entry_owned_by_another_user_is_ignored() {
        let (_scratch, dir) = temp("owner");
        let cache = CompileCache::open(&dir).unwrap();
        let engine = engine();
        let mut compiles = 0;
        compile_count(&cache, &engine, &mut compiles);
        let entry = cache.entry_path(&engine, &bytes());
        if std::os::unix::fs::chown(&entry, Some(65534), None).is_err() {
            eprintln!("not root: cannot test foreign ownership");
            return;
        }
        assert_eq!(
            compile_count(&cache, &engine, &mut compiles),
            CacheOutcome::Miss
        );
        assert_eq!(compiles, 2);
    }

    #[test]
    fn directory_writable_by_others_is_not_used_nor_changed() {
        let (_scratch, dir) = temp("open-dir");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(CompileCache::open(&dir).is_none());
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o777,
            "refused, not chmodded"
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(CompileCache::open(&dir).is_some());
    }

    #[test]
    fn symlinked_directory_is_not_used_and_its_target_keeps_its_mode() {
        let (scratch, dir) = temp("symlink");
        let target = scratch.path().join("elsewhere");
        fs::create_dir(&target).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&target, &dir).unwrap();
        assert!(CompileCache::open(&dir).is_none());
        assert_eq!(
            fs::metadata(&target).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
    }

    #[test]
    fn parent_writable_by_others_is_not_used_and_nothing_is_created() {
        let (scratch, _) = temp("parent");
        let parent = scratch.path().join("shared");
        fs::create_dir(&parent).unwrap();
        fs::set_permissions(&parent, fs::Permissions::from_mode(0o777)).unwrap();
        let dir = parent.join("cache");
        assert!(CompileCache::open(&dir).is_none());
        assert!(!dir.exists(), "not created in an unsafe parent");
        // Sticky, like /tmp: others cannot replace what is ours.
        fs::set_permissions(&parent, fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(CompileCache::open(&dir).is_some());
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o7777,
            0o700
        );
    }

    #[test]
    fn artifact_from_another_engine_configuration_is_a_different_entry() {
        let (_scratch, dir) = temp("engine");
        let cache = CompileCache::open(&dir).unwrap();
        let mut other = wasmtime::Config::new();
        other.wasm_component_model(true).epoch_interruption(true);
        let other = Engine::new(&other).unwrap();
        assert_ne!(
            cache.entry_path(&engine(), &bytes()),
            cache.entry_path(&other, &bytes())
        );
        // And an artifact of one engine planted under the other's name is refused by wasmtime.
        let mut compiles = 0;
        compile_count(&cache, &engine(), &mut compiles);
        fs::copy(
            cache.entry_path(&engine(), &bytes()),
            cache.entry_path(&other, &bytes()),
        )
        .unwrap();
        assert_eq!(
            compile_count(&cache, &other, &mut compiles),
            CacheOutcome::Miss
        );
    }
}
