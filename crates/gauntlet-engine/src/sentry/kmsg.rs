//! `/dev/kmsg`, read as the kernel documents it: one record per `read()`, `EPIPE` when records were overwritten
//! under us, `EAGAIN` at the end. A run is bracketed by sequence numbers (never by time): the reader drains to the
//! end before the server starts, stays attached and reads continuously in a thread so the ring cannot lap it,
//! drains again after the server stopped, and checks that the machine did not reboot in between.
//!
//! Sources sit behind [`Source`] so the bracket is tested on files; the real device is [`DevKmsg`].

use std::io::{BufRead, Seek};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One kernel-log record, parsed and unescaped.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub facility: u32,
    pub level: u32,
    pub seq: u64,
    pub micros: u64,
    pub text: String,
    /// `KEY=VALUE` dictionary lines that followed the record (`DEVICE=+pci:0000:03:00.0`, `SUBSYSTEM=pci`).
    pub dict: Vec<(String, String)>,
}

impl Record {
    /// The PCI address from a `DEVICE=+pci:<bdf>` dictionary line, when the driver logged one.
    pub fn pci_device(&self) -> Option<&str> {
        self.dict.iter().find(|(k, _)| k == "DEVICE").and_then(|(_, v)| v.strip_prefix("+pci:"))
    }
}

/// Parses `prio,seq,usec,flags[,more];text` plus ` KEY=VALUE` continuation lines. Unknown header fields are
/// ignored; anything malformed is `None` (a record we cannot read is counted, never trusted).
pub fn parse_record(raw: &[u8]) -> Option<Record> {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let mut lines = raw.split(|b| *b == b'\n');
    let first = lines.next()?;
    let semi = first.iter().position(|b| *b == b';')?;
    let header = std::str::from_utf8(&first[..semi]).ok()?;
    let mut fields = header.split(',');
    let prio: u32 = fields.next()?.trim().parse().ok()?;
    let seq: u64 = fields.next()?.trim().parse().ok()?;
    let micros: u64 = fields.next()?.trim().parse().ok()?;
    let text = unescape(&first[semi + 1..]);
    let dict = lines
        .filter_map(|l| l.strip_prefix(b" "))
        .filter_map(|l| {
            let l = unescape(l);
            let (k, v) = l.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect();
    Some(Record { facility: prio >> 3, level: prio & 7, seq, micros, text, dict })
}

/// `\xNN` back to the byte it stands for (the kernel escapes non-printable bytes and `\` itself).
pub fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\'
            && i + 3 < raw.len()
            && raw[i + 1] == b'x'
            && let Some(b) = std::str::from_utf8(&raw[i + 2..i + 4]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 4;
            continue;
        }
        out.push(raw[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What one read gave.
#[derive(Debug)]
pub enum Read {
    Record(Vec<u8>),
    /// Nothing more for now (`EAGAIN`).
    Empty,
    /// Records were overwritten before we read them (`EPIPE`); the next record's sequence says how many.
    Lost,
    Failed(String),
}

pub trait Source: Send {
    fn read(&mut self) -> Read;
    /// Waits up to `timeout` for more to read. A file has no such signal, so it waits the whole (short) timeout.
    fn wait(&mut self, timeout: Duration) {
        std::thread::sleep(timeout);
    }
}

/// The real device, opened non-blocking.
pub struct DevKmsg {
    fd: OwnedFd,
    buf: Vec<u8>,
}

pub const DEV_KMSG: &str = "/dev/kmsg";

/// Why the kernel log device was not opened; `path` is [`DEV_KMSG`] but for the tests of the device check.
#[derive(Debug, thiserror::Error)]
pub enum DevKmsgError {
    #[error("{}: {source}", path.display())]
    Stat { path: PathBuf, source: std::io::Error },
    /// Something else is mounted or linked at the path (`/dev/null`, `/dev/console` in some containers).
    #[error(
        "{} is not the kernel log device (want character device 1:11, found {major}:{minor})",
        path.display()
    )]
    NotTheDevice { path: PathBuf, major: u32, minor: u32 },
    /// `dmesg_restrict` is the value of `kernel.dmesg_restrict` when the open was refused for permission.
    #[error("cannot open {}: {source}{}", path.display(), restrict_hint(dmesg_restrict.as_deref()))]
    Open { path: PathBuf, source: std::io::Error, dmesg_restrict: Option<String> },
}

fn restrict_hint(dmesg_restrict: Option<&str>) -> String {
    dmesg_restrict
        .map(|r| {
            format!(
                " (kernel.dmesg_restrict = {r}; reading needs CAP_SYSLOG, e.g. root, or `--cap-add SYSLOG --device /dev/kmsg` in a container)"
            )
        })
        .unwrap_or_default()
}

impl DevKmsg {
    /// Opens `/dev/kmsg` after checking it is the real character device (1:11): containers are known to
    /// bind-mount `/dev/null` or link `/dev/console` there, and reading those would look clean.
    pub fn open() -> Result<DevKmsg, DevKmsgError> {
        DevKmsg::open_checked(Path::new(DEV_KMSG))
    }

    /// [`DevKmsg::open`] at `path`: the device check, then the open.
    fn open_checked(path: &Path) -> Result<DevKmsg, DevKmsgError> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let meta = std::fs::metadata(path).map_err(|source| DevKmsgError::Stat { path: path.to_owned(), source })?;
        let rdev = meta.rdev();
        let (major, minor) = (libc::major(rdev), libc::minor(rdev));
        if !meta.file_type().is_char_device() || (major, minor) != (1, 11) {
            return Err(DevKmsgError::NotTheDevice { path: path.to_owned(), major, minor });
        }
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path from stat has no NUL");
        // SAFETY: a valid C string and plain flags; the result is checked before use.
        let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if fd < 0 {
            let source = std::io::Error::last_os_error();
            let dmesg_restrict = match source.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => Some(
                    std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict").unwrap_or_default().trim().to_owned(),
                ),
                _ => None,
            };
            return Err(DevKmsgError::Open { path: path.to_owned(), source, dmesg_restrict });
        }
        // SAFETY: `fd` was just returned by open(2) and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(DevKmsg { fd, buf: vec![0; 16 * 1024] })
    }
}

