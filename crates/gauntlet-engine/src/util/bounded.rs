//! The one owner of opening files (issue 32 item 4). Reading: everything read from a bundle, a store, a run
//! directory, gauntlet's home or the command line goes through here: it opens without blocking (so a FIFO cannot
//! hang it), reads only a regular file (never a device such as `/dev/zero`, a FIFO or a socket), never follows a
//! symlink inside a root gauntlet walks (a name inside a root must be one plain file name: no `/`, no `..`), and
//! never reads past a cap chosen per kind of file. Writing: every file gauntlet creates in an output folder is
//! created here without following a symlink planted in its place ([`create`], [`append`], [`create_new`]).
//! Nothing here panics on what it finds. `file_rule.rs` lists every other place that opens a file, with its reason.

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
/// A model file or a build's source file, only hashed (streamed): weights reach hundreds of GiB.
pub const MODEL_CAP: u64 = 4 << 40;

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
    /// A name inside a root that is not one plain file name (`/`, `..`, empty): it would be read outside it.
    NotAName,
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
            ReadError::NotAName => write!(f, "is not a file name inside its folder (refused)"),
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

/// Opens a path the user or the manifest named (a model, a corpus, a header to sniff): a symlink is followed, but
/// what it leads to must be a regular file.
pub fn open_named(path: &Path) -> Result<(File, u64), ReadError> {
    open(path, 0)
}

/// Whether `name` is one plain file name: no separator, no NUL, not empty, not `.` or `..`, and no `..` inside
/// (joined to a root, it names a file directly in that root).
pub fn plain_name(name: &str) -> bool {
    !(name.is_empty() || name.contains(['/', '\\', '\0']) || name == "." || name.contains(".."))
}

/// The text of the file `name` directly inside `root` (a bundle, a store folder): `name` must be a plain file name
/// ([`plain_name`]) and the file a regular one that is not a symlink, of at most `cap` bytes.
pub fn read_in(root: &Path, name: &str, cap: u64) -> Result<String, ReadError> {
    if !plain_name(name) {
        return Err(ReadError::NotAName);
    }
    read_text(&root.join(name), cap)
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

/// The bytes of a file the user or the manifest named (a corpus, a quality set): a symlink is followed; what it
/// leads to must be a regular file of at most `cap` bytes.
pub fn read_named_bytes(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    let (file, len) = open(path, 0)?;
    read_capped(file, len, cap)
}

/// At most the last `limit` bytes of a regular file that is not a symlink (a server or build log): the tail a
/// report quotes, never more, lossily decoded by the caller.
pub fn read_tail(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::{Seek, SeekFrom};
    let (mut file, len) = open_regular(path)?;
    file.seek(SeekFrom::Start(len.saturating_sub(limit))).map_err(ReadError::Io)?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).map_err(ReadError::Io)?;
    Ok(bytes)
}

/// Why a file the user named that may be a pipe ([`read_text_or_pipe`]) was not read.
#[derive(Debug, thiserror::Error)]
pub enum PipeReadError {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// Refused from its size when it is a regular file, at `cap + 1` bytes when it is a pipe.
    #[error("larger than the {} KiB limit; refused before parsing", cap / 1024)]
    TooLarge { cap: u64 },
    /// A folder, a device, a socket: `what` is that kind in words ("a folder").
    #[error("is {what}; only a regular file or a pipe is read")]
    NotFileOrPipe { what: &'static str },
    #[error(
        "the pipe did not finish within {} s ({arrived} bytes arrived); its writer is still open",
        deadline.as_secs()
    )]
    PipeUnfinished { deadline: std::time::Duration, arrived: usize },
    #[error("not UTF-8 text (byte {at})")]
    NotUtf8 { at: usize },
}

/// How long a file given as a pipe (`--manifest <(generate)`, `--changed-files <(git diff …)`, a FIFO) may take to
/// arrive in full.
pub const PIPE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// The text of a file the user named that may be a pipe (a manifest, a suite, a list of changed files): refused
/// when it is over `cap` bytes (never read whole) or not UTF-8. A regular file is read at once (a symlink the user
/// named is followed); a pipe or a FIFO (process substitution) is opened without blocking and read until its writer
/// closes it, within `deadline`: a FIFO nobody writes to reads as empty, one whose writer never finishes is an error
/// at the deadline, never a hang. Devices, sockets and folders are refused.
pub fn read_text_or_pipe(
    path: &std::path::Path,
    cap: u64,
    deadline: std::time::Duration,
) -> Result<String, PipeReadError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    let bytes = if kind.is_file() {
        if meta.len() > cap {
            return Err(PipeReadError::TooLarge { cap });
        }
        let mut bytes = Vec::new();
        (&file).take(cap + 1).read_to_end(&mut bytes)?;
        bytes
    } else if kind.is_fifo() {
        read_pipe(&file, cap, deadline)?
    } else {
        let what = if kind.is_dir() {
            "a folder"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(PipeReadError::NotFileOrPipe { what });
    };
    if bytes.len() as u64 > cap {
        return Err(PipeReadError::TooLarge { cap });
    }
    String::from_utf8(bytes).map_err(|e| PipeReadError::NotUtf8 { at: e.utf8_error().valid_up_to() })
}

