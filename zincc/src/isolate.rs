//! LLVM aborts the whole process on some programs that pass every check before it (an intrinsic
//! the arch lacks only fails in instruction selection). `zincc` promises a message and an exit
//! code instead, so code generation runs in a forked child and a crash there is reported here.

use std::io::Write;

/// How the isolated work ended.
pub enum Outcome {
    /// It returned this exit code.
    Exited(u8),
    /// It was killed by this signal (LLVM's abort is SIGABRT).
    Crashed(i32),
}

/// Runs `work` in a child process and waits for it. `work` reports its own messages on the
/// inherited stdout/stderr and returns an exit code.
#[cfg(unix)]
pub fn run(work: impl FnOnce() -> u8) -> std::io::Result<Outcome> {
    // Anything buffered now would otherwise be written twice, once by each process.
    std::io::stdout().flush()?;
    std::io::stderr().flush()?;
    // SAFETY: zincc is single-threaded, so the child owns a consistent copy of the process; it
    // leaves through `_exit`, running no destructors or atexit handlers that belong to the parent.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            let code = work();
            let _ = std::io::stdout().flush();
            let _ = std::io::stderr().flush();
            unsafe { libc::_exit(code as i32) }
        }
        child => {
            let mut status = 0;
            // SAFETY: `child` is our own child process and `status` a valid out-pointer.
            if unsafe { libc::waitpid(child, &mut status, 0) } == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(if libc::WIFSIGNALED(status) {
                Outcome::Crashed(libc::WTERMSIG(status))
            } else {
                Outcome::Exited(libc::WEXITSTATUS(status) as u8)
            })
        }
    }
}

/// Without fork, the work runs in this process.
#[cfg(not(unix))]
pub fn run(work: impl FnOnce() -> u8) -> std::io::Result<Outcome> {
    Ok(Outcome::Exited(work()))
}
