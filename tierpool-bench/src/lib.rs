//! The tierpool comparison report: tierpool against the allocators and pool crates a Rust user
//! would otherwise pick, on workloads that mirror the four seed pull requests.
//!
//! `cargo run --release -p tierpool-bench` runs every workload against every contender and
//! prints one Markdown table per workload; it also writes `target/tierpool-report/results.json`
//! (one record per measurement), `report.md`, one SVG chart per workload and `index.html` (the
//! report as one page). See `--help` and `README.md`.
//!
//! Layout, one folder per part, each using only the ones above it:
//! - [`harness`]: how a workload runs and is measured: the global allocator (glibc, mimalloc
//!   or jemalloc per process) with an allocation counter ([`harness::alloc`]), calibrated,
//!   interleaved samples ([`harness::measure`]), the child processes the report starts
//!   ([`harness::children`]) and the servers it runs ([`harness::server_child`]), the one
//!   reader of `/proc` ([`harness::procfs`]), the open-file limit, progress bars, a
//!   workload's strategies declared once ([`choices!`]), the records of a run and
//!   `results.json` ([`harness::record`]), the SVG charts ([`harness::chart`]);
//! - [`contenders`]: every contender behind one `get(n)` interface;
//! - [`fixtures`]: the servers and clients measured: the loopback streaming server and
//!   client ([`fixtures::streaming`]), grpc's benchmark service on tonic, stock and pooled
//!   ([`fixtures::grpc`], the `grpc_server` binary), a Redis-protocol server on tokio-util's
//!   framing or tierpool's ([`fixtures::kv`], the `kv_server` binary), and tierpool-axum's
//!   `upload_server` example itself ([`fixtures::upload_server`], its source compiled in);
//! - [`workloads`]: one file per workload, each with its [`workloads::Scenario`], and the
//!   registry in report order ([`workloads::Workload::ALL`]);
//! - [`report`]: what a run writes: the tables, the verdict, `report.md` and the charts,
//!   `index.html`.
//!
//! The library half exists so that the criterion benches in `tierpool-bench/benches/` use the same
//! contenders as the report.

#![warn(missing_docs, missing_debug_implementations)]

pub mod harness;
pub mod contenders;
pub mod fixtures;
pub mod workloads;
pub mod report;

/// Every binary, bench and test of this crate runs under the switchable, counting allocator.
#[global_allocator]
static GLOBAL: harness::alloc::BenchAlloc = harness::alloc::BenchAlloc;
