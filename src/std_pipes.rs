//! The process's own stdin and stdout as async pipes, for the programs
//! that speak on them (`sluice demo-server`, `sluice stdio`). The crate
//! does not enable tokio's `io-std`, so plain threads bridge the blocking
//! std handles to in-memory pipes. Threads, not `spawn_blocking`: a read
//! parked on stdin must not hold up runtime shutdown.

use std::io::{self, Read as _, Write as _};
use std::thread;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Buffer of the pipes between the std threads and their user.
const PIPE_BUFFER: usize = 64 * 1024;

/// What stdin brings, what goes to stdout, and the end of the writing:
/// dropped, the writer lets the stdout thread finish what it holds and
/// then `written` says how that went.
pub(crate) struct Pipes {
    pub(crate) stdin: DuplexStream,
    pub(crate) stdout: DuplexStream,
    pub(crate) written: oneshot::Receiver<io::Result<()>>,
}

/// Starts the two threads; `who` names the program in their diagnostics.
pub(crate) fn open(who: &'static str) -> io::Result<Pipes> {
    let (stdin_pipe, stdin) = tokio::io::duplex(PIPE_BUFFER);
    let (stdout, stdout_pipe) = tokio::io::duplex(PIPE_BUFFER);
    let (written_tx, written) = oneshot::channel();
    let (rt_in, rt_out) = (Handle::current(), Handle::current());
    let read = move || pump_stdin(&rt_in, stdin_pipe, who);
    let write = move || _ = written_tx.send(pump_stdout(&rt_out, stdout_pipe));
    thread::Builder::new()
        .name(format!("{who}-stdin"))
        .spawn(read)?;
    thread::Builder::new()
        .name(format!("{who}-stdout"))
        .spawn(write)?;
    Ok(Pipes {
        stdin,
        stdout,
        written,
    })
}

fn pump_stdin(runtime: &Handle, mut pipe: DuplexStream, who: &str) {
    let mut buf = vec![0; PIPE_BUFFER];
    loop {
        match io::stdin().read(&mut buf) {
            // EOF, or the reader is gone: dropping `pipe` passes the end along.
            Ok(0) => return,
            Ok(n) if runtime.block_on(pipe.write_all(&buf[..n])).is_err() => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                _ = writeln!(io::stderr(), "sluice {who}: cannot read stdin: {e}");
                return;
            }
        }
    }
}

fn pump_stdout(runtime: &Handle, mut pipe: DuplexStream) -> io::Result<()> {
    let mut buf = vec![0; PIPE_BUFFER];
    let mut stdout = io::stdout();
    loop {
        let n = runtime.block_on(pipe.read(&mut buf))?;
        if n == 0 {
            return Ok(());
        }
        // Flush per chunk: progress is only useful while the work still runs.
        stdout.write_all(&buf[..n])?;
        stdout.flush()?;
    }
}
