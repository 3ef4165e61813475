//! `ctxgc`: the command-line shell around the ctxgc compiler.
//!
//! Exit codes: 0 ok, 1 input invalid (diagnostics on stderr), 2 usage error.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod input;

/// A deterministic context compiler for AI agents.
#[derive(Debug, Parser)]
#[command(name = "ctxgc", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compile a trace or transcript to what is still live; prints the compacted output.
    Compile(cmd::compile::CompileArgs),
    /// List every retired or rewritten item with its reason (or print a reason code's doc).
    Explain(cmd::explain::ExplainArgs),
    /// Show the input and the compiled output as a unified diff.
    Diff(cmd::diff::DiffArgs),
    /// Print the original of an item, byte for byte, whatever was decided for it.
    Receipt(cmd::receipt::ReceiptArgs),
}

/// How a command failed: decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// The input is invalid (exit 1).
    Input(String),
    /// The command was used wrongly (exit 2).
    Usage(String),
}

impl From<ctxgc_core::Error> for Failure {
    fn from(err: ctxgc_core::Error) -> Self {
        match err {
            ctxgc_core::Error::Usage(m) => Failure::Usage(m),
            other => Failure::Input(other.to_string()),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(err: std::io::Error) -> Self {
        Failure::Input(err.to_string())
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { 2 } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Compile(args) => cmd::compile::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Receipt(args) => cmd::receipt::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(message)) => {
            eprintln!("ctxgc: {message}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(message)) => {
            eprintln!("ctxgc: {message}");
            ExitCode::from(2)
        }
    }
}
