//! `gauntlet completions bash|zsh|fish`: the shell's completion script for every command and flag, on stdout.

use clap::CommandFactory;

use crate::Outcome;
use crate::exit::Exit;

pub(crate) fn completions(shell: clap_complete::Shell) -> Outcome {
    let mut command = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut command, "gauntlet", &mut crate::terminal::stdout());
    Ok(Exit::Pass)
}
