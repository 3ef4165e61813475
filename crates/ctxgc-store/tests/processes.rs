//! Guarantees that need real processes: an acknowledged append survives `kill -9`, and two
//! processes appending to one session never lose, reorder or fork acknowledged items. The
//! writers are `ctxgc-store-writer` processes, which print `ack SEQ ID BLAKE3` after each
//! append returns; every acknowledged line must be found in the database afterwards.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use ctxgc_core::compile::report_events;
use ctxgc_core::store::{StoreError, StoredSession, content_hash};
use ctxgc_core::{Format, Item, Session};
use ctxgc_store::Store;
use ctxgc_store::testing::{TestDb, test_databases};

/// One acknowledged item, as the writer printed it.
#[derive(Debug, Clone, PartialEq)]
struct Ack {
    seq: u64,
    id: String,
    hash: String,
}

fn writer(db: &TestDb, context: &str, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ctxgc-store-writer"))
        .args(["--db", &db.spec(), "--context", context])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the writer starts")
}

fn parse_ack(line: &str) -> Option<Ack> {
    let mut parts = line.split(' ');
    if parts.next()? != "ack" {
        return None;
    }
    Some(Ack {
        seq: parts.next()?.parse().ok()?,
        id: parts.next()?.to_owned(),
        hash: parts.next()?.to_owned(),
    })
}

/// Reads acknowledgements until `count` have arrived, then kills the writer with SIGKILL
/// (what `Child::kill` sends on Unix) wherever it is, and collects what it had printed.
fn kill_after(mut child: Child, count: usize) -> Vec<Ack> {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut acks = Vec::new();
    while acks.len() < count {
        let line = lines
            .next()
            .expect("the writer keeps writing")
            .expect("readable");
        acks.extend(parse_ack(&line));
    }
    child.kill().expect("kill -9");
    // Lines printed before the kill are acknowledged appends too.
    acks.extend(lines.map_while(Result::ok).filter_map(|l| parse_ack(&l)));
    let status = child.wait().expect("the writer is reaped");
    assert!(
        !status.success(),
        "the writer finished before it was killed"
    );
    acks
}

