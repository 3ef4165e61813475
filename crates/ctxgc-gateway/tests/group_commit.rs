//! Requests that arrive while the store is busy share one commit, each one's items stored
//! before it goes on, and a batch the store refuses fails alone.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ctxgc_core::Format;
use ctxgc_core::chat::ChatOptions;
use ctxgc_core::store::Store;
use ctxgc_gateway::request::{Parsed, parse};
use ctxgc_gateway::sessions::{CommitCounts, CompilePath, Sessions};
use serde_json::json;

/// A conversation's request after `turns` questions: each request holds the one before
/// it, then the answer to its last question and the next question.
fn body(conversation: usize, turns: usize) -> Vec<u8> {
    let mut messages = vec![json!({"role": "system", "content": "You are terse."})];
    for t in 0..turns {
        if t > 0 {
            messages.push(json!({"role": "assistant", "content": format!("answer {}", t - 1)}));
        }
        messages.push(json!({"role": "user", "content": format!("conversation {conversation}, question {t}")}));
    }
    serde_json::to_vec(&json!({"model": "m", "messages": messages})).unwrap()
}

fn compile(sessions: &Sessions, key: &str, body: &[u8]) -> ctxgc_gateway::sessions::Compiled {
    let Parsed::Conversation(conv) = parse(body, Format::OpenaiChat).unwrap() else {
        panic!("a conversation")
    };
    sessions.compile(key, &conv).unwrap()
}

/// Waits (a bounded while) until `n` appends queue behind the store; false if they never do.
fn wait_for_queue(sessions: &Sessions, n: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while sessions.queued_appends() < n {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

#[test]
fn appends_that_queue_behind_a_busy_store_are_committed_together() {
    let (_db, store) = sqlite_store();
    let sessions = Arc::new(Sessions::new(store, ChatOptions::default()));
    const N: usize = 8;
    // Each conversation's first request, one at a time: one commit each.
    for c in 0..N {
        assert_eq!(
            compile(&sessions, &format!("k{c}"), &body(c, 1)).path,
            CompilePath::Full
        );
    }
    assert_eq!(
        sessions.commit_counts(),
        CommitCounts {
            commits: N as u64,
            appends: N as u64
        }
    );
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (holding, held) = std::sync::mpsc::channel::<()>();
    let workers = std::thread::scope(|scope| {
        // Something else holds the store (a recall, say) while the next request of each
        // conversation arrives.
        let holder = {
            let sessions = sessions.clone();
            scope.spawn(move || {
                sessions
                    .with_store(|_| {
                        holding.send(()).ok();
                        released.recv().ok();
                        Ok(())
                    })
                    .unwrap()
            })
        };
        held.recv().unwrap();
        let workers: Vec<_> = (0..N)
            .map(|c| {
                let sessions = sessions.clone();
                scope.spawn(move || compile(&sessions, &format!("k{c}"), &body(c, 2)))
            })
            .collect();
        let queued = wait_for_queue(&sessions, N);
        let before = sessions.commit_counts();
        release.send(()).unwrap();
        holder.join().unwrap();
        let workers = workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect::<Vec<_>>();
        assert!(queued, "{N} appends never queued behind the store");
        assert_eq!(
            before.commits, N as u64,
            "nothing is committed while the store is held"
        );
        workers
    });
    assert_eq!(
        sessions.commit_counts(),
        CommitCounts {
            commits: N as u64 + 1,
            appends: 2 * N as u64
        },
        "eight appends queued behind the store go in one commit"
    );
    for (c, compiled) in workers.iter().enumerate() {
        assert_eq!(compiled.path, CompilePath::Incremental);
        assert_eq!(compiled.new_items, 2);
        // Each conversation is durable under its own name, its items in order.
        let stored = sessions
            .with_store(|s| s.items(&compiled.context_id, 0))
            .unwrap();
        assert_eq!(stored.len(), 4, "conversation {c}");
        assert!(
            stored[1]
                .raw
                .contains(&format!("conversation {c}, question 0"))
        );
    }
    // Alone, a request costs one commit, and goes on incrementally.
    let next = compile(&sessions, "k0", &body(0, 3));
    assert_eq!(next.path, CompilePath::Incremental);
    assert_eq!(next.new_items, 2);
    assert_eq!(
        sessions.commit_counts(),
        CommitCounts {
            commits: N as u64 + 2,
            appends: 2 * N as u64 + 1
        }
    );
}

#[test]
fn a_batch_the_store_refuses_fails_alone_in_its_group() {
    let (db, store) = sqlite_store();
    let sessions = Arc::new(Sessions::new(store, ChatOptions::default()));
    compile(&sessions, "a", &body(0, 1));
    compile(&sessions, "b", &body(1, 1));
    // Another writer (a second gateway on the same file) advances conversation a's session.
    let a_session = "gw-a";
    let mut other = db.open().unwrap();
    let stored_before = other.items(a_session, 0).unwrap().len() as u64;
    let extra = ctxgc_core::chat::lowering::lower_document(
        r#"{"messages":[{"role":"user","content":"from elsewhere"}]}"#,
        Format::OpenaiChat,
    )
    .unwrap()
    .items;
    let mut extra = extra;
    extra[0].id = format!("m{stored_before}-elsewhere");
    other
        .append(a_session, Format::OpenaiChat, stored_before, &extra)
        .unwrap();

    let (release, released) = std::sync::mpsc::channel::<()>();
    let (holding, held) = std::sync::mpsc::channel::<()>();
    let results = std::thread::scope(|scope| {
        let holder = {
            let sessions = sessions.clone();
            scope.spawn(move || {
                sessions
                    .with_store(|_| {
                        holding.send(()).ok();
                        released.recv().ok();
                        Ok(())
                    })
                    .unwrap()
            })
        };
        held.recv().unwrap();
        let workers: Vec<_> = [("a", 0), ("b", 1)]
            .into_iter()
            .map(|(key, c)| {
                let sessions = sessions.clone();
                scope.spawn(move || {
                    let body = body(c, 2);
                    let Parsed::Conversation(conv) = parse(&body, Format::OpenaiChat).unwrap()
                    else {
                        panic!("a conversation")
                    };
                    sessions.compile(key, &conv).map(|c| (c.path, c.context_id))
                })
            })
            .collect();
        let queued = wait_for_queue(&sessions, 2);
        release.send(()).unwrap();
        holder.join().unwrap();
        let results = workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect::<Vec<_>>();
        assert!(queued, "both appends queue behind the store");
        results
    });
    // b's append went in with the group; a's met the other writer's item (a conflict),
    // and a is still answered: its request no longer continues the stored session, so it
    // is compiled on its own.
    let (b_path, b_session) = results[1].as_ref().unwrap();
    assert_eq!(*b_path, CompilePath::Incremental);
    assert_eq!(b_session, "gw-b");
    let (_, a_context) = results[0].as_ref().unwrap();
    assert_ne!(
        a_context, a_session,
        "a moved off the session another writer changed"
    );
    let stored_a = sessions.with_store(|s| s.items(a_session, 0)).unwrap();
    assert_eq!(
        stored_a.len() as u64,
        stored_before + 1,
        "nothing of a's refused batch was stored"
    );
    assert!(sessions.commit_counts().commits >= 3);
}
