//! `mixed` (modelled on Vitess's `bucketpool`): a MySQL-like packet reader on 2 threads sharing one
//! pool. Each thread walks its own in-memory stream of `[u32 length][payload]` packets, takes a
//! buffer of the packet's size, copies the payload in, checks its first and last byte, and
//! releases the buffer.
//!
//! A *false hit* is a buffer handed out smaller than the packet: a pool that does that must
//! throw it away and allocate again. The workload checks every buffer's capacity and counts
//! them (the reader then falls back to a fresh `Vec`, so the packet is still read).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use super::{parallel, run_cases, Ctx, MakeCases, Rng};
use crate::contenders::{fill_and_check, Buf, Contender, Kind};
use crate::harness::measure::Case;
use crate::harness::record::Output;

/// Reader threads.
pub const THREADS: usize = 2;

/// A packet-size distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    /// 1..100 B, uniform.
    Short,
    /// 2 KiB..64 KiB, log-uniform.
    Medium,
    /// 1 B..16 MiB, log-uniform.
    Random,
}

impl Dist {
    /// Every distribution.
    pub const ALL: [Dist; 3] = [Dist::Short, Dist::Medium, Dist::Random];

    /// Its label.
    pub fn label(self) -> &'static str {
        match self {
            Dist::Short => "short",
            Dist::Medium => "medium",
            Dist::Random => "random",
        }
    }

    fn sample(self, rng: &mut Rng) -> usize {
        match self {
            Dist::Short => rng.range(1, 99),
            Dist::Medium => rng.log_uniform(2 << 10, 64 << 10),
            Dist::Random => rng.log_uniform(1, 16 << 20),
        }
    }

    /// Packets per thread's stream (it is replayed from the start when exhausted).
    fn packets(self, quick: bool) -> usize {
        match (self, quick) {
            (Dist::Short, false) => 20_000,
            (Dist::Medium, false) => 2_000,
            (Dist::Random, false) => 64,
            (Dist::Short, true) => 200,
            (Dist::Medium, true) => 20,
            (Dist::Random, true) => 4,
        }
    }
}

/// One thread's stream: the bytes and where each packet starts.
#[derive(Debug)]
pub struct Stream {
    data: Vec<u8>,
    starts: Vec<usize>,
}

impl Stream {
    /// A stream of `packets` packets drawn from `dist` with `seed`.
    pub fn new(dist: Dist, packets: usize, seed: u64) -> Stream {
        let mut rng = Rng::new(seed);
        let mut data = Vec::new();
        let mut starts = Vec::with_capacity(packets);
        for i in 0..packets {
            let len = dist.sample(&mut rng);
            starts.push(data.len());
            data.extend_from_slice(&(len as u32).to_le_bytes());
            let fill = (i % 251) as u8;
            data.resize(data.len() + len, fill);
            // Distinct ends, so a check cannot pass on a stale buffer by accident.
            let end = data.len();
            data[end - len] = fill.wrapping_add(1);
            data[end - 1] = fill.wrapping_add(2);
        }
        Stream { data, starts }
    }

    /// The payload of packet `i` (parsed from its header).
    #[inline]
    pub fn packet(&self, i: usize) -> &[u8] {
        let at = self.starts[i % self.starts.len()];
        let len = u32::from_le_bytes(self.data[at..at + 4].try_into().expect("header")) as usize;
        &self.data[at + 4..at + 4 + len]
    }

    /// Packets in the stream.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// True when the stream has no packets.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }
}

/// Reads `count` packets from `stream` starting at packet `from` into buffers from `c`.
/// Returns a checksum; counts buffers smaller than their packet in `false_hits`.
pub fn read_packets<C: Contender>(
    c: &C,
    stream: &Stream,
    from: usize,
    count: u64,
    false_hits: &AtomicU64,
) -> u64 {
    let mut sum = 0u64;
    for i in 0..count as usize {
        let payload = stream.packet(from + i);
        let mut buf = c.get(payload.len());
        if buf.capacity() < payload.len() {
            false_hits.fetch_add(1, Relaxed);
            let mut v = Vec::with_capacity(payload.len());
            sum += u64::from(fill_and_check(&mut v, payload));
            continue;
        }
        sum += u64::from(fill_and_check(&mut buf, payload));
        drop(black_box(buf));
    }
    sum
}

