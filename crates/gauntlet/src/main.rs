//! gauntlet's command line: parse arguments, call the engine, draw the terminal, map the outcome to an exit code.
//! No logic about servers, checks or verdicts lives here.

mod baseline;
mod terminal;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use gauntlet_engine::manifest::{Manifest, Target};
use gauntlet_engine::run::{GateError, GateOptions, run_gate, write_baseline, write_outputs};
use gauntlet_engine::store::skip_cache::{self, CacheKey};
use gauntlet_engine::store::{Store, Trust, default_store_dir};
use gauntlet_schema::{RunRecord, Verdict, parse_run_record};
use serde_json::Value;

/// Exit codes, documented in the README; tests assert them.
pub(crate) mod exit {
    pub const OK: u8 = 0;
    pub const FAIL: u8 = 1;
    pub const BAD_INPUT: u8 = 2;
    pub const SKIP: u8 = 3;
    pub const INCONCLUSIVE: u8 = 4;
    pub const INTERNAL: u8 = 101;
}

/// `gauntlet --version`: the crate version and the git commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("GAUNTLET_GIT_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "gauntlet",
    version = VERSION,
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
    /// Baselines: promote a run, show and list them, verify the store's hash chains.
    #[command(subcommand)]
    Baseline(BaselineCommand),
    /// Which profiles does a change concern? Maps changed paths to profiles through the manifest's [plan].
    Plan(PlanArgs),
    /// Measure latency and throughput at each concurrency (closed-loop batches); compare with a baseline bench.
    Bench(BenchArgs),
    /// Release qualification: stages R0–R7 on one server, into an evidence bundle that `verify` checks offline.
    Qualify(QualifyArgs),
    /// Check an evidence bundle offline: every file, identity and derived verdict; fail closed, list every problem.
    Verify {
        bundle: PathBuf,
        /// Print the problems as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Losslessness: does run B say exactly what run A said? Per case: identical or the first divergence. With a
    /// control run (A's setup again), a case where the control differs from A is inconclusive, not a failure.
    Compare {
        /// run.json of A, or its output folder.
        a: PathBuf,
        /// run.json of B, or its output folder.
        b: PathBuf,
        /// A second run of A's setup.
        #[arg(long, value_name = "RUN")]
        control: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Fold the run records of a CI matrix into one verdict, summary.md, junit.xml and merged.json.
    Report(ReportArgs),
    /// What will and will not work for a profile on this machine: kernel log, GPU and who holds it, server binary,
    /// model, port, store. One line each, with the fix. Exit 1 when something would make a run fail.
    Doctor {
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        #[arg(long, short)]
        profile: Option<String>,
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        /// Print the checks and the runtime facts (CPU, GPU) as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum BaselineCommand {
    /// Promote a run (its run.json or its output folder) to the baseline of its identity, or record a reviewer's
    /// decision on a qualification bundle (verified first; it must be complete and pass; --note required).
    Promote {
        run: PathBuf,
        /// Why this run becomes the reference (recorded in the history).
        #[arg(long, default_value = "")]
        note: String,
        /// Promote by hand, outside CI. Refused in a pull-request context whatever this says.
        #[arg(long)]
        trusted: bool,
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
    },
    /// Show the current baseline of a profile (or an identity digest) and its history.
    Show {
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        #[arg(long, short)]
        profile: Option<String>,
        /// An identity digest instead of a profile.
        #[arg(long)]
        identity: Option<String>,
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
    },
    /// List every identity in the store with its newest baseline.
    List {
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
    },
    /// Walk every history chain and record; fail on any edit, reorder, deletion or reused identity key.
    Verify {
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct BenchArgs {
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    #[arg(long, short)]
    profile: Option<String>,
    /// Concurrency levels (comma-separated). Default: the profile's `[bench]` table, else 1,2.
    #[arg(long, value_delimiter = ',')]
    concurrency: Vec<usize>,
    /// Default: the profile's `[bench]` table, else 64.
    #[arg(long)]
    max_tokens: Option<u64>,
    /// Batches per concurrency run first and discarded. Default: the profile's `[bench]` table, else 1.
    #[arg(long)]
    warmups: Option<usize>,
    /// Measured batches per concurrency: one sample of each metric each (at least 2 to compare). Default: the
    /// profile's `[bench]` `samples`, else 5.
    #[arg(long)]
    repetitions: Option<usize>,
    /// An earlier bench.json of the same identity to compare with.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Open loop: each batch's requests (as many as the concurrency) arrive as a seeded Poisson process at this
    /// many requests per second, instead of all at once. Default: the profile's `[bench]` `rate`, else closed loop.
    #[arg(long, value_name = "REQ/S")]
    rate: Option<f64>,
    /// The open loop's arrival seed (recorded). Default: the profile's `[bench]` `seed`, else 1.
    #[arg(long)]
    seed: Option<u64>,
    /// Before calling a regression, measure again (into OUT/confirm): a regression stands only when the re-run
    /// shows it too; otherwise the result is inconclusive.
    #[arg(long)]
    confirm: bool,
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[arg(long)]
    port: Option<u16>,
}

#[derive(clap::Args)]
struct QualifyArgs {
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    #[arg(long, short)]
    profile: Option<String>,
    /// The bundle folder (must not hold a qualification already).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Stages to run (comma-separated, e.g. R1,R3); R0 and R7 always run. Default: all.
    #[arg(long, value_name = "R…")]
    stages: Option<String>,
    /// The performance baseline for R5: a bench.json, an r5-performance.json, or an earlier bundle. Default: the
    /// newest qualification promoted into the store for this identity, if any.
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
    /// The baseline store (default: $GAUNTLET_STORE, the manifest's `store`, or GAUNTLET_HOME/store).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    #[arg(long)]
    port: Option<u16>,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// run.json / skipped.json files, or folders searched for them (CI artifacts downloaded side by side).
    #[arg(long, required = true, num_args = 1.., value_name = "PATH")]
    merge: Vec<PathBuf>,
    /// Profiles that must be there (comma-separated or repeated); a missing one fails the merge.
    #[arg(long, value_name = "P[,P…]")]
    expect: Vec<String>,
    /// The plan's matrix (`gauntlet plan --format github-matrix`): every profile in it must be there.
    #[arg(long, value_name = "FILE")]
    matrix: Option<PathBuf>,
    /// Write summary.md, junit.xml and merged.json here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Name each shard's evidence as this artifact, `{profile}` replaced (e.g. `gauntlet-{profile}`).
    #[arg(long, value_name = "PATTERN")]
    artifact: Option<String>,
}

#[derive(clap::Args)]
struct PlanArgs {
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// A file with one changed path per line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["since", "profiles", "all"])]
    changed_files: Option<PathBuf>,
    /// Exactly these profiles (comma-separated or repeated), e.g. from a manual dispatch's input.
    #[arg(long, value_name = "P[,P…]", conflicts_with_all = ["since", "all"])]
    profiles: Vec<String>,
    /// Every profile of the manifest.
    #[arg(long, conflicts_with = "since")]
    all: bool,
    /// Changed since this revision (e.g. the baseline's commit), in the repository at --repo.
    #[arg(long, value_name = "REV")]
    since: Option<String>,
    #[arg(long, value_name = "REV", requires = "since")]
    until: Option<String>,
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// When nothing is selected, select every profile.
    #[arg(long)]
    fallback_all: bool,
    #[arg(long, value_enum, default_value = "list")]
    format: PlanFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PlanFormat {
    /// One profile per line.
    List,
    /// `{"include": [{"profile": …, "runner": [labels]}]}`.
    GithubMatrix,
    /// `matrix=<github-matrix>` and `count=N` lines, to append to `$GITHUB_OUTPUT`.
    GithubOutput,
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
    /// Baseline store; default: $GAUNTLET_STORE, the manifest's `store`, or ~/.cache/gauntlet/store.
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// The source tree under test (a git work tree): enables the skip-cache for a clean pass.
    #[arg(long, value_name = "DIR")]
    source: Option<PathBuf>,
    /// Run even when the skip-cache remembers a pass for exactly this input.
    #[arg(long)]
    no_cache: bool,
    /// Promote this run to the store's baseline when its verdict is not fail and the context is trusted.
    #[arg(long)]
    promote: bool,
    /// Decision note recorded with --promote.
    #[arg(long, default_value = "")]
    note: String,
    /// With --promote: a person promotes by hand, outside CI.
    #[arg(long)]
    trusted: bool,
}

pub(crate) enum Failure {
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
        Command::Baseline(cmd) => baseline::command(cmd),
        Command::Plan(args) => plan(args),
        Command::Report(args) => report(args),
        Command::Bench(args) => bench(args),
        Command::Qualify(args) => qualify(args),
        Command::Verify { bundle, json } => verify(&bundle, json),
        Command::Compare { a, b, control, json } => compare(&a, &b, control.as_deref(), json),
        Command::Doctor { manifest, profile, store, json } => {
            doctor(manifest.as_deref(), profile.as_deref(), store.as_deref(), json)
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

pub(crate) fn load_manifest(path: Option<&Path>) -> Result<Manifest, Failure> {
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

fn doctor(path: Option<&Path>, profile: Option<&str>, store: Option<&Path>, json: bool) -> Result<u8, Failure> {
    use gauntlet_engine::doctor::{self, Hints, Status};
    let manifest = load_manifest(path)?;
    let profile = manifest.select_unchecked(profile).map_err(|e| Failure::BadInput(e.to_string()))?;
    let store_dir = default_store_dir(store, manifest.store.as_deref());
    let hints = Hints { setup: path.is_none().then_some("scripts/setup.sh --native") };
    let exam = doctor::examine(profile, &gauntlet_engine::home_dir(), &store_dir, &hints);
    let worst = exam.worst();
    if json {
        let text = serde_json::to_string_pretty(&exam).map_err(|e| Failure::Internal(e.to_string()))?;
        println!("{text}");
    } else {
        let mut out = std::io::stdout().lock();
        let _ = terminal::doctor(&mut out, &exam, &manifest.origin);
    }
    Ok(if worst == Status::Fail { exit::FAIL } else { exit::OK })
}

/// The chosen profile, with `--port` applied to a server gauntlet starts.
fn select_profile(
    manifest: &Manifest,
    name: Option<&str>,
    port: Option<u16>,
) -> Result<gauntlet_engine::manifest::Profile, Failure> {
    let mut profile = manifest.select(name).map_err(|e| Failure::BadInput(e.to_string()))?.clone();
    if let Some(port) = port {
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
    Ok(profile)
}

fn run(args: RunArgs) -> Result<u8, Failure> {
    let manifest = load_manifest(args.manifest.as_deref())?;
    let profile = select_profile(&manifest, args.profile.as_deref(), args.port)?;
    if (!args.note.is_empty() || args.trusted) && !args.promote {
        return Err(Failure::BadInput("--note and --trusted mean something only with --promote".into()));
    }
    let home = gauntlet_engine::home_dir();
    let identity = gauntlet_engine::identity::compute(&profile, &home).map_err(|e| Failure::BadInput(e.to_string()))?;
    let store_dir = default_store_dir(args.store.as_deref(), manifest.store.as_deref());
    let store = Store::open(&store_dir).map_err(|e| Failure::BadInput(e.to_string()))?;
    // Trust is decided before the run, so a refused promotion costs nothing.
    let provenance = if args.promote {
        match baseline::trust(args.trusted) {
            Trust::Trusted(p) => Some(p),
            Trust::Refused(why) => return Err(Failure::BadInput(format!("--promote: {why}"))),
        }
    } else {
        None
    };

    let (baseline, baseline_digest) = match &args.baseline {
        Some(path) => {
            let record = read_baseline(path)?;
            refuse_other_identity(&record, &identity, &path.display().to_string(), &store)?;
            let digest = gauntlet_engine::util::sha256_file(path).unwrap_or_default();
            (Some((record, path.display().to_string())), digest)
        }
        None => match store.latest(&identity.digest).map_err(|e| Failure::BadInput(e.to_string()))? {
            Some((entry, record)) => {
                eprintln!("gauntlet: baseline: {}", baseline::describe(&entry));
                (Some((record, format!("store:{}", entry.record))), entry.record.clone())
            }
            None => {
                explain_missing_baseline(&store, &profile.name, &identity);
                (None, "none".to_owned())
            }
        },
    };

    let cache_key = match &args.source {
        Some(dir) => Some(CacheKey::for_run(&profile, &identity, dir, &baseline_digest).map_err(Failure::BadInput)?),
        None => None,
    };
    let cache_dir = home.join("skip-cache");
    if let Some(key) = &cache_key
        && !args.no_cache
        && let Some(hit) = skip_cache::lookup(&cache_dir, key)
    {
        let line = format!(
            "gauntlet: reused the pass of {} ({}): same source tree, identity, model file, runtime, baseline and \
             gauntlet version; --no-cache runs again",
            hit.record.started_at,
            hit.dir.display()
        );
        print!("{}", hit.report);
        println!("\n{line}");
        // With --out, the remembered evidence is put where this run's would be, so a CI merge finds the shard.
        if let Some(out) = &args.out {
            write_reused(out, &hit).map_err(|e| Failure::Internal(format!("`{}`: {e}", out.display())))?;
        }
        append_step_summary(format!("{}\n{line}\n", hit.report).as_bytes());
        return Ok(exit::OK);
    }

    let out_dir = match args.out {
        Some(d) => d,
        None => default_out_dir(&profile.name),
    };
    let mut view = terminal::View::new(std::io::stderr().is_terminal());
    let opts = GateOptions {
        out_dir: &out_dir,
        identity: &identity,
        baseline: baseline.as_ref().map(|(r, p)| (r, p.clone())),
    };
    let record = match run_gate(&profile, &opts, &mut view) {
        Ok(r) => r,
        Err(GateError::GpuBusy(why)) => {
            eprintln!("gauntlet: skipped: {why}");
            write_skip(&out_dir, &profile.name, gauntlet_schema::SkipKind::GpuBusy, &why);
            return Ok(exit::SKIP);
        }
        Err(GateError::GpuUnknown(why)) => {
            eprintln!("gauntlet: failed closed: {why}");
            return Ok(exit::FAIL);
        }
        Err(e) => return Err(Failure::BadInput(e.to_string())),
    };
    write_outputs(&record, baseline.as_ref().map(|(r, _)| r), &out_dir)
        .map_err(|e| Failure::Internal(format!("cannot write outputs into `{}`: {e}", out_dir.display())))?;
    publish_to_github(&record, &out_dir);
    let mut stdout = std::io::stdout().lock();
    let _ = terminal::summary(&mut stdout, &record, &out_dir);
    if let Some(key) = &cache_key {
        let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap_or_default();
        if let Err(e) = skip_cache::remember(&cache_dir, key, &record, &report) {
            eprintln!("gauntlet: warning: skip-cache not written: {e}");
        }
    }
    if let Some(path) = &args.write_baseline {
        match write_baseline(&record, path) {
            Ok(()) => {
                let _ = writeln!(stdout, "baseline written: {}", path.display());
            }
            Err(e) => eprintln!("gauntlet: {e}"),
        }
    }
    if let Some(provenance) = provenance {
        if record.verdict == Verdict::Fail {
            let _ = writeln!(stdout, "not promoted: the run failed");
        } else {
            let entry = store
                .promote(&record, provenance, &args.note)
                .map_err(|e| Failure::Internal(format!("promotion failed: {e}")))?;
            let _ = writeln!(stdout, "promoted: {}", baseline::describe(&entry));
            baseline::warn_paired(&store, &entry);
        }
    }
    Ok(exit_of(record.verdict))
}

/// A skip-cache hit's remembered run.json and report.md, and `reused.json` saying where they come from.
fn write_reused(out: &Path, hit: &skip_cache::Hit) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    gauntlet_engine::util::write_atomic(&out.join("run.json"), &std::fs::read(hit.dir.join("run.json"))?)?;
    gauntlet_engine::util::write_atomic(&out.join("report.md"), hit.report.as_bytes())?;
    let reused = gauntlet_schema::store::Reused {
        reused_from: hit.dir.display().to_string(),
        original_started_at: hit.record.started_at.clone(),
        at: gauntlet_engine::util::now_rfc3339(),
    };
    gauntlet_engine::util::write_atomic(&out.join("reused.json"), serde_json::to_string_pretty(&reused)?.as_bytes())
}

fn exit_of(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Pass | Verdict::Warn => exit::OK,
        Verdict::Fail => exit::FAIL,
        Verdict::Skip => exit::SKIP,
        Verdict::Inconclusive => exit::INCONCLUSIVE,
    }
}

/// A skipped run leaves `skipped.json` in its output folder, so a merged report shows it as skipped, not missing.
fn write_skip(out_dir: &Path, profile: &str, kind: gauntlet_schema::SkipKind, reason: &str) {
    let skip = gauntlet_schema::SkipRecord {
        gauntlet_version: env!("CARGO_PKG_VERSION").into(),
        profile: profile.into(),
        kind,
        reason: reason.into(),
        at: gauntlet_engine::util::now_rfc3339(),
    };
    let written = std::fs::create_dir_all(out_dir).and_then(|_| {
        let text = serde_json::to_vec_pretty(&skip).map_err(std::io::Error::other)?;
        gauntlet_engine::util::write_atomic(&out_dir.join("skipped.json"), &text)
    });
    if let Err(e) = written {
        eprintln!("gauntlet: warning: cannot write {}: {e}", out_dir.join("skipped.json").display());
    }
}

/// What `bench` and `qualify` made, or None when the GPU stayed busy (said on stderr; the caller exits 3).
fn or_skip<T>(result: Result<T, GateError>) -> Result<Option<T>, Failure> {
    match result {
        Ok(x) => Ok(Some(x)),
        Err(GateError::GpuBusy(why)) => {
            eprintln!("gauntlet: skipped: {why}");
            Ok(None)
        }
        Err(e) => Err(Failure::BadInput(e.to_string())),
    }
}

/// A bench baseline of the same identity, or a clear refusal.
fn bench_baseline(
    path: Option<&Path>,
    identity: &gauntlet_engine::identity::Identity,
) -> Result<Option<(gauntlet_engine::run::BenchRecord, String)>, Failure> {
    let Some(path) = path else { return Ok(None) };
    let b = gauntlet_engine::run::read_bench(path).map_err(Failure::BadInput)?;
    if b.identity_digest != identity.digest {
        let diff = gauntlet_engine::identity::differences(&b.identity, &identity.value, &Value::Null, &Value::Null);
        return Err(Failure::BadInput(format!(
            "refusing to compare with `{}`: another identity ({})",
            path.display(),
            diff.refusing.join("; ")
        )));
    }
    Ok(Some((b, path.display().to_string())))
}

fn qualify(args: QualifyArgs) -> Result<u8, Failure> {
    use gauntlet_engine::qualify::{QualifyOptions, parse_stages, run_qualify};
    let manifest = load_manifest(args.manifest.as_deref())?;
    let profile = select_profile(&manifest, args.profile.as_deref(), args.port)?;
    let stages =
        parse_stages(args.stages.as_deref().unwrap_or("R0,R1,R2,R3,R4,R5,R6,R7")).map_err(Failure::BadInput)?;
    let identity = gauntlet_engine::identity::compute(&profile, &gauntlet_engine::home_dir())
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    let baseline = match args.baseline.as_deref() {
        Some(path) => bench_baseline(Some(path), &identity)?,
        None => {
            // The reference a reviewer promoted (`gauntlet baseline promote BUNDLE`) for exactly this identity.
            let store = Store::open(&default_store_dir(args.store.as_deref(), manifest.store.as_deref()))
                .map_err(|e| Failure::BadInput(e.to_string()))?;
            match store.latest_decision(&identity.digest).map_err(|e| Failure::BadInput(e.to_string()))? {
                Some((entry, decision)) => {
                    eprintln!("gauntlet: R5 baseline: {}", baseline::describe(&entry));
                    Some((decision.performance, format!("store:{} (qualification {})", entry.record, decision.run_id)))
                }
                None => None,
            }
        }
    };
    let out_dir = args.out.unwrap_or_else(|| default_out_dir(&format!("qualify-{}", profile.name)));
    let mut view = terminal::View::new(std::io::stderr().is_terminal());
    let opts = QualifyOptions { out_dir: &out_dir, identity: &identity, stages, baseline };
    let Some(report) = or_skip(run_qualify(&profile, &opts, &mut view))? else { return Ok(exit::SKIP) };
    let mut out = std::io::stdout().lock();
    let _ = terminal::qualification(&mut out, &report, &out_dir);
    use gauntlet_engine::qualify::QualificationVerdict;
    Ok(match report.verdict {
        QualificationVerdict::Pass => exit::OK,
        QualificationVerdict::Inconclusive => exit::INCONCLUSIVE,
        QualificationVerdict::Fail | QualificationVerdict::Running => exit::FAIL,
    })
}

/// A run record as raw JSON: `run.json`, or a folder holding one.
fn read_run_value(path: &Path) -> Result<Value, Failure> {
    let file = if path.is_dir() { path.join("run.json") } else { path.to_owned() };
    let text = std::fs::read_to_string(&file).map_err(|e| Failure::BadInput(format!("`{}`: {e}", file.display())))?;
    serde_json::from_str(&text).map_err(|e| Failure::BadInput(format!("`{}`: not JSON: {e}", file.display())))
}

fn compare(a: &Path, b: &Path, control: Option<&Path>, json: bool) -> Result<u8, Failure> {
    let (av, bv) = (read_run_value(a)?, read_run_value(b)?);
    let cv = control.map(read_run_value).transpose()?;
    let result = gauntlet_engine::compare::lossless::lossless(&av, &bv, cv.as_ref()).map_err(Failure::BadInput)?;
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&result).unwrap_or_default());
    } else {
        for c in &result.cases {
            let at = match (c.char_index, c.token_index) {
                (Some(ch), Some(t)) => format!(" at char {ch}, token {t}"),
                (Some(ch), None) => format!(" at char {ch}"),
                (None, Some(t)) => format!(" at token {t}"),
                _ => String::new(),
            };
            let _ = writeln!(out, "{:<14} {}{at} {}", c.status, c.id, c.detail);
        }
        let control = if result.controlled { "with a control run" } else { "without a control run" };
        let _ = writeln!(out, "lossless: {} ({control})", result.verdict.to_uppercase());
    }
    Ok(match result.verdict.as_str() {
        "pass" => exit::OK,
        "inconclusive" => exit::INCONCLUSIVE,
        _ => exit::FAIL,
    })
}

fn verify(bundle: &Path, json: bool) -> Result<u8, Failure> {
    if !bundle.is_dir() {
        return Err(Failure::BadInput(format!("`{}` is not a folder (want a qualification bundle)", bundle.display())));
    }
    let problems = gauntlet_engine::qualify::verify_bundle(bundle);
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({"bundle": bundle, "valid": problems.is_empty(), "problems": problems})
        );
    } else if problems.is_empty() {
        let _ = writeln!(out, "valid: {} (every file, identity and recomputed verdict checks out)", bundle.display());
    } else {
        for p in &problems {
            let _ = writeln!(out, "problem: {p}");
        }
        let _ = writeln!(out, "INVALID: {} problem(s) in {}", problems.len(), bundle.display());
    }
    Ok(if problems.is_empty() { exit::OK } else { exit::FAIL })
}

fn bench(args: BenchArgs) -> Result<u8, Failure> {
    use gauntlet_engine::run::run_bench;
    let manifest = load_manifest(args.manifest.as_deref())?;
    let profile = select_profile(&manifest, args.profile.as_deref(), args.port)?;
    // The profile's `[bench]` workload, each flag overriding its part.
    let mut workload = profile.bench.clone();
    if !args.concurrency.is_empty() {
        workload.concurrency = args.concurrency.clone();
    }
    workload.max_tokens = args.max_tokens.unwrap_or(workload.max_tokens);
    workload.warmups = args.warmups.unwrap_or(workload.warmups);
    workload.repetitions = args.repetitions.unwrap_or(workload.repetitions);
    workload.rate = args.rate.or(workload.rate);
    workload.seed = args.seed.or(workload.seed).or(workload.rate.map(|_| 1));
    if workload.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(Failure::BadInput("--rate must be a positive number of requests per second".into()));
    }
    if workload.concurrency.contains(&0) || workload.repetitions == 0 || workload.max_tokens == 0 {
        return Err(Failure::BadInput("--concurrency, --repetitions and --max-tokens must be at least 1".into()));
    }
    let identity = gauntlet_engine::identity::compute(&profile, &gauntlet_engine::home_dir())
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    let baseline = bench_baseline(args.baseline.as_deref(), &identity)?;
    let out_dir = args.out.unwrap_or_else(|| default_out_dir(&format!("bench-{}", profile.name)));
    let mut view = terminal::View::new(std::io::stderr().is_terminal());
    let mut measure = |dir: &Path| {
        let base = baseline.as_ref().map(|(b, p)| (b, p.clone()));
        or_skip(run_bench(&profile, &identity, &workload, base, dir, &mut view))
    };
    let Some(mut record) = measure(&out_dir)? else { return Ok(exit::SKIP) };
    let mut out = std::io::stdout().lock();
    let _ = terminal::bench(&mut out, &record, &out_dir);
    if args.confirm && record.verdict == "regression" {
        let _ = writeln!(out, "regression: measuring again to confirm it");
        let again_dir = out_dir.join("confirm");
        let Some(again) = measure(&again_dir)? else { return Ok(exit::SKIP) };
        let _ = terminal::bench(&mut out, &again, &again_dir);
        let outcome = gauntlet_engine::run::confirm(&mut record, &again, "confirm/bench.json");
        gauntlet_engine::run::write_bench(&record, &out_dir).map_err(|e| Failure::BadInput(e.to_string()))?;
        let _ = writeln!(out, "confirm: {outcome}");
    }
    use gauntlet_engine::run::BenchVerdict;
    Ok(match record.final_verdict() {
        BenchVerdict::Fail | BenchVerdict::Regression => exit::FAIL,
        BenchVerdict::Inconclusive => exit::INCONCLUSIVE,
        _ => exit::OK,
    })
}

fn report(args: ReportArgs) -> Result<u8, Failure> {
    use gauntlet_engine::report::merge;
    let mut expected: Vec<String> = args
        .expect
        .iter()
        .flat_map(|e| e.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(path) = &args.matrix {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::BadInput(format!("--matrix `{}`: {e}", path.display())))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Failure::BadInput(format!("--matrix `{}`: not JSON: {e}", path.display())))?;
        let include = value["include"].as_array().ok_or_else(|| {
            Failure::BadInput(format!(
                "--matrix `{}`: want {{\"include\": [{{\"profile\": …}}]}} (gauntlet plan --format github-matrix)",
                path.display()
            ))
        })?;
        for entry in include {
            let profile = entry["profile"].as_str().ok_or_else(|| {
                Failure::BadInput(format!("--matrix `{}`: an entry has no `profile`: {entry}", path.display()))
            })?;
            expected.push(profile.to_owned());
        }
    }
    expected.sort();
    expected.dedup();
    let shards = merge::collect(&args.merge).map_err(Failure::BadInput)?;
    let merged = merge::merge(shards, &expected);
    let markdown = merged.markdown(args.artifact.as_deref());
    if let Some(out) = &args.out {
        let write = |name: &str, bytes: &[u8]| {
            gauntlet_engine::util::write_atomic(&out.join(name), bytes)
                .map_err(|e| Failure::Internal(format!("cannot write `{}`: {e}", out.join(name).display())))
        };
        std::fs::create_dir_all(out).map_err(|e| Failure::Internal(format!("`{}`: {e}", out.display())))?;
        write("summary.md", markdown.as_bytes())?;
        write("junit.xml", merged.junit().as_bytes())?;
        write("merged.json", serde_json::to_string_pretty(&merged.json()).unwrap_or_default().as_bytes())?;
    }
    print!("{markdown}");
    if std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true") {
        for p in &merged.problems {
            print!("{}", gauntlet_engine::report::github_annotation("error", "gauntlet merge", p));
        }
    }
    append_step_summary(markdown.as_bytes());
    Ok(exit_of(merged.verdict))
}

