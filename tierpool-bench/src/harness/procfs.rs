//! The report's one reader of `/proc`: a process's resident set, its peak, its CPU time and
//! its minor page faults, for this process or another (a server run as a child). Every figure
//! is 0 where the file does not exist (the process is gone, or not Linux).

use std::io::Read;
use std::time::Duration;

/// Which process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proc {
    /// This process (read without allocating: sampling memory must not move the heap it
    /// measures).
    Me,
    /// Another one, by its id.
    Pid(u32),
}

impl Proc {
    /// The first bytes of `/proc/<this>/<file>` into `buf`; how many.
    fn read(self, file: &str, buf: &mut [u8]) -> usize {
        let opened = match self {
            Proc::Me => match file {
                "statm" => std::fs::File::open("/proc/self/statm"),
                "stat" => std::fs::File::open("/proc/self/stat"),
                "status" => std::fs::File::open("/proc/self/status"),
                _ => std::fs::File::open(format!("/proc/self/{file}")),
            },
            Proc::Pid(pid) => std::fs::File::open(format!("/proc/{pid}/{file}")),
        };
        let Ok(mut f) = opened else { return 0 };
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        n
    }

    /// The resident set in bytes (`statm`'s second field, 4 KiB pages).
    pub fn rss(self) -> u64 {
        let mut buf = [0u8; 128];
        let n = self.read("statm", &mut buf);
        buf[..n]
            .split(|&b| b == b' ')
            .nth(1)
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map_or(0, |pages| pages * 4096)
    }

    /// The most it was ever resident, in bytes (`status`' `VmHWM`).
    pub fn peak_rss(self) -> u64 {
        let mut buf = [0u8; 4096];
        let n = self.read("status", &mut buf);
        std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .map_or(0, |kb| kb * 1024)
    }

    /// Field `i` of `stat` (numbered from 1, as `proc(5)` does).
    fn stat_field(self, i: usize) -> u64 {
        let mut buf = [0u8; 1024];
        let n = self.read("stat", &mut buf);
        let stat = std::str::from_utf8(&buf[..n]).unwrap_or("");
        // The command name (field 2) is in parentheses and may hold spaces: count from after
        // it (field 3 first).
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(i - 3))
            .and_then(|x| x.parse().ok())
            .unwrap_or(0)
    }

    /// Minor page faults so far (`stat` field 10).
    pub fn minor_faults(self) -> u64 {
        self.stat_field(10)
    }

    /// CPU time so far, user and system (`stat` fields 14 and 15).
    pub fn cpu(self) -> Duration {
        let ticks = self.stat_field(14) + self.stat_field(15);
        // SAFETY: `sysconf` reads a constant.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_nanos(ticks * 1_000_000_000 / hz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_the_same_as_itself_by_its_id() {
        let me = Proc::Me;
        let pid = Proc::Pid(std::process::id());
        // Other tests run beside this one: the resident set may grow between two reads, the
        // peak only ever grows, so the peak read second is at least the resident set read
        // first.
        let rss = me.rss();
        assert!(rss > 0 && me.peak_rss() >= rss);
        let rss = pid.rss();
        assert!(rss > 0 && pid.peak_rss() >= rss);
        // Busy until the clock's tick counts this process's time (at most 2 s).
        let start = std::time::Instant::now();
        while me.cpu() == Duration::ZERO && start.elapsed() < Duration::from_secs(2) {
            std::hint::black_box((0..10_000u64).sum::<u64>());
        }
        let cpu = pid.cpu();
        assert!(cpu > Duration::ZERO && cpu <= me.cpu());
        assert_eq!(Proc::Pid(u32::MAX).rss(), 0);
    }
}
