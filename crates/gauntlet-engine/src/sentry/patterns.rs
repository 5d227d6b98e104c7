//! The pattern table (`patterns.toml`, embedded): which kernel-log and server-stderr lines are GPU faults, and of
//! which class. Data, not code, so a new driver message is a one-line change that the fixture tests cover.

use regex::Regex;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Info,
    Attribution,
    Warn,
    App,
    Device,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Info => "info",
            Class::Attribution => "attribution",
            Class::Warn => "warn",
            Class::App => "app",
            Class::Device => "device",
        }
    }
}

/// One rule that matched one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    pub pattern: String,
    pub class: Class,
    /// PCI address named by the line (Xid lines drop the function digit; `.0` is appended).
    pub bdf: Option<String>,
    pub pid: Option<u32>,
    pub process: Option<String>,
    pub xid: Option<u32>,
}

#[derive(Deserialize)]
struct File {
    version: u32,
    xid: XidTable,
    pattern: Vec<RawPattern>,
}

#[derive(Deserialize)]
struct XidTable {
    app: Vec<u32>,
    warn: Vec<u32>,
}

#[derive(Deserialize)]
struct RawPattern {
    id: String,
    class: String,
    regex: String,
    #[serde(default = "kmsg")]
    source: String,
}

fn kmsg() -> String {
    "kmsg".into()
}

struct Rule {
    id: String,
    class: Option<Class>,
    regex: Regex,
    stderr: bool,
}

pub struct Patterns {
    rules: Vec<Rule>,
    xid_app: Vec<u32>,
    xid_warn: Vec<u32>,
}

const TABLE: &str = include_str!("patterns.toml");

/// Why a pattern table was refused; `id` names the pattern at fault.
#[derive(Debug, thiserror::Error)]
pub enum PatternsError {
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("pattern table version {version} is not supported")]
    Version { version: u32 },
    #[error("pattern {id}: unknown class `{class}`")]
    UnknownClass { id: String, class: String },
    #[error("pattern {id}: {source}")]
    Regex { id: String, source: regex::Error },
}

impl Patterns {
    /// The embedded table. It is compiled into the binary and covered by tests, so a failure here is a bug.
    pub fn embedded() -> &'static Patterns {
        static P: std::sync::OnceLock<Patterns> = std::sync::OnceLock::new();
        P.get_or_init(|| Patterns::parse(TABLE).expect("the embedded pattern table is valid"))
    }

    pub fn parse(text: &str) -> Result<Patterns, PatternsError> {
        let file: File = toml::from_str(text)?;
        if file.version != 1 {
            return Err(PatternsError::Version { version: file.version });
        }
        let mut rules = Vec::new();
        for p in file.pattern {
            let class = match p.class.as_str() {
                "xid" => None,
                "device" => Some(Class::Device),
                "app" => Some(Class::App),
                "warn" => Some(Class::Warn),
                "info" => Some(Class::Info),
                "attribution" => Some(Class::Attribution),
                other => return Err(PatternsError::UnknownClass { id: p.id, class: other.to_owned() }),
            };
            let regex = match Regex::new(&p.regex) {
                Ok(regex) => regex,
                Err(source) => return Err(PatternsError::Regex { id: p.id, source }),
            };
            rules.push(Rule { id: p.id, class, regex, stderr: p.source == "stderr" });
        }
        Ok(Patterns { rules, xid_app: file.xid.app, xid_warn: file.xid.warn })
    }

    /// Every rule of the given source that matches `text`.
    pub fn classify(&self, text: &str, stderr: bool) -> Vec<Match> {
        let mut out = Vec::new();
        for rule in self.rules.iter().filter(|r| r.stderr == stderr) {
            let Some(c) = rule.regex.captures(text) else { continue };
            let get = |name: &str| c.name(name).map(|m| m.as_str().trim().trim_matches('\'').to_owned());
            let pid = get("pid").and_then(|p| p.parse().ok());
            let mut bdf = get("bdf").map(|b| normalise_bdf(&b));
            let xid: Option<u32> = get("xid").and_then(|x| x.parse().ok());
            let class = match (rule.class, xid) {
                (Some(c), _) => c,
                (None, Some(code)) => self.xid_class(code, text),
                (None, None) => Class::Device,
            };
            if bdf.is_none() {
                bdf = leading_bdf(text);
            }
            out.push(Match {
                pattern: rule.id.clone(),
                class,
                bdf,
                pid,
                process: get("name").filter(|n| !n.is_empty() && n != "<unknown>"),
                xid,
            });
        }
        out
    }

    fn xid_class(&self, code: u32, text: &str) -> Class {
        // 45 is cleanup after another Xid: it takes the class of the one it names.
        if code == 45
            && let Some(root) = text
                .split("caused by previous Xid ")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next().and_then(|d| d.parse::<u32>().ok()))
            && root != 45
        {
            return self.xid_class(root, "");
        }
        // 154 reports a change of the recovery action: to "None" it is informational, to anything else a reset.
        if code == 154 {
            return if text.contains(") to 0x0 (") { Class::Info } else { Class::Device };
        }
        if self.xid_app.contains(&code) {
            Class::App
        } else if self.xid_warn.contains(&code) {
            Class::Warn
        } else {
            Class::Device
        }
    }
}

