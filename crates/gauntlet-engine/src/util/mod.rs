//! Small shared pieces: atomic file writes, digests, machine facts. (Clock readings live in `gauntlet-stamp`.)

pub mod bounded;
pub mod children;
pub mod clean;
pub mod raw;
pub mod redact;
pub mod suggest;

use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use gauntlet_schema::Environment;
use sha2::{Digest, Sha256};

/// gauntlet's home: `$GAUNTLET_HOME`, else `$XDG_CACHE_HOME/gauntlet`, else `~/.cache/gauntlet`.
pub fn home_dir() -> std::path::PathBuf {
    if let Some(h) = std::env::var_os("GAUNTLET_HOME").filter(|h| !h.is_empty()) {
        return h.into();
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|h| !h.is_empty()) {
        return std::path::PathBuf::from(x).join("gauntlet");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    std::path::PathBuf::from(home).join(".cache").join("gauntlet")
}

/// Held (shared) by every atomic write from its temporary file's creation to its rename or removal; taken
/// (exclusively) by [`quiesce_writes`] on the way out of an interrupted process, so that no temporary file is left.
static WRITES: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// How long an interrupt waits for atomic writes in flight to finish before the process exits anyway.
const QUIESCE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits (at most [`QUIESCE_WAIT`]) until no atomic write is in flight, and from then on lets none start: called
/// by the signal handling just before the process exits on SIGINT, SIGTERM or SIGHUP, so that an interrupted
/// command leaves no `.NAME.tmp-PID` file behind. Only a SIGKILL (or a write stuck past the wait) still can, and
/// readers of the store ignore those ([`is_temporary_name`]).
pub fn quiesce_writes() {
    let deadline = std::time::Instant::now() + QUIESCE_WAIT;
    loop {
        match WRITES.try_write() {
            Ok(guard) => {
                // Held until the process exits: a write that would start now waits for an exit that is coming.
                std::mem::forget(guard);
                return;
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                std::mem::forget(p.into_inner());
                return;
            }
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(std::sync::TryLockError::WouldBlock) => return,
        }
    }
}

/// Held while a temporary file of an atomic write exists (see [`quiesce_writes`]); for writers that stream their
/// own temporary file (`bench.json`).
pub(crate) fn writing() -> std::sync::RwLockReadGuard<'static, ()> {
    WRITES.read().unwrap_or_else(|p| p.into_inner())
}

/// Whether a file name is one [`write_atomic`] uses for its temporary file (`.NAME.tmp-PID`): what an interrupted
/// writer may leave behind, never a record of its own.
pub fn is_temporary_name(name: &str) -> bool {
    name.starts_with('.')
        && name.rsplit_once(".tmp-").is_some_and(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Write via a temporary file in the same directory, fsync, then rename: a reader sees the old file or the
/// whole new one, never a part. Every registered secret is redacted from `bytes` first ([`redact`]): this is
/// where gauntlet's files leave the process. An interrupt (SIGINT, SIGTERM, SIGHUP) waits for the write to finish
/// ([`quiesce_writes`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let bytes = redact::bytes(bytes);
    let _writing = writing();
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        // A stale temporary file of an earlier process with this pid goes; the new one is created exclusively,
        // so a symlink planted under its name is never followed.
        let _ = std::fs::remove_file(&tmp);
        let mut f = bounded::create_new(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        bounded::sync_dir(dir);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The sha256 of a file the manifest named (a model, a binary, a task file): by the one file rule, a symlink
/// followed but a regular file at the end of it (never a FIFO or a device), streamed.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    bounded::sha256_named(path, bounded::MODEL_CAP).map(|(sha, _)| sha).map_err(|e| match e {
        bounded::ReadError::Io(e) => e,
        bounded::ReadError::NotFound => std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        other => std::io::Error::other(format!("`{}` {other}", path.display())),
    })
}

