//! The data files of the file workloads (`file-read`, `direct-read`): where each lives, and
//! how it is written. The parent makes a file, its children read it, the parent removes it.
//! Every error names the path it is about.

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use tierpool::AlignedPool;

/// The file of workload `workload` of `size` bytes in `dir`.
pub fn data_path(dir: &Path, workload: &str, size: usize) -> PathBuf {
    dir.join(format!("tierpool-{workload}-{}MiB.bin", size >> 20))
}

/// Creates the directory `path` goes in, if it is missing.
pub fn create_dir_for(path: &Path) -> Result<(), String> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the directory {}: {e}", dir.display())),
        _ => Ok(()),
    }
}

/// Creates (or empties) the file at `path`, its directory first.
pub fn create_empty(path: &Path) -> Result<(), String> {
    create_dir_for(path)?;
    std::fs::write(path, b"").map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// How [`make_file`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writes {
    /// Through the page cache (the file stays there for the readers).
    Buffered,
    /// With `O_DIRECT`, from buffers of this alignment, and synced.
    Direct(usize),
}

/// Bytes per write.
const BLOCK: usize = 1 << 20;

/// Makes the file at `path` (its directory first): `size` bytes, written in 1 MiB blocks,
/// each filled by `fill(offset, block)`.
pub fn make_file(
    path: &Path,
    size: usize,
    writes: Writes,
    fill: impl Fn(usize, &mut [u8]),
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    create_empty(path)?;
    let mut options = OpenOptions::new();
    options.write(true);
    match writes {
        Writes::Buffered => {
            let file = options.open(path).map_err(err)?;
            write_blocks(&file, size, &mut vec![0; BLOCK], &fill).map_err(err)
        }
        Writes::Direct(align) => {
            let file = options
                .custom_flags(libc::O_DIRECT)
                .open(path)
                .map_err(err)?;
            let pool = AlignedPool::with_alignment(align)
                .map_err(|e| format!("{}: alignment {align}: {e}", path.display()))?;
            let mut buf = pool.get(BLOCK);
            buf.resize(BLOCK, 0);
            write_blocks(&file, size, &mut buf, &fill).map_err(err)?;
            file.sync_all().map_err(err)
        }
    }
}

fn write_blocks(
    file: &std::fs::File,
    size: usize,
    buf: &mut [u8],
    fill: &impl Fn(usize, &mut [u8]),
) -> std::io::Result<()> {
    for pos in (0..size).step_by(BLOCK) {
        let block = &mut buf[..BLOCK.min(size - pos)];
        fill(pos, block);
        file.write_all_at(block, pos as u64)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_created_and_errors_name_the_path() {
        let dir = std::env::temp_dir().join(format!("tierpool-files-{}", std::process::id()));
        let path = data_path(&dir.join("a/b"), "test", 2 << 20);
        assert!(path.ends_with("a/b/tierpool-test-2MiB.bin"));
        make_file(&path, (2 << 20) + 10, Writes::Buffered, |pos, b| {
            b.iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = (pos + i) as u8)
        })
        .unwrap();
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), (2 << 20) + 10);
        assert!(data.iter().enumerate().all(|(i, &x)| x == i as u8));
        std::fs::remove_dir_all(&dir).unwrap();

        // A directory that cannot be made (a file is in the way): the message names it.
        let blocker = std::env::temp_dir().join(format!("tierpool-files-{}-f", std::process::id()));
        std::fs::write(&blocker, b"").unwrap();
        let e = create_empty(&blocker.join("x/y.bin")).unwrap_err();
        assert!(e.contains(&blocker.join("x").display().to_string()), "{e}");
        std::fs::remove_file(&blocker).unwrap();
    }
}
