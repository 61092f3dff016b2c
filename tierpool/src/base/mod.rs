//! Layer 0, what every other layer uses: the switch between `std` and loom's atomics and
//! locks (`sync.rs`), and the two words a buffer carries instead of a pointer, its pool's key
//! and its tag (`key.rs`). Imports nothing of the crate.

pub(crate) mod sync;
pub(crate) mod key;
