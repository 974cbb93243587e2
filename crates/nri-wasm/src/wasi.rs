//! The WASI preview 1 a plugin module sees: no arguments, no environment,
//! no files and no sockets, only clocks, randomness, sleeping and writes
//! to standard output and error (which go to the runtime's debug log).
//! Upstream gives its modules the same (wazero's WASI with an empty module
//! configuration); every other preview 1 function exists and fails with
//! `EBADF` for descriptors and `ENOSYS` otherwise, so any module linked
//! against preview 1 loads.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmtime::{Caller, Linker};

use crate::abi::{self, State};

const MODULE: &str = "wasi_snapshot_preview1";

const ESUCCESS: i32 = 0;
const EBADF: i32 = 8;
const EFAULT: i32 = 21;
const EINVAL: i32 = 28;
const ENOSYS: i32 = 52;

/// Writes `bytes` at `at` in the caller's memory: `EFAULT` if out of range.
fn put(caller: &mut Caller<'_, State>, at: i32, bytes: &[u8]) -> Result<(), i32> {
    let mem = abi::memory(caller).ok_or(EFAULT)?;
    mem.write(caller, at as u32 as usize, bytes)
        .map_err(|_| EFAULT)
}

fn errno(r: Result<(), i32>) -> i32 {
    r.err().unwrap_or(ESUCCESS)
}

fn now(clock: i32) -> Result<u64, i32> {
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    match clock {
        // realtime
        0 => Ok(nanos(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        )),
        // monotonic, process and thread CPU time: time since the process
        // first asked, which is monotonic and all a plugin can use them for
        1..=3 => Ok(nanos(crate::started().elapsed())),
        _ => Err(EINVAL),
    }
}

/// Adds preview 1 to `linker`.
pub(crate) fn add(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    // A module's own arguments and environment: none.
    let empty = |mut c: Caller<'_, State>, count: i32, size: i32| -> i32 {
        errno(
            put(&mut c, count, &0u32.to_le_bytes())
                .and_then(|()| put(&mut c, size, &0u32.to_le_bytes())),
        )
    };
    linker.func_wrap(MODULE, "args_sizes_get", empty)?;
    linker.func_wrap(MODULE, "environ_sizes_get", empty)?;
    linker.func_wrap(MODULE, "args_get", |_: i32, _: i32| ESUCCESS)?;
    linker.func_wrap(MODULE, "environ_get", |_: i32, _: i32| ESUCCESS)?;

    linker.func_wrap(
        MODULE,
        "clock_time_get",
        |mut c: Caller<'_, State>, clock: i32, _precision: i64, out: i32| -> i32 {
            errno(now(clock).and_then(|t| put(&mut c, out, &t.to_le_bytes())))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "clock_res_get",
        |mut c: Caller<'_, State>, clock: i32, out: i32| -> i32 {
            errno(now(clock).and_then(|_| put(&mut c, out, &1u64.to_le_bytes())))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "random_get",
        |mut c: Caller<'_, State>, at: i32, len: i32| -> i32 {
            let mut buf = vec![0u8; len as u32 as usize];
            if getrandom(&mut buf).is_err() {
                return ENOSYS;
            }
            errno(put(&mut c, at, &buf))
        },
    )?;
    linker.func_wrap(MODULE, "sched_yield", || ESUCCESS)?;
    linker.func_wrap(MODULE, "proc_exit", |code: i32| -> wasmtime::Result<()> {
        Err(abi::Exit(code).into())
    })?;
    linker.func_wrap(MODULE, "proc_raise", |_: i32| ENOSYS)?;

    // Writes to standard output and error are logged, a line at a time
    // up to a bound, so that a plugin's panic message is not lost.
    linker.func_wrap(
        MODULE,
        "fd_write",
        |mut c: Caller<'_, State>, fd: i32, iovs: i32, n: i32, written: i32| -> i32 {
            if fd != 1 && fd != 2 {
                return EBADF;
            }
            match abi::gather(&mut c, iovs, n) {
                Ok(bytes) => {
                    c.data_mut().output(fd, &bytes);
                    errno(put(&mut c, written, &(bytes.len() as u32).to_le_bytes()))
                }
                Err(e) => e,
            }
        },
    )?;
    // poll_oneoff is how a module sleeps; a plugin has no reason to, and a
    // sleep would hold the call until its deadline.
    linker.func_wrap(MODULE, "poll_oneoff", |_: i32, _: i32, _: i32, _: i32| {
        ENOSYS
    })?;

    // Descriptor functions: no descriptor is open, and there are no
    // preopened directories (fd_prestat_get's EBADF ends the search).
    macro_rules! ebadf {
        ($($name:literal: ($($t:ty),*);)*) => {$(
            linker.func_wrap(MODULE, $name, |$(_: $t),*| EBADF)?;
        )*};
    }
    ebadf! {
        "fd_advise": (i32, i64, i64, i32);
        "fd_allocate": (i32, i64, i64);
        "fd_close": (i32);
        "fd_datasync": (i32);
        "fd_fdstat_get": (i32, i32);
        "fd_fdstat_set_flags": (i32, i32);
        "fd_fdstat_set_rights": (i32, i64, i64);
        "fd_filestat_get": (i32, i32);
        "fd_filestat_set_size": (i32, i64);
        "fd_filestat_set_times": (i32, i64, i64, i32);
        "fd_pread": (i32, i32, i32, i64, i32);
        "fd_prestat_get": (i32, i32);
        "fd_prestat_dir_name": (i32, i32, i32);
        "fd_pwrite": (i32, i32, i32, i64, i32);
        "fd_read": (i32, i32, i32, i32);
        "fd_readdir": (i32, i32, i32, i64, i32);
        "fd_renumber": (i32, i32);
        "fd_seek": (i32, i64, i32, i32);
        "fd_sync": (i32);
        "fd_tell": (i32, i32);
        "path_create_directory": (i32, i32, i32);
        "path_filestat_get": (i32, i32, i32, i32, i32);
        "path_filestat_set_times": (i32, i32, i32, i32, i64, i64, i32);
        "path_link": (i32, i32, i32, i32, i32, i32, i32);
        "path_open": (i32, i32, i32, i32, i32, i64, i64, i32, i32);
        "path_readlink": (i32, i32, i32, i32, i32, i32);
        "path_remove_directory": (i32, i32, i32);
        "path_rename": (i32, i32, i32, i32, i32, i32);
        "path_symlink": (i32, i32, i32, i32, i32);
        "path_unlink_file": (i32, i32, i32);
        "sock_accept": (i32, i32, i32);
        "sock_recv": (i32, i32, i32, i32, i32, i32);
        "sock_send": (i32, i32, i32, i32, i32);
        "sock_shutdown": (i32, i32);
    }
    Ok(())
}

/// Fills `buf` from the kernel's random source.
fn getrandom(buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: the pointer and length describe `rest`, writable.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(())
}
