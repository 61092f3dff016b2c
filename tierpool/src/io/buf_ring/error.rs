//! Why a provided-buffer ring could not be made ([`BufRingError`]) or a receive failed
//! ([`RecvError`]).

use std::fmt;
use std::io;

use crate::sys::uring::{unsupported, MAX_ENTRIES};

/// Why a ring could not be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum BufRingError {
    /// The kernel has no provided-buffer rings (before Linux 5.19), or not the incremental
    /// consumption that was [`Required`](crate::io::buf_ring::Incremental::Required) (before 6.12).
    Unsupported {
        /// What is missing, and since when Linux has it.
        feature: &'static str,
        /// The kernel's answer.
        source: io::Error,
    },
    /// Another ring of this io_uring instance has this buffer group.
    GroupInUse {
        /// The group asked for.
        group: u16,
    },
    /// `entries` is not a power of two from 1 to [`MAX_ENTRIES`](crate::io::buf_ring::MAX_ENTRIES).
    InvalidEntries {
        /// The number asked for.
        entries: u32,
    },
    /// `buf_size` is 0, or above `u32::MAX` (an entry's length is 32 bits).
    InvalidBufSize {
        /// The size asked for.
        size: usize,
    },
    /// The descriptor given to [`build`](crate::io::buf_ring::BufRingBuilder::build) is not an io_uring
    /// instance's (the kernel said `EOPNOTSUPP`).
    NotIoUring,
    /// The system refused something else (duplicating the descriptor, registering).
    Io(io::Error),
}

impl fmt::Display for BufRingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufRingError::Unsupported { feature, source } => {
                write!(f, "this kernel has no {feature} ({source})")
            }
            BufRingError::GroupInUse { group } => write!(
                f,
                "buffer group {group} is already registered with this io_uring instance"
            ),
            BufRingError::InvalidEntries { entries } => write!(
                f,
                "a buffer ring has a power of two of entries from 1 to {MAX_ENTRIES}, not {entries}"
            ),
            BufRingError::InvalidBufSize { size } => write!(
                f,
                "a ring buffer's size is from 1 to {} bytes, not {size}",
                u32::MAX
            ),
            BufRingError::NotIoUring => {
                write!(f, "the descriptor is not an io_uring instance's")
            }
            BufRingError::Io(e) => write!(f, "registering the buffer ring: {e}"),
        }
    }
}

impl std::error::Error for BufRingError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BufRingError::Unsupported { source, .. } | BufRingError::Io(source) => Some(source),
            _ => None,
        }
    }
}

/// Why a completion carries no bytes.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecvError {
    /// The ring had no buffer (`ENOBUFS`): arm the receive again once
    /// [`replenish`](crate::io::buf_ring::BufRing::replenish) has put buffers back (under a budget, once buffers
    /// handed out have been dropped).
    Dry,
    /// The completion names a buffer this ring has not lent (or more bytes than it holds), or
    /// carries data without a buffer: it is not from a receive of this ring (a check that
    /// catches some mistakes, not all: see [`BufRing::complete`](crate::io::buf_ring::BufRing::complete)'s safety section).
    NotFromRing {
        /// The buffer id the completion named, if any.
        bid: Option<u16>,
    },
    /// The receive failed.
    Io(io::Error),
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Dry => write!(f, "the buffer ring ran dry (ENOBUFS)"),
            RecvError::NotFromRing { bid: Some(bid) } => {
                write!(
                    f,
                    "the completion names buffer {bid}, which this ring did not lend"
                )
            }
            RecvError::NotFromRing { bid: None } => {
                write!(
                    f,
                    "the completion carries data but selected no buffer of this ring"
                )
            }
            RecvError::Io(e) => write!(f, "receive failed: {e}"),
        }
    }
}

impl std::error::Error for RecvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecvError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<RecvError> for io::Error {
    fn from(e: RecvError) -> io::Error {
        match e {
            RecvError::Io(e) => e,
            RecvError::Dry => io::Error::from_raw_os_error(libc::ENOBUFS),
            other => io::Error::new(io::ErrorKind::InvalidData, other),
        }
    }
}

/// What a refused registration of `group` means; `feature` names what was asked for.
pub(crate) fn register_error(e: io::Error, group: u16, feature: &'static str) -> BufRingError {
    match e.raw_os_error() {
        Some(libc::EEXIST) => BufRingError::GroupInUse { group },
        Some(libc::EOPNOTSUPP) => BufRingError::NotIoUring,
        _ if unsupported(&e) => BufRingError::Unsupported { feature, source: e },
        _ => BufRingError::Io(e),
    }
}
