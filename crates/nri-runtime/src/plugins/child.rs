//! A launched plugin's process: spawned with `std`, killed and reaped
//! without a signal handler.
//!
//! The core runs inside other programs (containerd and CRI-O link it
//! through cgo), so it must never install a signal handler in its host: a
//! SIGCHLD handler installed behind the Go runtime's back, without
//! `SA_ONSTACK`, makes Go abort at the next SIGCHLD. tokio's process
//! support installs one where `pidfd_open` is unavailable (kernels before
//! 5.3, or a seccomp profile refusing the call), so it is not used.
//!
//! Instead, each process is waited for on its own: through a pidfd polled
//! by the core's runtime when the kernel gives one, else by a thread of
//! its own blocked in `waitid` for that one pid. Never `waitpid(-1)`: the
//! host reaps its own children.
//!
//! A pid is signalled only while it is ours: a process keeps its pid,
//! as a zombie, until it is reaped, and only this module reaps it. With a
//! pidfd the handle itself reaps (under `&mut self`); with a thread, the
//! thread reaps and the handle signals under the same lock.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use log::debug;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::oneshot;

/// How long [`Child::kill`] waits for the killed process to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// A reaper thread only calls `waitid` and `waitpid`.
const REAPER_STACK: usize = 64 * 1024;

/// How a reaped process ended.
#[derive(Clone, Copy, Debug)]
enum Exit {
    Status(ExitStatus),
    /// It was not our child any more (someone else reaped it).
    Unknown,
}

impl Exit {
    fn into_result(self) -> io::Result<ExitStatus> {
        match self {
            Exit::Status(status) => Ok(status),
            Exit::Unknown => Err(io::Error::from_raw_os_error(libc::ECHILD)),
        }
    }
}

/// What the reaper thread has reaped: `None` while the process is ours.
type Reaped = Arc<Mutex<Option<Exit>>>;

enum Reaper {
    /// Readable once the process has exited; the handle reaps it.
    Pidfd(AsyncFd<OwnedFd>),
    /// A thread waits and reaps; `done` fires once it has.
    Thread {
        reaped: Reaped,
        done: oneshot::Receiver<()>,
    },
    /// Reaped; the pidfd is closed, the thread gone.
    Done(Exit),
}

/// A child process that is killed and reaped when dropped.
pub(crate) struct Child {
    pid: libc::pid_t,
    reaper: Reaper,
}

/// Spawns `cmd` (its stdio and environment as the caller set them).
pub(crate) fn spawn(cmd: &mut Command) -> io::Result<Child> {
    spawn_with(cmd, true)
}

/// As [`spawn`]; `try_pidfd: false` forces the reaper thread, as where
/// `pidfd_open` is refused.
fn spawn_with(cmd: &mut Command, try_pidfd: bool) -> io::Result<Child> {
    // std's handle neither waits nor kills when dropped: from here on the
    // pid is this module's to reap.
    let pid = cmd.spawn()?.id() as libc::pid_t;
    let pidfd = if try_pidfd { open_pidfd(pid) } else { None };
    let reaper = match pidfd {
        Some(fd) => Reaper::Pidfd(fd),
        None => match reaper_thread(pid) {
            Ok(reaper) => reaper,
            Err(e) => {
                // Nothing would ever reap it: undo the spawn.
                let _ = send_kill(pid);
                reap(pid, 0);
                return Err(e);
            }
        },
    };
    Ok(Child { pid, reaper })
}

impl Child {
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Waits until the process has exited and is reaped. Cancel-safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            let exit = match &mut self.reaper {
                Reaper::Done(exit) => return exit.into_result(),
                Reaper::Pidfd(fd) => {
                    let mut ready = fd.readable().await?;
                    let exit = reap(self.pid, libc::WNOHANG);
                    if exit.is_none() {
                        ready.clear_ready();
                    }
                    exit
                }
                Reaper::Thread { reaped, done } => {
                    // Closed unsent only if the thread died: the slot
                    // then holds what it reaped, if anything.
                    let _ = done.await;
                    Some((*lock(reaped)).unwrap_or(Exit::Unknown))
                }
            };
            if let Some(exit) = exit {
                // Closes the pidfd.
                self.reaper = Reaper::Done(exit);
            }
        }
    }

    /// Sends SIGKILL and waits, at most [`KILL_WAIT`], for the process to
    /// be reaped. A process still there then (stuck in the kernel) is
    /// reaped in the background once the handle is dropped.
    pub(crate) async fn kill(&mut self) -> io::Result<ExitStatus> {
        match self.start_kill() {
            // Gone already (reaped by someone else): wait says so.
            Err(e) if e.raw_os_error() != Some(libc::ESRCH) => return Err(e),
            _ => {}
        }
        match tokio::time::timeout(KILL_WAIT, self.wait()).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "process {} not reaped {KILL_WAIT:?} after SIGKILL",
                    self.pid
                ),
            )),
        }
    }

    /// Sends SIGKILL unless the process is reaped already.
    fn start_kill(&self) -> io::Result<()> {
        match &self.reaper {
            Reaper::Done(_) => Ok(()),
            Reaper::Pidfd(_) => send_kill(self.pid),
            Reaper::Thread { reaped, .. } => {
                let reaped = lock(reaped);
                if reaped.is_some() {
                    return Ok(());
                }
                send_kill(self.pid)
            }
        }
    }

    #[cfg(test)]
    fn uses_pidfd(&self) -> bool {
        matches!(self.reaper, Reaper::Pidfd(_))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.start_kill();
        if let Reaper::Pidfd(fd) = std::mem::replace(&mut self.reaper, Reaper::Done(Exit::Unknown))
        {
            drop(fd);
            if reap(self.pid, libc::WNOHANG).is_none() {
                reap_in_background(self.pid);
            }
        }
        // A reaper thread reaps the killed process on its own.
    }
}

