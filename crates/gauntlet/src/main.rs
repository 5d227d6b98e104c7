//! gauntlet's command line: parse the arguments (`cli`), hand them to their command (`commands`), and exit with
//! the code the one exit map (`exit`) gives. No logic about servers, checks or verdicts lives in this binary.

#[cfg(target_os = "linux")]
mod allocator;
#[cfg(test)]
mod book;
mod cli;
mod commands;
mod exit;
mod terminal;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};
use exit::Exit;

fn main() -> ExitCode {
    // Tokens in gauntlet's own environment (CI tokens, keys) are redacted from everything it writes or prints.
    gauntlet_engine::util::redact::register_environment();
    // SIGINT, SIGTERM and SIGHUP end every command through one handler: it stops the server groups gauntlet
    // started and lets atomic writes in flight finish, so that an interrupted command leaves no temporary file.
    gauntlet_engine::server::install_signal_forwarding();
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
        Command::CompareBench { bench, vllm, aiperf, concurrency, json } => {
            commands::compare::compare_bench(&bench, vllm.as_deref(), aiperf.as_deref(), concurrency, json)
        }
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
