//! Resident memory of a gateway: `VmRSS` from /proc, summed over the process and all its
//! descendants (LiteLLM runs a supervisor and worker processes; ctxgc is one process).
//!
//! A sum of RSS counts pages shared between processes (copy-on-write after a fork, shared
//! libraries) once per process: for a tree it is an upper bound of what the tree holds.

use std::collections::HashMap;

use anyhow::Context;
use clap::Args;
use serde_json::json;

/// Arguments of `gateway-compare rss`.
#[derive(Debug, Args)]
pub struct RssArgs {
    /// The process (its descendants are counted too).
    #[arg(long)]
    pub pid: u32,
    /// Name of the gateway, for the JSON line.
    #[arg(long, default_value = "gateway")]
    pub gateway: String,
    /// Print `{"kind":"idle","gateway":...,"rss_mb":...}` instead of the bare number.
    #[arg(long)]
    pub json: bool,
}

/// `VmRSS` of one process, in kB.
fn vm_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The children of every process now running, by parent.
fn parents() -> HashMap<u32, Vec<u32>> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return children;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name (field 2) may hold spaces and parentheses: fields resume after
        // the last ')'. Then: state, ppid.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    children
}

/// Resident memory of `pid` and its descendants, in MB (10^6 bytes); `None` when the
/// process is gone.
pub fn tree_rss_mb(pid: u32) -> Option<f64> {
    let root = vm_rss_kb(pid)?;
    let children = parents();
    let mut total = root;
    let mut stack: Vec<u32> = children.get(&pid).cloned().unwrap_or_default();
    let mut seen = 0;
    // Bounded: a process tree is finite, and pids cannot repeat in one snapshot.
    while let Some(p) = stack.pop() {
        seen += 1;
        if seen > 100_000 {
            break;
        }
        total += vm_rss_kb(p).unwrap_or(0);
        if let Some(c) = children.get(&p) {
            stack.extend(c);
        }
    }
    Some(total as f64 * 1024.0 / 1e6)
}

/// Runs `rss`.
pub fn run(args: RssArgs) -> anyhow::Result<()> {
    let mb = tree_rss_mb(args.pid).with_context(|| format!("no process {}", args.pid))?;
    if args.json {
        let mb = (mb * 100.0).round() / 100.0;
        println!(
            "{}",
            json!({"kind": "idle", "gateway": args.gateway, "rss_mb": mb})
        );
    } else {
        println!("{mb:.2}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tree_rss_mb;

    #[test]
    fn own_memory_is_read() {
        let mb = tree_rss_mb(std::process::id()).unwrap_or_default();
        assert!(mb > 0.1, "{mb}");
        assert_eq!(tree_rss_mb(u32::MAX), None);
    }
}
