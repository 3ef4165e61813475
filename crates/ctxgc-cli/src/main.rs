//! `ctxgc`: the command-line shell around the ctxgc compiler.
//!
//! Exit codes: 0 ok, 1 input invalid (diagnostics on stderr), 2 usage error, 3 another
//! writer appended to a stored session first (`session append --expect-seq`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

// Compiling a large session allocates many small values; mimalloc frees them several times
// faster than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Score every context strategy (full, truncation, tool-result clearing, ctxgc, any other
    /// compactor) on traces and transcripts: tokens, used-value misses, probes, replayed cost.
    Bench(Box<cmd::bench::BenchArgs>),
    /// Run an MCP proxy in front of MCP servers that trims their tool outputs (and gives them back with `expand`).
    Proxy(cmd::proxy::ProxyArgs),
    /// Run an HTTP gateway for OpenAI and Anthropic clients: point the base URL at it and every request's conversation is compiled.
    Gateway(cmd::gateway::GatewayArgs),
    /// Keep sessions in a database (SQLite by default, PostgreSQL for fleets): append, compile, receipt, list.
    Session(cmd::session::SessionArgs),
    /// Learn from traces which fields of each tool's output the agent uses: writes a projection to review.
    Learn(cmd::learn::LearnArgs),
    /// Trim one tool output with a projection (dropped fields hidden, a footer says how to get them back).
    Trim(cmd::trim::TrimArgs),
    /// Leave-one-out: tool-output tokens a projection removes on unseen runs, and its misses.
    Measure(cmd::measure::MeasureArgs),
    /// Write a telemetry report of tool outputs (HTML page and JSON): what fills the context, what is never used.
    Report(cmd::report::ReportArgs),
    /// Run a local web console: compile an input and see what was removed, why, and what it saved; browse stored sessions.
    Serve(cmd::serve::ServeArgs),
}

/// How a command failed: decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// The input is invalid (exit 1).
    Input(String),
    /// The command was used wrongly (exit 2).
    Usage(String),
    /// Another writer appended to the session first (exit 3).
    Conflict(String),
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
        Command::Bench(args) => cmd::bench::run_bench(*args),
        Command::Proxy(args) => cmd::proxy::run(args),
        Command::Gateway(args) => cmd::gateway::run(args),
        Command::Session(args) => cmd::session::run(args),
        Command::Learn(args) => cmd::learn::run(args),
        Command::Trim(args) => cmd::trim::run(args),
        Command::Measure(args) => cmd::measure::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Serve(args) => cmd::serve::run(args),
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
        Err(Failure::Conflict(message)) => {
            eprintln!("ctxgc: {message}");
            ExitCode::from(3)
        }
    }
}
