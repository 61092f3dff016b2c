//! What direct I/O on a file needs (Linux): [`direct_io_alignment`].

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The alignments `O_DIRECT` I/O on a file needs, from [`direct_io_alignment`].
///
/// A read or write with `O_DIRECT` needs its buffer's address to be a multiple of
/// [`memory`](Self::memory), and its file offset and length multiples of
/// [`offset`](Self::offset); otherwise the kernel refuses it with `EINVAL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirectIoAlignment {
    /// The alignment of a buffer's address, in bytes.
    pub memory: usize,
    /// The alignment of file offsets and lengths, in bytes.
    pub offset: usize,
    /// Where the figures came from.
    pub source: AlignmentSource,
}

/// Where [`DirectIoAlignment`]'s figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AlignmentSource {
    /// The kernel's `statx` with `STATX_DIOALIGN` (Linux 6.1 and later, on filesystems that
    /// report it).
    Statx,
    /// The device's logical block size (`/sys/dev/block/<dev>/queue/logical_block_size`), for
    /// both the address and the offsets: where `statx` does not report them.
    LogicalBlockSize,
    /// The filesystem's block size (`statfs`), or 4 KiB where that is implausible: for a
    /// filesystem with no single block device behind it (btrfs, ZFS, overlays, network
    /// filesystems) where `statx` does not report the alignment.
    FilesystemBlockSize,
}

impl DirectIoAlignment {
    /// The alignment for an [`AlignedPool`](crate::AlignedPool) whose buffers serve this file:
    /// the larger of the two, so that a buffer's address and its capacity (a whole number of
    /// blocks) both fit.
    ///
    /// ```no_run
    /// let dio = tierpool::direct_io_alignment("/var/lib/db/data.0")?;
    /// let pool = tierpool::AlignedPool::with_alignment(dio.pool_alignment())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pool_alignment(&self) -> usize {
        self.memory.max(self.offset)
    }
}

/// Why [`direct_io_alignment`] could not tell a file's alignment.
#[derive(Debug)]
#[non_exhaustive]
pub enum DirectIoError {
    /// The file's filesystem does not do direct I/O: opening it with `O_DIRECT` failed with
    /// `EINVAL`, or `statx` reports it has none, or it is tmpfs (which Linux 6.6 and later
    /// open with `O_DIRECT`, but which is the page cache itself: nothing to bypass).
    Unsupported {
        /// The file asked about.
        path: PathBuf,
    },
    /// Not a regular file or a block device (a directory, say): direct I/O applies to files;
    /// create the file first and ask about it.
    NotAFile {
        /// The path asked about.
        path: PathBuf,
    },
    /// The file could not be opened or examined.
    Io {
        /// The file asked about.
        path: PathBuf,
        /// What the system reported.
        source: io::Error,
    },
}

impl fmt::Display for DirectIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectIoError::Unsupported { path } => write!(
                f,
                "{}: its filesystem does not support direct I/O (O_DIRECT)",
                path.display()
            ),
            DirectIoError::NotAFile { path } => write!(
                f,
                "{}: not a regular file or block device, so it has no direct I/O alignment",
                path.display()
            ),
            DirectIoError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for DirectIoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DirectIoError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The alignment `O_DIRECT` reads and writes of the file at `path` need (Linux): from
/// `statx(STATX_DIOALIGN)` where the kernel reports it (6.1 and later), else the device's
/// logical block size, else (no single device behind the filesystem) its block size.
///
/// The file is opened (for reading) with `O_DIRECT` first, which is how older kernels tell a
/// filesystem without direct I/O: they refuse the open. Newer ones accept it on tmpfs, which
/// is told by its `statfs` type and reported as unsupported too.
///
/// # Errors
/// [`DirectIoError::Unsupported`] where the filesystem has no direct I/O (tmpfs),
/// [`DirectIoError::NotAFile`] for a directory or another special file, and
/// [`DirectIoError::Io`] if the file cannot be opened for reading (it does not exist, no
/// permission) or examined.
///
/// ```no_run
/// match tierpool::direct_io_alignment("/dev/shm/file") {
///     Err(tierpool::DirectIoError::Unsupported { .. }) => {} // tmpfs: buffered I/O only
///     other => panic!("{other:?}"),
/// }
/// ```
pub fn direct_io_alignment(path: impl AsRef<Path>) -> Result<DirectIoAlignment, DirectIoError> {
    let path = path.as_ref();
    let io_err = |source: io::Error| DirectIoError::Io {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io_err)?;
    let kind = meta.file_type();
    use std::os::unix::fs::FileTypeExt;
    if !kind.is_file() && !kind.is_block_device() {
        return Err(DirectIoError::NotAFile {
            path: path.to_owned(),
        });
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return Err(DirectIoError::Unsupported {
                path: path.to_owned(),
            })
        }
        Err(e) => return Err(io_err(e)),
    }
    let sx = statx_dio(path).map_err(io_err)?;
    if sx.stx_mask & libc::STATX_DIOALIGN != 0 {
        if sx.stx_dio_offset_align == 0 {
            return Err(DirectIoError::Unsupported {
                path: path.to_owned(),
            });
        }
        return Ok(DirectIoAlignment {
            memory: sx.stx_dio_mem_align as usize,
            offset: sx.stx_dio_offset_align as usize,
            source: AlignmentSource::Statx,
        });
    }
    match guessed_alignment(path, kind.is_block_device(), &sx) {
        Ok(Some(alignment)) => Ok(alignment),
        Ok(None) => Err(DirectIoError::Unsupported {
            path: path.to_owned(),
        }),
        Err(e) => Err(io_err(e)),
    }
}

