//! Layer 7, other crates' traits for tierpool's types, each behind its feature: io_uring
//! runtimes' buffer traits (`compio.rs`, `tokio_uring.rs`, `monoio.rs`) and `http_body::Body`
//! (`http_body.rs`). Nothing in the crate imports this folder.

#[cfg(feature = "compio")]
mod compio;
#[cfg(all(feature = "tokio-uring", target_os = "linux"))]
mod tokio_uring;
#[cfg(all(feature = "monoio", target_os = "linux"))]
mod monoio;
#[cfg(feature = "http-body")]
pub(crate) mod http_body;