fn wait_for_all(child: Child) -> (Vec<Ack>, usize) {
    let output = child.wait_with_output().expect("the writer runs");
    assert!(
        output.status.success(),
        "the writer failed: {:?}",
        output.status
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8 output");
    let acks = text.lines().filter_map(parse_ack).collect();
    let conflicts = text.lines().filter(|l| l.starts_with("conflict")).count();
    (acks, conflicts)
}

/// Every acknowledged item is stored at its sequence number with its exact bytes.
fn assert_acknowledged(stored: &[Item], acks: &[Ack]) {
    for ack in acks {
        let item = usize::try_from(ack.seq)
            .ok()
            .and_then(|s| stored.get(s))
            .unwrap_or_else(|| panic!("acknowledged {ack:?} is missing ({} stored)", stored.len()));
        assert_eq!(item.id, ack.id, "sequence {} holds another item", ack.seq);
        assert_eq!(
            content_hash(item.raw.as_bytes()),
            ack.hash,
            "{} changed",
            ack.id
        );
    }
}

/// Every stored item is whole: its original bytes lower to exactly the stored item.
fn assert_whole(stored: &[Item]) {
    for item in stored {
        let relowered = common::items(&item.raw);
        assert_eq!(relowered.len(), 1);
        assert_eq!(&relowered[0], item, "{} is not whole", item.id);
    }
}

#[test]
fn acknowledged_appends_survive_kill_9() {
    for db in test_databases() {
        eprintln!("backend: {}", db.backend);
        let mut all_acks = Vec::new();
        // Kill at different points; each round reopens the session the last one left.
        for (round, kill_at) in [1usize, 2, 5, 23, 60, 140].into_iter().enumerate() {
            let prefix = format!("r{round}-");
            let child = writer(&db, "ctx", &["--prefix", &prefix, "--count", "0"]);
            let acks = kill_after(child, kill_at);
            assert!(acks.len() >= kill_at);
            all_acks.extend(acks);
            let stored = db.open().unwrap().items("ctx", 0).unwrap();
            assert_acknowledged(&stored, &all_acks);
            assert_whole(&stored);
        }
        // The session still replays and compiles after six crashes.
        let mut session =
            StoredSession::open(db.open().unwrap(), "ctx", Session::new(Default::default()))
                .unwrap();
        session.compile().unwrap();
        let report = report_events(session.session(), Default::default());
        assert_eq!(report.decisions.len() as u64, session.len());
    }
}

#[test]
fn a_batch_killed_mid_append_is_stored_whole_or_not_at_all() {
    for db in test_databases() {
        eprintln!("backend: {}", db.backend);
        let batch = 250;
        let child = writer(
            &db,
            "ctx",
            &[
                "--prefix",
                "b-",
                "--count",
                "0",
                "--batch",
                &batch.to_string(),
            ],
        );
        let acks = kill_after(child, 3 * batch);
        let stored = db.open().unwrap().items("ctx", 0).unwrap();
        assert_acknowledged(&stored, &acks);
        assert_whole(&stored);
        assert_eq!(stored.len() % batch, 0, "a partial batch was stored");
        let info = db.open().unwrap().info("ctx").unwrap().unwrap();
        assert_eq!(info.items, stored.len() as u64);
    }
}

#[test]
fn two_processes_appending_to_one_session_lose_and_reorder_nothing() {
    for db in test_databases() {
        eprintln!("backend: {}", db.backend);
        let per_writer = 200;
        let count = per_writer.to_string();
        let a = writer(&db, "shared", &["--prefix", "a", "--count", &count]);
        let b = writer(&db, "shared", &["--prefix", "b", "--count", &count]);
        let (acks_a, conflicts_a) = wait_for_all(a);
        let (acks_b, conflicts_b) = wait_for_all(b);
        eprintln!("conflicts resolved by catching up: {conflicts_a} + {conflicts_b}");
        assert_eq!(acks_a.len(), per_writer);
        assert_eq!(acks_b.len(), per_writer);

        let stored = db.open().unwrap().items("shared", 0).unwrap();
        assert_eq!(
            stored.len(),
            2 * per_writer,
            "items were lost or duplicated"
        );
        let switches = stored
            .windows(2)
            .filter(|w| w[0].id.as_bytes()[0] != w[1].id.as_bytes()[0])
            .count();
        eprintln!("the writers took turns {switches} times");
        assert_acknowledged(&stored, &acks_a);
        assert_acknowledged(&stored, &acks_b);
        // No two acknowledgements share a sequence number: nothing forked.
        let mut seqs: Vec<u64> = acks_a.iter().chain(&acks_b).map(|a| a.seq).collect();
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(seqs.len(), 2 * per_writer);
        // Each writer's items are stored in the order it appended them.
        for (prefix, acks) in [("a", &acks_a), ("b", &acks_b)] {
            let order: Vec<&str> = stored
                .iter()
                .map(|i| i.id.as_str())
                .filter(|id| id.starts_with(prefix))
                .collect();
            let expected: Vec<String> = (0..per_writer).map(|n| format!("{prefix}{n}")).collect();
            assert_eq!(order, expected, "writer {prefix} was reordered");
            assert!(acks.windows(2).all(|w| w[0].seq < w[1].seq));
        }
        // And the interleaved session replays: every parent came before its child.
        let mut session = StoredSession::open(
            db.open().unwrap(),
            "shared",
            Session::new(Default::default()),
        )
        .unwrap();
        session.compile().unwrap();
        assert_eq!(session.len(), 2 * per_writer as u64);
    }
}

#[test]
fn a_writer_behind_another_process_gets_a_conflict_not_a_fork() {
    for db in test_databases() {
        eprintln!("backend: {}", db.backend);
        // This process opens the session first...
        let mut stale =
            StoredSession::open(db.open().unwrap(), "ctx", Session::new(Default::default()))
                .unwrap();
        // ...then another process appends five items.
        let (acks, _) = wait_for_all(writer(&db, "ctx", &["--prefix", "w", "--count", "5"]));
        assert_eq!(acks.len(), 5);
        let err = stale
            .append(
                Format::Events,
                common::items(&common::set_var("mine", 9, "x", 9)),
            )
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Conflict {
                    expected: 0,
                    actual: 5,
                    ..
                }
            ),
            "{err}"
        );
        let stored = db.open().unwrap().items("ctx", 0).unwrap();
        assert_eq!(stored.len(), 5);
        assert_acknowledged(&stored, &acks);
        // Caught up, it appends after the other process's items.
        assert_eq!(stale.refresh().unwrap(), 5);
        let mine = stale
            .append(
                Format::Events,
                common::items(&common::set_var("mine", 9, "x", 9)),
            )
            .unwrap();
        assert_eq!(mine, 5..6);
    }
}
