//! How much of the tool output could go at all: an upper bound that knows the future.
//!
//! `cargo run --release -p ctxgc-bench --example ceiling -- FILES...` reads each input as the
//! bench does and, with the bench's own notion of used values ([`ctxgc_bench::values`]),
//! prints per file:
//! - per request (token-weighted over every request the bench replays): the share of tool-output
//!   tokens in outputs the agent has not answered yet (no rule folds those), in answered
//!   outputs holding a value a later turn takes from them, and in answered outputs no later
//!   turn takes anything from: the most any strategy could drop whole without hiding a used
//!   value or asking for a recall;
//! - a perfect projection on arrival: each output reduced to the values later turns take from
//!   it (each value's tokens plus 2 of punctuation, and a 15-token footer).
//!
//! A value counts as taken from an output when the turn uses it, no message that is not a tool
//! output showed it before that turn, and the output is the latest one holding it. No compiler
//! can know this when the request is sent; the figures bound what learning could reach.

use ctxgc_bench::context::{is_agent_turn, is_tool_output};
use ctxgc_bench::prepare::Prepared;
use ctxgc_bench::run::{BenchConfig, InputFile, load};

/// Token sums over every request of one file.
#[derive(Default)]
struct Sums {
    requests: u64,
    tool: u64,
    unanswered: u64,
    answered_used_later: u64,
    projected_all: u64,
    projected_kept: u64,
}

/// For each item before turn position `before`, the values that some turn at index `from` or
/// later (an index into `p.turns`) takes from it.
fn taken_from(p: &Prepared, tool: &[bool], from: usize, before: usize) -> Vec<Vec<u32>> {
    let mut taken: Vec<Vec<u32>> = vec![Vec::new(); before];
    for k in from..p.turns.len() {
        let t = p.turns[k];
        for (v, _) in p.used_values(k) {
            let Some(holders) = p.postings.get(v as usize) else {
                continue;
            };
            // Shown by a message the agent or user wrote: no tool output is needed for it.
            if holders.iter().any(|&h| h < t && !tool[h]) {
                continue;
            }
            if let Some(&h) = holders
                .iter()
                .rev()
                .find(|&&h| h < t.min(before) && tool[h])
                && !taken[h].contains(&v)
            {
                taken[h].push(v);
            }
        }
    }
    taken
}

fn add_conversation(p: &Prepared, sums: &mut Sums) {
    let items = &p.conversation.items;
    let tool: Vec<bool> = items.iter().map(is_tool_output).collect();
    let agent: Vec<bool> = items.iter().map(is_agent_turn).collect();
    for (k, &t) in p.turns.iter().enumerate() {
        if t == 0 {
            continue; // the bench sends no request before a first item
        }
        sums.requests += 1;
        let taken = taken_from(p, &tool, k, t);
        for i in (0..t).filter(|&i| tool[i]) {
            let tokens = p.tokens[i] as u64;
            sums.tool += tokens;
            if !(i + 1..t).any(|j| agent[j]) {
                sums.unanswered += tokens;
            } else if !taken[i].is_empty() {
                sums.answered_used_later += tokens;
            }
        }
    }
    let tokenizer = p.options.tokenizer;
    let taken = taken_from(p, &tool, 0, items.len());
    for i in (0..items.len()).filter(|&i| tool[i]) {
        let all = p.tokens[i] as u64;
        let kept: u64 = taken[i]
            .iter()
            .map(|&v| tokenizer.count(p.values.value(v)) as u64 + 2)
            .sum::<u64>()
            + 15;
        sums.projected_all += all;
        sums.projected_kept += kept.min(all);
    }
}

fn share(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: ceiling FILES...");
        std::process::exit(2);
    }
    let config = BenchConfig::default();
    for path in paths {
        let file = InputFile {
            text: std::fs::read_to_string(&path).map_err(|e| e.to_string()),
            path,
        };
        let prepared = match load(&file, &config) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{}: {e}", file.path);
                continue;
            }
        };
        let mut sums = Sums::default();
        for p in &prepared {
            add_conversation(p, &mut sums);
        }
        let never_used = sums.tool - sums.unanswered - sums.answered_used_later;
        println!(
            "{}: {} conversations, {} requests",
            file.path,
            prepared.len(),
            sums.requests
        );
        println!(
            "  per request: unanswered {:.1}%, answered and used later {:.1}%, answered and never used later {:.1}% (the most droppable whole)",
            share(sums.unanswered, sums.tool),
            share(sums.answered_used_later, sums.tool),
            share(never_used, sums.tool)
        );
        println!(
            "  perfect projection on arrival: {:.1}% removed",
            100.0 - share(sums.projected_kept, sums.projected_all)
        );
    }
}
