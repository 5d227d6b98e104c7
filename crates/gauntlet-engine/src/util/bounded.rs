//! The one reader of files gauntlet did not write in this process (store records, bundles, shards, quality sets):
//! it opens without following a final symlink and without blocking (so a FIFO cannot hang it), reads only a
//! regular file (never a device such as `/dev/zero`, a FIFO or a socket), and never reads past a cap chosen per
//! kind of file. It never panics on what it finds.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// A store's `format.json`, a skip record, a `reused.json`: a few lines.
pub const SMALL_CAP: u64 = 1 << 20;
/// A run record, a bench record, a stage file of a bundle, a history file, a monitor log.
pub const RECORD_CAP: u64 = 256 << 20;
/// An evidence file that is only hashed (streamed, never held): a server log, a copied corpus.
pub const EVIDENCE_CAP: u64 = 4 << 30;

/// Why an untrusted file was not read.
#[derive(Debug)]
pub enum ReadError {
    NotFound,
    /// The final path component is a symbolic link (refused, not followed).
    Symlink,
    /// A FIFO, a device, a socket or a directory: only regular files are read.
    NotRegular(&'static str),
    TooLarge {
        cap: u64,
    },
    NotUtf8 {
        at: usize,
    },
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotFound => write!(f, "no such file"),
            ReadError::Symlink => write!(f, "is a symbolic link (refused: only regular files are read)"),
            ReadError::NotRegular(kind) => write!(f, "is a {kind}, not a regular file (refused)"),
            ReadError::TooLarge { cap } => write!(f, "larger than the {} limit (refused)", size(*cap)),
            ReadError::NotUtf8 { at } => write!(f, "not UTF-8 text (byte {at})"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl ReadError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::NotFound)
    }
}

fn size(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// Opens `path` for reading if it is a regular file that is not a symlink; its size with it.
pub fn open_regular(path: &Path) -> Result<(File, u64), ReadError> {
    open(path, libc::O_NOFOLLOW)
}

fn open(path: &Path, follow: i32) -> Result<(File, u64), ReadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(follow | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => ReadError::Symlink,
            _ if e.kind() == std::io::ErrorKind::NotFound => ReadError::NotFound,
            _ => ReadError::Io(e),
        })?;
    // fstat on the opened descriptor: what was checked is what is read.
    let meta = file.metadata().map_err(ReadError::Io)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let what = if kind.is_dir() {
            "directory"
        } else if kind.is_fifo() {
            "FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "device"
        } else if kind.is_socket() {
            "socket"
        } else {
            "special file"
        };
        return Err(ReadError::NotRegular(what));
    }
    Ok((file, meta.len()))
}

/// The bytes of a regular file of at most `cap` bytes.
pub fn read_bytes(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let (file, len) = open_regular(path)?;
    read_capped(file, len, cap)
}

/// An opened file of `len` bytes (by its metadata), read to its end but never past `cap`.
fn read_capped(file: File, len: u64, cap: u64) -> Result<Vec<u8>, ReadError> {
    if len > cap {
        return Err(ReadError::TooLarge { cap });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // A file that grows while it is read still stops at the cap.
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(ReadError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooLarge { cap });
    }
    Ok(bytes)
}

/// The UTF-8 text of a regular file of at most `cap` bytes.
pub fn read_text(path: &Path, cap: u64) -> Result<String, ReadError> {
    String::from_utf8(read_bytes(path, cap)?).map_err(|e| ReadError::NotUtf8 { at: e.utf8_error().valid_up_to() })
}

/// The UTF-8 text of a file the user named (on the command line: a record to compare, report or promote, a
/// baseline): a symlink is followed, since the user chose the path, but what it leads to must still be a regular
/// file of at most `cap` bytes; a FIFO or a device is refused, never read or waited on.
pub fn read_named_text(path: &Path, cap: u64) -> Result<String, ReadError> {
    let (file, len) = open(path, 0)?;
    String::from_utf8(read_capped(file, len, cap)?).map_err(|e| ReadError::NotUtf8 { at: e.utf8_error().valid_up_to() })
}

/// The sha256 (lowercase hex) and size of a regular file of at most `cap` bytes, streamed.
pub fn sha256(path: &Path, cap: u64) -> Result<(String, u64), ReadError> {
    let (file, len) = open_regular(path)?;
    if len > cap {
        return Err(ReadError::TooLarge { cap });
    }
    let mut h = Sha256::new();
    let n = std::io::copy(&mut file.take(cap.saturating_add(1)), &mut h).map_err(ReadError::Io)?;
    if n > cap {
        return Err(ReadError::TooLarge { cap });
    }
    Ok((super::hex(&h.finalize()), n))
}

/// Whether `path` is a real directory (not a symlink to one): the folders inside a store or bundle that
/// gauntlet walks must be its own.
pub fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_symlinks_devices_and_fifos_and_caps_size() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"hello").unwrap();
        assert_eq!(read_text(&plain, 5).unwrap(), "hello");
        assert!(matches!(read_text(&plain, 4), Err(ReadError::TooLarge { cap: 4 })));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&plain, &link).unwrap();
        assert!(matches!(read_bytes(&link, 100), Err(ReadError::Symlink)));
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(read_bytes(&zero, 100), Err(ReadError::Symlink)));
        assert!(matches!(read_bytes(Path::new("/dev/zero"), 100), Err(ReadError::NotRegular("device"))));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        assert!(matches!(read_bytes(&fifo, 100), Err(ReadError::NotRegular("FIFO"))));
        assert!(matches!(read_named_text(&fifo, 100), Err(ReadError::NotRegular("FIFO"))));
        assert!(matches!(read_named_text(&zero, 100), Err(ReadError::NotRegular("device"))));
        assert_eq!(read_named_text(&link, 5).unwrap(), "hello", "a path the user named may be a symlink");
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "a FIFO must not block the reader");
        assert!(matches!(read_bytes(dir.path(), 100), Err(ReadError::NotRegular("directory"))));
        assert!(read_bytes(&dir.path().join("absent"), 100).unwrap_err().is_not_found());
        assert_eq!(sha256(&plain, 5).unwrap(), (crate::util::sha256_hex(b"hello"), 5));
        assert!(matches!(sha256(&zero, 5), Err(ReadError::Symlink)));
    }
}