/// sha256 of a file, remembered under `home/digests/` by (path, device, inode, size, mtime): an unchanged file is
/// read once per machine. Any change of those facts hashes it again.
/// A model directory (Hugging Face layout): the digest of its sorted per-file list, one line `SHA256  PATH` per
/// regular file (PATH relative, `/`-separated, lines sorted by PATH), with the file count and total size. Entries
/// whose name starts with `.` (`.cache`, `.git`) are left out; symbolic links are followed (a hub cache's snapshot
/// points into its blobs). Bounded: at most 100 000 files, 16 levels deep.
pub fn sha256_dir(dir: &Path, home: &Path) -> std::io::Result<(String, u64, u64)> {
    let mut lines = Vec::new();
    let mut size = 0u64;
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let meta = std::fs::metadata(&path)?;
            if meta.is_dir() {
                if depth >= 16 {
                    return Err(std::io::Error::other(format!("`{}` is nested deeper than 16 levels", path.display())));
                }
                stack.push((path, depth + 1));
            } else if meta.is_file() {
                if lines.len() >= 100_000 {
                    return Err(std::io::Error::other("more than 100000 files"));
                }
                let rel = path.strip_prefix(dir).unwrap_or(&path);
                let rel: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                lines.push((rel.join("/"), sha256_file_memo(&path, home)?));
                size += meta.len();
            }
        }
    }
    lines.sort();
    let list: String = lines.iter().map(|(p, h)| format!("{h}  {p}\n")).collect();
    Ok((sha256_hex(list.as_bytes()), lines.len() as u64, size))
}

pub fn sha256_file_memo(path: &Path, home: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    let canonical = std::fs::canonicalize(path)?;
    let key = sha256_hex(
        format!(
            "{}\0{}\0{}\0{}\0{}.{}",
            canonical.display(),
            meta.dev(),
            meta.ino(),
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec()
        )
        .as_bytes(),
    );
    let memo = home.join("digests").join(&key);
    if let Ok(text) = bounded::read_text(&memo, bounded::SMALL_CAP) {
        let text = text.trim();
        if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(text.to_owned());
        }
    }
    let digest = sha256_file(path)?;
    // A memo that cannot be written only costs a re-hash next time.
    if std::fs::create_dir_all(home.join("digests")).is_ok() {
        let _ = write_atomic(&memo, digest.as_bytes());
    }
    Ok(digest)
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

pub fn environment() -> Environment {
    let hostname =
        std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_owned()).unwrap_or_default();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    Environment {
        hostname,
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        cpu_model,
        cpu_count: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    }
}

/// How long a helper command (git, `server --version`) may take.
pub const HELPER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Why a helper (git, a server program's `--version`) gave no usable output; `program` is the name it was run by.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error("cannot run `{program}`: {source}")]
    Spawn { program: String, source: std::io::Error },
    /// Past [`HELPER_TIMEOUT`]; its process group was killed.
    #[error("`{program}` did not finish within {}s; killed", HELPER_TIMEOUT.as_secs())]
    TimedOut { program: String },
    /// It exited, but a process it started still held its stdout or stderr at the deadline; the group was killed.
    #[error("`{program}` exited but something it started kept its output open; killed")]
    OutputHeld { program: String },
    /// A non-zero exit (`code` is `None` when a signal ended it), with what it wrote to stderr, trimmed.
    #[error("`{program}` exited with {code:?}: {stderr}")]
    Failed { program: String, code: Option<i32>, stderr: String },
    /// More than `cap` bytes on stdout: refused whole, never cut.
    #[error("`{program}` wrote more than {cap} bytes")]
    TooMuchOutput { program: String, cap: usize },
}

impl HelperError {
    fn failed(program: &str, code: Option<i32>, stderr: &[u8]) -> HelperError {
        HelperError::Failed {
            program: program.to_owned(),
            code,
            stderr: String::from_utf8_lossy(stderr).trim().to_owned(),
        }
    }
}

