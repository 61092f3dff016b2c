//! A server the report runs as a child of its own binary (`tierpool-bench <subcommand>
//! --addr 127.0.0.1:0 ...`): started, its address read from its first line (`... listening on
//! ADDR ...`), its later lines kept, its standard error passed on (panics counted), its memory
//! read from `/proc`, stopped with SIGTERM, and killed if dropped.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::harness::procfs::Proc;

/// A running child server.
#[derive(Debug)]
pub struct ChildServer {
    child: Child,
    /// The address it listens on.
    pub addr: String,
    /// Its later lines (behind a lock so that a server may be shared with a sampling thread).
    lines: Mutex<mpsc::Receiver<String>>,
    /// Panics it reported on its standard error (a task that panicked: tokio reports it there
    /// and goes on).
    panics: Arc<AtomicUsize>,
}

impl ChildServer {
    /// Starts this binary's `subcommand` on a free loopback port with `args`.
    pub fn start<S: AsRef<OsStr>>(subcommand: &str, args: &[S]) -> Result<ChildServer, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let mut child = Command::new(&exe)
            .args([subcommand, "--addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {} {subcommand}: {e}", exe.display()))?;
        let panics = Arc::new(AtomicUsize::new(0));
        let err = BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let seen = Arc::clone(&panics);
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                if line.contains("panicked") {
                    seen.fetch_add(1, Ordering::Relaxed);
                }
                eprintln!("{line}");
            }
        });
        let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut first = String::new();
        out.read_line(&mut first).map_err(|e| e.to_string())?;
        let addr = first
            .split_once("listening on ")
            .and_then(|(_, r)| r.split_whitespace().next())
            .ok_or_else(|| format!("{subcommand} said {first:?}"))?
            .to_string();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(ChildServer {
            child,
            addr,
            lines: Mutex::new(lines),
            panics,
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(0)
    }

    /// Panics it has reported so far.
    pub fn panics(&self) -> usize {
        self.panics.load(Ordering::Relaxed)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line it prints after the first, waiting up to `timeout`; `None` if it printed
    /// none in that time, or has gone.
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.recv_timeout(timeout).ok()
    }

    /// Its resident set now, in bytes.
    pub fn rss(&self) -> u64 {
        Proc::Pid(self.pid()).rss()
    }

    /// The most it was ever resident, in bytes (`VmHWM`).
    pub fn peak_rss(&self) -> u64 {
        Proc::Pid(self.pid()).peak_rss()
    }

    /// Stops it with SIGTERM and waits; an error if it then fails.
    pub fn stop(mut self) -> Result<(), String> {
        // SAFETY: `kill` with a pid of ours and a signal number.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let status = self.child.wait().map_err(|e| e.to_string())?;
        if !status.success() && status.code().is_some() {
            return Err(format!("the server exited with {status}"));
        }
        Ok(())
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
