//! The tierpool comparison report: tierpool against the allocators and pool crates a Rust user
//! would otherwise pick, on workloads that mirror the four seed pull requests.
//!
//! `cargo run --release -p tierpool-bench` runs every workload against every contender and
//! prints one Markdown table per workload; it also writes `target/tierpool-report/results.json`
//! (one record per measurement), `report.md`, one SVG chart per workload and `index.html` (the
//! report as one page). See `--help` and `README.md`.
//!
//! Layout:
//! - [`alloc`]: the global allocator (glibc, mimalloc or jemalloc per process) with an
//!   allocation counter, and RSS;
//! - [`contenders`]: every contender behind one `get(n)` interface;
//! - [`measure`]: calibrated, interleaved samples and their median/min/max;
//! - [`workloads`]: one module per workload, each with its [`workloads::Scenario`], and the
//!   list of them in report order ([`workloads::Workload::ALL`]);
//! - [`choice`]: a workload's strategies, declared once ([`choices!`]);
//! - [`children`]: the child processes the report starts;
//! - [`report`]: records, tables, `results.json` and its validation;
//! - [`render`]: a report's Markdown (`report.md`, or a document's marked section) and charts;
//! - [`page`]: the report as one HTML page (`index.html`);
//! - [`chart`]: the SVG charts;
//! - [`progress`]: the run's progress bars (indicatif), or plain lines off a terminal;
//! - [`streaming`]: the loopback streaming server and client (the `streaming` workload and the
//!   `echo_server` / `echo_client` examples);
//! - [`grpc`]: grpc's benchmark service on tonic, stock and pooled (the `grpc_server` binary);
//! - [`kv`]: a Redis-protocol server, tokio-util's framing or tierpool's (the `kv_server`
//!   binary);
//! - [`upload_server`]: tierpool-axum's `upload_server` example itself (its source, compiled
//!   in), which the `uploads` workload runs as `tierpool-bench upload-server`;
//! - [`server_child`]: a server run as a child of this binary;
//! - [`procfs`]: the one reader of `/proc` (a process's memory, CPU time, page faults);
//! - [`nofile`]: the open-file limit, raised for many connections.
//!
//! The library half exists so that the criterion benches in `tierpool-bench/benches/` use the same
//! contenders as the report.

#![warn(missing_docs, missing_debug_implementations)]

pub mod alloc;
pub mod chart;
pub mod children;
pub mod choice;
pub mod contenders;
pub mod grpc;
pub mod kv;
pub mod measure;
pub mod nofile;
pub mod page;
pub mod procfs;
pub mod progress;
pub mod render;
pub mod report;
pub mod server_child;
pub mod streaming;
/// tierpool-axum's `upload_server` example, compiled into the report from its source so that
/// the `uploads` workload runs the program a user copies (`run` is its command line).
#[path = "../../tierpool-axum/examples/upload_server.rs"]
#[allow(dead_code, missing_docs)] // its `main`, and an example's docs
pub mod upload_server;
pub mod verdict;
pub mod workloads;

/// Every binary, bench and test of this crate runs under the switchable, counting allocator.
#[global_allocator]
static GLOBAL: alloc::BenchAlloc = alloc::BenchAlloc;
