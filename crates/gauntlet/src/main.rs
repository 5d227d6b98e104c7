//! gauntlet's command line: parse the arguments (`cli`), hand them to their command (`commands`), and exit with
//! the code the one exit map (`exit`) gives. No logic about servers, checks or verdicts lives in this binary.

mod cli;
mod commands;
mod exit;
mod terminal;

use std::process::ExitCode;

/// jemalloc, not glibc's malloc: a bench is one long process in which each stream's small allocations (its read
/// buffers, its token events) are made and freed on whichever runtime worker it runs on at the time, beside seven
/// other streams doing the same. glibc's per-thread arenas fragmented under that: over an hour against the real
/// server the resident memory grew by 6 to 8 % with a flat heap (valgrind massif), and neither `malloc_trim` after
/// each batch nor `M_ARENA_MAX`/`M_MMAP_THRESHOLD` settings stopped it (README, "Bounded memory and the soak").
/// jemalloc keeps each size in its own slabs and hands back unused pages after a delay by itself.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read at its start (`_RJEM_MALLOC_CONF` in the environment still overrides them): one arena
/// (the runtime's few threads seldom contend, and each extra arena holds pages of its own) and freed pages handed
/// back after about a second instead of ten.
#[cfg(target_os = "linux")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: ConfString = ConfString(c"narenas:1,dirty_decay_ms:1000".as_ptr());

/// A C string's address as the `const char *` jemalloc reads its settings from.
#[cfg(target_os = "linux")]
#[repr(transparent)]
struct ConfString(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, immutable and alive for the whole process.
#[cfg(target_os = "linux")]
unsafe impl Sync for ConfString {}

use clap::Parser;

use cli::{Cli, Command};
use exit::Exit;

fn main() -> ExitCode {
    // Tokens in gauntlet's own environment (CI tokens, keys) are redacted from everything it writes or prints.
    gauntlet_engine::util::redact::register_environment();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => commands::run::run(args),
        Command::Build { manifest, profile, out } => {
            commands::build::build(manifest.as_deref(), profile.as_deref(), out)
        }
        Command::Check { manifest } => commands::check::check(manifest.as_deref()),
        Command::Init { attach, spawn, model, revision, out } => {
            commands::init::init(attach.as_deref(), spawn.as_deref(), model.as_deref(), revision.as_deref(), &out)
        }
        Command::Schema => commands::schema::schema(),
        Command::DefaultManifest => commands::schema::default_manifest(),
        Command::Baseline(cmd) => commands::baseline::command(cmd),
        Command::Plan(args) => commands::plan::plan(args),
        Command::Report(args) => commands::report::report(args),
        Command::Completions { shell } => commands::completions::completions(shell),
        Command::Bench(args) => commands::bench::bench(args),
        Command::Qualify(args) => commands::qualify::qualify(args),
        Command::Verify { bundle, json } => commands::verify::verify(&bundle, json),
        Command::Compare { a, b, control, json } => commands::compare::compare(&a, &b, control.as_deref(), json),
        Command::Doctor { manifest, profile, store, json } => {
            commands::doctor::doctor(manifest.as_deref(), profile.as_deref(), store.as_deref(), json)
        }
    };
    if let Err(failure) = &result {
        failure.report();
    }
    ExitCode::from(exit::code(&result))
}

/// What every command returns: its outcome, or why it could not finish.
pub(crate) type Outcome = Result<Exit, exit::Failure>;