/// Reads a non-blocking pipe until end of file, at most `cap + 1` bytes, waiting for data with `poll` until
/// `deadline` has passed since the first read.
fn read_pipe(file: &std::fs::File, cap: u64, deadline: std::time::Duration) -> Result<Vec<u8>, PipeReadError> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let until = std::time::Instant::now() + deadline;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match (&*file).read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => {
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() as u64 > cap {
                    return Ok(bytes);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(PipeReadError::PipeUnfinished { deadline, arrived: bytes.len() });
                }
                let mut fd = libc::pollfd { fd: file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                let ms = left.as_millis().clamp(1, 1000) as libc::c_int;
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe { libc::poll(&mut fd, 1, ms) };
            }
            Err(e) => return Err(PipeReadError::Io(e)),
        }
    }
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
    digest(file, len, cap)
}

/// [`sha256`] of a path the user or the manifest named (a model, a binary): a symlink is followed (a hub cache's
/// snapshot points into its blobs); what it leads to must be a regular file.
pub fn sha256_named(path: &Path, cap: u64) -> Result<(String, u64), ReadError> {
    let (file, len) = open_named(path)?;
    digest(file, len, cap)
}

fn digest(file: File, len: u64, cap: u64) -> Result<(String, u64), ReadError> {
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

/// Why a file was not created: `path` is named in the message.
fn create_error(path: &Path, e: std::io::Error) -> std::io::Error {
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::EEXIST) if link => std::io::Error::other(format!(
            "`{}` is a symbolic link (refused: gauntlet never writes through a link in its output)",
            path.display()
        )),
        Some(libc::ENXIO) => std::io::Error::other(format!("`{}` is a FIFO or a device (refused)", path.display())),
        _ => std::io::Error::new(e.kind(), format!("`{}`: {e}", path.display())),
    }
}

fn open_for_writing(path: &Path, options: &mut std::fs::OpenOptions) -> std::io::Result<File> {
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| create_error(path, e))?;
    // fstat on the opened descriptor: a FIFO with a reader, a device or a directory is refused.
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::other(format!("`{}` is not a regular file (refused)", path.display())));
    }
    Ok(file)
}

/// Creates (or truncates) the regular file `path` for writing, never through a symlink planted in its place (a
/// `server.log` linked to someone's file is refused, the file it points to untouched), and never a FIFO or device.
pub fn create(path: &Path) -> std::io::Result<File> {
    open_for_writing(path, std::fs::OpenOptions::new().write(true).create(true).truncate(true))
}

/// Opens the regular file `path` for appending (created if absent), on the same terms as [`create`].
pub fn append(path: &Path) -> std::io::Result<File> {
    open_for_writing(path, std::fs::OpenOptions::new().append(true).create(true))
}

/// Creates `path`, which must not exist in any form (not even as a dangling symlink): a temporary file's name.
pub fn create_new(path: &Path) -> std::io::Result<File> {
    open_for_writing(path, std::fs::OpenOptions::new().write(true).create_new(true))
}

/// Makes a rename inside `dir` durable (fsync of the folder itself); best effort.
pub fn sync_dir(dir: &Path) {
    let folder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir);
    if let Ok(d) = folder {
        let _ = d.sync_all();
    }
}

/// Why [`copy`] did not copy.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// `from` was refused or could not be read (over the cap: [`ReadError::TooLarge`]).
    #[error("`{}`: {source}", from.display())]
    Read { from: std::path::PathBuf, source: ReadError },
    /// `to` could not be created ([`create`]'s error names it).
    #[error("{0}")]
    Create(#[source] std::io::Error),
    #[error("`{}`: {source}", to.display())]
    Write { to: std::path::PathBuf, source: std::io::Error },
}

