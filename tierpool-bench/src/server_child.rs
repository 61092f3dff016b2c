//! A server the report runs as a child of its own binary (`tierpool-bench <subcommand>
//! --addr 127.0.0.1:0 ...`): started, its address read from its first line (`listening on
//! ADDR ...`), its later lines kept, its memory read from `/proc`, stopped with SIGTERM, and
//! killed if dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// A running child server.
#[derive(Debug)]
pub struct ChildServer {
    child: Child,
    /// The address it listens on.
    pub addr: String,
    lines: mpsc::Receiver<String>,
}

impl ChildServer {
    /// Starts this binary's `subcommand` on a free loopback port with `args`.
    pub fn start(subcommand: &str, args: &[&str]) -> Result<ChildServer, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let mut child = Command::new(&exe)
            .args([subcommand, "--addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {} {subcommand}: {e}", exe.display()))?;
        let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut first = String::new();
        out.read_line(&mut first).map_err(|e| e.to_string())?;
        let addr = first
            .strip_prefix("listening on ")
            .and_then(|r| r.split_whitespace().next())
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
        Ok(ChildServer { child, addr, lines })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The lines it printed after the first, in order.
    pub fn lines(&self) -> &mpsc::Receiver<String> {
        &self.lines
    }

    /// Its resident set now, in bytes.
    pub fn rss(&self) -> u64 {
        crate::workloads::process_rss(self.pid())
    }

    /// The most it was ever resident, in bytes (`VmHWM`).
    pub fn peak_rss(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .map_or(0, |kb| kb * 1024)
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