fn append_step_summary(text: &[u8]) {
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|s| !s.is_empty()) {
        let appended = std::fs::OpenOptions::new().create(true).append(true).open(&summary).and_then(|mut f| {
            f.write_all(text)?;
            f.write_all(b"\n")
        });
        if let Err(e) = appended {
            eprintln!("gauntlet: warning: cannot append to GITHUB_STEP_SUMMARY: {e}");
        }
    }
}

/// A baseline of another identity is refused, listing every differing field, and naming the stored baseline
/// whose identity does match when there is one.
fn refuse_other_identity(
    record: &RunRecord,
    identity: &gauntlet_engine::identity::Identity,
    origin: &str,
    store: &Store,
) -> Result<(), Failure> {
    if record.identity_digest == identity.digest {
        return Ok(());
    }
    let d =
        gauntlet_engine::identity::differences(&record.identity, &identity.value, &record.runtime, &identity.runtime);
    let mut msg = format!("refusing to compare with baseline `{origin}`: it has another identity");
    push_differences(&mut msg, &d);
    if let Ok(Some((entry, _))) = store.latest(&identity.digest) {
        msg.push_str(&format!("\nthe store has a baseline of this identity: {}", baseline::describe(&entry)));
    }
    Err(Failure::BadInput(msg))
}

