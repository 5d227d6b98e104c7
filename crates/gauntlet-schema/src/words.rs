//! The closed vocabularies of gauntlet's files (verdicts, statuses, modes, outcomes) as enums whose JSON
//! spellings are exactly the strings earlier versions wrote. Nothing here may change a spelling: old records must
//! keep reading and outputs must keep their bytes.

/// Declares an enum whose variants serialize as the given strings, with `as_str`, `Display`, `FromStr` and
/// comparison with a `&str` (so that a test's `record.status == "pass"` reads the same as before; the code itself
/// compares variants, which a misspelling cannot compile into).
#[macro_export]
macro_rules! string_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The spelling in files and output.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!("`{other}` is not a {}", stringify!($name))),
                }
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }
    };
}

string_enum! {
    /// How a spawned server ended (or that it was attached and not ours to stop).
    pub enum StopOutcome {
        Terminated => "terminated",
        Killed => "killed",
        Stuck => "stuck",
        Crashed => "crashed",
        NotStarted => "not-started",
        Attached => "attached",
    }
}

string_enum! {
    /// What the kernel-log bracket of a run could tell.
    pub enum KernelLogState {
        /// Read completely; no fault attributed to the run.
        Clean => "clean",
        /// A fault line was logged during the run.
        Fault => "fault",
        /// Records were lost or the reader failed part-way.
        Incomplete => "incomplete",
        /// The kernel log could not be read at all.
        Blind => "blind",
    }
}

string_enum! {
    /// Why a run did not start (`skipped.json`).
    pub enum SkipKind {
        GpuBusy => "gpu-busy",
        BuildTimeout => "build-timeout",
    }
}

string_enum! {
    /// Which clock stamped a bench batch's receive times.
    pub enum ReceiveClock {
        Kernel => "kernel",
        Client => "client",
        Mixed => "mixed",
    }
}

// The macro derives no `Default` (most vocabularies have none); a sentry record starts clean.
#[allow(clippy::derivable_impls)]
impl Default for KernelLogState {
    fn default() -> Self {
        KernelLogState::Clean
    }
}
