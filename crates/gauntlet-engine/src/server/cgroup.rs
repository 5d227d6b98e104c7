//! A control group per spawn, where the machine lets gauntlet make one: the spawned leader is placed in it before
//! it executes anything, so every process it ever starts is in it too, whatever it does to its environment, its
//! process group or its session. At the stop, everything in it is killed and the group removed.
//!
//! cgroup v2 is preferred (its `cgroup.kill` ends every member at once, forks in flight included); else v1's
//! `pids` hierarchy (forks are stopped first through `pids.max`, then each member is killed). The new group is made
//! beside gauntlet's own, inside the hierarchy's mount. Where neither can be made (a read-only mount in a
//! container, a cgroup this user may not write), [`Cgroup::create`] says why, and supervision rests on the process
//! group, the environment marker and the child-subreaper sweep.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Which cgroup interface a group lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V2,
    V1Pids,
}

/// Why a spawn has no control group of its own. Clone: the machine's answer is found once and given to every spawn
/// (an I/O error is shared behind an `Arc` for that).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CgroupError {
    #[error("GAUNTLET_CGROUP=off")]
    Off,
    #[error("cannot read {path}: {source}")]
    Proc { path: &'static str, source: Arc<std::io::Error> },
    /// No hierarchy would do: why not, for each one tried, in order.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NoHierarchy(Vec<HierarchyError>),
    #[error("cannot create the cgroup `{}`: {source}", dir.display())]
    Create { dir: PathBuf, source: Arc<std::io::Error> },
    /// The leader was not a member after its spawn (its write to `cgroup.procs` failed between fork and exec).
    #[error("the server could not be placed in the cgroup `{}`", dir.display())]
    NotJoined { dir: PathBuf },
}

