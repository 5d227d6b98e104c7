//! The command line's shape: every command, flag and help text (clap). Parsing only: no command runs here.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// `gauntlet --version`: the crate version and the git commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("GAUNTLET_GIT_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "gauntlet",
    version = VERSION,
    about = "Does the inference server still work, say the same things, run as fast?"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// The gate: start the profile's server, run the suite, judge it against a baseline, stop the server.
    Run(RunArgs),
    /// Run only a profile's build step (`[servers.NAME.build]`), e.g. in CI before the tests.
    Build {
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        #[arg(long, short)]
        profile: Option<String>,
        /// Where build.log goes (default: a new folder under gauntlet-out/).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
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
    /// Put a bench's numbers beside another tool's run of the same server: vLLM's `bench serve --save-result` JSON
    /// or AIPerf's `profile_export.jsonl`. Informational: it judges nothing (the tools time differently; see the
    /// book's bench chapter).
    CompareBench {
        /// gauntlet's bench.json.
        bench: PathBuf,
        /// vLLM's `--save-result` JSON (`benchmarks/benchmark_serving.py` or `vllm bench serve`).
        #[arg(long, value_name = "FILE", conflicts_with = "aiperf", required_unless_present = "aiperf")]
        vllm: Option<PathBuf>,
        /// AIPerf's per-request records, `profile_export.jsonl` (`aiperf profile`'s artifact folder).
        #[arg(long, value_name = "FILE")]
        aiperf: Option<PathBuf>,
        /// The bench level to compare. Default: the vLLM run's `max_concurrency`, else the bench's only level.
        #[arg(long, value_name = "N")]
        concurrency: Option<usize>,
        #[arg(long)]
        json: bool,
    },
    /// Re-render a stored run (`report RUN --format md|html|junit|json`), or fold the run records of a CI matrix
    /// into one verdict, summary.md, junit.xml and merged.json (`report --merge …`).
    Report(ReportArgs),
    /// Print a shell completion script: `gauntlet completions bash > /etc/bash_completion.d/gauntlet`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write a starter manifest: `--attach URL` asks a running server what it is (models, version and property
    /// endpoints, `Server` header) and guesses its kind; `--spawn KIND --model PATH` starts that engine on a model.
    /// Never overwrites a file; the manifest it writes passes `gauntlet check`.
    Init {
        /// The running server's base URL.
        #[arg(long, value_name = "URL", conflicts_with = "spawn", required_unless_present = "spawn")]
        attach: Option<String>,
        /// The server kind to start (llama.cpp, vllm, sglang, tgi, trtllm, ollama, mistralrs, transformers,
        /// llama-cpp-python).
        #[arg(long, value_name = "KIND", requires = "model")]
        spawn: Option<String>,
        /// The model: a file, a directory (Hugging Face layout), or a hub id with --revision.
        #[arg(long, value_name = "PATH")]
        model: Option<String>,
        /// A hub model's pinned revision (commit hash): `--model ORG/NAME --revision HASH`.
        #[arg(long, value_name = "HASH", requires = "model")]
        revision: Option<String>,
        /// Where to write it (default: gauntlet.toml); an existing file is never overwritten.
        #[arg(long, value_name = "FILE", default_value = "gauntlet.toml")]
        out: PathBuf,
    },
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
    /// Every identity's promotions over time (decode, load, passed cases, text changes, notes, chain status); with
    /// --html, as a page.
    History {
        /// Only identities whose newest promotion is of this profile.
        #[arg(long, short)]
        profile: Option<String>,
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        /// Write the page here.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    #[arg(long, value_name = "FILE")]
    pub(crate) manifest: Option<PathBuf>,
    #[arg(long, short)]
    pub(crate) profile: Option<String>,
    /// Concurrency levels (comma-separated). Default: the profile's `[bench]` table, else 1,2.
    #[arg(long, value_delimiter = ',')]
    pub(crate) concurrency: Vec<usize>,
    /// Default: the profile's `[bench]` table, else 64.
    #[arg(long)]
    pub(crate) max_tokens: Option<u64>,
    /// Batches per concurrency run first and discarded. Default: the profile's `[bench]` table, else 1.
    #[arg(long)]
    pub(crate) warmups: Option<usize>,
    /// Measured batches per concurrency: one sample of each metric each (at least 2 to compare). Default: the
    /// profile's `[bench]` `samples`, else 5.
    #[arg(long)]
    pub(crate) samples: Option<usize>,
    /// Deprecated name of --samples.
    #[arg(long, hide = true, conflicts_with = "samples")]
    pub(crate) repetitions: Option<usize>,
    /// An earlier bench.json of the same identity to compare with.
    #[arg(long, value_name = "FILE")]
    pub(crate) baseline: Option<PathBuf>,
    /// Earlier bench.json files of the same identity and workload (repeatable): with the baseline, from 3 sessions
    /// on, their spread is the between-session noise the comparison counts instead of the default.
    #[arg(long, value_name = "FILE")]
    pub(crate) history: Vec<PathBuf>,
    /// Also write the results in this format beside bench.json: `csv` writes bench.csv (one row per concurrency
    /// and metric); `llmd` writes llm-d's Benchmark Report v0.2, one `llmd-c<N>.json` per concurrency.
    #[arg(long, value_enum)]
    pub(crate) format: Option<BenchFormat>,
    /// Open loop: each batch's requests (as many as the concurrency) arrive as a seeded Poisson process at this
    /// many requests per second, instead of all at once. Default: the profile's `[bench]` `rate`, else closed loop.
    #[arg(long, value_name = "REQ/S")]
    pub(crate) rate: Option<f64>,
    /// The open loop's arrival seed (recorded). Default: the profile's `[bench]` `seed`, else 1.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Before calling a regression, measure again (into OUT/confirm): a regression stands only when the re-run
    /// shows it too; otherwise the result is inconclusive.
    #[arg(long)]
    pub(crate) confirm: bool,
    /// Paired A/B: measure this profile (B) against profile A in the same minutes, one request at a time in ABBA
    /// order with the same prompt for both, into paired.json. `--baseline` and `--confirm` do not apply.
    #[arg(long, value_name = "A", conflicts_with_all = ["baseline", "confirm"])]
    pub(crate) paired_with: Option<String>,
    /// The most pairs a paired bench measures; it stops earlier at a look where every metric is decided.
    /// Default 20.
    #[arg(long, value_name = "N", requires = "paired_with")]
    pub(crate) pairs: Option<usize>,
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    #[arg(long)]
    pub(crate) port: Option<u16>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum BenchFormat {
    Csv,
    Llmd,
}

#[derive(clap::Args)]
pub(crate) struct QualifyArgs {
    #[arg(long, value_name = "FILE")]
    pub(crate) manifest: Option<PathBuf>,
    #[arg(long, short)]
    pub(crate) profile: Option<String>,
    /// The bundle folder (must not hold a qualification already).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Stages to run (comma-separated, e.g. R1,R3); R0 and R7 always run. Default: all.
    #[arg(long, value_name = "R…")]
    pub(crate) stages: Option<String>,
    /// The performance baseline for R5: a bench.json, an r5-performance.json, or an earlier bundle. Default: the
    /// newest qualification promoted into the store for this identity, if any.
    #[arg(long, value_name = "PATH")]
    pub(crate) baseline: Option<PathBuf>,
    /// The baseline store (default: $GAUNTLET_STORE, the manifest's `store`, or GAUNTLET_HOME/store).
    #[arg(long, value_name = "DIR")]
    pub(crate) store: Option<PathBuf>,
    #[arg(long)]
    pub(crate) port: Option<u16>,
}

#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    /// A stored run to render again: its run.json or its output folder.
    #[arg(required_unless_present = "merge", conflicts_with = "merge", value_name = "RUN")]
    pub(crate) run: Option<PathBuf>,
    /// What to render RUN as, on stdout (default: md).
    #[arg(long, value_enum)]
    pub(crate) format: Option<ReportFormat>,
    /// The run's baseline store, to find a baseline named `store:<digest>` (default: $GAUNTLET_STORE or the
    /// user's cache).
    #[arg(long, value_name = "DIR")]
    pub(crate) store: Option<PathBuf>,
    /// run.json / skipped.json files, or folders searched for them (CI artifacts downloaded side by side).
    #[arg(long, num_args = 1.., value_name = "PATH")]
    pub(crate) merge: Vec<PathBuf>,
    /// Profiles that must be there (comma-separated or repeated); a missing one fails the merge.
    #[arg(long, value_name = "P[,P…]")]
    pub(crate) expect: Vec<String>,
    /// The plan's matrix (`gauntlet plan --format github-matrix`): every profile in it must be there.
    #[arg(long, value_name = "FILE")]
    pub(crate) matrix: Option<PathBuf>,
    /// Write summary.md, junit.xml and merged.json here.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Name each shard's evidence as this artifact, `{profile}` replaced (e.g. `gauntlet-{profile}`).
    #[arg(long, value_name = "PATTERN")]
    pub(crate) artifact: Option<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum ReportFormat {
    Md,
    Html,
    Junit,
    Json,
}

#[derive(clap::Args)]
pub(crate) struct PlanArgs {
    #[arg(long, value_name = "FILE")]
    pub(crate) manifest: Option<PathBuf>,
    /// A file with one changed path per line.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["since", "profiles", "all"])]
    pub(crate) changed_files: Option<PathBuf>,
    /// Exactly these profiles (comma-separated or repeated), e.g. from a manual dispatch's input.
    #[arg(long, value_name = "P[,P…]", conflicts_with_all = ["since", "all"])]
    pub(crate) profiles: Vec<String>,
    /// Every profile of the manifest.
    #[arg(long, conflicts_with = "since")]
    pub(crate) all: bool,
    /// Changed since this revision (e.g. the baseline's commit), in the repository at --repo.
    #[arg(long, value_name = "REV")]
    pub(crate) since: Option<String>,
    #[arg(long, value_name = "REV", requires = "since")]
    pub(crate) until: Option<String>,
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub(crate) repo: PathBuf,
    /// When nothing is selected, select every profile.
    #[arg(long)]
    pub(crate) fallback_all: bool,
    #[arg(long, value_enum, default_value = "list")]
    pub(crate) format: PlanFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum PlanFormat {
    /// One profile per line.
    List,
    /// `{"include": [{"profile": …, "runner": [labels]}]}`.
    GithubMatrix,
    /// `matrix=<github-matrix>` and `count=N` lines, to append to `$GITHUB_OUTPUT`.
    GithubOutput,
}

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// Manifest file; without it, the embedded default (llama.cpp + SmolLM2-135M, installed by scripts/setup.sh).
    #[arg(long, value_name = "FILE")]
    pub(crate) manifest: Option<PathBuf>,
    /// Profile to run; default: the manifest's `default_profile`, or its only profile.
    #[arg(long, short)]
    pub(crate) profile: Option<String>,
    /// A run.json (from --write-baseline or an earlier --out) to compare with.
    #[arg(long, value_name = "FILE")]
    pub(crate) baseline: Option<PathBuf>,
    /// Write this run as a baseline file unless the verdict is fail.
    #[arg(long, value_name = "FILE")]
    pub(crate) write_baseline: Option<PathBuf>,
    /// Output directory; default: a new timestamped folder under ./gauntlet-out/.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Listen on this port instead of the profile's (spawned servers only).
    #[arg(long)]
    pub(crate) port: Option<u16>,
    /// Baseline store; default: $GAUNTLET_STORE, the manifest's `store`, or ~/.cache/gauntlet/store.
    #[arg(long, value_name = "DIR")]
    pub(crate) store: Option<PathBuf>,
    /// The source tree under test (a git work tree): enables the skip-cache for a clean pass.
    #[arg(long, value_name = "DIR")]
    pub(crate) source: Option<PathBuf>,
    /// Run even when the skip-cache remembers a pass for exactly this input.
    #[arg(long)]
    pub(crate) no_cache: bool,
    /// Promote this run to the store's baseline when its verdict is not fail and the context is trusted.
    #[arg(long)]
    pub(crate) promote: bool,
    /// Decision note recorded with --promote.
    #[arg(long, default_value = "")]
    pub(crate) note: String,
    /// With --promote: a person promotes by hand, outside CI.
    #[arg(long)]
    pub(crate) trusted: bool,
}
