//! The traits every buffer handle has because it holds bytes: `AsRef<[u8]>`, `Borrow<[u8]>`,
//! and comparison, ordering and hashing by contents (like `Vec<u8>` and `Bytes`), written
//! once for [`PooledBuf`](crate::PooledBuf), [`PooledBytes`](crate::PooledBytes) and
//! [`AlignedBuf`](crate::AlignedBuf). A handle gets them by dereferencing to its bytes
//! (`&self[..]`); `Hash` agrees with `Borrow<[u8]>`, so a handle can key a map looked up by
//! `&[u8]`.

/// Implements the content traits for `$t`, which must index as `[u8]` (`self[..]`).
macro_rules! bytes_like {
    ($t:ty) => {
        impl AsRef<[u8]> for $t {
            #[inline]
            fn as_ref(&self) -> &[u8] {
                &self[..]
            }
        }

        impl std::borrow::Borrow<[u8]> for $t {
            #[inline]
            fn borrow(&self) -> &[u8] {
                &self[..]
            }
        }

        impl PartialEq for $t {
            /// Compares the contents, not the pools.
            fn eq(&self, other: &Self) -> bool {
                self[..] == other[..]
            }
        }

        impl Eq for $t {}

        impl PartialEq<[u8]> for $t {
            fn eq(&self, other: &[u8]) -> bool {
                self[..] == *other
            }
        }

        impl PartialEq<&[u8]> for $t {
            fn eq(&self, other: &&[u8]) -> bool {
                self[..] == **other
            }
        }

        impl PartialEq<Vec<u8>> for $t {
            fn eq(&self, other: &Vec<u8>) -> bool {
                self[..] == other[..]
            }
        }

        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $t {
            /// Orders by contents, lexicographically.
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self[..].cmp(&other[..])
            }
        }

        impl std::hash::Hash for $t {
            /// Hashes the contents like `[u8]`, so that it agrees with `Borrow<[u8]>`.
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self[..].hash(state);
            }
        }
    };
}
