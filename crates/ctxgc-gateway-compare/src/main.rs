//! `gateway-compare`: the two halves of `scripts/compare-gateways.sh` that must be fast and
//! identical for every gateway measured, so that a difference between two gateways is the
//! gateways' own and not the harness's.
//!
//! - `fake-provider` answers OpenAI Chat Completions and Anthropic Messages at once, in each
//!   API's real shape (JSON and server-sent events, with usage fields), so the time a request
//!   takes through a gateway minus the time it takes direct is what the gateway added;
//! - `drive` replays growing agent conversations (one per worker, as tenants do) direct to the
//!   provider and then through a gateway, the same requests both times, and prints the
//!   latency percentiles, the difference, the time to first byte and the throughput;
//! - `soak` keeps a gateway under load for a long time and samples its resident memory, for a
//!   leak rate;
//! - `rss` reads the resident memory of a process and its descendants;
//! - `report` merges the JSON lines of a run into one line per case or a readable table.

mod conversation;
mod drive;
mod provider;
mod report;
mod rss;
mod soak;
mod stats;

use clap::{Parser, Subcommand};

/// Command line of `gateway-compare`.
#[derive(Debug, Parser)]
#[command(
    name = "gateway-compare",
    about = "Measure LLM gateways side by side on loopback"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve POST /v1/chat/completions and POST /v1/messages, answering at once.
    FakeProvider(provider::ProviderArgs),
    /// Replay growing conversations direct and through a gateway; print percentiles.
    Drive(drive::DriveArgs),
    /// Load a gateway for a long time and sample its resident memory.
    Soak(soak::SoakArgs),
    /// Resident memory (VmRSS) of a process and its descendants, in MB.
    Rss(rss::RssArgs),
    /// Merge the JSON lines of a run: one line per case (--json) or a table.
    Report(report::ReportArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Report(args) => report::run(args),
        Command::Rss(args) => rss::run(args),
        command => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                match command {
                    Command::FakeProvider(args) => provider::run(args).await,
                    Command::Drive(args) => drive::run(args).await,
                    Command::Soak(args) => soak::run(args).await,
                    Command::Report(_) | Command::Rss(_) => Ok(()),
                }
            })
        }
    }
}
