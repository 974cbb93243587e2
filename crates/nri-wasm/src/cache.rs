//! Compiled modules kept on disk, so that a module is compiled once per
//! node and engine build, not at every start of the runtime.
//!
//! Loading a compiled module runs its machine code in the runtime's
//! process, so a cache file is trusted only as far as its directory is:
//! the directory is created `0700`, and a directory or file that is not
//! the process's own, or that others may write, is not read (nor written
//! to). Files appear under their final name only whole (written aside,
//! synced, renamed), are read into memory rather than mapped (a file cut
//! short under a mapping would fault), and are checked by the engine,
//! which refuses one compiled by another version or configuration.
//!
//! A file's name is the SHA-256 of the module's bytes and of the engine's
//! compatibility hash: a changed module or engine misses and is compiled
//! anew. Files unused for [`UNUSED_FOR`] are removed when another is
//! stored, and so is what a process that died while storing one left
//! aside (after [`ASIDE_LEFT_FOR`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

/// How long a compiled module stays on disk without being loaded.
pub(crate) const UNUSED_FOR: Duration = Duration::from_secs(30 * 24 * 3600);

/// How old a file written aside must be to be the leftover of a process
/// that died while writing it: writing one takes seconds.
pub(crate) const ASIDE_LEFT_FOR: Duration = Duration::from_secs(3600);

const SUFFIX: &str = ".cwasm";
/// Files being written are named `<hash>.tmp-<pid>-<n>`.
const ASIDE: &str = ".tmp-";

/// Numbers this process's files written aside, so that two stores in it
/// never share one.
static ASIDE_SEQ: AtomicU64 = AtomicU64::new(0);

/// A cache directory, checked and ready.
pub(crate) struct Cache {
    dir: PathBuf,
}

/// Where in a cache one module's compiled form lives.
pub(crate) struct Entry {
    path: PathBuf,
}

impl Cache {
    /// Creates `dir` (and its parents) if it is missing, and checks that
    /// it is this process's own and closed to others.
    pub(crate) fn open(dir: &Path) -> io::Result<Cache> {
        if !dir.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let meta = fs::symlink_metadata(dir)?;
        if !meta.is_dir() {
            return Err(io::Error::other("not a directory"));
        }
        trusted(&meta)?;
        Ok(Cache {
            dir: dir.to_path_buf(),
        })
    }

    /// The entry of `wasm` compiled by `engine`.
    pub(crate) fn entry(&self, engine: &Engine, wasm: &[u8]) -> Entry {
        let mut hash = Sha256::new();
        hash.update(wasm);
        std::hash::Hash::hash(
            &engine.precompile_compatibility_hash(),
            &mut DigestHasher(&mut hash),
        );
        let name: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Entry {
            path: self.dir.join(name + SUFFIX),
        }
    }

    /// Removes compiled modules not loaded for [`UNUSED_FOR`], and what
    /// processes that died while storing one left aside.
    fn prune(&self, keep: &Path) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let kept_for = if name.ends_with(SUFFIX) {
                UNUSED_FOR
            } else if name.contains(ASIDE) {
                ASIDE_LEFT_FOR
            } else {
                continue;
            };
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| now.duration_since(at).unwrap_or_default() > kept_for);
            if old && path != keep {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

impl Entry {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The name this process's `seq`th store writes before renaming.
    fn aside(&self, seq: u64) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!("{ASIDE}{}-{seq}", std::process::id()));
        PathBuf::from(name)
    }

    /// The compiled module, if the cache has a trusted one the engine
    /// accepts. `Ok(None)` is a miss; an error says why a file that is
    /// there was not used.
    pub(crate) fn load(&self, engine: &Engine) -> io::Result<Option<Module>> {
        let meta = match fs::symlink_metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !meta.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        trusted(&meta)?;
        let bytes = fs::read(&self.path)?;
        // SAFETY: the bytes are a file that only this process's user can
        // have written, in a directory only it may write, and that such a
        // process wrote with Module::serialize (see `store`); the engine
        // checks that it was compiled by this version and configuration.
        let module = unsafe { Module::deserialize(engine, &bytes) }
            .map_err(|e| io::Error::other(format!("{e:#}")))?;
        // Its modification time is its last use, for `prune`.
        let _ = File::options()
            .append(true)
            .open(&self.path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        Ok(Some(module))
    }

    /// Stores `module`'s compiled form, whole or not at all, and prunes
    /// modules unused for long.
    pub(crate) fn store(&self, cache: &Cache, module: &Module) -> io::Result<()> {
        let bytes = module
            .serialize()
            .map_err(|e| io::Error::other(format!("{e:#}")))?;
        let aside = self.aside(ASIDE_SEQ.fetch_add(1, Ordering::Relaxed));
        let mut res = write_synced(&aside, &bytes);
        if res
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::AlreadyExists)
        {
            // Left by an earlier process with this pid that died writing.
            let _ = fs::remove_file(&aside);
            res = write_synced(&aside, &bytes);
        }
        let res = res.and_then(|()| fs::rename(&aside, &self.path));
        if res.is_err() {
            let _ = fs::remove_file(&aside);
        }
        res?;
        cache.prune(&self.path);
        Ok(())
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Whether a file or directory is this process's own, and closed to
/// writes by anyone else.
fn trusted(meta: &fs::Metadata) -> io::Result<()> {
    // SAFETY: geteuid cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(io::Error::other(format!(
            "owned by uid {}, not {me}",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(io::Error::other(format!(
            "writable by others (mode {:o})",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Feeds what a value hashes into a digest.
struct DigestHasher<'a>(&'a mut Sha256);

impl std::hash::Hasher for DigestHasher<'_> {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        // Only the digest is read, never this.
        0
    }
}
