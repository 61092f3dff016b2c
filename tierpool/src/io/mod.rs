//! Reading and writing with pooled buffers: messages that span several buffers
//! ([`PooledChain`](crate::PooledChain)), readiness-first reads that take a buffer only when
//! data has arrived ([`read_ready`], feature `tokio`), length-prefixed frames ([`frame`],
//! feature `tokio`) and io_uring provided-buffer rings ([`buf_ring`], feature `buf-ring`).
//!
//! (Layer 6 of the crate: imports the pools and buffers below it.)

#[cfg(feature = "tokio")]
pub(crate) mod read_buf;
pub(crate) mod chain;
#[cfg(feature = "tokio")]
mod ready;
#[cfg(feature = "tokio-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-util")))]
pub mod codec;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod frame;
#[cfg(all(feature = "buf-ring", target_os = "linux", not(loom)))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "buf-ring", target_os = "linux"))))]
pub mod buf_ring;

#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use read_buf::ReadBuffer;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use ready::{read_ready, read_ready_exact, ReadReady};