/// What a helper wrote before it exited: its exit code, stdout (at most the cap asked for, plus one byte to tell
/// that it went over) and stderr (at most 64 KiB).
struct HelperOutput {
    code: Option<i32>,
    out: Vec<u8>,
    err: Vec<u8>,
}

/// Runs `cmd` (a helper: git, a server program's `--version`) as the leader of its own process group, under
/// [`HELPER_TIMEOUT`] in all: past it the whole group is killed, whether the helper itself still runs or it exited
/// but something it started still holds its output open (waiting for those pipes to close would last as long as
/// that process does). Both pipes are read to their end, so the helper never blocks on a full one; what is past
/// `cap` (stdout) or 64 KiB (stderr) is only counted.
fn run_in_group(mut cmd: std::process::Command, program: &str, cap: usize) -> Result<HelperOutput, HelperError> {
    use std::io::Read as _;
    use std::os::unix::process::CommandExt as _;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let (mut child, _expected) = children::spawn_expected(&mut cmd)
        .map_err(|source| HelperError::Spawn { program: program.to_owned(), source })?;
    let pgid = child.id() as i32;
    let kill_group = || {
        // SAFETY: killpg has no memory-safety preconditions; a vanished group only yields ESRCH.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let pipes: [(bool, Option<Box<dyn std::io::Read + Send>>); 2] = [
        (true, child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>)),
        (false, child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>)),
    ];
    for (is_stdout, pipe) in pipes {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = pipe {
                let limit = if is_stdout { cap as u64 + 1 } else { 64 << 10 };
                let _ = r.by_ref().take(limit).read_to_end(&mut buf);
                // Read on to the end so that the helper never blocks on a full pipe; what is past the cap is
                // only counted (one byte over is enough to refuse the output).
                let _ = std::io::copy(&mut r, &mut std::io::sink());
            }
            let _ = tx.send((is_stdout, buf));
        });
    }
    let deadline = Instant::now() + HELPER_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                kill_group();
                let _ = child.wait();
                return Err(HelperError::TimedOut { program: program.to_owned() });
            }
        }
    };
    let (mut out, mut err) = (None, None);
    while out.is_none() || err.is_none() {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
        match rx.recv_timeout(left) {
            Ok((true, b)) => out = Some(b),
            Ok((false, b)) => err = Some(b),
            Err(_) => {
                kill_group();
                return Err(HelperError::OutputHeld { program: program.to_owned() });
            }
        }
    }
    Ok(HelperOutput { code: status.code(), out: out.unwrap_or_default(), err: err.unwrap_or_default() })
}

/// Runs a helper (git) in its own process group under [`HELPER_TIMEOUT`] and returns its whole stdout, or why
/// not: it could not start, it exited non-zero (its stderr), it ran past the deadline (its group is killed), it
/// wrote more than `cap` bytes (never cut silently: a truncated list of paths is a wrong answer), or something it
/// started kept its output open past the deadline.
pub fn run_bounded_bytes<S: AsRef<std::ffi::OsStr>>(
    program: &str,
    args: &[S],
    cap: usize,
) -> Result<Vec<u8>, HelperError> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    let o = run_in_group(cmd, program, cap)?;
    if o.code != Some(0) {
        return Err(HelperError::failed(program, o.code, &o.err));
    }
    if o.out.len() > cap {
        return Err(HelperError::TooMuchOutput { program: program.to_owned(), cap });
    }
    Ok(o.out)
}

/// How much of a helper's stdout [`run_bounded`] and [`run_bounded_merged`] keep (lossily decoded).
const HELPER_TEXT_CAP: usize = 1 << 20;

/// A helper's stdout, or why it failed (its stderr when it exited non-zero).
pub fn run_bounded(program: &str, args: &[&str]) -> Result<String, HelperError> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    let o = run_in_group(cmd, program, HELPER_TEXT_CAP)?;
    match o.code {
        Some(0) => Ok(String::from_utf8_lossy(&o.out[..o.out.len().min(HELPER_TEXT_CAP)]).into_owned()),
        code => Err(HelperError::failed(program, code, &o.err)),
    }
}