impl Source for DevKmsg {
    fn read(&mut self) -> Read {
        loop {
            // SAFETY: the buffer is valid for `len` bytes and the fd is open.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n > 0 {
                return Read::Record(self.buf[..n as usize].to_vec());
            }
            if n == 0 {
                return Read::Empty;
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Read::Empty,
                Some(libc::EPIPE) => return Read::Lost,
                _ => return Read::Failed(format!("read {DEV_KMSG}: {err}")),
            }
        }
    }

    fn wait(&mut self, timeout: Duration) {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; poll(2) returns on data, error or timeout.
        unsafe { libc::poll(&mut pfd, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
    }
}

/// A file standing in for the device: records in kmsg's own text form (header line plus ` KEY=VALUE` lines),
/// and a line `!EPIPE` where the device would have said records were lost. Lines appended while a bracket is
/// open are read as they come.
pub struct FileSource {
    reader: std::io::BufReader<std::fs::File>,
    pending: Option<String>,
}

impl FileSource {
    pub fn open(path: &Path) -> std::io::Result<FileSource> {
        Ok(FileSource { reader: std::io::BufReader::new(std::fs::File::open(path)?), pending: None })
    }

    fn next_line(&mut self) -> Option<String> {
        if let Some(l) = self.pending.take() {
            return Some(l);
        }
        let mut line = String::new();
        let pos = self.reader.stream_position().ok()?;
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            // A line still being written is read again once it is whole.
            Ok(_) if !line.ends_with('\n') => {
                let _ = self.reader.seek(std::io::SeekFrom::Start(pos));
                None
            }
            Ok(_) => Some(line),
            Err(_) => None,
        }
    }
}

impl Source for FileSource {
    fn read(&mut self) -> Read {
        let Some(first) = self.next_line() else { return Read::Empty };
        if first.trim_end() == "!EPIPE" {
            return Read::Lost;
        }
        let mut record = first;
        while let Some(next) = self.next_line() {
            if next.starts_with(' ') {
                record.push_str(&next);
            } else {
                self.pending = Some(next);
                break;
            }
        }
        Read::Record(record.into_bytes())
    }

