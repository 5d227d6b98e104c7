//! gauntlet's command line: parse arguments, call the engine, draw the terminal, map the outcome to an exit code.
//! No logic about servers, checks or verdicts lives here.

mod terminal;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gauntlet_engine::manifest::{Manifest, Target};
use gauntlet_engine::run::{GateOptions, run_gate, write_baseline, write_outputs};
use gauntlet_schema::{RunRecord, Verdict, parse_run_record};

/// Exit codes, documented in the README; tests assert them.
mod exit {
    pub const OK: u8 = 0;
    pub const FAIL: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const SKIP: u8 = 3;
    pub const INCONCLUSIVE: u8 = 4;
    pub const INTERNAL: u8 = 101;
}

#[derive(Parser)]
#[command(
    name = "gauntlet",
    version,
    about = "Does the inference server still work, say the same things, run as fast?"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The gate: start the profile's server, run the suite, judge it against a baseline, stop the server.
    Run(RunArgs),
    /// Validate a manifest (the embedded default when none is given) and list its profiles.
    Check {
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
    },
    /// Print the JSON Schema of the manifest format.
    Schema,
    /// Print the embedded default manifest (a starting point for your own).
    DefaultManifest,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Manifest file; without it, the embedded default (llama.cpp + SmolLM2-135M, installed by scripts/setup.sh).
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// Profile to run; default: the manifest's `default_profile`, or its only profile.
    #[arg(long, short)]
    profile: Option<String>,
    /// A run.json (from --write-baseline or an earlier --out) to compare with.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Write this run as a baseline file unless the verdict is fail.
    #[arg(long, value_name = "FILE")]
    write_baseline: Option<PathBuf>,
    /// Output directory; default: a new timestamped folder under ./gauntlet-out/.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Listen on this port instead of the profile's (spawned servers only).
    #[arg(long)]
    port: Option<u16>,
}

enum Failure {
    BadInput(String),
    Internal(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Check { manifest } => check(manifest.as_deref()),
        Command::Schema => {
            println!("{}", include_str!("../../../schema/manifest.schema.json").trim_end());
            Ok(exit::OK)
        }
        Command::DefaultManifest => {
            print!("{}", Manifest::embedded_default_text());
            Ok(exit::OK)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Failure::BadInput(msg)) => {
            eprintln!("gauntlet: error: {msg}");
            ExitCode::from(exit::BAD_INPUT)
        }
        Err(Failure::Internal(msg)) => {
            eprintln!("gauntlet: internal error: {msg}");
            ExitCode::from(exit::INTERNAL)
        }
    }
}

fn load_manifest(path: Option<&Path>) -> Result<Manifest, Failure> {
    let manifest = match path {
        Some(p) => Manifest::from_file(p),
        None => Manifest::embedded_default(&gauntlet_engine::home_dir()),
    }
    .map_err(|e| Failure::BadInput(e.to_string()))?;
    for w in &manifest.warnings {
        eprintln!("gauntlet: warning: {}: {w}", manifest.origin);
    }
    Ok(manifest)
}

fn check(path: Option<&Path>) -> Result<u8, Failure> {
    let manifest = load_manifest(path)?;
    let mut problems = 0;
    for (name, _) in manifest.profiles.iter() {
        match manifest.select(Some(name)) {
            Ok(p) => {
                let target = match &p.target {
                    Target::Spawn(s) => format!("spawns {}", s.command().join(" ")),
                    Target::Attach(a) => format!("attaches to {}", a.base_url),
                };
                println!("{name}: ok, suite `{}` ({} cases), {target}", p.suite.id, p.suite.cases.len());
            }
            Err(e) => {
                problems += 1;
                println!("{name}: {e}");
            }
        }
    }
    Ok(if problems == 0 { exit::OK } else { exit::BAD_INPUT })
}

fn run(args: RunArgs) -> Result<u8, Failure> {
    let manifest = load_manifest(args.manifest.as_deref())?;
    let mut profile = manifest.select(args.profile.as_deref()).map_err(|e| Failure::BadInput(e.to_string()))?.clone();
    if let Some(port) = args.port {
        match &mut profile.target {
            Target::Spawn(s) if port > 0 => s.port = port,
            Target::Spawn(_) => return Err(Failure::BadInput("--port: must be 1..=65535".into())),
            Target::Attach(_) => {
                return Err(Failure::BadInput(format!(
                    "--port: profile `{}` attaches to a running server; its address is its `base_url`",
                    profile.name
                )));
            }
        }
    }
    let baseline = match &args.baseline {
        Some(path) => Some((read_baseline(path)?, path.display().to_string())),
        None => None,
    };
    let out_dir = match args.out {
        Some(d) => d,
        None => default_out_dir(&profile.name),
    };
    let mut view = terminal::View::new(std::io::stderr().is_terminal());
    let opts = GateOptions { out_dir: &out_dir, baseline: baseline.as_ref().map(|(r, p)| (r, p.clone())) };
    let record = run_gate(&profile, &opts, &mut view).map_err(|e| Failure::BadInput(e.to_string()))?;
    write_outputs(&record, baseline.as_ref().map(|(r, _)| r), &out_dir)
        .map_err(|e| Failure::Internal(format!("cannot write outputs into `{}`: {e}", out_dir.display())))?;
    publish_to_github(&record, &out_dir);
    let mut stdout = std::io::stdout().lock();
    let _ = terminal::summary(&mut stdout, &record, &out_dir);
    if let Some(path) = &args.write_baseline {
        match write_baseline(&record, path) {
            Ok(()) => {
                let _ = writeln!(stdout, "baseline written: {}", path.display());
            }
            Err(e) => eprintln!("gauntlet: {e}"),
        }
    }
    Ok(match record.verdict {
        Verdict::Pass | Verdict::Warn => exit::OK,
        Verdict::Fail => exit::FAIL,
        Verdict::Skip => exit::SKIP,
        Verdict::Inconclusive => exit::INCONCLUSIVE,
    })
}

fn read_baseline(path: &Path) -> Result<RunRecord, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::BadInput(format!("cannot read baseline `{}`: {e}", path.display())))?;
    parse_run_record(&text).map_err(|e| Failure::BadInput(format!("baseline `{}`: {e}", path.display())))
}

fn default_out_dir(profile: &str) -> PathBuf {
    let stamp = gauntlet_engine::util::now_rfc3339().replace([':', '-'], "");
    let stamp = stamp.split('.').next().unwrap_or("run").to_owned();
    let base = PathBuf::from("gauntlet-out");
    let mut dir = base.join(format!("{stamp}-{profile}"));
    let mut n = 2;
    while dir.exists() {
        dir = base.join(format!("{stamp}-{profile}-{n}"));
        n += 1;
    }
    dir
}

/// Annotations on stdout when running under GitHub Actions; the Markdown report appended to the step summary.
fn publish_to_github(record: &RunRecord, out_dir: &Path) {
    if std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true") {
        print!("{}", gauntlet_engine::report::github_annotations(record));
    }
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|s| !s.is_empty()) {
        let appended = std::fs::read(out_dir.join("report.md")).and_then(|report| {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&summary)?;
            f.write_all(&report)?;
            f.write_all(b"\n")
        });
        if let Err(e) = appended {
            eprintln!("gauntlet: warning: cannot append to GITHUB_STEP_SUMMARY: {e}");
        }
    }
}