/// No baseline of this identity: when the profile has one under another identity, say what changed, so a
/// "no baseline yet" after an edited manifest is not a mystery.
fn explain_missing_baseline(store: &Store, profile: &str, identity: &gauntlet_engine::identity::Identity) {
    let Ok(Some((entry, record))) = store.latest_of_profile(profile, &identity.digest) else { return };
    let d =
        gauntlet_engine::identity::differences(&record.identity, &identity.value, &record.runtime, &identity.runtime);
    let mut msg = format!(
        "gauntlet: no baseline of this identity yet; the newest baseline of profile `{profile}` ({}) has another:",
        baseline::describe(&entry)
    );
    push_differences(&mut msg, &d);
    eprintln!("{msg}");
}

/// One indented line per differing field; those that only warn under a heading of their own.
fn push_differences(msg: &mut String, d: &gauntlet_engine::identity::Differences) {
    for f in &d.refusing {
        msg.push_str(&format!("\n  {f}"));
    }
    if !d.warning.is_empty() {
        msg.push_str("\n(these only warn:)");
        for f in &d.warning {
            msg.push_str(&format!("\n  {f}"));
        }
    }
}

fn plan(args: PlanArgs) -> Result<u8, Failure> {
    let manifest = load_manifest(args.manifest.as_deref())?;
    let all: Vec<String> = manifest.profiles.keys().cloned().collect();
    let wanted: Vec<String> = args
        .profiles
        .iter()
        .flat_map(|p| p.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    let selected: Vec<String> = if args.all {
        all.clone()
    } else if !wanted.is_empty() {
        for p in &wanted {
            if !all.contains(p) {
                return Err(Failure::BadInput(format!("--profiles: no profile `{p}` (profiles: {})", all.join(", "))));
            }
        }
        let mut w = wanted;
        w.sort();
        w.dedup();
        w
    } else {
        let changed: Vec<String> = match (&args.changed_files, &args.since) {
            (Some(file), None) => std::fs::read_to_string(file)
                .map_err(|e| Failure::BadInput(format!("cannot read `{}`: {e}", file.display())))?
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
            (None, Some(rev)) => gauntlet_engine::plan::changed_since(&args.repo, rev, args.until.as_deref())
                .map_err(Failure::BadInput)?,
            _ => {
                return Err(Failure::BadInput(
                    "plan needs --changed-files FILE, --since REV, --profiles P[,P…] or --all".into(),
                ));
            }
        };
        let selection = gauntlet_engine::plan::select(&manifest.plan, &all, &changed, args.fallback_all);
        for reason in &selection.reasons {
            eprintln!("gauntlet plan: {reason}");
        }
        selection.profiles
    };
    let entries: Vec<(String, Vec<String>)> = selected
        .iter()
        .map(|p| (p.clone(), manifest.profiles.get(p).map(|x| x.runner.clone()).unwrap_or_default()))
        .collect();
    match args.format {
        PlanFormat::List => {
            for p in &selected {
                println!("{p}");
            }
        }
        PlanFormat::GithubMatrix => println!("{}", gauntlet_engine::plan::github_matrix(&entries)),
        PlanFormat::GithubOutput => {
            println!("matrix={}", gauntlet_engine::plan::github_matrix(&entries));
            println!("count={}", entries.len());
        }
    }
    Ok(exit::OK)
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
    if let Ok(report) = std::fs::read(out_dir.join("report.md")) {
        append_step_summary(&report);
    }
}
