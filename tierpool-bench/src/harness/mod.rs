//! How a workload is run and measured: the counting, switchable global allocator, calibrated
//! samples, child processes (a workload's, and a server's), `/proc`, the open-file limit,
//! progress, a workload's declared strategies, the records a run produces, and the SVG
//! charts the workloads draw. Nothing here knows a workload.

pub mod alloc;
pub mod measure;
pub mod procfs;
pub mod nofile;
pub mod progress;
pub mod choice;
pub mod record;
pub mod children;
pub mod server_child;
pub mod chart;