/// Copies the regular file `from` (not a symlink, at most `cap` bytes) to `to`, created by [`create`].
pub fn copy(from: &Path, to: &Path, cap: u64) -> Result<u64, CopyError> {
    let refused = |source| CopyError::Read { from: from.to_owned(), source };
    let (file, len) = open_regular(from).map_err(refused)?;
    if len > cap {
        return Err(refused(ReadError::TooLarge { cap }));
    }
    let mut out = create(to).map_err(CopyError::Create)?;
    let n = std::io::copy(&mut file.take(cap.saturating_add(1)), &mut out)
        .map_err(|source| CopyError::Write { to: to.to_owned(), source })?;
    if n > cap {
        return Err(refused(ReadError::TooLarge { cap }));
    }
    Ok(n)
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
    fn a_copy_over_its_cap_is_refused_as_too_large_and_writes_nothing_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        std::fs::write(&from, b"twelve bytes").unwrap();
        let to = dir.path().join("to");
        assert_eq!(copy(&from, &to, 12).unwrap(), 12);
        assert!(matches!(
            copy(&from, &dir.path().join("other"), 11),
            Err(CopyError::Read { source: ReadError::TooLarge { cap: 11 }, .. })
        ));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&to, &link).unwrap();
        assert!(matches!(copy(&from, &link, 12), Err(CopyError::Create(_))));
        assert!(matches!(copy(&link, &to, 12), Err(CopyError::Read { source: ReadError::Symlink, .. })));
    }

    #[test]
    fn a_pipe_or_file_over_its_cap_or_of_the_wrong_kind_is_the_matching_variant() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, [b'#'; 2048]).unwrap();
        let deadline = std::time::Duration::from_secs(5);
        assert!(matches!(read_text_or_pipe(&big, 1024, deadline), Err(PipeReadError::TooLarge { cap: 1024 })));
        assert!(matches!(
            read_text_or_pipe(dir.path(), 1024, deadline),
            Err(PipeReadError::NotFileOrPipe { what: "a folder" })
        ));
        std::fs::write(&big, b"ok\xff").unwrap();
        assert!(matches!(read_text_or_pipe(&big, 1024, deadline), Err(PipeReadError::NotUtf8 { at: 2 })));
        assert!(matches!(read_text_or_pipe(&dir.path().join("absent"), 1024, deadline), Err(PipeReadError::Io(_))));
    }

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

    /// D9 of issue 32: a file gauntlet creates is never created through a symlink planted in its place.
    #[test]
    fn creating_never_follows_a_planted_link_nor_opens_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = dir.path().join("server.log");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        for open in [create, append, create_new] {
            let e = open(&link).unwrap_err().to_string();
            assert!(e.contains("server.log") && e.contains("symbolic link"), "{e}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("absent"), &dangling).unwrap();
        assert!(create(&dangling).is_err() && create_new(&dangling).is_err());
        assert!(!dir.path().join("absent").exists(), "a dangling link's target must not be created");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(create(&fifo).unwrap_err().to_string().contains("FIFO"));
        let plain = dir.path().join("plain");
        use std::io::Write;
        create(&plain).unwrap().write_all(b"one").unwrap();
        append(&plain).unwrap().write_all(b"two").unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"onetwo");
        create(&plain).unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"", "create truncates");
        assert!(create_new(&plain).is_err());
        std::fs::write(&plain, b"abc").unwrap();
        assert_eq!(copy(&plain, &dir.path().join("copy"), 3).unwrap(), 3);
        assert!(copy(&plain, &dir.path().join("copy2"), 2).unwrap_err().to_string().contains("limit"));
        assert!(copy(&plain, &link, 3).unwrap_err().to_string().contains("symbolic link"));
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }

    /// D7 of issue 32: a name inside a root is one plain file name.
    #[test]
    fn names_inside_a_root_are_plain_and_tails_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), b"0123456789").unwrap();
        assert_eq!(read_in(dir.path(), "a.json", 10).unwrap(), "0123456789");
        for bad in ["", ".", "..", "../a.json", "/etc/hostname", "x/../a.json", "r2-samples-/../../x", "a\\b", "a..b"] {
            assert!(matches!(read_in(dir.path(), bad, 100), Err(ReadError::NotAName)), "`{bad}` must be refused");
        }
        assert_eq!(read_tail(&dir.path().join("a.json"), 4).unwrap(), b"6789");
        assert!(matches!(read_tail(Path::new("/dev/zero"), 4), Err(ReadError::NotRegular("device"))));
        assert!(matches!(read_named_bytes(Path::new("/dev/zero"), 4), Err(ReadError::NotRegular("device"))));
        assert!(matches!(sha256_named(Path::new("/dev/zero"), 4), Err(ReadError::NotRegular("device"))));
    }
}