/// The alignment of a file or block device whose kernel does not report it (`statx` without
/// `STATX_DIOALIGN`, before Linux 6.1): the device's logical block size where there is a
/// device, else the filesystem's block size. `None` on tmpfs, which has nothing to bypass.
fn guessed_alignment(
    path: &Path,
    block_device: bool,
    sx: &libc::statx,
) -> io::Result<Option<DirectIoAlignment>> {
    let both = |block: usize, source| DirectIoAlignment {
        memory: block,
        offset: block,
        source,
    };
    if block_device {
        // The device itself (its node lives on devtmpfs, whose `statfs` says nothing of it).
        let block = logical_block_size(sx.stx_rdev_major, sx.stx_rdev_minor)?;
        return Ok(Some(both(block, AlignmentSource::LogicalBlockSize)));
    }
    let (major, minor) = (sx.stx_dev_major, sx.stx_dev_minor);
    let fs = statfs(path)?;
    // The field's and the constant's types differ between targets (both hold a small
    // positive magic number).
    #[allow(clippy::unnecessary_cast)]
    if fs.f_type as i64 == libc::TMPFS_MAGIC as i64 {
        // Linux 6.6 and later open tmpfs files with O_DIRECT, but tmpfs is the page cache
        // itself: there is nothing to bypass and no device to align to.
        return Ok(None);
    }
    if major != 0 {
        if let Ok(block) = logical_block_size(major, minor) {
            return Ok(Some(both(block, AlignmentSource::LogicalBlockSize)));
        }
    }
    // An anonymous device number (btrfs, ZFS, overlays, network filesystems) or no sysfs: the
    // filesystem's block size, which such filesystems align direct I/O to (btrfs: its sector
    // size), where it is a plausible power of two; else 4 KiB, which every device accepts.
    let bsize = u64::try_from(fs.f_bsize).unwrap_or(0);
    let block = if bsize.is_power_of_two() && (512..=64 << 10).contains(&bsize) {
        bsize as usize
    } else {
        4096
    };
    Ok(Some(both(block, AlignmentSource::FilesystemBlockSize)))
}

/// `statfs` of `path`: the filesystem's type and block size.
fn statfs(path: &Path) -> io::Result<libc::statfs> {
    let c = c_path(path)?;
    let mut fs = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `fs` writable memory of `statfs`'s size.
    if unsafe { libc::statfs(c.as_ptr(), fs.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zeroed, then filled by a successful `statfs` (a plain C struct of integers).
    Ok(unsafe { fs.assume_init() })
}

/// `path` as a C string.
fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// `statx` of `path` asking for the direct I/O alignment.
fn statx_dio(path: &Path) -> io::Result<libc::statx> {
    let c = c_path(path)?;
    let mut sx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `c` is a NUL-terminated path, `sx` is writable memory of `statx`'s size; the
    // kernel writes the struct or fails.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            0,
            libc::STATX_BASIC_STATS | libc::STATX_DIOALIGN,
            sx.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zeroed, then filled by a successful `statx`: every field is initialized (a
    // plain C struct of integers).
    Ok(unsafe { sx.assume_init() })
}

/// The logical block size of device `major:minor`, from sysfs (a partition's is its disk's).
fn logical_block_size(major: u32, minor: u32) -> io::Result<usize> {
    let dev = format!("/sys/dev/block/{major}:{minor}");
    let read = |p: String| -> io::Result<usize> {
        let s = std::fs::read_to_string(p)?;
        s.trim()
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "unreadable block size"))
    };
    read(format!("{dev}/queue/logical_block_size"))
        .or_else(|_| read(format!("{dev}/../queue/logical_block_size")))
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("no direct I/O alignment from statx, and {dev}: {e}"),
            )
        })
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn directories_and_missing_files_are_clear_errors() {
        let dir = std::env::temp_dir();
        assert!(matches!(
            direct_io_alignment(&dir),
            Err(DirectIoError::NotAFile { .. })
        ));
        let missing = dir.join("tierpool-no-such-file");
        let err = direct_io_alignment(&missing).unwrap_err();
        assert!(
            matches!(&err, DirectIoError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
        );
        assert!(err.to_string().contains("tierpool-no-such-file"));
    }

    #[test]
    fn the_logical_block_size_of_a_real_device_is_a_power_of_two() {
        // The device this test binary lives on, whatever the filesystem.
        let me = std::env::current_exe().unwrap();
        let sx = statx_dio(&me).unwrap();
        match logical_block_size(sx.stx_dev_major, sx.stx_dev_minor) {
            Ok(b) => assert!(b.is_power_of_two() && b >= 512, "{b}"),
            // In CI the tests live on a disk (ext4): there this must work.
            Err(e) if std::env::var_os("TIERPOOL_REQUIRE_DIRECT_IO").is_some() => {
                panic!("no logical block size for the test binary's device: {e}")
            }
            // An overlay, btrfs or a virtual filesystem has no single block device behind it.
            Err(e) => eprintln!("no block device behind the test binary: {e}"),
        }
    }
}