/// Why one hierarchy (`cgroup v2`, `cgroup v1 pids`) cannot hold gauntlet's groups.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HierarchyError {
    #[error("{hierarchy}: gauntlet is in no such group")]
    NoGroup { hierarchy: &'static str },
    #[error("{hierarchy}: gauntlet's group {group} is outside the mount {mount}")]
    OutsideMount { hierarchy: &'static str, group: String, mount: String },
    /// The watchdog (a shell script) reads the path as one word, and `:` separates its fields.
    #[error("{hierarchy}: the group's path `{}` has characters gauntlet does not handle", dir.display())]
    UnhandledPath { hierarchy: &'static str, dir: PathBuf },
    #[error("{hierarchy}: not mounted")]
    NotMounted { hierarchy: &'static str },
    /// A probe group could not be made beside gauntlet's own.
    #[error("{}: {source}", base.display())]
    NotWritable { base: PathBuf, source: Arc<std::io::Error> },
}

/// One spawn's control group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    dir: PathBuf,
    version: Version,
}

/// Where new groups are made: the directory of gauntlet's own group in the first usable hierarchy, or why none is.
static BASE: OnceLock<Result<(PathBuf, Version), CgroupError>> = OnceLock::new();

impl Cgroup {
    /// A new, empty group for one spawn, or why none can be made (the same reason every time: it is found once).
    pub fn create() -> Result<Cgroup, CgroupError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let (base, version) = BASE.get_or_init(find_base).clone()?;
        let dir = base.join(format!("gauntlet-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        if let Err(e) = std::fs::create_dir(&dir) {
            return Err(CgroupError::Create { dir, source: Arc::new(e) });
        }
        Ok(Cgroup { dir, version })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file a process writes its pid into to join this group.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Every process in the group now (at most a million: a pid list is never larger).
    pub fn members(&self) -> Vec<i32> {
        match crate::util::bounded::read_text(&self.procs_file(), 16 << 20) {
            Ok(text) => text.lines().filter_map(|l| l.trim().parse().ok()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Kills every member: v2 through `cgroup.kill`; where a `pids.max` exists, no member may fork from now on;
    /// then SIGKILL to each listed member (v1, or a v2 kernel older than `cgroup.kill`).
    pub fn kill_all(&self) {
        if self.version == Version::V2 {
            let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        }
        let pids_max = self.dir.join("pids.max");
        if pids_max.exists() {
            let _ = std::fs::write(pids_max, "0");
        }
        for pid in self.members() {
            super::group::signal_pid(pid, libc::SIGKILL);
        }
    }

    /// Removes the (empty) group; false while a member is still in it.
    pub fn remove(&self) -> bool {
        match std::fs::remove_dir(&self.dir) {
            Ok(()) => true,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }

    /// What supervision this spawn has, in words for the run record.
    pub fn describe(&self) -> String {
        let v = match self.version {
            Version::V2 => "cgroup v2",
            Version::V1Pids => "cgroup v1 (pids)",
        };
        format!("{v} {}", self.dir.display())
    }
}

/// Whether the kernel lets gauntlet make a group for its spawns here: the group it would use, or why not. For
/// `doctor`.
pub fn availability() -> Result<String, CgroupError> {
    BASE.get_or_init(find_base).clone().map(|(base, version)| Cgroup { dir: base, version }.describe())
}

/// Characters a group path may hold: the watchdog (a shell script) reads it as one word, and `:` separates its
/// fields.
fn plain(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-@+".contains(&b)))
}

/// The first hierarchy where gauntlet can make (and remove) a group beside its own: v2, then v1 `pids`. None
/// when `GAUNTLET_CGROUP=off` (a cgroup manager that objects to groups it did not make; the tests of the
/// fallback).
fn find_base() -> Result<(PathBuf, Version), CgroupError> {
    if std::env::var_os("GAUNTLET_CGROUP").is_some_and(|v| v == "off") {
        return Err(CgroupError::Off);
    }
    let unread = |path, e| CgroupError::Proc { path, source: Arc::new(e) };
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| unread("/proc/self/cgroup", e))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| unread("/proc/self/mountinfo", e))?;
    base_in(&own, &mounts)
}

/// [`find_base`] from the text of `/proc/self/cgroup` (`own`) and `/proc/self/mountinfo` (`mounts`): each hierarchy's
/// group directory, kept if a probe group can be made (and removed) in it.
fn base_in(own: &str, mounts: &str) -> Result<(PathBuf, Version), CgroupError> {
    let mut why = Vec::new();
    for version in [Version::V2, Version::V1Pids] {
        match candidate(own, mounts, version) {
            Ok(base) => {
                let probe = base.join(format!("gauntlet-probe-{}", std::process::id()));
                match std::fs::create_dir(&probe) {
                    Ok(()) => {
                        let _ = std::fs::remove_dir(&probe);
                        return Ok((base, version));
                    }
                    Err(e) => why.push(HierarchyError::NotWritable { base, source: Arc::new(e) }),
                }
            }
            Err(e) => why.push(e),
        }
    }
    Err(CgroupError::NoHierarchy(why))
}

/// The directory of gauntlet's own group in the hierarchy of `version`, from `/proc/self/cgroup` and the
/// hierarchy's mount in `/proc/self/mountinfo`.
fn candidate(own: &str, mounts: &str, version: Version) -> Result<PathBuf, HierarchyError> {
    let hierarchy = match version {
        Version::V2 => "cgroup v2",
        Version::V1Pids => "cgroup v1 pids",
    };
    let path = own
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let hit = match version {
                Version::V2 => id == "0" && controllers.is_empty(),
                Version::V1Pids => controllers.split(',').any(|c| c == "pids"),
            };
            hit.then_some(path)
        })
        .ok_or(HierarchyError::NoGroup { hierarchy })?;
    for line in mounts.lines() {
        let Some((before, after)) = line.split_once(" - ") else { continue };
        let fields: Vec<&str> = before.split(' ').collect();
        let after: Vec<&str> = after.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (fields.get(3), fields.get(4), after.first()) else {
            continue;
        };
        let hit = match version {
            Version::V2 => *fstype == "cgroup2",
            Version::V1Pids => *fstype == "cgroup" && after.get(2).is_some_and(|o| o.split(',').any(|c| c == "pids")),
        };
        if !hit {
            continue;
        }
        // The mount shows the hierarchy from `root` down; gauntlet's group must be inside it.
        let outside = || HierarchyError::OutsideMount { hierarchy, group: path.to_owned(), mount: (*point).to_owned() };
        let Some(rel) = path.strip_prefix(root.trim_end_matches('/')) else {
            return Err(outside());
        };
        if !rel.is_empty() && !rel.starts_with('/') {
            return Err(outside());
        }
        let dir = PathBuf::from(format!("{point}{rel}"));
        if !plain(&dir) {
            return Err(HierarchyError::UnhandledPath { hierarchy, dir });
        }
        return Ok(dir);
    }
    Err(HierarchyError::NotMounted { hierarchy })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
35 25 0:30 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw
36 25 0:31 / /sys/fs/cgroup/pids rw,relatime shared:11 - cgroup cgroup rw,pids
37 25 0:32 /docker/abc /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
";

    /// No usable hierarchy is one error that keeps why, hierarchy by hierarchy, in the order they were tried.
    #[test]
    fn no_usable_hierarchy_is_no_hierarchy_with_each_reason_in_order() {
        let e = base_in("", MOUNTS).unwrap_err();
        assert!(
            matches!(
                &e,
                CgroupError::NoHierarchy(why) if matches!(
                    why.as_slice(),
                    [
                        HierarchyError::NoGroup { hierarchy: "cgroup v2" },
                        HierarchyError::NoGroup { hierarchy: "cgroup v1 pids" }
                    ]
                )
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "cgroup v2: gauntlet is in no such group; cgroup v1 pids: gauntlet is in no such group"
        );
        // Mounted where no group can be made: not writable, named by its directory.
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let mounts = format!("30 25 0:26 / {} rw - cgroup2 cgroup2 rw\n", gone.display());
        let e = base_in("0::/\n", &mounts).unwrap_err();
        assert!(
            matches!(
                &e,
                CgroupError::NoHierarchy(why) if matches!(
                    why.as_slice(),
                    [HierarchyError::NotWritable { base, .. }, HierarchyError::NoGroup { .. }] if *base == gone
                )
            ),
            "{e:?}"
        );
        // Where the probe group can be made, that hierarchy is the base.
        std::fs::create_dir(&gone).unwrap();
        assert_eq!(base_in("0::/\n", &mounts).unwrap(), (gone.clone(), Version::V2));
        assert_eq!(std::fs::read_dir(&gone).unwrap().count(), 0, "the probe group is removed");
    }

    #[test]
    fn the_group_directory_is_found_from_the_mount_and_the_own_path() {
        let own = "8:pids:/\n1:cpu:/docker/abc/x\n0::/user.slice/s-1.scope\n";
        assert_eq!(
            candidate(own, MOUNTS, Version::V2).unwrap(),
            PathBuf::from("/sys/fs/cgroup/unified/user.slice/s-1.scope")
        );
        assert_eq!(candidate(own, MOUNTS, Version::V1Pids).unwrap(), PathBuf::from("/sys/fs/cgroup/pids/"));
        // No v2 mount: said, not guessed.
        let v1_only: String = MOUNTS.lines().skip(1).map(|l| format!("{l}\n")).collect();
        let e = candidate(own, &v1_only, Version::V2).unwrap_err();
        assert!(matches!(e, HierarchyError::NotMounted { hierarchy: "cgroup v2" }), "{e:?}");
        assert_eq!(e.to_string(), "cgroup v2: not mounted");
        // A path the watchdog could not carry as one word is refused.
        let e = candidate("0::/a b:c\n", MOUNTS, Version::V2).unwrap_err();
        assert!(matches!(e, HierarchyError::UnhandledPath { .. }), "{e:?}");
        assert!(e.to_string().contains("characters"));
        // A group outside what the mount shows is said so, with both paths.
        let e = candidate("1:cpu:/elsewhere\n", MOUNTS, Version::V1Pids).unwrap_err();
        assert!(matches!(e, HierarchyError::NoGroup { hierarchy: "cgroup v1 pids" }), "{e:?}");
        let own_outside = "8:pids:/\n";
        let mounts_in_docker = "36 25 0:31 /docker /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        assert!(matches!(
            candidate(own_outside, mounts_in_docker, Version::V1Pids),
            Err(HierarchyError::OutsideMount { .. })
        ));
    }
}
