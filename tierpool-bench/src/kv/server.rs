//! What the server shares between connections, and the commands it answers.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

use super::resp::Reply;
use super::{Framing, Mode};
use crate::procfs::Proc;

/// The keys and values, the pool and the counts every connection shares.
pub(super) struct Server {
    pub(super) db: Mutex<HashMap<Bytes, Bytes>>,
    pub(super) mode: Mode,
    pub(super) framing: Framing,
    pub(super) pool: tierpool::BufferPool,
    pub(super) connections: AtomicUsize,
}

impl Server {
    /// The reply to one command, as Redis gives it.
    pub(super) fn execute(&self, args: &[Bytes]) -> Reply {
        let Some(name) = args.first() else {
            return Reply::Error("ERR empty command".into());
        };
        let name = name.to_ascii_lowercase();
        let arity = |n: usize| args.len() == n;
        let wrong = || {
            Reply::Error(format!(
                "ERR wrong number of arguments for '{}' command",
                String::from_utf8_lossy(&name)
            ))
        };
        match &name[..] {
            b"ping" => match args.len() {
                1 => Reply::Simple("PONG"),
                2 => Reply::Bulk(Some(args[1].clone())),
                _ => wrong(),
            },
            b"get" if arity(2) => Reply::Bulk(self.db().get(&args[1]).cloned()),
            b"set" if arity(3) => {
                self.db().insert(args[1].clone(), args[2].clone());
                Reply::Simple("OK")
            }
            b"del" if args.len() >= 2 => {
                let mut db = self.db();
                let n = args[1..].iter().filter(|k| db.remove(*k).is_some()).count();
                Reply::Integer(n as i64)
            }
            b"config" if args.len() == 3 && args[1].eq_ignore_ascii_case(b"get") => {
                config_get(&args[2])
            }
            b"info" => Reply::Bulk(Some(Bytes::from(self.info()))),
            b"get" | b"set" | b"del" | b"config" => wrong(),
            _ => {
                let mut e = format!(
                    "ERR unknown command '{}', with args beginning with:",
                    String::from_utf8_lossy(&args[0])
                );
                for a in args.iter().skip(1).take(8) {
                    let _ = write!(e, " '{}'", String::from_utf8_lossy(a));
                }
                Reply::Error(e)
            }
        }
    }

    /// The keys, locked (a panic while it was held leaves the map as it was: nothing is half
    /// done in it).
    fn db(&self) -> std::sync::MutexGuard<'_, HashMap<Bytes, Bytes>> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `INFO`: the mode, the connections, the process's RSS and, pooled, what the pool holds.
    fn info(&self) -> String {
        let stats = self.pool.stats();
        let fields = [
            (
                "connected_clients",
                self.connections.load(Ordering::Relaxed) as u64,
            ),
            ("keys", self.db().len() as u64),
            ("rss_bytes", Proc::Me.rss()),
            (
                "pool_in_use_bytes",
                stats.budget.as_ref().map_or(0, |b| b.in_use_bytes as u64),
            ),
            ("pool_retained_bytes", stats.retained_bytes as u64),
            // What the pool may hold at most: in use (the budget) and kept for reuse.
            (
                "pool_max_in_use_bytes",
                self.pool.max_in_use_bytes().unwrap_or(0) as u64,
            ),
            (
                "pool_max_retained_bytes",
                self.pool.max_retained_bytes() as u64,
            ),
        ];
        let mut s = format!("# kv_server\r\nmode:{:?}\r\n", self.mode);
        for (name, value) in fields {
            let _ = write!(s, "{name}:{value}\r\n");
        }
        s
    }
}

/// `CONFIG GET`, which `redis-benchmark` sends first: the two settings it asks for.
fn config_get(name: &Bytes) -> Reply {
    let value = match &name.to_ascii_lowercase()[..] {
        b"save" => Some(""),
        b"appendonly" => Some("no"),
        _ => None,
    };
    Reply::Array(match value {
        Some(v) => vec![
            Reply::Bulk(Some(name.clone())),
            Reply::Bulk(Some(Bytes::from(v))),
        ],
        None => vec![],
    })
}