/// A pidfd for `pid`, registered with the current tokio runtime; `None`
/// where the kernel or a seccomp profile refuses `pidfd_open`, or outside
/// a runtime.
fn open_pidfd(pid: libc::pid_t) -> Option<AsyncFd<OwnedFd>> {
    tokio::runtime::Handle::try_current().ok()?;
    // SAFETY: pidfd_open takes a pid and flags, no pointers; both are
    // passed as the long the variadic syscall(2) reads.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_pidfd_open,
            libc::c_long::from(pid),
            0 as libc::c_long,
        )
    };
    if fd < 0 {
        debug!(
            "pidfd_open: {}; a thread reaps process {pid}",
            io::Error::last_os_error()
        );
        return None;
    }
    // SAFETY: pidfd_open returned a new descriptor (close-on-exec) that
    // nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // SAFETY: the OwnedFd moves into the AsyncFd, which keeps it open and
    // gives back the same descriptor until it is dropped.
    match unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) } {
        Ok(fd) => Some(fd),
        Err(e) => {
            debug!("pidfd of process {pid} not pollable: {e}; a thread reaps it");
            None
        }
    }
}

/// Starts the thread that waits for `pid` and reaps it.
fn reaper_thread(pid: libc::pid_t) -> io::Result<Reaper> {
    let reaped: Reaped = Arc::new(Mutex::new(None));
    let (tell, done) = oneshot::channel();
    let slot = Arc::clone(&reaped);
    std::thread::Builder::new()
        .name("nri-reap".into())
        .stack_size(REAPER_STACK)
        .spawn(move || {
            wait_exited(pid);
            // Reaped under the lock the killer takes: no SIGKILL can reach
            // a process that took the pid over.
            let mut slot = lock(&slot);
            *slot = Some(reap(pid, 0).unwrap_or(Exit::Unknown));
            drop(slot);
            let _ = tell.send(());
        })?;
    Ok(Reaper::Thread { reaped, done })
}

/// Reaps a killed process whose handle is gone, on a thread of its own.
fn reap_in_background(pid: libc::pid_t) {
    let spawned = std::thread::Builder::new()
        .name("nri-reap".into())
        .stack_size(REAPER_STACK)
        .spawn(move || {
            reap(pid, 0);
        });
    if spawned.is_err() {
        // No thread to wait on: wait here rather than leave a zombie. A
        // process that got SIGKILL is normally gone at once.
        reap(pid, 0);
    }
}