/// `0000:01:00` (Xid form, no function) → `0000:01:00.0`; lower case.
pub fn normalise_bdf(b: &str) -> String {
    let b = b.trim_end_matches(['.', ':']).to_ascii_lowercase();
    let b = if b.matches(':').count() == 1 { format!("0000:{b}") } else { b };
    // NVML writes an 8-digit domain (`00000000:00:06.0`), the kernel a 4-digit one.
    let b = match b.split_once(':') {
        Some((domain, rest)) if domain.len() == 8 && domain.starts_with("0000") => format!("{}:{rest}", &domain[4..]),
        _ => b,
    };
    if b.contains('.') { b } else { format!("{b}.0") }
}

/// Drivers logging through dev_err() start with `amdgpu 0000:03:00.0: `.
fn leading_bdf(text: &str) -> Option<String> {
    let word = text.split_whitespace().nth(1)?.trim_end_matches(':');
    let ok = word.len() == 12 && word.as_bytes()[4] == b':' && word.as_bytes()[10] == b'.';
    ok.then(|| word.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(version: u32, class: &str, regex: &str) -> String {
        format!(
            "version = {version}\n[xid]\napp = []\nwarn = []\n[[pattern]]\nid = \"p1\"\nclass = \"{class}\"\nregex = '{regex}'\n"
        )
    }

    #[test]
    fn a_bad_table_is_refused_with_the_variant_and_the_pattern_at_fault() {
        assert!(Patterns::parse(&table(1, "device", "Xid")).is_ok());
        let e = Patterns::parse(&table(2, "device", "Xid")).err().unwrap();
        assert!(matches!(e, PatternsError::Version { version: 2 }), "{e:?}");
        assert_eq!(e.to_string(), "pattern table version 2 is not supported");
        let e = Patterns::parse(&table(1, "fatal", "Xid")).err().unwrap();
        assert!(matches!(&e, PatternsError::UnknownClass { id, class } if id == "p1" && class == "fatal"), "{e:?}");
        assert_eq!(e.to_string(), "pattern p1: unknown class `fatal`");
        let e = Patterns::parse(&table(1, "app", "(unclosed")).err().unwrap();
        assert!(matches!(&e, PatternsError::Regex { id, .. } if id == "p1"), "{e:?}");
        assert!(e.to_string().starts_with("pattern p1: "), "{e}");
        assert!(matches!(Patterns::parse("version = ").err().unwrap(), PatternsError::Toml(_)));
    }
}