    fn wait(&mut self, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_millis(20)));
    }
}

/// What a bracket saw: every kernel (facility 0) record in order, and how sure it is that none is missing.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    /// Kernel records found in the buffer before the run started (pre-run state).
    pub before: Vec<Record>,
    /// Kernel records logged during the run (and its teardown grace).
    pub during: Vec<Record>,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// Records known lost (sequence gaps); `lost_unknown` when an EPIPE could not be sized.
    pub lost: u64,
    pub lost_unknown: bool,
    pub records_read: u64,
    pub unreadable: u64,
    /// Non-kernel records (userspace writes to /dev/kmsg, facility ≠ 0): counted and ignored.
    pub ignored_userspace: u64,
    pub boot_id_before: Option<String>,
    pub boot_id_after: Option<String>,
    /// Set when the reader failed or died: the bracket is then incomplete.
    pub broken: Option<String>,
}

struct Cursor {
    next: Option<u64>,
    epipe: bool,
}

impl Cursor {
    /// Accounts one read into `obs`; `during` picks which list kernel records go to.
    fn take(&mut self, read: Read, obs: &mut Observed, during: bool) -> bool {
        match read {
            Read::Empty => false,
            Read::Lost => {
                self.epipe = true;
                true
            }
            Read::Failed(why) => {
                obs.broken.get_or_insert(why);
                false
            }
            Read::Record(raw) => {
                obs.records_read += 1;
                let Some(record) = parse_record(&raw) else {
                    obs.unreadable += 1;
                    return true;
                };
                if let Some(next) = self.next {
                    if record.seq > next {
                        // Sequence numbers are read, not trusted: a jump near u64::MAX saturates the count.
                        obs.lost = obs.lost.saturating_add(record.seq - next);
                    } else if self.epipe {
                        obs.lost_unknown = true;
                    }
                }
                self.epipe = false;
                // The last possible sequence number has no successor: the next record cannot be counted as a gap.
                self.next = record.seq.checked_add(1);
                if during {
                    obs.first_seq.get_or_insert(record.seq);
                }
                obs.last_seq = Some(record.seq);
                if record.facility != 0 {
                    obs.ignored_userspace += 1;
                } else if during {
                    obs.during.push(record);
                } else {
                    obs.before.push(record);
                }
                true
            }
        }
    }
}

/// An open bracket: created before the server starts, finished after it stopped.
pub struct Bracket {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(Box<dyn Source>, Cursor)>>,
    obs: Arc<Mutex<Observed>>,
    boot_id_path: PathBuf,
}

const DRAIN_LIMIT: Duration = Duration::from_secs(10);