/// A helper's exit code with stdout and stderr together (version banners go to either), run with exactly
/// `environment` (nothing of gauntlet's own besides: a server program's `--version` gets the environment the
/// server is started with, `server::server_environment`).
pub fn run_bounded_merged(
    program: &str,
    args: &[&str],
    environment: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Result<(Option<i32>, String), HelperError> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).env_clear().envs(environment.iter().map(|(k, v)| (k, v)));
    let o = run_in_group(cmd, program, HELPER_TEXT_CAP)?;
    let out = String::from_utf8_lossy(&o.out[..o.out.len().min(HELPER_TEXT_CAP)]);
    Ok((o.code, format!("{out}{}", String::from_utf8_lossy(&o.err))))
}

/// The runtime for measuring: worker threads (up to 4) so that streams are timestamped in parallel and one stream's
/// work never waits for another's; current-thread where threads cannot be had.
pub fn measuring_runtime() -> tokio::runtime::Runtime {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .or_else(|_| tokio::runtime::Builder::new_current_thread().enable_all().build())
        .expect("tokio runtime")
}

#[cfg(test)]
mod tests {

    /// A Hugging Face model folder: the digest is that of the sorted `SHA256  PATH` list of its files (dot entries
    /// left out), so it follows content and names, not the order files were written in.
    #[test]
    fn a_model_directory_digest_is_its_sorted_file_list() {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::create_dir_all(dir.path().join(".cache")).unwrap();
        std::fs::write(dir.path().join("config.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("sub/model.safetensors"), b"weights").unwrap();
        std::fs::write(dir.path().join(".cache/lock"), b"ignored").unwrap();
        let list = format!("{}  config.json\n{}  sub/model.safetensors\n", sha256_hex(b"{}"), sha256_hex(b"weights"));
        let (digest, files, size) = sha256_dir(dir.path(), home.path()).unwrap();
        assert_eq!((digest.as_str(), files, size), (sha256_hex(list.as_bytes()).as_str(), 2, 9));
        std::fs::write(dir.path().join("sub/model.safetensors"), b"weightz").unwrap();
        assert_ne!(sha256_dir(dir.path(), home.path()).unwrap().0, digest, "a changed file changes the digest");
    }

    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("gauntlet-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("run.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn memo_rehashes_a_changed_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m.gguf");
        std::fs::write(&f, b"abc").unwrap();
        let home = dir.path().join("home");
        let first = sha256_file_memo(&f, &home).unwrap();
        assert_eq!(first, sha256_hex(b"abc"));
        assert_eq!(sha256_file_memo(&f, &home).unwrap(), first, "remembered");
        std::fs::write(&f, b"abcd").unwrap();
        assert_eq!(sha256_file_memo(&f, &home).unwrap(), sha256_hex(b"abcd"), "size changed: hashed again");
    }

    #[test]
    fn a_helper_that_fails_is_the_matching_variant_with_its_stderr_and_code() {
        let e = run_bounded("sh", &["-c", "echo ' no such ref ' >&2; exit 3"]).unwrap_err();
        assert!(matches!(&e, HelperError::Failed { code: Some(3), stderr, .. } if stderr == "no such ref"), "{e:?}");
        assert_eq!(e.to_string(), "`sh` exited with Some(3): no such ref");
        let e = run_bounded_bytes("sh", &["-c", "printf 12345"], 4).unwrap_err();
        assert!(matches!(e, HelperError::TooMuchOutput { cap: 4, .. }), "{e:?}");
        assert_eq!(run_bounded_bytes("sh", &["-c", "printf 1234"], 4).unwrap(), b"1234");
        let e = run_bounded_merged("/nonexistent/gauntlet-helper", &["--version"], &[]).unwrap_err();
        assert!(matches!(e, HelperError::Spawn { .. }), "{e:?}");
        assert!(e.to_string().starts_with("cannot run `/nonexistent/gauntlet-helper`: "), "{e}");
    }

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