/// Blocks until `pid` has exited, leaving it to be reaped (or until it is
/// not our child).
fn wait_exited(pid: libc::pid_t) {
    while let Err(e) = peek_exit(pid, 0) {
        if e.kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// `waitid(P_PID, pid, WEXITED | WNOWAIT | flags)`: waits for `pid` to
/// exit without reaping it (with `WNOHANG`, only looks).
fn peek_exit(pid: libc::pid_t, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: siginfo_t is plain data; all zeroes is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes only into `info`, which lives across the call.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT | flags,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `waitpid(pid, flags)`: how it ended once reaped, `None` while it runs
/// (with `WNOHANG`).
fn reap(pid: libc::pid_t, flags: libc::c_int) -> Option<Exit> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only into `status`, a local.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r == pid {
            return Some(Exit::Status(ExitStatus::from_raw(status)));
        }
        if r == 0 {
            return None;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Some(Exit::Unknown);
        }
    }
}

fn send_kill(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: kill takes no pointers; the pid is still ours (module docs).
    if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn lock(reaped: &Mutex<Option<Exit>>) -> MutexGuard<'_, Option<Exit>> {
    reaped.lock().unwrap_or_else(|e| e.into_inner())
}

/// The turn of a unit test that opens pidfds or reaper threads: the tests
/// below count those of the whole process, so every test that makes one
/// (these, and the peer identity's) takes turns.
#[cfg(test)]
pub(crate) fn pidfd_test_turn() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn serial() -> MutexGuard<'static, ()> {
        pidfd_test_turn()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn pidfd_works() -> bool {
        // SAFETY: as in open_pidfd; the descriptor is closed right away.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_pidfd_open,
                libc::c_long::from(std::process::id() as libc::pid_t),
                0 as libc::c_long,
            )
        };
        if fd < 0 {
            return false;
        }
        // SAFETY: a descriptor pidfd_open just returned, owned here.
        drop(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        true
    }

    /// Whether `pid` is reaped: no longer a child of ours, running or zombie.
    /// Asks without reaping it.
    fn is_reaped(pid: libc::pid_t) -> bool {
        matches!(peek_exit(pid, libc::WNOHANG), Err(e) if e.raw_os_error() == Some(libc::ECHILD))
    }

    fn eventually(what: &str, ok: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !ok() {
            assert!(Instant::now() < deadline, "{what}: not within 5s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn pidfds() -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy() == "anon_inode:[pidfd]")
            })
            .count()
    }

    fn reaper_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "nri-reap")
            })
            .count()
    }

    /// Nothing of the reaping is left: no pidfd, no thread.
    fn assert_nothing_left(pidfds_before: usize) {
        assert_eq!(pidfds(), pidfds_before, "a pidfd is left open");
        eventually("reaper threads gone", || reaper_threads() == 0);
    }

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    /// Runs `test` with a pidfd where the kernel has them and with the
    /// reaper thread, each on a runtime of its own, and checks that it
    /// left no pidfd or reaper thread behind.
    fn each_way<F: std::future::Future<Output = ()>>(test: impl Fn(bool) -> F) {
        let _turn = serial();
        for try_pidfd in [true, false] {
            let before = pidfds();
            runtime().block_on(test(try_pidfd));
            assert_nothing_left(before);
        }
    }

    #[test]
    fn the_pidfd_is_used_where_the_kernel_gives_one() {
        each_way(|try_pidfd| async move {
            let mut child = spawn_with(&mut sh("exit 0"), try_pidfd).unwrap();
            assert_eq!(child.uses_pidfd(), try_pidfd && pidfd_works());
            child.wait().await.unwrap();
        });
    }

    #[test]
    fn a_process_that_exits_is_reaped_with_its_status() {
        each_way(|try_pidfd| async move {
            let mut child = spawn_with(&mut sh("exit 3"), try_pidfd).unwrap();
            let status = child.wait().await.unwrap();
            assert_eq!(status.code(), Some(3), "pidfd {try_pidfd}");
            assert!(is_reaped(child.pid()), "pidfd {try_pidfd}");
            // Waiting again gives the same answer.
            assert_eq!(child.wait().await.unwrap().code(), Some(3));
        });
    }

    #[test]
    fn kill_ends_and_reaps_a_running_process() {
        each_way(|try_pidfd| async move {
            let mut child = spawn_with(&mut sh("exec sleep 60"), try_pidfd).unwrap();
            let started = Instant::now();
            let status = child.kill().await.unwrap();
            assert_eq!(status.signal(), Some(libc::SIGKILL), "pidfd {try_pidfd}");
            assert!(started.elapsed() < KILL_WAIT);
            assert!(is_reaped(child.pid()), "pidfd {try_pidfd}");
            // Killing a reaped process is a no-op, not a signal to a stranger.
            assert_eq!(child.kill().await.unwrap().signal(), Some(libc::SIGKILL));
        });
    }

    #[test]
    fn dropping_the_handle_kills_and_reaps_the_process() {
        each_way(|try_pidfd| async move {
            let child = spawn_with(&mut sh("exec sleep 60"), try_pidfd).unwrap();
            let pid = child.pid();
            drop(child);
            // Reaped off this thread: blocking it here is fine.
            eventually("dropped child reaped", || is_reaped(pid));
        });
    }

    #[test]
    fn a_handle_outliving_its_runtime_still_kills_and_reaps() {
        let _turn = serial();
        let before = pidfds();
        let rt = runtime();
        let child = rt.block_on(async { spawn(&mut sh("exec sleep 60")).unwrap() });
        assert_eq!(child.uses_pidfd(), pidfd_works());
        drop(rt);
        let pid = child.pid();
        drop(child);
        eventually("child reaped after its runtime", || is_reaped(pid));
        assert_nothing_left(before);
    }

    #[test]
    fn outside_a_runtime_a_thread_reaps() {
        let _turn = serial();
        let before = pidfds();
        let child = spawn(&mut sh("exec sleep 60")).unwrap();
        assert!(!child.uses_pidfd());
        let pid = child.pid();
        drop(child);
        eventually("child reaped", || is_reaped(pid));
        assert_nothing_left(before);
    }
}