fn read_boot_id(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// Reads until `Empty` (or a failure, or a bounded time: a log flooding faster than we read is reported).
fn drain(source: &mut dyn Source, cursor: &mut Cursor, obs: &mut Observed, during: bool) {
    let deadline = Instant::now() + DRAIN_LIMIT;
    while cursor.take(source.read(), obs, during) {
        if Instant::now() >= deadline {
            obs.broken.get_or_insert_with(|| "the kernel log did not stop growing while it was drained".into());
            return;
        }
    }
}

impl Bracket {
    /// Drains what the buffer already holds (pre-run state), then keeps reading in a thread.
    pub fn start(mut source: Box<dyn Source>, boot_id_path: &Path) -> Bracket {
        let mut obs = Observed { boot_id_before: read_boot_id(boot_id_path), ..Observed::default() };
        let mut cursor = Cursor { next: None, epipe: false };
        drain(source.as_mut(), &mut cursor, &mut obs, false);
        let obs = Arc::new(Mutex::new(obs));
        let stop = Arc::new(AtomicBool::new(false));
        let (t_obs, t_stop) = (obs.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("gauntlet-kmsg".into())
            .spawn(move || {
                while !t_stop.load(Ordering::Acquire) {
                    let read = source.read();
                    let more = {
                        let mut o = t_obs.lock().unwrap_or_else(|p| p.into_inner());
                        cursor.take(read, &mut o, true)
                    };
                    if !more {
                        if t_obs.lock().map(|o| o.broken.is_some()).unwrap_or(true) {
                            break;
                        }
                        // Short: the wait ends early on data, and its length is how long a stop waits for the reader.
                        source.wait(Duration::from_millis(20));
                    }
                }
                (source, cursor)
            })
            .ok();
        if thread.is_none() {
            obs.lock().unwrap_or_else(|p| p.into_inner()).broken = Some("cannot start the kernel-log reader".into());
        }
        Bracket { stop, thread, obs, boot_id_path: boot_id_path.to_owned() }
    }

    /// Waits `grace` (faults of a teardown arrive after the process exits), stops the reader, drains to the end
    /// and re-reads boot_id.
    pub fn finish(mut self, grace: Duration) -> Observed {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            std::thread::sleep((deadline - Instant::now()).min(Duration::from_millis(50)));
        }
        self.stop.store(true, Ordering::Release);
        let joined = self.thread.take().map(|t| t.join());
        let mut obs = std::mem::take(&mut *self.obs.lock().unwrap_or_else(|p| p.into_inner()));
        match joined {
            Some(Ok((mut source, mut cursor))) if obs.broken.is_none() => {
                drain(source.as_mut(), &mut cursor, &mut obs, true);
            }
            Some(Ok(_)) => {}
            Some(Err(_)) => {
                obs.broken.get_or_insert_with(|| "the kernel-log reader panicked".into());
            }
            None => {}
        }
        obs.boot_id_after = read_boot_id(&self.boot_id_path);
        obs
    }
}

impl Drop for Bracket {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod cursor_tests {
    use super::*;

    /// Found by the `kernel_log` fuzz target: sequence numbers that jump to near u64::MAX, fall back and jump again
    /// overflowed the count of lost records, and the last possible one overflowed its successor (panics with overflow
    /// checks, wrong counts without).
    #[test]
    fn sequence_numbers_near_the_top_of_u64_do_not_overflow() {
        let mut cursor = Cursor { next: None, epipe: false };
        let mut obs = Observed::default();
        for seq in [0, u64::MAX - 1, 5, u64::MAX - 1, u64::MAX, 3] {
            let raw = format!("3,{seq},100,-;NVRM: Xid (PCI:0000:01:00): 45, pid=1, name=x").into_bytes();
            assert!(cursor.take(Read::Record(raw), &mut obs, true));
        }
        assert_eq!(obs.lost, u64::MAX, "saturated");
        assert_eq!(obs.last_seq, Some(3));
        assert_eq!(obs.records_read, 6);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What containers put at `/dev/kmsg` instead of the device is refused before it is read, with its numbers.
    #[test]
    fn anything_but_the_kernel_log_device_is_refused_as_the_matching_variant() {
        let e = DevKmsg::open_checked(Path::new("/dev/null")).err().unwrap();
        assert!(matches!(e, DevKmsgError::NotTheDevice { major: 1, minor: 3, .. }), "{e:?}");
        assert_eq!(e.to_string(), "/dev/null is not the kernel log device (want character device 1:11, found 1:3)");
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("kmsg");
        let e = DevKmsg::open_checked(&absent).err().unwrap();
        assert!(matches!(&e, DevKmsgError::Stat { path, .. } if *path == absent), "{e:?}");
        std::fs::write(&absent, b"").unwrap();
        let e = DevKmsg::open_checked(&absent).err().unwrap();
        assert!(matches!(e, DevKmsgError::NotTheDevice { major: 0, minor: 0, .. }), "{e:?}");
    }

    #[test]
    fn a_refused_open_names_dmesg_restrict_and_how_to_read_anyway() {
        let e = DevKmsgError::Open {
            path: DEV_KMSG.into(),
            source: std::io::Error::from_raw_os_error(libc::EPERM),
            dmesg_restrict: Some("1".into()),
        };
        let text = e.to_string();
        assert!(text.starts_with("cannot open /dev/kmsg: "), "{text}");
        assert!(text.ends_with("(kernel.dmesg_restrict = 1; reading needs CAP_SYSLOG, e.g. root, or `--cap-add SYSLOG --device /dev/kmsg` in a container)"), "{text}");
    }
}