struct Cases {
    streams: Arc<Vec<[Stream; THREADS]>>,
    false_hits: Arc<Vec<AtomicU64>>,
    /// Bytes the pool retained after the last run of each distribution (`u64::MAX`: the
    /// contender cannot say).
    retained: Arc<Vec<AtomicU64>>,
}

impl MakeCases for Cases {
    fn params(&self) -> Vec<String> {
        Dist::ALL.iter().map(|d| d.label().to_string()).collect()
    }

    fn cases<C: Contender>(&self, c: C) -> Vec<Case> {
        (0..Dist::ALL.len())
            .map(|d| {
                let c = c.clone();
                let streams = self.streams.clone();
                let false_hits = self.false_hits.clone();
                let retained = self.retained.clone();
                // One iteration is one pass over each thread's whole stream, so that every
                // sample sees the same mix of packet sizes.
                let packets = streams[d][0].len();
                Case {
                    run: Box::new(move |iters| {
                        let t = parallel(THREADS, |t| {
                            black_box(read_packets(
                                &c,
                                &streams[d][t],
                                0,
                                iters * packets as u64,
                                &false_hits[d],
                            ));
                        });
                        retained[d].store(c.retained_bytes().unwrap_or(u64::MAX), Relaxed);
                        t
                    }),
                    ops_per_iter: (THREADS * packets) as f64,
                }
            })
            .collect()
    }

    fn extra(&self, param: usize) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::from([(
            "false hits".to_string(),
            self.false_hits[param].load(Relaxed) as f64,
        )]);
        let retained = self.retained[param].load(Relaxed);
        if retained != u64::MAX {
            m.insert("retained MiB".into(), retained as f64 / (1 << 20) as f64);
        }
        m
    }
}

/// Runs the workload.
pub fn run(ctx: &Ctx, kinds: &[Kind]) -> Output {
    let streams: Arc<Vec<[Stream; THREADS]>> = Arc::new(
        Dist::ALL
            .iter()
            .enumerate()
            .map(|(d, &dist)| {
                let n = dist.packets(ctx.quick);
                [
                    Stream::new(dist, n, 2 * d as u64 + 1),
                    Stream::new(dist, n, 2 * d as u64 + 2),
                ]
            })
            .collect(),
    );
    run_cases(
        ctx,
        "mixed",
        "ns/packet",
        Duration::from_millis(20),
        kinds,
        || Cases {
            streams: streams.clone(),
            false_hits: Arc::new(Dist::ALL.iter().map(|_| AtomicU64::new(0)).collect()),
            retained: Arc::new(Dist::ALL.iter().map(|_| AtomicU64::new(u64::MAX)).collect()),
        },
    )
}

/// The `mixed` workload.
pub const WORKLOAD: super::OfKinds = super::OfKinds {
    name: "mixed",
    describe: "Modelled on Vitess's bucket pool: a packet reader on 2 threads sharing one pool; packets of short (< 100 B), medium (2-64 KiB) and random (log-uniform to 16 MiB) sizes copied from an in-memory stream into a buffer of the packet's size, checked, released; per packet.",
    weight: 20,
    run,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contenders::PlainVec;

    #[test]
    fn streams_parse_back() {
        for dist in Dist::ALL {
            let s = Stream::new(dist, 50, 7);
            assert_eq!(s.len(), 50);
            for i in 0..120 {
                let p = s.packet(i);
                assert!(!p.is_empty() && p.len() <= 16 << 20);
            }
            let hits = AtomicU64::new(0);
            read_packets(&PlainVec, &s, 3, 100, &hits);
            assert_eq!(hits.load(Relaxed), 0);
        }
    }
}
