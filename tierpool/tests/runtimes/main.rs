//! The completion runtimes' bridges on a real io_uring (compio, monoio, tokio-uring), the
//! provided-buffer ring, and direct I/O through each runtime.
//!
//! One test binary: the modules share the helpers that say when the kernel refuses io_uring
//! or a filesystem refuses `O_DIRECT`.

#[path = "../common/mod.rs"]
mod common;

mod buf_ring;
mod compio;
mod direct_io;
mod monoio;
mod tokio_uring;
